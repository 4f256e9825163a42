package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// statusRows parses the instance table of `stackd status NAME [-o wide]`:
// one map of column to value per instance line after the header.
func statusRows(t *testing.T, out string) []map[string]string {
	t.Helper()
	var header []string
	var rows []map[string]string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == "REGION":
			header = f
		case header != nil && len(f) >= len(header):
			row := map[string]string{}
			for i, h := range header {
				row[h] = f[i]
			}
			rows = append(rows, row)
		case header != nil:
			header = nil // the table ended
		}
	}
	return rows
}

// A SERVICE_MANAGED stack set's instances record their accounts'
// organizational units: `stackd status NAME -o wide` has an OU column
// (from the state, and from the daemon's API), and the console's grid
// groups the accounts by OU — buttons name each OU with its size and move
// the focus to its first account, the keyboard crosses from one OU to the
// next, and the instance page names the OU.
func TestConsoleGroupsAccountsByOU(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("no Chromium binary (chromium, chromium-headless-shell or $STACKD_CHROMIUM): the browser tests need one; .ci/run installs Debian's chromium")
	}
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	for rel, content := range map[string]string{"organization.hcl": orgHCL, "baseline.hcl": baselineHCL, "templates/baseline/main.hcl": baselineTemplate} {
		p := filepath.Join(f.repo, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "baseline over ou-root")
	f.mustApply(t)
	m := newOrgModel()

	checkOUColumn := func(how string, out string) {
		t.Helper()
		rows := statusRows(t, out)
		if len(rows) != 3*len(m.ouOf) {
			t.Fatalf("%s: %d instance rows, want %d:\n%s", how, len(rows), 3*len(m.ouOf), out)
		}
		for _, r := range rows {
			if want := m.ouOf[r["ACCOUNT"]]; r["OU"] != want {
				t.Errorf("%s: %s/%s in OU %q, want %q", how, r["REGION"], r["ACCOUNT"], r["OU"], want)
			}
		}
	}
	checkOUColumn("from the state", mustStackd(t, "status", "baseline", "-o", "wide", "--state-dir", f.state).stdout)

	const token = "console-ou-token-77a0"
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, f.flags("--interval", "1h", "--listen", "127.0.0.1:0", "--api-token-file", tok)...)
	base := "http://" + d.addr(t)
	checkOUColumn("from the daemon", mustStackd(t, "status", "baseline", "-o", "wide", "--state-dir", f.state).stdout)

	b := newBrowser(t, 1280, 900)
	b.do("open the console", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")))
	b.do("log in", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("token")))
	b.wait("the fleet", `!!document.querySelector('#fleet tr[data-stack-set="baseline"]')`)
	b.do("open the grid", chromedp.Navigate(base+"/ui/#/set/baseline"))
	b.wait("the grid", `!!document.querySelector('canvas#grid[data-ready]')`)
	b.screenshot("grid-by-ou")
	ous := strings.Split(b.eval(`[...document.querySelectorAll('#grid-ous button')].map(b => b.textContent).join('\n')`), "\n")
	sizes := map[string]int{}
	for _, ou := range m.ouOf {
		sizes[ou]++
	}
	var want []string
	for ou, n := range sizes {
		want = append(want, "OU "+ou+" ("+strconv.Itoa(n)+")")
	}
	slices.Sort(want)
	if !slices.Equal(ous, want) {
		t.Errorf("OU buttons %q, want %q", ous, want)
	}
	if got := b.eval(`document.querySelector('#grid').getAttribute('aria-label')`); !strings.Contains(got, "in 5 organizational units") {
		t.Errorf("grid label %q names no OUs", got)
	}

	// The ou-prod button focuses its first account; up from there is the
	// last account of ou-dev, the OU before it (the header row between
	// them is not a cell).
	b.do("jump to ou-prod", chromedp.Click(`#grid-ous button[data-ou="ou-prod"]`))
	if got := b.eval(`document.querySelector('#grid-focus').textContent`); got != "200000000001 / ap-south-1: complete · OU ou-prod" {
		t.Errorf("after the ou-prod button the focus is %q", got)
	}
	b.do("up into ou-dev", chromedp.KeyEvent(kb.ArrowUp))
	if got := b.eval(`document.querySelector('#grid-focus').textContent`); got != "300000000004 / ap-south-1: complete · OU ou-dev" {
		t.Errorf("up from ou-prod's first account the focus is %q", got)
	}
	b.do("open the instance", chromedp.KeyEvent(kb.Enter))
	b.wait("the instance", `!!document.querySelector('#instance-ou') && location.hash.includes('/i/ap-south-1/300000000004')`)
	if got := b.eval(`document.querySelector('#instance-ou').textContent`); got != "ou-dev" {
		t.Errorf("the instance page names OU %q, want ou-dev", got)
	}
	b.screenshot("instance-ou")
}

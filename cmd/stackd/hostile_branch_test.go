package main

// The hostile-branch suite (docs/design.md §9, untrusted input): everyone who can
// push a branch can make stackd plan it. Every branch attack is pushed at
// once to a running daemon (a real process) while the deploy branch keeps
// deploying: the daemon survives, each branch gets a diagnostic (or a
// change set without any secret), the deploy branch's commits deploy, and
// the daemon's peak memory stays bounded.

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/reconciler"
)

// branchAttack is one hostile branch: edit changes a checkout of the
// deploy branch; want are substrings of one of the branch's diagnostics
// (none: the branch must plan, and leak nothing).
type branchAttack struct {
	name string
	edit func(t *testing.T, dir string)
	want []string
}

// fanOutModules writes a chain of levels modules, each calling the next
// fan times (modules take no count: fan module blocks), the last holding
// one file resource: fan^levels resources per instance.
func fanOutModules(t *testing.T, dir string, fan, levels int) {
	calls := func(next string) string {
		var b strings.Builder
		for i := 0; i < fan; i++ {
			fmt.Fprintf(&b, "module \"n%d\" {\n  source = %q\n}\n", i, next)
		}
		return b.String()
	}
	files := map[string]string{}
	for i := 0; i < levels; i++ {
		body := calls(fmt.Sprintf("../m%d", i+1))
		if i == levels-1 {
			body = "resource \"file\" \"leaf\" {\n  path    = \"leaf\"\n  content = \"x\"\n}\n"
		}
		files[fmt.Sprintf("templates/m%d/main.hcl", i)] = body
	}
	writeTree(t, dir, files)
	appendTo(t, dir, qsTemplate, "\n"+strings.ReplaceAll(calls("../m0"), "\"n", "\"fan"))
}

func hostileBranches() []branchAttack {
	return []branchAttack{
		{
			name: "for-each-sensitive",
			edit: edit(qsTemplate, `resource "file" "credentials" {`, "resource \"file\" \"each\" {\n  for_each = [var.api_key]\n  path     = \"each\"\n  content  = \"x\"\n}\n\nresource \"file\" \"credentials\" {"),
			want: []string{qsTemplate},
		},
		{
			name: "nesting-in-template",
			edit: edit("web.hcl", `image    = "nginx:1.25"`, `image    = "${`+nested("(", `"x"`, ")", 1500000)+`}"`),
			want: []string{"web.hcl:"},
		},
		{
			name: "nesting-in-comment",
			edit: func(t *testing.T, dir string) {
				appendTo(t, dir, "web.hcl", "\n/* "+strings.Repeat("(", 1500000)+" */\n")
			},
		},
		{
			name: "module-fan-out",
			edit: func(t *testing.T, dir string) { fanOutModules(t, dir, 6, 8) },
			want: []string{"Too many module instances"},
		},
		{
			name: "setproduct",
			edit: edit(qsTemplate, "replicas=${var.replicas}", "replicas=${length(setproduct(range(1024),range(1024),range(1024)))}"),
			want: []string{"setproduct"},
		},
		{
			name: "symlink-to-200MB",
			edit: func(t *testing.T, dir string) {
				f, err := os.Create(filepath.Join(dir, "huge.bin"))
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Truncate(200 << 20); err != nil {
					t.Fatal(err)
				}
				f.Close()
				if err := os.Symlink("huge.bin", filepath.Join(dir, "big.hcl")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"big.hcl"},
		},
		{
			name: "parseint-of-a-secret",
			edit: edit(qsTemplate, "replicas=${var.replicas}", "replicas=${parseint(var.api_key, 10)}"),
			want: []string{"parseint"},
		},
		{
			name: "derived-secret-in-a-path",
			edit: edit(qsTemplate, `path    = "web/credentials"`, `path    = "web/${strrev(var.api_key)}/${base64encode(var.api_key)}"`),
		},
		{
			name: "steal-a-file",
			edit: func(t *testing.T, dir string) { writeTree(t, dir, apiStackSet("thief", "web/app.conf")) },
			want: []string{"Two stack sets manage one file"},
		},
		{
			name: "reserved-name",
			edit: func(t *testing.T, dir string) { writeTree(t, dir, apiStackSet("stackd", "own.conf")) },
			want: []string{"Reserved stack_set name"},
		},
		{
			name: "expensive-to-plan",
			edit: func(t *testing.T, dir string) {
				files := busyBranchDefs("busy")
				writeTree(t, dir, map[string]string{"busy.hcl": strings.Replace(files["fleet.hcl"], `"fleet"`, `"busy"`, 1),
					"template/main.hcl": files["template/main.hcl"]})
			},
			want: []string{"Planning took too long"},
		},
		{
			name: "50MB-definitions",
			edit: func(t *testing.T, dir string) {
				line := "# " + strings.Repeat("x", 1021) + "\n"
				writeTree(t, dir, map[string]string{"big.hcl": strings.Repeat(line, 50<<10)})
			},
			want: []string{"big.hcl"},
		},
	}
}

// pushBranch commits attack's edit on a new branch of its name.
func pushBranch(t *testing.T, repo string, a branchAttack) string {
	t.Helper()
	return commitOnBranch(t, repo, a.name, a.edit)
}

// peakRSSMiB is a process's peak resident set size (VmHWM).
func peakRSSMiB(t *testing.T, pid int) float64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return float64(kb) / 1024
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// maxHostileRSSMiB bounds the daemon's peak memory during the suite: the
// attacks ask for gigabytes (25 GB for setproduct, 200 MB for the
// symlink); a quiet daemon on the quickstart peaks near 50 MiB.
const maxHostileRSSMiB = 200

func TestHostileBranches(t *testing.T) {
	t.Parallel()
	f, p := deployedDaemon(t, "--plan-budget", "5s")
	addr := p.addr(t)

	attacks := hostileBranches()
	heads := map[string]string{}
	for _, a := range attacks {
		heads[a.name] = pushBranch(t, f.repo, a)
	}
	// The deploy branch keeps deploying while the branches are planned.
	deployImage(t, f, p, "nginx:1.25", "nginx:1.26")
	deployImage(t, f, p, "nginx:1.26", "nginx:1.27")

	// Every branch gets its change sets (or diagnostics) on the status branch.
	var head statusCommit
	eventually(t, 3*time.Minute, func() bool {
		head = statusHead(t, f.repo)
		for _, a := range attacks {
			var doc struct{ Revision string }
			b, ok := head.Files[reconciler.ChangeSetPath(a.name, "stackd", "json")]
			if !ok {
				b = head.Files[reconciler.ChangeSetPath(a.name, "web", "json")]
			}
			if json.Unmarshal(b, &doc) != nil || doc.Revision != heads[a.name] {
				return false
			}
		}
		return true
	}, "not every hostile branch was planned; logs:\n%s", p.log)
	for _, a := range attacks {
		b, rejected := head.Files[reconciler.ChangeSetPath(a.name, "stackd", "json")]
		if len(a.want) == 0 {
			continue
		}
		if !rejected {
			var got []string
			for name, b := range head.Files {
				if strings.HasPrefix(name, "changesets/"+a.name+"/") && strings.HasSuffix(name, ".json") {
					got = append(got, fmt.Sprintf("%s: %.300s", name, b))
				}
			}
			t.Errorf("branch %s: planned without a diagnostic, want one containing %q; got:\n%s", a.name, a.want, strings.Join(got, "\n"))
			continue
		}
		var idx reconciler.IndexStatus
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatalf("branch %s: %v", a.name, err)
		}
		if idx.Revision != heads[a.name] {
			t.Errorf("branch %s: diagnostics of %s, want of its head %s", a.name, idx.Revision, heads[a.name])
		}
		var diags []string
		for _, d := range idx.Diagnostics {
			diags = append(diags, d.String())
		}
		t.Run(a.name, func(t *testing.T) { wantDiagnostic(t, diags, a.want...) })
	}

	// No secret, nor a form of it, anywhere a branch's author can look.
	forms := []string{qsSecret, reverse(qsSecret), base64.StdEncoding.EncodeToString([]byte(qsSecret))}
	var api strings.Builder
	for _, a := range attacks {
		var doc json.RawMessage
		if code, err := getJSON(addr, "/v1/changesets?ref="+a.name, &doc); err == nil && code == 200 {
			api.Write(doc)
		}
	}
	history, _, err := readStatusHistory(f.repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range forms {
		if strings.Contains(p.log.String(), form) {
			t.Errorf("the daemon's log holds %q", form)
		}
		if strings.Contains(api.String(), form) {
			t.Errorf("GET /v1/changesets holds %q", form)
		}
		for _, c := range history {
			for name, b := range c.Files {
				if strings.Contains(string(b), form) {
					t.Errorf("%s of status commit %s holds %q", name, c.Hash[:7], form)
				}
			}
		}
	}

	if p.done() {
		t.Fatalf("the daemon exited; logs:\n%s", p.log)
	}
	rss := peakRSSMiB(t, p.cmd.Process.Pid)
	t.Logf("peak RSS of the daemon during the hostile-branch suite: %.0f MiB", rss)
	if rss > maxHostileRSSMiB {
		t.Errorf("peak RSS %.0f MiB, want at most %d MiB", rss, maxHostileRSSMiB)
	}
	p.signal(t, 15)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Errorf("stackd run exited %d after SIGTERM; logs:\n%s", code, p.log)
	}
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// GET /v1/changesets plans one ref at a time under the budget and stops
// when its client goes away: a client that asks for a branch expensive to
// plan and hangs up does not hold the planner, so the next request is
// answered; and a request that waits for the planner gives up with its
// client. The budget is far longer than the test waits, so only the stop
// can let the second request through.
func TestChangeSetsRequestStopsWithItsClient(t *testing.T) {
	t.Parallel()
	// --pr-branches none: only the API plans the branch.
	f, p := deployedDaemon(t, "--plan-budget", "10m", "--pr-branches", "none")
	addr := p.addr(t)
	pushBranch(t, f.repo, hostileBranchNamed(t, "expensive-to-plan"))

	get := func(ref string, timeout time.Duration) (int, error) {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: timeout}
		resp, err := c.Get("http://" + addr + "/v1/changesets?ref=" + ref)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	if _, err := get("expensive-to-plan", time.Second); err == nil {
		t.Fatal("the expensive branch was planned within a second; the test needs it to take longer")
	}
	// The planner is free again once the plan has seen its client go.
	code, err := get("main", 30*time.Second)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/changesets?ref=main after a client gave up: %d %v; logs:\n%s", code, err, p.log)
	}
	if p.done() {
		t.Fatalf("the daemon exited; logs:\n%s", p.log)
	}
}

func hostileBranchNamed(t *testing.T, name string) branchAttack {
	t.Helper()
	for _, a := range hostileBranches() {
		if a.name == name {
			return a
		}
	}
	t.Fatalf("no hostile branch %q", name)
	return branchAttack{}
}

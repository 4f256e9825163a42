package main

// Hostile and bad input: each is a diagnostic (or a refused request) with
// nothing applied, the targets untouched and stackd still fine; a following
// valid commit applies normally.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/provider/custom"
)

const qsTemplate = "templates/web/main.hcl"

// badCommit is one hostile change to the quickstart.
type badCommit struct {
	name string
	edit func(t *testing.T, repo string)
	// The output must name file:line of the line holding mark (when file is
	// set) and contain every string of want.
	file, mark string
	want       []string
}

func appendTo(t *testing.T, repo, rel, s string) {
	t.Helper()
	p := filepath.Join(repo, filepath.FromSlash(rel))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, s...), 0o644); err != nil {
		t.Fatal(err)
	}
}

func edit(rel, old, new string) func(*testing.T, string) {
	return func(t *testing.T, repo string) { replaceIn(t, repo, rel, old, new) }
}

// nested returns depth opening brackets, core and the closing ones.
func nested(open, core, close string, depth int) string {
	return strings.Repeat(open, depth) + core + strings.Repeat(close, depth)
}

func useAccountsFile(content string) func(*testing.T, string) {
	return func(t *testing.T, repo string) {
		replaceIn(t, repo, "web.hcl", `accounts = ["111111111111", "222222222222"]`, `accounts_file = "./accounts.csv"`)
		writeTree(t, repo, map[string]string{"accounts.csv": content})
	}
}

var badCommits = []badCommit{
	{
		// A commit that loses the definitions does not delete the fleet;
		// the diagnostic says how to delete every stack set on purpose.
		name: "every definitions file deleted",
		edit: func(t *testing.T, repo string) {
			if err := os.Remove(filepath.Join(repo, "web.hcl")); err != nil {
				t.Fatal(err)
			}
		},
		want: []string{"No definitions", "holds no *.hcl definition files", "with no stack_set block"},
	},
	{
		name: "syntax error in the definitions",
		edit: edit("web.hcl", `description = "frontend configuration"`, `description = = "frontend configuration"`),
		file: "web.hcl", mark: "= =", want: []string{"Invalid expression"},
	},
	{
		name: "syntax error in a template",
		edit: edit(qsTemplate, "locals {", "locals {{"),
		file: qsTemplate, mark: "locals {{",
	},
	{
		name: "variable of the wrong type",
		edit: edit("web.hcl", "replicas = 2", `replicas = "three"`),
		file: "web.hcl", mark: `"three"`,
	},
	{
		name: "type error in an expression",
		edit: edit(qsTemplate, "replicas=${var.replicas}", `replicas=${var.replicas + "x"}`),
		file: qsTemplate, mark: `+ "x"`,
	},
	{
		name: "unknown block",
		edit: func(t *testing.T, repo string) { appendTo(t, repo, "web.hcl", "\nbogus \"x\" {\n}\n") },
		file: "web.hcl", mark: "bogus", want: []string{"Unsupported block type"},
	},
	{
		name: "unknown stack set attribute",
		edit: edit("web.hcl", `template    = "./templates/web"`, "template    = \"./templates/web\"\n  colour      = \"blue\""),
		file: "web.hcl", mark: "colour", want: []string{"Unsupported argument"},
	},
	{
		name: "unknown resource attribute",
		edit: edit(qsTemplate, `mode    = "0600"`, "mode    = \"0600\"\n  wat     = 1"),
		file: qsTemplate, mark: "wat",
	},
	{
		name: "reference to a missing resource",
		edit: edit(qsTemplate, "config_sha256=${file.config.sha256}", "config_sha256=${file.nope.sha256}"),
		file: qsTemplate, mark: "file.nope",
	},
	{
		name: "dependency cycle",
		edit: edit(qsTemplate, `path    = "web/app.conf"`, "path       = \"web/app.conf\"\n  depends_on = [command.register]"),
		want: []string{"ycle"},
	},
	{
		name: "count of a billion",
		edit: edit(qsTemplate, "count   = var.replicas", "count   = 1000000000"),
		file: qsTemplate, mark: "1000000000", want: []string{"Invalid count argument"},
	},
	{
		name: "10,000 nested lists",
		edit: edit("web.hcl", "replicas = 2", "replicas = "+nested("[", "2", "]", 10000)),
		file: "web.hcl", mark: "replicas = [[",
	},
	{
		name: "10,000 nested parentheses around a string",
		edit: edit("web.hcl", "replicas = 2", "replicas = "+nested("(", `"two"`, ")", 10000)),
		file: "web.hcl", mark: "replicas = ((",
	},
	{
		name: "absolute file path",
		edit: edit(qsTemplate, `path    = "web/app.conf"`, `path    = "/tmp/stackd-escape/app.conf"`),
		file: qsTemplate, mark: `resource "file" "config"`, want: []string{"/tmp/stackd-escape/app.conf", "must be relative"},
	},
	{
		name: "file path with ..",
		edit: edit(qsTemplate, `path    = "web/app.conf"`, `path    = "web/../../../escape.conf"`),
		file: qsTemplate, mark: `resource "file" "config"`, want: []string{"web/../../../escape.conf", "must be relative"},
	},
	{
		name: "accounts file with junk",
		edit: useAccountsFile("111111111111\n222222222222, not an account!\n"),
		want: []string{"accounts.csv", "line 2"},
	},
	{
		name: "accounts file with a byte order mark inside",
		edit: useAccountsFile("111111111111,\ufeff222222222222\n"),
		want: []string{"accounts.csv", "line 1"},
	},
	{
		name: "accounts file that is not UTF-8",
		edit: useAccountsFile("111111111111\n\xff\xfe222222222222\x00\n"),
		want: []string{"accounts.csv", "UTF-8"},
	},
	{
		name: "50 MB definitions file",
		edit: func(t *testing.T, repo string) {
			line := "# " + strings.Repeat("x", 1021) + "\n"
			writeTree(t, repo, map[string]string{"big.hcl": strings.Repeat(line, 50<<10)})
		},
		want: []string{"big.hcl", "too large"},
	},
}

func TestHostileCommits(t *testing.T) {
	t.Parallel()
	for _, tc := range badCommits {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			base := runGit(t, f.repo, "rev-parse", "HEAD")
			mustApplyRetry(t, f)
			targets := snapshot(t, f.targets)

			tc.edit(t, f.repo)
			want := tc.want
			if tc.file != "" {
				want = append(want, fmt.Sprintf("%s:%d,", tc.file, lineOf(t, f.repo, tc.file, tc.mark)))
			}
			bad := f.commit(t, tc.name)
			start := time.Now()
			res := applyRetry(t, f)
			if res.code() != 1 {
				t.Fatalf("apply of %q: exit %d, want 1\n%s", tc.name, res.code(), res)
			}
			if !strings.Contains(res.stdout, fmt.Sprintf("Revision %s rejected: nothing applied.", bad[:7])) {
				t.Errorf("apply did not report the revision rejected:\n%s", res.stdout)
			}
			for _, w := range want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("apply printed:\n%.2000s\nwant it to contain %q", res.stdout, w)
				}
			}
			t.Logf("rejected in %s: %.300s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(res.stdout))
			// Asked again, the remembered rejection still says why.
			again := applyRetry(t, f)
			if again.code() != 1 || !strings.Contains(again.stdout, fmt.Sprintf("Revision %s rejected: nothing applied.", bad[:7])) {
				t.Errorf("apply of the rejected revision again: exit %d, want 1 and the rejection\n%s", again.code(), again)
			}
			for _, w := range want {
				if !strings.Contains(again.stdout, w) {
					t.Errorf("apply of the rejected revision again printed:\n%.2000s\nwant it to contain %q", again.stdout, w)
				}
			}
			if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
				t.Errorf("the rejected commit changed the targets (-before +after):\n%s", diff)
			}

			// A valid commit after it applies normally.
			runGit(t, f.repo, "read-tree", "-u", "--reset", base)
			replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
			f.commit(t, "back to good definitions, nginx 1.26")
			res = mustApplyRetry(t, f)
			if !strings.Contains(res.stdout, "DeployStackSet") || !strings.Contains(res.stdout, "SUCCEEDED (6/6 instances)") {
				t.Errorf("apply of the valid commit printed %q, want a successful DeployStackSet", res.stdout)
			}
			checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.26")
		})
	}
}

// An accounts file with a byte order mark and CRLF line ends lists the
// same accounts: no instance changes, none named after the BOM.
func TestAccountsFileWithBOM(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mustApplyRetry(t, f)
	targets := snapshot(t, f.targets)
	useAccountsFile("\ufeff111111111111,\r\n222222222222\r\n\r\n")(t, f.repo)
	rev := f.commit(t, "accounts from a spreadsheet export")
	res := mustApplyRetry(t, f)
	if want := fmt.Sprintf("Revision %s: no changes.", rev[:7]); !strings.Contains(res.stdout, want) {
		t.Errorf("apply printed %q, want %q", res.stdout, want)
	}
	if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
		t.Errorf("the same accounts from a CSV changed the targets:\n%s", diff)
	}
}

// A symbolic link planted inside the targets root, pointing outside it:
// the file provider refuses to write through it.
func TestFilePathThroughSymlink(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mustApplyRetry(t, f)
	outside := t.TempDir()
	link := filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "web", "evil")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	// The account directory itself replaced by a link out of the root.
	acct := filepath.Join(f.targets, "333333333333")
	if err := os.Symlink(outside, acct); err != nil {
		t.Fatal(err)
	}
	appendTo(t, f.repo, qsTemplate, `
resource "file" "evil" {
  path    = "web/evil/pwned.txt"
  content = "pwned\n"
}
`)
	replaceIn(t, f.repo, "web.hcl", `accounts = ["111111111111", "222222222222"]`, `accounts = ["111111111111", "222222222222", "333333333333"]`)
	f.commit(t, "write through a symlink")
	res := applyRetry(t, f)
	if res.code() != 1 {
		t.Fatalf("apply: exit %d, want 1\n%s", res.code(), res)
	}
	if !strings.Contains(res.stdout, "eu-west-1/111111111111 OPERATION_FAILED") || !strings.Contains(res.stdout, "pwned.txt") {
		t.Errorf("apply printed:\n%s\nwant the instance with the link to fail naming the path", res.stdout)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files were written outside the targets root: %v", names)
	}
	// eu-west-1 goes first (SEQUENTIAL) and exceeds the tolerance.
	if want := "eu-west-1/333333333333 OPERATION_FAILED"; !strings.Contains(res.stdout, want) || !strings.Contains(res.stdout, "path escapes") {
		t.Errorf("apply printed:\n%s\nwant %q: its account directory links out of the root", res.stdout, want)
	}

	// The valid commit without the hostile resource applies.
	runGit(t, f.repo, "checkout", "-q", "HEAD~1", "--", ".")
	f.commit(t, "no more symlink games")
	if err := os.Remove(acct); err != nil {
		t.Fatal(err)
	}
	res = mustApplyRetry(t, f)
	if !strings.Contains(res.stdout, "SUCCEEDED") {
		t.Errorf("apply of the valid commit printed %q", res.stdout)
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.25")
}

// 100,000 nested brackets in a 200 KB definitions file: a diagnostic, not
// a crash. Run as a process, because a crash would take the test binary.
func TestDeepNestingDoesNotCrash(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	for _, tc := range []struct{ name, value string }{
		{"parentheses", nested("(", "2", ")", 100000)},
		{"lists", nested("[", "2", "]", 100000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyQuickstart(t, dir)
			replaceIn(t, dir, "web.hcl", "replicas = 2", "replicas = "+tc.value)
			res := runBinary(t, binary, "validate", dir)
			if res.code() != 1 || strings.Contains(res.stderr, "fatal error") || !strings.Contains(res.stdout, "web.hcl:") {
				t.Errorf("validate of %d nested %s: exit %d\n%.1500s", 100000, tc.name, res.code(), res)
			}
		})
	}
}

// ---- custom resources ----------------------------------------------------

// customFixture deploys one custom resource and a file made from its Data.
func customFixture(t *testing.T, hook string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	writeTree(t, f.repo, map[string]string{
		"rec.hcl": fmt.Sprintf(`resource_type "Custom::Rec" {
  service_token = %q
}

stack_set "rec" {
  template = "./t"
  vars     = { size = 1 }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`, hook),
		"t/main.hcl": `variable "size" { type = number }
resource "custom" "rec" {
  type       = "Custom::Rec"
  properties = { size = var.size }
  timeout    = "30s"
}
resource "file" "name" {
  path    = "name.txt"
  content = "${custom.rec.data.name} size=${var.size}\n"
}
`,
	})
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "a custom resource")
	return f
}

// Synchronous answers that break the protocol: the call fails with the
// reason, nothing else is applied, a later valid answer works.
func TestHostileCustomAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer func(req crRequest) []byte
		want   string
	}{
		{
			name: "oversized answer",
			answer: func(req crRequest) []byte {
				m := req.success()
				m["Reason"] = strings.Repeat("x", custom.MaxResponseBytes)
				return mustJSON(m)
			},
			want: fmt.Sprintf("more than %d bytes", custom.MaxResponseBytes),
		},
		{
			name:   "Status of the wrong type",
			answer: func(req crRequest) []byte { return []byte(`{"Status": 5, "RequestId": "` + req.RequestID + `"}`) },
			want:   "invalid answer",
		},
		{
			name:   "unknown Status",
			answer: func(req crRequest) []byte { return []byte(`{"Status": "MAYBE"}`) },
			want:   "invalid answer",
		},
		{
			name: "answer for another request",
			answer: func(req crRequest) []byte {
				m := req.success()
				m["RequestId"] = "00000000-0000-0000-0000-000000000000"
				return mustJSON(m)
			},
			want: "invalid answer",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			hostile := false
			prov := newRecordingProvider()
			prov.answer = func(w http.ResponseWriter, r *http.Request, req crRequest) {
				mu.Lock()
				bad := hostile
				mu.Unlock()
				body := mustJSON(req.success())
				if bad {
					body = tc.answer(req)
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write(body)
			}
			srv := httptest.NewServer(prov)
			t.Cleanup(srv.Close)
			f := customFixture(t, srv.URL)
			mustApplyRetry(t, f)
			targets := snapshot(t, f.targets)

			mu.Lock()
			hostile = true
			mu.Unlock()
			replaceIn(t, f.repo, "rec.hcl", "size = 1", "size = 2")
			f.commit(t, "size 2")
			res := applyRetry(t, f)
			if res.code() != 1 || !strings.Contains(res.stdout, "OPERATION_FAILED") || !strings.Contains(res.stdout, tc.want) {
				t.Errorf("apply against a provider giving a %s: exit %d, want 1 and %q\n%s", tc.name, res.code(), tc.want, res)
			}
			if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
				t.Errorf("the failed update changed the targets:\n%s", diff)
			}
			if check := stackdRetry(t, "state", "check", "--state-dir", f.state); check.err != nil {
				t.Errorf("state check: %s", check)
			}

			mu.Lock()
			hostile = false
			mu.Unlock()
			replaceIn(t, f.repo, "rec.hcl", "size = 2", "size = 3")
			f.commit(t, "size 3")
			res = mustApplyRetry(t, f)
			if got := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "name.txt")); !strings.HasSuffix(got, "size=3\n") {
				t.Errorf("name.txt after the valid commit = %q", got)
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Asynchronous responses through the daemon's API: tampered, expired,
// oversized and malformed ones are refused and change nothing; the real
// response then completes the resource.
func TestHostileResponseURLs(t *testing.T) {
	t.Parallel()
	urls := make(chan crRequest, 4)
	prov := newRecordingProvider()
	prov.answer = func(w http.ResponseWriter, r *http.Request, req crRequest) {
		urls <- req
		w.WriteHeader(http.StatusAccepted) // the answer comes on the response URL
	}
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)
	f := customFixture(t, srv.URL)

	// The daemon signs response URLs with the key kept in its state: plant
	// one, so the test can sign an expired URL the daemon would accept but
	// for its age.
	key := make([]byte, 32)
	rand.Read(key)
	st := openState(t, f.state)
	if err := st.SetMeta(brokerKeyMeta, key); err != nil {
		t.Fatal(err)
	}
	st.Close()

	listen := freePort(t)
	d := startDaemonRetry(t, f.flags("--listen", listen, "--external-url", "http://"+listen, "--interval", "1h")...)
	var req crRequest
	select {
	case req = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatalf("no Create reached the provider; logs:\n%s", d.logs)
	}
	token := req.ResponseURL[strings.LastIndex(req.ResponseURL, "/")+1:]
	good := mustJSON(req.success())
	put := func(url string, body []byte) int {
		t.Helper()
		r, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := httpClient.Do(r)
		if err != nil {
			t.Fatalf("PUT %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	past := time.Now().Add(-time.Hour)
	old, err := custom.NewBroker(custom.BrokerOptions{Key: key, ExternalURL: "http://" + listen, Now: func() time.Time { return past }})
	if err != nil {
		t.Fatal(err)
	}
	w, err := old.Expect(custom.Identity{RequestID: req.RequestID, StackID: req.StackID, LogicalResourceID: req.LogicalResourceID}, past.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	expired := w.URL()
	w.Close()
	forged, err := custom.NewBroker(custom.BrokerOptions{ExternalURL: "http://" + listen}) // another key
	if err != nil {
		t.Fatal(err)
	}
	fw, err := forged.Expect(custom.Identity{RequestID: req.RequestID, StackID: req.StackID, LogicalResourceID: req.LogicalResourceID}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	forgedURL := fw.URL()
	fw.Close()
	other := req.success()
	other["LogicalResourceId"] = "custom.other"
	big := req.success()
	big["Reason"] = strings.Repeat("y", custom.MaxResponseBytes)
	base := "http://" + listen + custom.ResponsesPath
	for _, tc := range []struct {
		name string
		url  string
		body []byte
		want int
	}{
		{"tampered signature", base + flip(token, len(token)-3), good, http.StatusUnauthorized},
		{"tampered claims", base + flip(token, 2), good, http.StatusUnauthorized},
		{"signed with another key", forgedURL, good, http.StatusUnauthorized},
		{"expired", expired, good, http.StatusGone},
		{"garbage token", base + "not-a-token", good, http.StatusNotFound},
		{"oversized body", req.ResponseURL, mustJSON(big), http.StatusRequestEntityTooLarge},
		{"not JSON", req.ResponseURL, []byte("SUCCESS"), http.StatusBadRequest},
		{"another resource's answer", req.ResponseURL, mustJSON(other), http.StatusBadRequest},
	} {
		if got := put(tc.url, tc.body); got != tc.want {
			t.Errorf("%s: PUT answered %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := put(req.ResponseURL, good); got != http.StatusOK {
		t.Fatalf("the real response: %d, want 200; logs:\n%s", got, d.logs)
	}
	if got := put(req.ResponseURL, good); got != http.StatusConflict {
		t.Errorf("the real response again: %d, want 409", got)
	}
	eventually(t, 20*time.Second, func() bool {
		return strings.Contains(statusHead(t, f.repo).Message, "SUCCEEDED (1/1)")
	}, "no successful status commit after the real response; logs:\n%s", d.logs)
	if got, want := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "name.txt")), fmt.Sprintf("%s size=1\n", req.where()); got != want {
		t.Errorf("name.txt = %q, want %q", got, want)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
}

// Webhooks with bad signatures are refused and trigger nothing; a good one
// triggers exactly one pass.
func TestHostileWebhooks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote.git")
	work := filepath.Join(dir, "work")
	runGit(t, dir, "init", "-q", "--bare", remote)
	runGit(t, dir, "clone", "-q", remote, work)
	copyQuickstart(t, work)
	rev1 := commitAllIn(t, work, "web")
	runGit(t, work, "push", "-q", "origin", "main")
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("hook-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fixture{state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	d := startDaemonRetry(t, "--repo", "file://"+remote, "--cache-dir", filepath.Join(dir, "cache"), "--state-dir", f.state,
		"--targets-root", f.targets, "--log-format", "json", "--listen", "127.0.0.1:0", "--interval", "1h", "--webhook-secret-file", secret)
	addr := d.addr(t)
	waitReady(t, d, addr, rev1)
	eventually(t, 20*time.Second, func() bool {
		return strings.Contains(statusHead(t, remote).Message, rev1[:7])
	}, "no status commit for %s; logs:\n%s", rev1[:7], d.logs)
	passes := metric(t, addr, "stackd_reconciles_total")

	replaceIn(t, work, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev2 := commitAllIn(t, work, "web: nginx 1.26")
	runGit(t, work, "push", "-q", "origin", "main")
	body := `{"ref":"refs/heads/main","after":"` + rev2 + `"}`
	send := func(sig string, body string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/hooks/git", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-GitHub-Event", "push")
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			// The daemon answers an oversized body with 413 before reading
			// it and closes the connection: the client may see the reset
			// while it is still sending.
			if len(body) > 1<<20 && (strings.Contains(err.Error(), "reset by peer") || strings.Contains(err.Error(), "broken pipe")) {
				return http.StatusRequestEntityTooLarge
			}
			t.Fatalf("POST /v1/hooks/git: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	sign := hmacHex
	for _, tc := range []struct {
		name, sig, body string
		want            int
	}{
		{"no signature", "", body, http.StatusUnauthorized},
		{"wrong secret", "sha256=" + sign("guess", body), body, http.StatusUnauthorized},
		{"signature of another body", "sha256=" + sign("hook-secret", body+" "), body, http.StatusUnauthorized},
		{"sha1 prefix", "sha1=" + sign("hook-secret", body), body, http.StatusUnauthorized},
		{"not hex", "sha256=" + strings.Repeat("z", 64), body, http.StatusUnauthorized},
		{"truncated", "sha256=" + sign("hook-secret", body)[:20], body, http.StatusUnauthorized},
		{"oversized body", "sha256=" + sign("hook-secret", strings.Repeat("a", 26<<20)), strings.Repeat("a", 26<<20), http.StatusRequestEntityTooLarge},
	} {
		if got := send(tc.sig, tc.body); got != tc.want {
			t.Errorf("%s: webhook answered %d, want %d", tc.name, got, tc.want)
		}
	}
	healthz(t, addr)
	if got := send("sha256="+sign("hook-secret", body), body); got != http.StatusAccepted {
		t.Fatalf("the signed webhook: %d, want 202", got)
	}
	waitReady(t, d, addr, rev2)
	eventually(t, 20*time.Second, func() bool {
		msg := statusHead(t, remote).Message
		return strings.Contains(msg, rev2[:7]) && strings.Contains(msg, "SUCCEEDED")
	}, "no status commit for %s; logs:\n%s", rev2[:7], d.logs)
	if got := metric(t, addr, "stackd_reconciles_total"); got != passes+1 {
		t.Errorf("reconcile passes went from %v to %v, want exactly one more (the signed webhook's)", passes, got)
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.26")
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
}

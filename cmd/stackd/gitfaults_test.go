package main

// Git faults: `stackd run` against a remote served by `git daemon` on
// 127.0.0.1 that goes away, is slow or stalls, is force-pushed, loses its
// deploy branch, or gets a status-branch push from someone else; and a cache
// clone removed under the daemon's feet. In each case the daemon keeps serving, keeps the
// last good revision deployed, reports the fault, and recovers by itself
// when the fault ends.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/reconciler"
)

// remoteEnv is a bare repository served by git daemon, a user's clone of it
// (pushing by path, so pushes work while the daemon is down), and stackd's
// directories.
type remoteEnv struct {
	dir, base, bare, work, cache string
	git                          *gitDaemon
	f                            *fixture
}

// newRemoteEnv makes the remote with the quickstart as its first commit.
func newRemoteEnv(t *testing.T) *remoteEnv {
	t.Helper()
	dir := t.TempDir()
	e := &remoteEnv{dir: dir, base: filepath.Join(dir, "srv"), work: filepath.Join(dir, "work"), cache: filepath.Join(dir, "cache")}
	e.bare = filepath.Join(e.base, "defs.git")
	e.f = &fixture{state: filepath.Join(dir, "stackd", "state"), targets: filepath.Join(dir, "targets")}
	if err := os.MkdirAll(e.base, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, dir, "init", "-q", "--bare", e.bare)
	runGit(t, dir, "clone", "-q", e.bare, e.work)
	copyQuickstart(t, e.work)
	e.push(t, "Add the web stack set")
	e.git = startGitDaemon(t, e.base, 0)
	return e
}

// push commits the work tree and pushes main; it returns the commit.
func (e *remoteEnv) push(t *testing.T, msg string) string {
	t.Helper()
	rev := commitAllIn(t, e.work, msg)
	runGit(t, e.work, "push", "-q", "origin", "main")
	return rev
}

func (e *remoteEnv) flags(extra ...string) []string {
	return e.flagsFor(e.git.url("defs.git"), extra...)
}

// flagsFor is flags with repo as the remote's URL (a proxy in front of it).
func (e *remoteEnv) flagsFor(repo string, extra ...string) []string {
	return append([]string{"--repo", repo, "--cache-dir", e.cache, "--state-dir", e.f.state,
		"--targets-root", e.f.targets, "--log-format", "json", "--listen", "127.0.0.1:0"}, extra...)
}

// waitReady waits until /readyz reports rev reconciled.
func waitReady(t *testing.T, d *daemon, addr, rev string) {
	t.Helper()
	eventually(t, 30*time.Second, func() bool {
		code, h, err := readyz(addr)
		return err == nil && code == 200 && h.Revision == rev
	}, "/readyz never reported %s; logs:\n%s", rev[:7], d.logs)
}

// waitStatusOn waits until the stack set's status document on the remote's
// status branch is at rev.
func waitStatusOn(t *testing.T, d *daemon, repo, name, rev string) statusCommit {
	t.Helper()
	var head statusCommit
	eventually(t, 30*time.Second, func() bool {
		h, ok, err := readStatusHistory(repo)
		if err != nil || !ok {
			return false
		}
		var doc reconciler.StackSetStatus
		head = h[0]
		return json.Unmarshal(head.Files[reconciler.StatusPath(name)], &doc) == nil && doc.Revision == rev
	}, "the status branch of %s never reached %s; logs:\n%s", repo, rev[:7], d.logs)
	return head
}

// failedPasses returns the "reconcile failed" log lines.
func failedPasses(logs string) []map[string]any {
	var out []map[string]any
	for _, l := range logLines(logs) {
		if l["message"] == "reconcile failed" {
			out = append(out, l)
		}
	}
	return out
}

func healthz(t *testing.T, addr string) {
	t.Helper()
	code, err := getJSON(addr, "/healthz", nil)
	if err != nil || code != 200 {
		t.Errorf("GET /healthz: %d %v, want 200", code, err)
	}
}

// The remote goes away mid-run: the daemon keeps serving, reports the
// fault, keeps the last good revision, retries with backoff, and deploys a
// commit pushed meanwhile once the remote is back.
func TestGitRemoteUnreachable(t *testing.T) {
	t.Parallel()
	e := newRemoteEnv(t)
	rev1 := runGit(t, e.work, "rev-parse", "HEAD")
	d := startDaemonRetry(t, e.flags("--interval", "100ms")...)
	addr := d.addr(t)
	waitReady(t, d, addr, rev1)
	waitStatusOn(t, d, e.bare, "web", rev1)
	checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.25")
	targets := snapshot(t, e.f.targets)
	fetchErrors := metric(t, addr, "stackd_git_fetches_total", `result="error"`)

	e.git.stop(t)
	var h reconciler.Health
	eventually(t, 20*time.Second, func() bool {
		var code int
		code, h, _ = readyz(addr)
		return code == 503 && strings.Contains(h.Err, "fetch") && len(failedPasses(d.logs.String())) >= 3
	}, "/readyz never reported the fetch failure three times; logs:\n%s", d.logs)
	t.Logf("/readyz while the remote is down: %s", h.Err)
	healthz(t, addr)
	if got := metric(t, addr, "stackd_git_fetches_total", `result="error"`); got <= fetchErrors {
		t.Errorf("stackd_git_fetches_total{result=\"error\"} = %v, want more than %v", got, fetchErrors)
	}
	// Backoff: the announced retry delays grow.
	fails := failedPasses(d.logs.String())
	var delays []float64
	for _, l := range fails {
		// Durations are logged with their unit ("1.5s").
		s, _ := l["retry_in"].(string)
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("retry_in %q: %v", s, err)
		}
		delays = append(delays, float64(d.Milliseconds()))
	}
	for i := 1; i < len(delays) && i < 4; i++ {
		if delays[i] < delays[i-1] {
			t.Errorf("retry_in went down from %vms to %vms: %v", delays[i-1], delays[i], delays)
		}
	}
	if delays[0] < 500 || delays[0] > 1000 {
		t.Errorf("first retry_in %vms, want 0.5-1s", delays[0])
	}
	t.Run("a poll tick retries at once", func(t *testing.T) {
		// The backoff spaces only the retries nothing asked for: with a
		// poll every 100ms, an attempt comes before the delay the previous
		// one announced (which doubles from 0.5-1s). Not every gap: a
		// loaded machine may delay a tick.
		var gaps []string
		for i := 1; i < len(fails); i++ {
			prev, _ := time.Parse(time.RFC3339Nano, fails[i-1]["time"].(string))
			cur, _ := time.Parse(time.RFC3339Nano, fails[i]["time"].(string))
			gap := cur.Sub(prev)
			if gap < time.Duration(delays[i-1]*0.9)*time.Millisecond {
				return
			}
			gaps = append(gaps, fmt.Sprintf("%s (announced %vms)", gap, delays[i-1]))
		}
		t.Errorf("every retry waited for its backoff despite the polls: %v", gaps)
	})

	// A restart while the remote is down: the daemon starts on its cache
	// clone (API, /readyz and metrics up) and keeps trying.
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
	d = startDaemonRetry(t, e.flags("--interval", "100ms")...)
	addr = d.addr(t)
	eventually(t, 20*time.Second, func() bool {
		code, h, _ := readyz(addr)
		return code == 503 && strings.Contains(h.Err, "fetch")
	}, "the daemon restarted with the remote down never reported it; logs:\n%s", d.logs)

	// A commit pushed while the remote is unreachable.
	replaceIn(t, e.work, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev2 := e.push(t, "web: nginx 1.26")
	if diff := cmp.Diff(targets, snapshot(t, e.f.targets)); diff != "" {
		t.Errorf("the targets changed while the remote was down:\n%s", diff)
	}
	e.git = startGitDaemon(t, e.base, e.git.port)
	waitReady(t, d, addr, rev2)
	waitStatusOn(t, d, e.bare, "web", rev2)
	checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.26")
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
	checkJSONLogs(t, d.logs.String())
}

// A force-push rewrites the deploy branch: the new head is deployed.
func TestGitForcePush(t *testing.T) {
	t.Parallel()
	e := newRemoteEnv(t)
	rev1 := runGit(t, e.work, "rev-parse", "HEAD")
	d := startDaemonRetry(t, e.flags("--interval", "100ms")...)
	addr := d.addr(t)
	waitReady(t, d, addr, rev1)
	replaceIn(t, e.work, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev2 := e.push(t, "web: nginx 1.26")
	waitReady(t, d, addr, rev2)
	waitStatusOn(t, d, e.bare, "web", rev2)
	checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.26")

	// Rewrite history: rev2 is gone, rev3 (a sibling) replaces it.
	runGit(t, e.work, "reset", "-q", "--hard", rev1)
	replaceIn(t, e.work, "web.hcl", `"nginx:1.25"`, `"nginx:1.27"`)
	rev3 := commitAllIn(t, e.work, "web: nginx 1.27 instead")
	runGit(t, e.work, "push", "-q", "--force", "origin", "main")
	waitReady(t, d, addr, rev3)
	waitStatusOn(t, d, e.bare, "web", rev3)
	checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.27")
	healthz(t, addr)
	t.Run("the force-push is counted", func(t *testing.T) {
		if got := metric(t, addr, "stackd_git_faults_total", `kind="force_push"`); got != 1 {
			t.Errorf("stackd_git_faults_total{kind=\"force_push\"} = %v, want 1", got)
		}
		var warned []map[string]any
		for _, l := range logLines(d.logs.String()) {
			if l["message"] == "git fault worked around" && l["kind"] == "force_push" {
				warned = append(warned, l)
			}
		}
		if len(warned) != 1 || warned[0]["level"] != "warn" || !strings.Contains(fmt.Sprint(warned[0]["fault"]), rev3[:7]) {
			t.Errorf("force-push warnings %v, want one naming %s; logs:\n%s", warned, rev3[:7], d.logs)
		}
	})
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
}

// The deploy branch is deleted: reported, nothing deleted from the targets;
// pushed again, it deploys.
func TestGitDeployBranchDeleted(t *testing.T) {
	t.Parallel()
	e := newRemoteEnv(t)
	rev1 := runGit(t, e.work, "rev-parse", "HEAD")
	d := startDaemonRetry(t, e.flags("--interval", "100ms")...)
	addr := d.addr(t)
	waitReady(t, d, addr, rev1)
	waitStatusOn(t, d, e.bare, "web", rev1)
	targets := snapshot(t, e.f.targets)

	runGit(t, e.bare, "update-ref", "-d", "refs/heads/main")
	var h reconciler.Health
	eventually(t, 20*time.Second, func() bool {
		var code int
		code, h, _ = readyz(addr)
		return code == 503 && strings.Contains(h.Err, "main")
	}, "/readyz never reported the missing deploy branch; logs:\n%s", d.logs)
	t.Logf("/readyz without the deploy branch: %s", h.Err)
	healthz(t, addr)
	var doc reconciler.StackSetStatus
	if code, err := getJSON(addr, "/v1/stack_sets/web", &doc); err != nil || code != 200 || len(doc.Instances) != 6 {
		t.Errorf("GET /v1/stack_sets/web without the deploy branch: %d %v, %d instances; want the 6 deployed", code, err, len(doc.Instances))
	}
	if diff := cmp.Diff(targets, snapshot(t, e.f.targets)); diff != "" {
		t.Errorf("the targets changed when the deploy branch was deleted:\n%s", diff)
	}

	replaceIn(t, e.work, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev2 := e.push(t, "web: nginx 1.26, on a new main")
	waitReady(t, d, addr, rev2)
	waitStatusOn(t, d, e.bare, "web", rev2)
	checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.26")
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
}

// The cache clone is removed while the daemon runs: the next pass clones it
// again by itself, counts and logs the fault, and deploys the commit pushed
// meanwhile. Passes run on webhooks only, so that no fetch races the
// removal. Then restarts: a cache directory holding only what Git writes
// into a removed cache's path is cleared and cloned again; one holding
// someone's file is refused and left as it is.
func TestGitCacheDirRemoved(t *testing.T) {
	t.Parallel()
	e := newRemoteEnv(t)
	secret := filepath.Join(e.dir, "webhook-secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := e.flags("--interval", "1h", "--webhook-secret-file", secret)
	rev1 := runGit(t, e.work, "rev-parse", "HEAD")
	d := startDaemonRetry(t, flags...)
	addr := d.addr(t)
	waitReady(t, d, addr, rev1)
	waitStatusOn(t, d, e.bare, "web", rev1)

	eventually(t, 10*time.Second, func() bool { return os.RemoveAll(e.cache) == nil }, "cannot remove %s", e.cache)
	replaceIn(t, e.work, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev2 := e.push(t, "web: nginx 1.26")
	_, before, _ := readyz(addr)
	if code := postWebhook(t, addr, "s3cret", "{}"); code != http.StatusAccepted {
		t.Fatalf("webhook: %d", code)
	}
	var h reconciler.Health
	eventually(t, 20*time.Second, func() bool {
		_, h, _ = readyz(addr)
		return h.LastAttempt.After(before.LastAttempt)
	}, "the webhook started no pass; logs:\n%s", d.logs)
	if h.Err != "" || h.Revision != rev2 {
		t.Fatalf("/readyz after the pass that found the cache removed: %+v, want %s and no error; logs:\n%s", h, rev2[:7], d.logs)
	}
	healthz(t, addr)
	waitReady(t, d, addr, rev2)
	waitStatusOn(t, d, e.bare, "web", rev2)
	checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.26")
	if got := metric(t, addr, "stackd_git_faults_total", `kind="cache_damaged"`); got != 1 {
		t.Errorf("stackd_git_faults_total{kind=\"cache_damaged\"} = %v, want 1", got)
	}
	if n := strings.Count(d.logs.String(), `"kind":"cache_damaged"`); n != 1 {
		t.Errorf("%d log lines report the removed cache, want 1; logs:\n%s", n, d.logs)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
	if out := runGit(t, e.cache, "rev-parse", "--is-bare-repository"); out != "true" {
		t.Errorf("the cache directory holds no bare repository after the daemon re-cloned it: %s", out)
	}

	apply := func() cliResult {
		return stackdRetry(t, append([]string{"apply"}, flags[:len(flags)-6]...)...)
	}
	t.Run("a restart clears Git's leftovers", func(t *testing.T) {
		if err := os.RemoveAll(e.cache); err != nil {
			t.Fatal(err)
		}
		// What go-git writes into a removed cache's path: loose objects, refs.
		writeTree(t, e.cache, map[string]string{
			"objects/4b/825dc642cb6eb9a060e54bf8d69288fbee4904": "x",
			"refs/heads/stackd/status":                          rev2 + "\n",
		})
		replaceIn(t, e.work, "web.hcl", `"nginx:1.26"`, `"nginx:1.27"`)
		rev3 := e.push(t, "web: nginx 1.27")
		if res := apply(); res.err != nil {
			t.Fatalf("apply with Git's leftovers in the cache directory: %s", res)
		}
		if doc := statusHead(t, e.bare).stackSetStatus(t, "web"); doc.Revision != rev3 {
			t.Errorf("status of web at %.7s after the apply, want %.7s", doc.Revision, rev3)
		}
		checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.27")
	})
	t.Run("a restart refuses someone's files", func(t *testing.T) {
		if err := os.RemoveAll(e.cache); err != nil {
			t.Fatal(err)
		}
		writeTree(t, e.cache, map[string]string{"notes.txt": "mine\n"})
		res := apply()
		if res.err == nil || !strings.Contains(res.err.Error(), "notes.txt") {
			t.Errorf("apply with someone's file in the cache directory: %s; want an error naming the file", res)
		}
		if got := readFile(t, filepath.Join(e.cache, "notes.txt")); got != "mine\n" {
			t.Errorf("notes.txt = %q after the refused apply", got)
		}
	})
}

// Someone else pushes to stackd/status while an operation runs: stackd's
// status push is rejected, it rebuilds its commit on the new tip, and both
// changes are on the branch afterwards. The operation waits in a custom
// resource Update until the other push is done; the daemon fetches only on
// webhooks, so its cache still has the old tip when it pushes.
func TestGitStatusPushRejected(t *testing.T) {
	t.Parallel()
	prov := newGatedProvider()
	prov.gate = "Update"
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)

	e := newRemoteEnv(t)
	writeTree(t, e.work, map[string]string{
		"dns.hcl": `stack_set "dns" {
  template = "./dns"
  vars     = { zone = "internal" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`,
		"dns/main.hcl": fmt.Sprintf(`variable "zone" { type = string }
resource "custom" "record" {
  type          = "Custom::Record"
  service_token = %q
  properties    = { zone = var.zone }
}
`, srv.URL),
		"types.hcl": "resource_type \"Custom::Record\" {}\n",
	})
	rev1 := e.push(t, "dns records")
	secret := filepath.Join(e.dir, "webhook-secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonRetry(t, e.flags("--interval", "1h", "--webhook-secret-file", secret)...)
	addr := d.addr(t)
	waitReady(t, d, addr, rev1)
	waitStatusOn(t, d, e.bare, "dns", rev1)

	replaceIn(t, e.work, "dns.hcl", `zone = "internal"`, `zone = "corp"`)
	rev2 := e.push(t, "dns: corp zone")
	if code := postWebhook(t, addr, "s3cret", `{"ref":"refs/heads/main"}`); code != http.StatusAccepted {
		t.Fatalf("webhook: %d, want 202", code)
	}
	select {
	case req := <-prov.received:
		for req.RequestType != "Update" {
			req = <-prov.received
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no Update reached the provider; logs:\n%s", d.logs)
	}
	// Meanwhile, someone else adds a file to stackd/status.
	other := filepath.Join(e.dir, "other")
	runGit(t, e.dir, "clone", "-q", "--branch", "stackd/status", e.bare, other)
	writeTree(t, other, map[string]string{"notes/ops.md": "maintenance on Friday\n"})
	otherRev := commitAllIn(t, other, "ops notes")
	runGit(t, other, "push", "-q", "origin", "stackd/status")
	close(prov.release)

	head := waitStatusOn(t, d, e.bare, "dns", rev2)
	if got := string(head.Files["notes/ops.md"]); got != "maintenance on Friday\n" {
		t.Errorf("the other push's notes/ops.md is %q on the status branch, want it kept", got)
	}
	// stackd's commit was rebuilt on the other push: its parent.
	if parent := runGit(t, e.bare, "rev-parse", head.Hash+"^"); parent != otherRev {
		t.Errorf("the status commit %q has parent %s, want the other push's %s", head.Message, parent[:7], otherRev[:7])
	}
	healthz(t, addr)
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
}

// postWebhook sends a push webhook signed with secret ("" for none).
func postWebhook(t *testing.T, addr, secret, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/hooks/git", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	if secret != "" {
		req.Header.Set("X-Hub-Signature-256", "sha256="+hmacHex(secret, body))
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/hooks/git: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// hmacHex is the hex HMAC-SHA256 of body with key (GitHub's webhook signature).
func hmacHex(key, body string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(body))
	return hex.EncodeToString(mac.Sum(nil))
}

// The status push of a finished operation fails because the remote is
// down: once the remote is back, the status commit must still be written
// (the same gap a kill between the state and the status commit leaves).
func TestGitStatusWriteRetried(t *testing.T) {
	t.Parallel()
	prov := newGatedProvider()
	prov.gate = "Update"
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)
	e := newRemoteEnv(t)
	writeTree(t, e.work, map[string]string{
		"dns.hcl": `stack_set "dns" {
  template = "./dns"
  vars     = { zone = "internal" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`,
		"dns/main.hcl": fmt.Sprintf(`variable "zone" { type = string }
resource "custom" "record" {
  type          = "Custom::Record"
  service_token = %q
  properties    = { zone = var.zone }
}
`, srv.URL),
		"types.hcl": "resource_type \"Custom::Record\" {}\n",
	})
	rev1 := e.push(t, "dns records")
	d := startDaemonRetry(t, e.flags("--interval", "100ms")...)
	addr := d.addr(t)
	waitReady(t, d, addr, rev1)
	waitStatusOn(t, d, e.bare, "dns", rev1)

	replaceIn(t, e.work, "dns.hcl", `zone = "internal"`, `zone = "corp"`)
	rev2 := e.push(t, "dns: corp zone")
	select {
	case req := <-prov.received:
		for req.RequestType != "Update" {
			req = <-prov.received
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no Update reached the provider; logs:\n%s", d.logs)
	}
	e.git.stop(t)
	close(prov.release)
	eventually(t, 20*time.Second, func() bool {
		for _, l := range logLines(d.logs.String()) {
			if msg, _ := l["message"].(string); strings.HasPrefix(msg, "status commit failed") {
				return true
			}
		}
		return false
	}, "the status push did not fail; logs:\n%s", d.logs)
	e.git = startGitDaemon(t, e.base, e.git.port)
	waitStatusOn(t, d, e.bare, "dns", rev2)
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
}

// The remote gets slow, then stalls, then recovers, behind a TCP proxy in
// front of git daemon; every fetch and push is bounded by --git-timeout 2s.
// Throttled (512-byte chunks with a pause after each), a fetch is slow but
// finishes: the new commit is deployed and no fault is counted. Stalled (the
// proxy accepts connections and forwards nothing), a fetch fails at the
// bound instead of hanging: the daemon closes the connection itself, keeps
// serving and retrying, keeps the last good revision, and reports the fault
// in /readyz, the metrics and the log. Back to full speed, it deploys by
// itself what was pushed during the stall.
func TestGitRemoteSlow(t *testing.T) {
	t.Parallel()
	e := newRemoteEnv(t)
	p := newSlowProxy(t, e.git.addr())
	rev1 := runGit(t, e.work, "rev-parse", "HEAD")
	d := startDaemonRetry(t, e.flagsFor(p.url("defs.git"), "--interval", "100ms", "--git-timeout", "2s")...)
	addr := d.addr(t)
	waitReady(t, d, addr, rev1)
	waitStatusOn(t, d, e.bare, "web", rev1)
	checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.25")
	fetchFaults := func() float64 { return metric(t, addr, "stackd_git_faults_total", `kind="fetch"`) }

	// Throttled: slow but correct.
	faults := fetchFaults()
	p.setMode(proxyThrottled)
	replaceIn(t, e.work, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev2 := e.push(t, "web: nginx 1.26")
	waitReady(t, d, addr, rev2)
	waitStatusOn(t, d, e.bare, "web", rev2)
	checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.26")
	t.Logf("%d bytes went through the throttled proxy", p.throttled.Load())
	if n := p.throttled.Load(); n <= throttleChunk {
		t.Errorf("the proxy forwarded %d bytes throttled, want more than one %d-byte chunk", n, throttleChunk)
	}
	if got := fetchFaults(); got != faults {
		t.Errorf("stackd_git_faults_total{kind=\"fetch\"} went from %v to %v over a slow remote that answered within --git-timeout; logs:\n%s",
			faults, got, d.logs)
	}

	// Stalled: bounded, reported, nothing changed.
	targets := snapshot(t, e.f.targets)
	failedBefore := len(failedPasses(d.logs.String()))
	p.setMode(proxyStalled)
	replaceIn(t, e.work, "web.hcl", `"nginx:1.26"`, `"nginx:1.27"`)
	rev3 := e.push(t, "web: nginx 1.27")
	var h reconciler.Health
	eventually(t, 30*time.Second, func() bool {
		var code int
		code, h, _ = readyz(addr)
		return code == 503 && strings.Contains(h.Err, "fetch") && strings.Contains(h.Err, "deadline exceeded") &&
			len(failedPasses(d.logs.String())) >= failedBefore+2 && p.abandoned.Load() >= 2
	}, "the stalled fetches never failed twice at the deadline, the daemon closing its connections (%d closed); logs:\n%s",
		p.abandoned.Load(), d.logs)
	t.Logf("/readyz while the remote stalls: %s (the daemon closed %d stalled connections)", h.Err, p.abandoned.Load())
	if h.Revision != rev2 {
		t.Errorf("/readyz revision %.7s while the remote stalls, want the last good %.7s", h.Revision, rev2)
	}
	healthz(t, addr)
	var doc reconciler.StackSetStatus
	if code, err := getJSON(addr, "/v1/stack_sets/web", &doc); err != nil || code != 200 || doc.Revision != rev2 || len(doc.Instances) != 6 {
		t.Errorf("GET /v1/stack_sets/web while the remote stalls: %d %v, revision %.7s, %d instances; want 200, %.7s, 6",
			code, err, doc.Revision, len(doc.Instances), rev2)
	}
	if got := fetchFaults(); got < faults+2 {
		t.Errorf("stackd_git_faults_total{kind=\"fetch\"} = %v after two stalled fetches, want at least %v", got, faults+2)
	}
	var logged []map[string]any
	for _, l := range failedPasses(d.logs.String())[failedBefore:] {
		if msg := fmt.Sprint(l["error"]); strings.Contains(msg, "fetch") && strings.Contains(msg, "deadline exceeded") {
			logged = append(logged, l)
		}
	}
	if len(logged) < 2 || logged[0]["level"] != "error" {
		t.Errorf("%d \"reconcile failed\" lines name the fetch deadline (%v), want at least 2 at level error; logs:\n%s",
			len(logged), logged, d.logs)
	}
	if diff := cmp.Diff(targets, snapshot(t, e.f.targets)); diff != "" {
		t.Errorf("the targets changed while the remote stalled:\n%s", diff)
	}

	// Full speed again: recovers by itself.
	p.setMode(proxyPassThrough)
	waitReady(t, d, addr, rev3)
	waitStatusOn(t, d, e.bare, "web", rev3)
	checkDeployed(t, e.f, qsRegions, qsAccounts, "nginx:1.27")
	healthz(t, addr)
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
	checkJSONLogs(t, d.logs.String())
}

// Modes of a slowProxy, taken by each connection when it is accepted.
const (
	proxyPassThrough int32 = iota
	proxyThrottled         // throttleChunk bytes at a time, throttlePause after each
	proxyStalled           // accepted, but nothing forwarded either way
)

const (
	throttleChunk = 512
	throttlePause = 10 * time.Millisecond
)

// slowProxy is a TCP proxy on 127.0.0.1 in front of target whose speed the
// test sets. The test's cleanup closes its listener and every connection and
// waits for its goroutines.
type slowProxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	done   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}

	// throttled counts the bytes forwarded (either way) by throttled
	// connections; abandoned counts stalled connections the client closed.
	throttled atomic.Int64
	abandoned atomic.Int64
	// stalled counts the connections accepted in proxyStalled mode.
	stalled atomic.Int64
}

func newSlowProxy(t *testing.T, target string) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: target, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// url is the git:// URL of the repository name behind the proxy.
func (p *slowProxy) url(name string) string { return "git://" + p.ln.Addr().String() + "/" + name }

func (p *slowProxy) setMode(m int32) { p.mode.Store(m) }

func (p *slowProxy) close() {
	close(p.done)
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers c to be closed by close; false if the proxy is closing.
func (p *slowProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		c.Close()
		return false
	default:
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *slowProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *slowProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c, p.mode.Load())
	}
}

// serve handles one client connection in mode.
func (p *slowProxy) serve(client net.Conn, mode int32) {
	defer p.wg.Done()
	defer p.untrack(client)
	if mode == proxyStalled {
		p.stalled.Add(1)
		// Read and drop what the client sends until it gives up.
		_, _ = io.Copy(io.Discard, client)
		select {
		case <-p.done: // closed by the cleanup, not by the client
		default:
			p.abandoned.Add(1)
		}
		return
	}
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(upstream) {
		return
	}
	defer p.untrack(upstream)
	throttle := mode == proxyThrottled
	var both sync.WaitGroup
	both.Add(2)
	go func() {
		defer both.Done()
		p.pipe(upstream, client, throttle)
	}()
	go func() {
		defer both.Done()
		p.pipe(client, upstream, throttle)
	}()
	both.Wait()
}

// pipe copies src to dst, throttled or not, then half-closes dst so the
// other side sees the end of the stream.
func (p *slowProxy) pipe(dst, src net.Conn, throttle bool) {
	defer func() {
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	if !throttle {
		_, _ = io.Copy(dst, src)
		return
	}
	buf := make([]byte, throttleChunk)
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.throttled.Add(int64(n))
			pause.Reset(throttlePause)
			select {
			case <-pause.C:
			case <-p.done:
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A stop while a fetch hangs on a stalled remote ends the fetch at once:
// only provider calls in flight get --shutdown-grace, and a fetch bounded
// only by a long --git-timeout must not hold the shutdown (systemd would
// kill the daemon first).
func TestStopDuringStalledFetch(t *testing.T) {
	t.Parallel()
	e := newRemoteEnv(t)
	p := newSlowProxy(t, e.git.addr())
	rev1 := runGit(t, e.work, "rev-parse", "HEAD")
	d := startDaemonRetry(t, e.flagsFor(p.url("defs.git"), "--interval", "100ms", "--git-timeout", "10m", "--shutdown-grace", "10m")...)
	addr := d.addr(t)
	waitReady(t, d, addr, rev1)
	// The status push must be done too: stalled, it would hold the loop
	// with a connection opened before the count below.
	waitStatusOn(t, d, e.bare, "web", rev1)
	p.setMode(proxyStalled)
	replaceIn(t, e.work, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	e.push(t, "web: nginx 1.26")
	eventually(t, 20*time.Second, func() bool { return p.stalled.Load() > 0 },
		"no fetch reached the stalled remote; logs:\n%s", d.logs)
	// d.stop fails the test if the daemon is still running 30s later; the
	// fetch alone could hang for 10 minutes.
	if err := d.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	eventually(t, 10*time.Second, func() bool { return p.abandoned.Load() >= 1 },
		"the stalled connection was not closed by the stop")
}

package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// TestCLIAgainstRunningDaemon: while `stackd run` holds the state, status,
// plan, state backup and reconcile go through its API — found through the
// file it writes next to the state, token included — and print what they
// print without a daemon.
func TestCLIAgainstRunningDaemon(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := newFixture(t)
	p, tokenFile := startTokenDaemon(t, binary, f)
	p.waitLine(t, 30*time.Second, 0, "stackd running with its version", func(l map[string]any) bool {
		v, _ := l["version"].(string)
		return l["message"] == "stackd running" && v != "" // go build may stamp the commit, go test does not
	})
	p.waitLine(t, 30*time.Second, 0, "operation finished", message("operation finished"))

	info := readDaemonInfo(t, f.state)
	if info.APITokenFile != tokenFile || !strings.HasPrefix(info.URL, "http://127.0.0.1:") {
		t.Fatalf("daemon file %+v", info)
	}
	if b, _ := os.ReadFile(daemonFile(f.state)); strings.Contains(string(b), "s3cret-token") {
		t.Fatal("the daemon file holds the token")
	}

	st := runBinary(t, binary, "status", "--state-dir", f.state)
	if st.err != nil || !strings.Contains(st.stdout, "web") || !strings.Contains(st.stdout, "OPERATION_COMPLETE") && !strings.Contains(st.stdout, "last operation") {
		t.Fatalf("stackd status while the daemon runs: %s", st)
	}

	plan := runBinary(t, binary, "plan", "--state-dir", f.state, "--repo", f.repo)
	if plan.err != nil || !strings.Contains(plan.stdout, "web") {
		t.Fatalf("stackd plan while the daemon runs: %s", plan)
	}

	// A plan of another repository is refused, not answered with the
	// daemon's; a branch that does not exist is the caller's mistake (404).
	other := newFixture(t)
	if res := runBinary(t, binary, "plan", "--state-dir", f.state, "--repo", other.repo); res.err == nil || !strings.Contains(res.stderr, "deploys another definitions repository") {
		t.Errorf("stackd plan of another repository while the daemon runs: %s", res)
	}
	if res := runBinary(t, binary, "plan", "--state-dir", f.state, "--repo", f.repo, "--branch", "nosuch"); res.err == nil || !strings.Contains(res.stderr, "--branch nosuch (it deploys") {
		t.Errorf("stackd plan of another branch while the daemon runs: %s", res)
	}
	if res := runBinary(t, binary, "plan", "--state-dir", f.state, "--ref", "nosuch"); res.err == nil || !strings.Contains(res.stderr, "404") || !strings.Contains(res.stderr, "branch not found") {
		t.Errorf("stackd plan --ref nosuch while the daemon runs: %s", res)
	}

	backup := filepath.Join(t.TempDir(), "state.backup")
	b := runBinary(t, binary, "state", "backup", backup, "--state-dir", f.state)
	if b.err != nil || !strings.Contains(b.stdout, "Backed up") {
		t.Fatalf("stackd state backup while the daemon runs: %s", b)
	}
	if v := runBinary(t, binary, "state", "verify", backup); v.err != nil {
		t.Fatalf("the online backup does not verify: %s", v)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, %v", fi, err)
	}

	// A new commit, reconciled now rather than at the next poll (1h).
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev := f.commit(t, "nginx 1.26")
	rc := runBinary(t, binary, "reconcile", "--wait", "--state-dir", f.state)
	if rc.err != nil || !strings.Contains(rc.stdout, "web DeployStackSet "+rev[:7]+" SUCCEEDED") {
		t.Fatalf("stackd reconcile --wait: %s", rc)
	}

	// A wrong token is refused, and said so.
	badToken := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(badToken, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := runBinary(t, binary, "status", "--server", info.URL, "--api-token-file", badToken)
	if bad.err == nil || !strings.Contains(bad.stderr, "401") {
		t.Fatalf("status with a wrong token: %s", bad)
	}

	viaDaemon := runBinary(t, binary, "status", "--json", "--state-dir", f.state)
	if viaDaemon.err != nil {
		t.Fatalf("status --json through the daemon: %s", viaDaemon)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("stackd run exited %d; logs:\n%s", code, p.log)
	}
	if _, err := os.Stat(daemonFile(f.state)); !os.IsNotExist(err) {
		t.Errorf("the daemon file outlived the daemon: %v", err)
	}
	local := runBinary(t, binary, "status", "--json", "--state-dir", f.state)
	if local.err != nil {
		t.Fatalf("status --json without a daemon: %s", local)
	}
	var a, l []reconciler.StackSetStatus
	if err := json.Unmarshal([]byte(viaDaemon.stdout), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(local.stdout), &l); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, a); diff != "" {
		t.Errorf("status --json through the daemon differs from the state's (-state +daemon):\n%s", diff)
	}
	if nod := runBinary(t, binary, "reconcile", "--state-dir", f.state); nod.err == nil || !strings.Contains(nod.stderr, "no daemon holds") {
		t.Errorf("reconcile without a daemon: %s", nod)
	}
}

// startTokenDaemon starts `stackd run` on fixture f with an API on a free
// loopback port behind the token "s3cret-token" (in the file it returns),
// polling only hourly, with extra flags.
func startTokenDaemon(t *testing.T, binary string, f *fixture, extra ...string) (*proc, string) {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--listen", "127.0.0.1:0", "--api-token-file", tokenFile, "--interval", "1h"}, extra...)
	return startProc(t, binary, nil, append([]string{"run"}, f.flags(args...)...)...), tokenFile
}

func readDaemonInfo(t *testing.T, stateDir string) daemonInfo {
	t.Helper()
	b, err := os.ReadFile(daemonFile(stateDir))
	if err != nil {
		t.Fatalf("daemon file: %v", err)
	}
	var info daemonInfo
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// TestRejectedRevisionAlerts: a deploy-branch revision that does not
// validate is visible to alerting — /readyz is 503 saying so, the pass
// counts as a failed reconcile, stackd_stack_set_revision_rejected is 1 —
// and all of it clears with the next good revision.
func TestRejectedRevisionAlerts(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := newFixture(t)
	// Notifications go to a webhook on 127.0.0.1.
	hook := newEventHook(t)
	p, _ := startTokenDaemon(t, binary, f, "--notify-webhook-url-file", hook.file)
	p.waitLine(t, 30*time.Second, 0, "operation finished", message("operation finished"))
	info := readDaemonInfo(t, f.state)
	get := func(path string) (int, string) {
		t.Helper()
		return apiGetStatus(t, info.URL+path)
	}
	metricsHave := func(want ...string) {
		t.Helper()
		_, text := get("/metrics")
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("metrics lack %q", w)
			}
		}
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before: %d %s", code, body)
	}
	metricsHave(`stackd_stack_set_revision_rejected{stack_set="web"} 0`,
		`stackd_stack_set_last_operation{kind="CreateStackInstances",stack_set="web",status="SUCCEEDED"} 1`)

	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.25" + `)
	bad := f.commit(t, "a syntax error")
	rc := runBinary(t, binary, "reconcile", "--wait", "--state-dir", f.state)
	if code := rc.code(); code != 1 || !strings.Contains(rc.stdout, "revision "+bad[:7]+" rejected") {
		t.Fatalf("reconcile --wait of a bad revision: %s", rc)
	}
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "revision "+bad[:7]+" rejected") || !strings.Contains(body, "the last good revision stays deployed") {
		t.Errorf("/readyz with a rejected head: %d %s", code, body)
	}
	metricsHave(`stackd_stack_set_revision_rejected{stack_set="web"} 1`)
	// Passes over the rejected head count as failed reconciles (an alert on
	// the rate fires). How many passes saw it (the watch's, the one asked
	// for, ...) is the daemon's business: at least one.
	failedPasses := func() float64 {
		t.Helper()
		_, text := get("/metrics")
		for _, line := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(line, `stackd_reconciles_total{result="error"} `); ok {
				var n float64
				if err := json.Unmarshal([]byte(strings.TrimSpace(v)), &n); err != nil {
					t.Fatalf("metrics line %q: %v", line, err)
				}
				return n
			}
		}
		t.Fatalf("metrics lack stackd_reconciles_total{result=\"error\"}")
		return 0
	}
	if n := failedPasses(); n < 1 {
		t.Errorf(`stackd_reconciles_total{result="error"} %v with a rejected head, want at least 1`, n)
	}
	// A second pass over the same bad head notifies nothing new (the
	// webhook's events are checked below) but counts as failed too.
	before := failedPasses()
	if rc := runBinary(t, binary, "reconcile", "--wait", "--state-dir", f.state); rc.code() != 1 {
		t.Fatalf("reconcile --wait again: %s", rc)
	}
	if n := failedPasses(); n <= before {
		t.Errorf(`stackd_reconciles_total{result="error"} %v after another pass over the rejected head, want more than %v`, n, before)
	}

	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25" + `, `"nginx:1.26"`)
	good := f.commit(t, "fixed")
	if rc := runBinary(t, binary, "reconcile", "--wait", "--state-dir", f.state); rc.err != nil || !strings.Contains(rc.stdout, good[:7]+" SUCCEEDED") {
		t.Fatalf("reconcile --wait of the fix: %s", rc)
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the fix: %d %s", code, body)
	}
	metricsHave(`stackd_stack_set_revision_rejected{stack_set="web"} 0`,
		`stackd_stack_set_last_operation{kind="DeployStackSet",stack_set="web",status="SUCCEEDED"} 1`)

	// Every event reached the webhook, in order, once.
	want := []string{
		notify.TypeOperationStarted + " web CreateStackInstances",
		notify.TypeOperationSucceeded + " web CreateStackInstances",
		notify.TypeRevisionRejected + "  " + bad[:7],
		notify.TypeOperationStarted + " web DeployStackSet",
		notify.TypeOperationSucceeded + " web DeployStackSet",
	}
	var got []string
	eventually(t, 10*time.Second, func() bool {
		got = got[:0]
		for _, e := range hook.received() {
			line := e.Type + " " + e.StackSet + " " + e.Kind
			if e.Type == notify.TypeRevisionRejected {
				line += e.Revision[:7]
			}
			got = append(got, line)
		}
		return len(got) >= len(want)
	}, "webhook events %v, want %v", got, want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("webhook events (-want +got):\n%s", diff)
	}
}

// A state held only for a moment (a process that forked just as the
// state was closed keeps a copy of the lock until it execs) is opened, not
// taken for a daemon's; one whose daemon says so in its file is asked at
// once; one held longer without that file is held.
func TestStateHeld(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	time.AfterFunc(150*time.Millisecond, func() {
		defer close(released)
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	if stateHeld(dir) {
		t.Error("a state released within a moment was taken for a daemon's")
	}
	<-released

	st, err = state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !stateHeld(dir) {
		t.Error("a state held on was not reported held")
	}
	if err := os.WriteFile(daemonFile(dir), []byte(`{"url":"http://127.0.0.1:1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if !stateHeld(dir) {
		t.Error("a state whose daemon wrote its file was not reported held")
	}
}

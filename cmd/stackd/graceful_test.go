package main

// Graceful stop: SIGTERM to a real `stackd run` process while a provider
// call is in flight. Within --shutdown-grace the call finishes, its result
// is persisted and the process exits 0, and the next start does not redo
// it; past the grace the call is cancelled and the next start repeats it
// with the same RequestId. And `stackd state backup` / `restore`.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// gatedProvider answers custom-resource requests of type gate ("Create"
// unless set otherwise) only once released (while blocking is set); a
// request whose caller gives up is reported on cancelled.
type gatedProvider struct {
	*recordingProvider
	gate      string
	blocking  atomic.Bool
	release   chan struct{}
	cancelled chan crRequest
}

func newGatedProvider() *gatedProvider {
	p := &gatedProvider{recordingProvider: newRecordingProvider(), gate: "Create", release: make(chan struct{}), cancelled: make(chan crRequest, 16)}
	p.blocking.Store(true)
	p.answer = func(w http.ResponseWriter, r *http.Request, req crRequest) {
		if req.RequestType == p.gate && p.blocking.Load() {
			select {
			case <-p.release:
			case <-r.Context().Done():
				p.cancelled <- req
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(req.success())
	}
	return p
}

// creates returns the RequestIds of the Creates per account.
func (p *gatedProvider) creates() map[string][]string {
	out := map[string][]string{}
	for _, r := range p.all() {
		if r.RequestType == "Create" {
			out[r.ResourceOwnerID] = append(out[r.ResourceOwnerID], r.RequestID)
		}
	}
	return out
}

// gracefulFixture is a stack set of two instances, one after the other,
// each a custom resource and a file that records its physical id.
func gracefulFixture(t *testing.T, hook string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "stackd", "state"), targets: filepath.Join(dir, "targets")}
	writeTree(t, f.repo, map[string]string{
		"slow.hcl": fmt.Sprintf(`resource_type "Custom::Slow" {
  service_token = %q
}

stack_set "slow" {
  template = "./t"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111", "222222222222"]
  }
  operation_preferences {
    region_concurrency_type = "SEQUENTIAL"
    max_concurrent_count    = 1
  }
}
`, hook),
		"t/main.hcl": `resource "custom" "slow" {
  type       = "Custom::Slow"
  properties = { size = 1 }
}

resource "file" "done" {
  path    = "done.txt"
  content = "${custom.slow.id}\n"
}
`,
	})
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "a slow stack set")
	return f
}

// startSlow starts `stackd run` on f and waits for the first Create.
func startSlow(t *testing.T, f *fixture, prov *gatedProvider, grace string) (*proc, crRequest) {
	t.Helper()
	binary := stackdBinary(t)
	p := startProc(t, binary, nil, append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h", "--shutdown-grace", grace)...)...)
	select {
	case req := <-prov.received:
		return p, req
	case <-p.exited:
		t.Fatalf("stackd exited before calling the provider (%v); logs:\n%s", p.err, p.log)
	case <-time.After(30 * time.Second):
		t.Fatalf("the provider got no request within 30s; logs:\n%s", p.log)
	}
	return nil, crRequest{}
}

func TestGracefulStopFinishesCallsInFlight(t *testing.T) {
	t.Parallel()
	prov := newGatedProvider()
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)
	f := gracefulFixture(t, srv.URL)

	p, first := startSlow(t, f, prov, "10s")
	p.signal(t, syscall.SIGTERM)
	// Nothing may happen to the call in flight at SIGTERM: watch it for a
	// moment (this shows an absence; it waits for nothing).
	window := time.NewTimer(300 * time.Millisecond)
	select {
	case req := <-prov.cancelled:
		t.Fatalf("SIGTERM cancelled the Create of %s at once, with a 10s grace; logs:\n%s", req.where(), p.log)
	case <-p.exited:
		t.Fatalf("stackd exited at SIGTERM with a provider call in flight (%v); logs:\n%s", p.err, p.log)
	case <-window.C:
	}
	close(prov.release)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("stackd run exited %d after SIGTERM, want 0; logs:\n%s", code, p.log)
	}
	checkJSONLogs(t, p.log.String())
	if n := p.log.count("grace period over: stopping and cancelling provider calls in flight"); n != 0 {
		t.Errorf("the grace period ran out although the call ended at once")
	}
	// The finished call is persisted: its instance is complete, its file written.
	done := filepath.Join(f.instanceDir("eu-west-1", first.ResourceOwnerID), "done.txt")
	if got, want := readFile(t, done), "phys-"+first.RequestID+"\n"; got != want {
		t.Errorf("done.txt of the instance in flight = %q, want %q", got, want)
	}
	var docs []struct {
		Instances []struct{ Account, Status string }
	}
	st := mustStackdRetry(t, "status", "--json", "--state-dir", f.state)
	if err := json.Unmarshal([]byte(st.stdout), &docs); err != nil || len(docs) != 1 {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	for _, in := range docs[0].Instances {
		if in.Account == first.ResourceOwnerID && in.Status != "OPERATION_COMPLETE" {
			t.Errorf("the instance whose call finished during the grace is %s, want OPERATION_COMPLETE", in.Status)
		}
	}
	if check := stackdRetry(t, "state", "check", "--state-dir", f.state); check.err != nil {
		t.Errorf("state check after the graceful stop: %s", check)
	}

	// The next start finishes the operation and redoes nothing.
	res := mustApplyRetry(t, f)
	if !strings.Contains(res.stdout, "SUCCEEDED") {
		t.Errorf("apply after the restart printed %q, want the operation to succeed", res.stdout)
	}
	t.Run("the resumed operation reports every instance", func(t *testing.T) {
		doc := statusHead(t, f.repo).stackSetStatus(t, "slow")
		if op := doc.LastOperation; op == nil || op.Kind != "CreateStackInstances" || op.Counts.Total != 2 || op.Counts.Succeeded != 2 {
			t.Errorf("last operation after the resume: %+v, want CreateStackInstances with 2 of 2 instances succeeded", op)
		}
	})
	for account, ids := range prov.creates() {
		if len(ids) != 1 {
			t.Errorf("%s: %d Creates (%v), want exactly 1", account, len(ids), ids)
		}
	}
	if n := len(prov.creates()); n != 2 {
		t.Errorf("Creates for %d instances, want 2", n)
	}
}

func TestGracefulStopCancelsAfterGrace(t *testing.T) {
	t.Parallel()
	prov := newGatedProvider()
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)
	f := gracefulFixture(t, srv.URL)

	p, first := startSlow(t, f, prov, "200ms")
	p.signal(t, syscall.SIGTERM)
	select {
	case req := <-prov.cancelled:
		if req.RequestID != first.RequestID {
			t.Errorf("cancelled request %s, want the one in flight %s", req.RequestID, first.RequestID)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the call in flight was not cancelled after the 200ms grace; logs:\n%s", p.log)
	}
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("stackd run exited %d after SIGTERM, want 0; logs:\n%s", code, p.log)
	}
	if n := p.log.count("grace period over: stopping and cancelling provider calls in flight"); n != 1 {
		t.Errorf("logged the end of the grace period %d times, want once; logs:\n%s", n, p.log)
	}
	if n := p.log.count("operation interrupted; it resumes on restart"); n != 1 {
		t.Errorf("logged the interrupted operation %d times, want once; logs:\n%s", n, p.log)
	}
	if _, err := os.Stat(filepath.Join(f.instanceDir("eu-west-1", first.ResourceOwnerID), "done.txt")); err == nil {
		t.Errorf("the cancelled instance wrote done.txt")
	}
	if check := stackdRetry(t, "state", "check", "--state-dir", f.state); check.err != nil {
		t.Errorf("state check after the cancelled stop: %s", check)
	}

	// The next start resumes: the cancelled Create again, with its RequestId.
	prov.blocking.Store(false)
	res := mustApplyRetry(t, f)
	if !strings.Contains(res.stdout, "SUCCEEDED") {
		t.Errorf("apply after the restart printed %q, want the operation to succeed", res.stdout)
	}
	creates := prov.creates()
	if ids := creates[first.ResourceOwnerID]; len(ids) != 2 || ids[0] != ids[1] {
		t.Errorf("Creates of the cancelled instance %v, want the cancelled one repeated with the same RequestId", ids)
	}
	for account, ids := range creates {
		if account != first.ResourceOwnerID && len(ids) != 1 {
			t.Errorf("%s: %d Creates, want 1", account, len(ids))
		}
	}
	done := filepath.Join(f.instanceDir("eu-west-1", first.ResourceOwnerID), "done.txt")
	if got, want := readFile(t, done), "phys-"+first.RequestID+"\n"; got != want {
		t.Errorf("done.txt = %q, want %q", got, want)
	}
}

// `stackd state backup` / `restore`: a backup of a deployed state restores
// into a new directory that passes `state check`, reads the same, and with
// which `apply` changes nothing.
func TestStateBackupRestore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mustApplyRetry(t, f)
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	f.commit(t, "web: nginx 1.26")
	mustApplyRetry(t, f)
	backup := filepath.Join(t.TempDir(), "state.bak")

	// While a daemon holds the state, the backup is taken online by the
	// daemon (daemon_cli_test.go has the rest of the CLI through it).
	d := startDaemonRetry(t, f.flags("--listen", "127.0.0.1:0", "--interval", "1h")...)
	addr := d.addr(t)
	// The API has no token (loopback), but its backup holds sensitive
	// values: only the CLI, reading the daemon's file, gets it.
	backupReq, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/state/backup", nil)
	if err != nil {
		t.Fatal(err)
	}
	backupReq.Header.Set("Stackd-API-Version", "latest")
	if resp, err := httpClient.Do(backupReq); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/state/backup without a token: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	online := filepath.Join(t.TempDir(), "online.bak")
	if res := stackdRetry(t, "state", "backup", online, "--state-dir", f.state); res.err != nil || !strings.Contains(res.stdout, "Backed up") {
		t.Errorf("state backup while the daemon runs: %s\nwant an online backup", res)
	}
	if res := stackdRetry(t, "state", "verify", online); res.err != nil {
		t.Errorf("the online backup does not verify: %s", res)
	}
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}

	mustStackdRetry(t, "state", "backup", backup, "--state-dir", f.state)
	restored := filepath.Join(t.TempDir(), "restored")
	mustStackdRetry(t, "state", "restore", backup, "--state-dir", restored)
	if res := stackdRetry(t, "state", "check", "--state-dir", restored); res.err != nil || !strings.Contains(res.stdout, "state is consistent") {
		t.Errorf("state check of the restored state: %s", res)
	}
	before := mustStackdRetry(t, "status", "--json", "--state-dir", f.state).stdout
	after := mustStackdRetry(t, "status", "--json", "--state-dir", restored).stdout
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("status of the restored state (-original +restored):\n%s", diff)
	}
	// Restoring over a state is refused.
	if res := stackdRetry(t, "state", "restore", backup, "--state-dir", f.state); res.err == nil {
		t.Errorf("restore into a non-empty state directory succeeded")
	}

	targets := snapshot(t, f.targets)
	status := statusHead(t, f.repo)
	head := runGit(t, f.repo, "rev-parse", "HEAD")
	res := mustStackdRetry(t, append([]string{"apply"}, (&fixture{repo: f.repo, state: restored, targets: f.targets}).flags()...)...)
	if want := fmt.Sprintf("Revision %s already reconciled.", head[:7]); strings.TrimSpace(res.stdout) != want {
		t.Errorf("apply with the restored state printed %q, want %q", res.stdout, want)
	}
	if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
		t.Errorf("apply with the restored state changed the targets:\n%s", diff)
	}
	if got := statusHead(t, f.repo); got.Hash != status.Hash {
		t.Errorf("apply with the restored state made a status commit %q", got.Message)
	}
}

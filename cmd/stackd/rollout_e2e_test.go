package main

import (
	"bytes"
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

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// regionHealth is a health endpoint on 127.0.0.1: GET
// /health/<region>/<account> answers 200 unless its region is set
// unhealthy while a condition on the instance holds (as a real service is
// unhealthy only while it runs the bad version).
type regionHealth struct {
	*httptest.Server
	mu        sync.Mutex
	unhealthy map[string]func(account string) bool
}

func newRegionHealth(t *testing.T) *regionHealth {
	h := &regionHealth{unhealthy: map[string]func(string) bool{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		region, account, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/health/"), "/")
		h.mu.Lock()
		bad := h.unhealthy[region]
		h.mu.Unlock()
		if bad != nil && bad(account) {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(h.Close)
	return h
}

// unhealthyWhile makes the instances of region unhealthy while bad says
// so.
func (h *regionHealth) unhealthyWhile(region string, bad func(account string) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unhealthy[region] = bad
}

// runs reports whether the quickstart instance's app.conf names image.
func (f *fixture) runs(region, account, image string) bool {
	b, err := os.ReadFile(filepath.Join(f.instanceDir(region, account), "web", "app.conf"))
	return err == nil && strings.Contains(string(b), image)
}

// The quickstart with a canary rollout and a health check: a new image
// goes out in batches of 1, 2 and 3; when us-east-1 turns unhealthy, batch
// 2 fails its gate and batches 2 and 1 roll back to the previous image,
// while batch 3 is never touched.
func TestRolloutHealthCheckRollbackEndToEnd(t *testing.T) {
	t.Parallel()
	hs := newRegionHealth(t)
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	copyQuickstart(t, f.repo)
	replaceIn(t, f.repo, "web.hcl", "  operation_preferences {", fmt.Sprintf(`  rollout {
    pattern    = "canary"
    batch_size = 1
    on_failure = "rollback"
    health_check {
      url      = "%s/health/${target.region}/${target.account}"
      interval = "20ms"
      timeout  = "1s"
      deadline = "1s"
      healthy  = 2
    }
  }

  operation_preferences {`, hs.URL))
	runGit(t, f.repo, "init", "-q")
	rev1 := f.commit(t, "web with a canary rollout")
	res := f.mustApply(t)
	if !strings.Contains(res.stdout, "SUCCEEDED (6/6 instances)") {
		t.Fatalf("first apply:\n%s", res)
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.25")
	before := snapshot(t, f.targets)

	hs.unhealthyWhile("us-east-1", func(account string) bool { return f.runs("us-east-1", account, "nginx:1.27") })
	replaceIn(t, f.repo, "web.hcl", `image    = "nginx:1.25"`, `image    = "nginx:1.27"`)
	rev2 := f.commit(t, "nginx 1.27")
	res = f.apply(t)
	if res.code() != 1 || !strings.Contains(res.stdout, "web DeployStackSet "+rev2[:7]+" ROLLED_BACK") {
		t.Fatalf("second apply: exit %d, want 1 with the operation ROLLED_BACK\n%s", res.code(), res)
	}
	checkJSONLogs(t, res.stderr)
	var batchLogs []float64
	for _, l := range logLines(res.stderr) {
		if l["message"] == "rollout batch started" {
			batchLogs = append(batchLogs, l["batch"].(float64))
		}
	}
	if fmt.Sprint(batchLogs) != "[1 2]" {
		t.Errorf("batch log lines for batches %v, want [1 2]", batchLogs)
	}

	// Every file is back at the previous revision's content; batch 3's
	// were never rewritten.
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.25")
	after := snapshot(t, f.targets)
	for p, st := range before {
		if after[p].Content != st.Content {
			t.Errorf("%s changed: %q, want %q", p, after[p].Content, st.Content)
		}
	}
	for _, where := range [][2]string{{"us-east-1", "222222222222"}, {"ap-south-1", "111111111111"}, {"ap-south-1", "222222222222"}} {
		rel, _ := filepath.Rel(f.targets, filepath.Join(f.instanceDir(where[0], where[1]), "web", "app.conf"))
		rel = filepath.ToSlash(rel)
		if !after[rel].ModTime.Equal(before[rel].ModTime) {
			t.Errorf("%s (batch 3) was rewritten", rel)
		}
	}

	head := statusHead(t, f.repo)
	for _, s := range []string{"ROLLED_BACK", "batch 2 of 3 failed its health check", "us-east-1/111111111111", "answered 503, want 200", "rolled back 3 instances to " + rev1[:7]} {
		if !strings.Contains(head.Message, s) {
			t.Errorf("status commit message %q does not say %q", head.Message, s)
		}
	}
	doc := head.stackSetStatus(t, "web")
	if doc.Revision != rev1 {
		t.Errorf("status/web.json revision %s, want the previous %s", doc.Revision, rev1[:7])
	}
	if op := doc.LastOperation; op == nil || op.Status != state.OperationRolledBack || op.Rollout == nil || op.Rollout.FailedBatch != 2 ||
		op.Counts.RolledBack != 3 || op.Counts.Cancelled != 3 {
		t.Errorf("last_operation %+v, want ROLLED_BACK at batch 2 with 3 rolled back and 3 cancelled", op)
	}
	for _, in := range doc.Instances {
		if in.Revision != rev1 {
			t.Errorf("%s/%s at revision %s, want %s", in.Region, in.Account, in.Revision, rev1[:7])
		}
	}
	checkStatusBranchHasNoSecret(t, f.repo)

	st := mustStackd(t, "status", "--state-dir", f.state)
	for _, s := range []string{"last operation: DeployStackSet ROLLED_BACK", "rollout: canary, 3 batches; batch 2 failed"} {
		if !strings.Contains(st.stdout, s) {
			t.Errorf("stackd status does not say %q:\n%s", s, st.stdout)
		}
	}
	check := stackd(t, "state", "check", "--state-dir", f.state)
	if check.code() != 0 {
		t.Errorf("stackd state check: %s", check)
	}
}

// A running daemon holds a rollout with pause = "until_promoted" after each
// batch; `stackd promote` and `stackd abort` steer it through the API (the
// daemon holds the state open), and the abort rolls the change back.
func TestPromoteAndAbortThroughTheDaemon(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("rollout-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, f.flags("--interval", "200ms", "--listen", "127.0.0.1:0", "--api-token-file", tok)...)
	addr := d.addr(t)
	api := []string{"--api-url", "http://" + addr, "--api-token-file", tok}
	waitStatus := func(what string, cond func(msg string) bool) {
		t.Helper()
		eventually(t, 20*time.Second, func() bool {
			h, ok, err := readStatusHistory(f.repo)
			return err == nil && ok && cond(h[0].Message)
		}, "no status commit %s; logs:\n%s", what, d.logs)
	}
	rev1 := runGit(t, f.repo, "rev-parse", "HEAD")
	waitStatus("for the first revision", func(m string) bool { return strings.Contains(m, rev1[:7]+" SUCCEEDED") })

	replaceIn(t, f.repo, "web.hcl", "  operation_preferences {", `  rollout {
    batch_size = 2
    pause      = "until_promoted"
    on_failure = "rollback"
  }

  operation_preferences {`)
	replaceIn(t, f.repo, "web.hcl", `image    = "nginx:1.25"`, `image    = "nginx:1.27"`)
	rev2 := f.commit(t, "nginx 1.27, held after each batch")
	waitStatus("holding after batch 1", func(m string) bool {
		return strings.HasSuffix(m, rev2[:7]+" RUNNING (2/6) batch 1/3 waiting for promotion")
	})

	if res := stackd(t, append([]string{"promote", "web", "--api-url", "http://" + addr}, "--api-token-file", filepath.Join(t.TempDir(), "missing"))...); res.code() != 1 {
		t.Errorf("promote with a missing token file: exit %d\n%s", res.code(), res)
	}
	if res := stackd(t, "promote", "web", "--api-url", "http://"+addr); res.code() != 1 || !strings.Contains(res.err.Error(), "HTTP 401") {
		t.Errorf("promote without the token: exit %d, want 1 with HTTP 401\n%s", res.code(), res)
	}
	// Found from --state-dir alone, token included, as status finds it.
	res := mustStackd(t, "promote", "web", "--state-dir", f.state)
	if !strings.Contains(res.stdout, "web: promoted") {
		t.Errorf("promote printed %q", res.stdout)
	}
	if res := stackd(t, "promote", "web", "--state-dir", t.TempDir()); res.code() != 1 || !strings.Contains(res.err.Error(), "no daemon holds the state") {
		t.Errorf("promote with no daemon on --state-dir: exit %d\n%s", res.code(), res)
	}
	waitStatus("holding after batch 2", func(m string) bool { return strings.HasSuffix(m, " RUNNING (4/6) batch 2/3 waiting for promotion") })
	checkDeployed(t, f, qsRegions[:2], qsAccounts, "nginx:1.27")
	checkDeployed(t, f, qsRegions[2:], qsAccounts, "nginx:1.25")
	// The API shows where the rollout is.
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/stack_sets/web", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer rollout-token")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc reconciler.StackSetStatus
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if lo := doc.LastOperation; lo == nil || lo.Status != state.OperationRunning || lo.Rollout == nil ||
		!cmp.Equal(*lo.Rollout, reconciler.RolloutStatus{Pattern: "rolling", Batch: 2, Batches: 3, Phase: state.RolloutWaitingForPromotion, PreviousRevision: rev1, Sizes: []int{2, 2, 2}}) {
		t.Errorf("GET /v1/stack_sets/web last_operation %+v, want RUNNING, waiting for promotion after batch 2 of 3", doc.LastOperation)
	}

	mustStackd(t, append([]string{"abort", "web"}, api...)...)
	waitStatus("of the rollback", func(m string) bool { return strings.Contains(m, rev2[:7]+" ROLLED_BACK") })
	head := statusHead(t, f.repo)
	if !strings.Contains(head.Message, "aborted by stackd abort after batch 2 of 3 (while waiting for promotion); rolled back 4 instances to "+rev1[:7]) {
		t.Errorf("status commit %q, want it to say the abort and the rollback", head.Message)
	}
	res = stackd(t, append([]string{"promote", "web"}, api...)...)
	if res.code() != 1 || !strings.Contains(res.err.Error(), `No rollout of stack set "web" is running. (HTTP 404)`) {
		t.Errorf("promote after the end: exit %d, want 1 with HTTP 404\n%s", res.code(), res)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v", err)
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.25")
	checkJSONLogs(t, d.logs.String())
	for _, want := range []string{"rollout waiting for promotion", "rollout promoted", "rollout stopped", "rollout rolling back"} {
		if !strings.Contains(d.logs.String(), `"message":"`+want) {
			t.Errorf("daemon logs have no %q line", want)
		}
	}
}

// stackd status shows where a rollout stopped by a daemon restart is.
func TestStatusShowsRolloutProgress(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := st.CreateStackSet("web", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	op := state.Operation{
		ID: state.NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: "DeployStackSet", Revision: "abcdef0123456789",
		Status: state.OperationRunning, Started: time.Now(),
		Results: []state.InstanceResult{{Region: "eu-west-1", Account: "1", Action: "update", Status: state.InstanceOperationComplete, Batch: 1}},
		Rollout: &state.RolloutProgress{Pattern: "canary", Batch: 2, Batches: 4, Phase: state.RolloutWaitingForPromotion},
	}
	if err := st.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	ss.LastOperation = op.ID
	if err := st.PutStackSet(ss); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	res := mustStackd(t, "status", "--state-dir", dir)
	if !strings.Contains(res.stdout, "rollout: canary, batch 2 of 4 (WAITING_FOR_PROMOTION)") {
		t.Errorf("stackd status:\n%s\nwant the rollout's batch 2 of 4", res.stdout)
	}
}

// `stackd apply --listen` serves the API while it runs, so a rollout held
// until promoted can be promoted without a daemon.
func TestApplyListenPromotes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mustApply(t)
	replaceIn(t, f.repo, "web.hcl", "  operation_preferences {", `  rollout {
    batch_size = 3
    pause      = "until_promoted"
  }

  operation_preferences {`)
	replaceIn(t, f.repo, "web.hcl", `image    = "nginx:1.25"`, `image    = "nginx:1.27"`)
	rev2 := f.commit(t, "nginx 1.27, held after each batch")
	listen := freePort(t)
	logs := &syncBuffer{}
	var stdout bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runCLI(t.Context(), &stdout, logs, append([]string{"apply", "--listen", listen}, f.flags()...)...)
	}()
	eventually(t, 20*time.Second, func() bool {
		h, ok, err := readStatusHistory(f.repo)
		return err == nil && ok && strings.HasSuffix(h[0].Message, rev2[:7]+" RUNNING (3/6) batch 1/2 waiting for promotion")
	}, "apply never held after batch 1; logs:\n%s", logs)
	res := mustStackd(t, "promote", "web", "--api-url", "http://"+listen)
	if !strings.Contains(res.stdout, "web: promoted") {
		t.Errorf("promote printed %q", res.stdout)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("apply: %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("apply did not finish after the promotion; logs:\n%s", logs)
	}
	if !strings.Contains(stdout.String(), "SUCCEEDED (6/6 instances)") {
		t.Errorf("apply printed %q", stdout.String())
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.27")
}

package reconciler_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
	"github.com/stackd/stackd/internal/clock"
	"github.com/stackd/stackd/internal/testkit"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

const driftTemplate = `
resource "file" "conf" {
  path    = "app.conf"
  content = "port=80\n"
}
resource "file" "motd" {
  path    = "motd"
  content = "hello"
}
`

func driftDefs(mode, extra string) map[string]string {
	return map[string]string{
		"templates/files/main.hcl": driftTemplate,
		"stacks.hcl": `stack_set "web" {
  template = "./templates/files"
  drift {
    interval = "1h"
    mode     = "` + mode + `"
    ` + extra + `
  }
  deployment_targets {
    regions  = ["eu", "us"]
    accounts = ["111111111111", "222222222222"]
  }
}
`,
	}
}

func newDriftHarness(t *testing.T, clk *testkit.Clock, mode string) (*harness, string) {
	t.Helper()
	root := t.TempDir()
	var clock clock.Clock
	if clk != nil {
		clock = clk
	}
	h, _, _ := newHarnessWith(t, newCtl(), clock, provider.Registry{"file": file.New(file.Options{Root: root})}, driftDefs(mode, ""))
	res, err := h.rec.Reconcile(t.Context())
	if err != nil || res.Failed() {
		t.Fatalf("first deploy: %v %+v", err, res)
	}
	return h, root
}

func driftOf(t *testing.T, st *state.Store, region, account string) *state.Drift {
	t.Helper()
	ss, err := st.StackSetByName("web")
	if err != nil {
		t.Fatal(err)
	}
	in, err := st.Instance(ss.ID, region, account)
	if err != nil {
		t.Fatal(err)
	}
	return in.Drift
}

func TestDriftReportThenCorrect(t *testing.T) {
	h, root := newDriftHarness(t, nil, "report")
	ctx := t.Context()
	rep, err := h.rec.CheckDrift(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != engine.DriftInSync || len(rep.Instances) != 4 || rep.Checked == nil {
		t.Fatalf("fresh fleet: %+v", rep)
	}

	// Edit one instance's file, delete another's.
	edited := filepath.Join(root, "111111111111", "eu", "app.conf")
	deleted := filepath.Join(root, "222222222222", "us", "motd")
	if err := os.WriteFile(edited, []byte("port=8080\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(deleted); err != nil {
		t.Fatal(err)
	}
	rep, err = h.rec.CheckDrift(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != engine.DriftDrifted || rep.DriftedInstances != 2 || rep.DriftedResources != 2 || rep.Correction != "" {
		t.Fatalf("after edits (report mode): %+v", rep)
	}
	var resources []engine.ResourceDrift
	if err := json.Unmarshal(driftOf(t, h.store, "eu", "111111111111").Resources, &resources); err != nil {
		t.Fatal(err)
	}
	if len(resources) != 2 || resources[0].Address != "file.conf" || resources[0].Status != engine.DriftDrifted ||
		resources[0].Differences[0].Actual != "port=8080\n" {
		t.Errorf("recorded drift of eu/111111111111: %+v", resources)
	}
	// The status branch says so, per instance.
	doc, _ := statusDoc(t, h.repo, "web")
	n := 0
	for _, in := range doc.Instances {
		if in.Drift != nil && in.Drift.Status == engine.DriftDrifted {
			n++
		}
	}
	if n != 2 || doc.Drift == nil || doc.Drift.Status != engine.DriftDrifted {
		t.Errorf("status document: drift %+v, %d drifted instances", doc.Drift, n)
	}
	// Report only: nothing was changed back.
	if b, _ := os.ReadFile(edited); string(b) != "port=8080\n" {
		t.Errorf("report mode changed the file: %q", b)
	}

	// mode = "correct": a DriftCorrection re-applies the two instances.
	commitFiles(t, h.repo, driftDefs("correct", ""), "correct drift")
	if res, err := h.rec.Reconcile(ctx); err != nil || len(res.Operations) != 0 {
		t.Fatalf("changing the drift block only: %v %+v (want no operation)", err, res)
	}
	rep, err = h.rec.CheckDrift(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Correction == "" {
		t.Fatalf("correct mode started no correction: %+v", rep)
	}
	h.rec.Wait()
	ss, _ := h.store.StackSetByName("web")
	op, err := h.store.Operation(ss.LastOperation)
	if err != nil {
		t.Fatal(err)
	}
	if op.Kind != state.KindDriftCorrection || op.Status != state.OperationSucceeded || len(op.Results) != 2 || op.ID != rep.Correction {
		t.Fatalf("correction operation: %+v (the check named %q)", op, rep.Correction)
	}
	if b, _ := os.ReadFile(edited); string(b) != "port=80\n" {
		t.Errorf("edited file after correction: %q", b)
	}
	if b, err := os.ReadFile(deleted); err != nil || string(b) != "hello" {
		t.Errorf("deleted file after correction: %q %v", b, err)
	}
	if _, subject := statusDoc(t, h.repo, "web"); !strings.Contains(subject, "DriftCorrection") {
		t.Errorf("status commit %q does not name the DriftCorrection", subject)
	}
	rep, err = h.rec.CheckDrift(ctx, "web")
	if err != nil || rep.Status != engine.DriftInSync {
		t.Errorf("after the correction: %v %+v", err, rep)
	}
}

// TestDriftIgnore: ignored resources are NOT_CHECKED and do not make the
// stack set drift.
func TestDriftIgnore(t *testing.T) {
	root := t.TempDir()
	h, _, _ := newHarnessWith(t, newCtl(), nil, provider.Registry{"file": file.New(file.Options{Root: root})}, driftDefs("report", `ignore = ["file.motd", "file.conf.mode"]`))
	if res, err := h.rec.Reconcile(t.Context()); err != nil || res.Failed() {
		t.Fatal(err, res)
	}
	if err := os.Remove(filepath.Join(root, "111111111111", "eu", "motd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "111111111111", "eu", "app.conf"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := h.rec.CheckDrift(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != engine.DriftInSync {
		t.Errorf("ignored changes made it %s: %+v", rep.Status, rep)
	}
}

// TestDriftNeverWithAnOperation: a check while an operation of the stack
// set runs is refused (it comes after), and the loop checks every interval
// on its clock.
func TestDriftNeverWithAnOperation(t *testing.T) {
	c := newCtl()
	root := t.TempDir()
	files := driftDefs("report", "")
	files["stacks.hcl"] += stackSetHCL("slow", "v1", []string{"eu"}, []string{"111111111111"}, "")
	h, _, _ := newHarnessWith(t, c, nil, provider.Registry{"file": file.New(file.Options{Root: root})}, files)
	if res, err := h.rec.Reconcile(t.Context()); err != nil || res.Failed() {
		t.Fatal(err, res)
	}
	c.gate("slow")
	files["stacks.hcl"] = strings.Replace(files["stacks.hcl"], `"v1"`, `"v2"`, 1)
	commitFiles(t, h.repo, files, "v2")
	d := runDriver(t, h)
	defer d.stop(t)
	d.submit()
	c.waitFor(t, "the slow operation to call its provider", func() bool { return len(c.blockedIn("slow", "eu")) > 0 })
	if _, err := h.rec.CheckDrift(t.Context(), "slow"); !errors.Is(err, reconciler.ErrDriftBusy) {
		t.Errorf("check during an operation: %v, want ErrDriftBusy", err)
	}
	// Another stack set is not held up.
	if _, err := h.rec.CheckDrift(t.Context(), "web"); err != nil {
		t.Errorf("check of an idle stack set: %v", err)
	}
	c.openAll()
}

func TestDriftLoopChecksEveryInterval(t *testing.T) {
	clk := testkit.NewClock(false)
	h, root := newDriftHarness(t, clk, "report")
	d := runDriver(t, h)
	defer d.stop(t)
	if err := os.Remove(filepath.Join(root, "111111111111", "us", "motd")); err != nil {
		t.Fatal(err)
	}
	// Never checked: due at the first tick.
	clk.WaitForWaiter(t, time.Minute, waitLimit)
	clk.Advance(time.Minute)
	eventually(t, "the first periodic check", func() (bool, string) {
		dr := driftOf(t, h.store, "us", "111111111111")
		return dr != nil && dr.Status == string(engine.DriftDrifted), "not checked yet"
	})
	first := driftOf(t, h.store, "us", "111111111111").Checked
	// Within the hour: no new check.
	for range 3 {
		clk.WaitForWaiter(t, time.Minute, waitLimit)
		clk.Advance(time.Minute)
	}
	clk.WaitForWaiter(t, time.Minute, waitLimit)
	if got := driftOf(t, h.store, "us", "111111111111").Checked; !got.Equal(first) {
		t.Errorf("checked again after 4 minutes of a 1h interval")
	}
	clk.Advance(time.Hour)
	eventually(t, "the check an hour later", func() (bool, string) {
		return !driftOf(t, h.store, "us", "111111111111").Checked.Equal(first), "not checked again"
	})
}

// TestPlanRefresh: a plan that reads first shows the changes that correct
// drift, their BeforeValue the value found; without a read nothing
// changes; another ref cannot refresh.
func TestPlanRefresh(t *testing.T) {
	h, root := newDriftHarness(t, nil, "report")
	if err := os.WriteFile(filepath.Join(root, "222222222222", "eu", "app.conf"), []byte("port=9999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, err := h.rec.Plan(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, ic := range plain.ChangeSets[0].Instances {
		if len(ic.Changes) > 0 {
			t.Errorf("a plan without a read shows changes for %s/%s", ic.Region, ic.Account)
		}
	}
	res, err := h.rec.PlanWith(t.Context(), "", reconciler.PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, ic := range res.ChangeSets[0].Instances {
		for _, c := range ic.Changes {
			rc := c.ResourceChange
			found++
			if ic.Region != "eu" || ic.Account != "222222222222" || rc.LogicalResourceId != "file.conf" ||
				rc.ResourceDriftStatus != "MODIFIED" || rc.PropertyChanges[0].BeforeValue != "port=9999\n" || rc.PropertyChanges[0].AfterValue != "port=80\n" {
				t.Errorf("refreshed change of %s/%s: %+v", ic.Region, ic.Account, rc)
			}
		}
	}
	if found != 1 {
		t.Errorf("refreshed plan has %d changes, want 1", found)
	}
	main := strings.TrimSpace(runGit(t, h.repo, "rev-parse", "--abbrev-ref", "HEAD"))
	runGit(t, h.repo, "checkout", "-q", "-b", "feature")
	commitFiles(t, h.repo, map[string]string{"notes.txt": "x"}, "feature")
	runGit(t, h.repo, "checkout", "-q", main)
	if _, err := h.rec.PlanWith(t.Context(), "feature", reconciler.PlanOptions{Refresh: true}); !errors.Is(err, reconciler.ErrRefreshUntrusted) {
		t.Errorf("refresh of another ref: %v, want ErrRefreshUntrusted", err)
	}
	// Planning changed nothing in the world.
	if b, _ := os.ReadFile(filepath.Join(root, "222222222222", "eu", "app.conf")); string(b) != "port=9999\n" {
		t.Errorf("a plan changed the file: %q", b)
	}
}

// readGate is the ctl provider with a Read for drift that blocks until its
// context ends (a slow read), recording whether an apply ever ran while a
// read was in flight.
type readGate struct {
	*ctl
	entered  chan struct{}
	reading  atomic.Int32
	overlaps atomic.Int32
}

func (g *readGate) Readable(cty.Value) bool { return true }

func (g *readGate) Read(ctx context.Context, req provider.Request) (provider.Result, error) {
	g.reading.Add(1)
	defer g.reading.Add(-1)
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return provider.Result{}, ctx.Err()
}

func (g *readGate) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	if g.reading.Load() > 0 {
		g.overlaps.Add(1)
	}
	return g.ctl.Update(ctx, req)
}

// TestOperationStopsARunningDriftCheck: a commit arriving while a drift
// check reads its stack set is not held up by it — the check is stopped
// (ErrDriftBusy) before the operation applies anything.
func TestOperationStopsARunningDriftCheck(t *testing.T) {
	c := newCtl()
	g := &readGate{ctl: c, entered: make(chan struct{}, 1)}
	files := map[string]string{"stacks.hcl": stackSetHCL("web", "v1", []string{"eu"}, []string{"111111111111", "222222222222"}, "")}
	h, _, _ := newHarnessWith(t, c, nil, provider.Registry{"ctl": g}, files)
	if res, err := h.rec.Reconcile(t.Context()); err != nil || res.Failed() {
		t.Fatal(err, res)
	}
	checked := make(chan error, 1)
	go func() {
		_, err := h.rec.CheckDrift(context.Background(), "web")
		checked <- err
	}()
	select {
	case <-g.entered:
	case <-time.After(waitLimit):
		t.Fatal("the drift check never read")
	}
	files["stacks.hcl"] = stackSetHCL("web", "v2", []string{"eu"}, []string{"111111111111", "222222222222"}, "")
	commitFiles(t, h.repo, files, "v2")
	res, err := h.rec.Reconcile(t.Context())
	if err != nil || res.Failed() || len(res.Operations) != 1 || res.Operations[0].Status != state.OperationSucceeded {
		t.Fatalf("the operation behind a drift check: %v %+v", err, res)
	}
	select {
	case err := <-checked:
		if !errors.Is(err, reconciler.ErrDriftBusy) {
			t.Errorf("the interrupted check returned %v, want ErrDriftBusy", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the drift check did not end when the operation started")
	}
	if n := g.overlaps.Load(); n > 0 {
		t.Errorf("%d updates ran while a drift read was in flight", n)
	}
}

// TestDriftCorrectionFollowsTheRollout: a DriftCorrection of a stack set
// with a rollout block goes batch by batch, like any operation.
func TestDriftCorrectionFollowsTheRollout(t *testing.T) {
	root := t.TempDir()
	files := driftDefs("correct", "")
	files["stacks.hcl"] = strings.Replace(files["stacks.hcl"], "  deployment_targets {", "  rollout {\n    pattern    = \"rolling\"\n    batch_size = 1\n  }\n  deployment_targets {", 1)
	h, _, _ := newHarnessWith(t, newCtl(), nil, provider.Registry{"file": file.New(file.Options{Root: root})}, files)
	if res, err := h.rec.Reconcile(t.Context()); err != nil || res.Failed() {
		t.Fatal(err, res)
	}
	for _, dir := range []string{"111111111111/eu", "222222222222/us", "222222222222/eu"} {
		if err := os.Remove(filepath.Join(root, dir, "motd")); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := h.rec.CheckDrift(t.Context(), "web")
	if err != nil || rep.Correction == "" {
		t.Fatalf("check: %v %+v", err, rep)
	}
	h.rec.Wait()
	ss, _ := h.store.StackSetByName("web")
	op, err := h.store.Operation(ss.LastOperation)
	if err != nil {
		t.Fatal(err)
	}
	if op.Kind != state.KindDriftCorrection || op.Status != state.OperationSucceeded || op.Rollout == nil || len(op.Rollout.Plan) != 3 {
		t.Fatalf("correction with a rollout: %s %s, rollout %+v", op.Kind, op.Status, op.Rollout)
	}
	for _, dir := range []string{"111111111111/eu", "222222222222/us", "222222222222/eu"} {
		if _, err := os.Stat(filepath.Join(root, dir, "motd")); err != nil {
			t.Errorf("%s/motd not restored: %v", dir, err)
		}
	}
}

// TestDriftCorrectedAfterToleratedFailure: a deploy that failed on one
// instance within its failure tolerance keeps the stack set's earlier
// configuration recorded; drift of the instances that reached the new
// one is still corrected (the failed one is the next operation's).
func TestDriftCorrectedAfterToleratedFailure(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	defs := driftDefs("correct", "")
	defs["stacks.hcl"] = strings.Replace(defs["stacks.hcl"], "  deployment_targets {", `  operation_preferences {
    region_concurrency_type = "PARALLEL"
    failure_tolerance_count = 1
  }
  deployment_targets {`, 1)
	h, _, _ := newHarnessWith(t, newCtl(), nil, provider.Registry{"file": file.New(file.Options{Root: root})}, defs)
	if res, err := h.rec.Reconcile(ctx); err != nil || res.Failed() {
		t.Fatalf("first deploy: %v %+v", err, res)
	}
	// v2 fails on one instance: a directory where its file goes.
	blocked := filepath.Join(root, "111111111111", "eu", "app.conf")
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	defs["templates/files/main.hcl"] = strings.Replace(driftTemplate, "port=80", "port=81", 1)
	commitFiles(t, h.repo, defs, "port 81")
	res, err := h.rec.Reconcile(ctx)
	if err != nil || !res.Failed() || res.Operations[0].Status != state.OperationSucceeded {
		t.Fatalf("v2: %v %+v, want a tolerated failure", err, res)
	}
	// An instance that reached v2 drifts.
	tampered := filepath.Join(root, "222222222222", "us", "motd")
	if err := os.WriteFile(tampered, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := h.rec.CheckDrift(ctx, "web")
	if err != nil || rep.Correction == "" {
		t.Fatalf("check: %v %+v, want a correction", err, rep)
	}
	h.rec.Wait()
	op, err := h.store.Operation(rep.Correction)
	if err != nil || op.Kind != state.KindDriftCorrection || op.Status != state.OperationSucceeded || len(op.Results) != 1 ||
		op.Results[0].Region != "us" || op.Results[0].Account != "222222222222" {
		t.Fatalf("correction: %v %+v, want us/222222222222 alone", err, op)
	}
	if b, _ := os.ReadFile(tampered); string(b) != "hello" {
		t.Errorf("tampered file after correction: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "222222222222", "us", "app.conf")); string(b) != "port=81\n" {
		t.Errorf("the correction did not keep v2: %q", b)
	}
	// The failed instance is still the next operation's: re-running the
	// revision reports it failed.
	if res, err := h.rec.Reconcile(ctx); err != nil || !res.UpToDate || !res.Failed() {
		t.Errorf("after the correction: %v %+v, want the failed deploy still reported", err, res)
	}
}

// TestDriftStatusNotHiddenByAWaitingOperation: a drift check that finds
// drift while the final status document of the stack set's operation still
// waits in the status writer (the pass's other operation runs) is what the
// status branch shows in the end: the older, waiting document never lands
// after the drift result. The commits still say what the operation did, and
// its status is no longer owed once written.
func TestDriftStatusNotHiddenByAWaitingOperation(t *testing.T) {
	c := newCtl()
	root := t.TempDir()
	files := driftDefs("report", "")
	files["stacks.hcl"] += stackSetHCL("slow", "v1", []string{"eu"}, []string{"111111111111"}, "")
	h, _, _ := newHarnessWith(t, c, nil, provider.Registry{"file": file.New(file.Options{Root: root})}, files)
	if res, err := h.rec.Reconcile(t.Context()); err != nil || res.Failed() {
		t.Fatal(err, res)
	}
	// v2 changes both stack sets; slow's operation is held at its provider.
	c.gate("slow")
	defer c.openAll()
	files["templates/files/main.hcl"] = strings.Replace(driftTemplate, "hello", "hello v2", 1)
	files["stacks.hcl"] = strings.Replace(files["stacks.hcl"], `"v1"`, `"v2"`, 1)
	rev2 := commitFiles(t, h.repo, files, "v2")
	d := runDriver(t, h)
	defer d.stop(t)
	d.submit()
	eventually(t, "web's operation to succeed", opStatusIs(h.store, "web", rev2, state.OperationSucceeded))
	c.waitFor(t, "the slow operation to call its provider", func() bool { return len(c.blockedIn("slow", "eu")) > 0 })

	// web is idle, its final document waits for slow's: a check finds drift.
	if err := os.WriteFile(filepath.Join(root, "111111111111", "us", "motd"), []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	var (
		rep *reconciler.DriftReport
		err error
	)
	eventually(t, "a drift check of web", func() (bool, string) {
		rep, err = h.rec.CheckDrift(t.Context(), "web")
		return !errors.Is(err, reconciler.ErrDriftBusy), "busy" // its runner is going idle
	})
	if err != nil || rep.Status != engine.DriftDrifted || rep.DriftedInstances != 1 {
		t.Fatalf("check: %v %+v, want one drifted instance", err, rep)
	}
	c.open("slow")
	eventually(t, "slow's operation to succeed", opStatusIs(h.store, "slow", rev2, state.OperationSucceeded))
	d.stop(t) // writes what is owed

	doc, _ := statusDoc(t, h.repo, "web")
	if doc.Drift == nil || doc.Drift.Status != engine.DriftDrifted || doc.Drift.DriftedInstances != 1 {
		t.Errorf("web's status document after the pass: drift %+v, want DRIFTED (1 instance)", doc.Drift)
	}
	if lo := doc.LastOperation; lo == nil || lo.Revision != rev2 || lo.Status != state.OperationSucceeded {
		t.Errorf("web's status document: last_operation %+v, want SUCCEEDED at %s", lo, rev2[:7])
	}
	all := strings.Join(statusMessages(t, h.repo), "\n---\n")
	for _, want := range []string{"stackd: web DeployStackSet " + rev2[:7] + " SUCCEEDED", "stackd: web drift DRIFTED"} {
		if !strings.Contains(all, want) {
			t.Errorf("no status commit says %q:\n%s", want, all)
		}
	}
	if owed, err := h.store.Meta("status_owed/web"); err == nil && len(owed) > 0 {
		t.Errorf("web's status is still owed (%s) after it was written", owed)
	}
	// Written and remembered: the same result again makes no commit.
	before := statusHead(t, h.repo)
	if _, err := h.rec.CheckDrift(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	if after := statusHead(t, h.repo); after != before {
		t.Errorf("the same drift result was written again: %s", firstLines(statusMessages(t, h.repo)))
	}
}

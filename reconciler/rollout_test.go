package reconciler_test

// Rollout tests: the real reconciler, Git repository, Badger state and
// engine as in the scheduler tests, the ctl provider at the edge, a fake
// clock (no test sleeps through a pause) and an httptest health endpoint.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/internal/clock"
	"github.com/stackd/stackd/internal/testkit"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// ---- the fake clock -----------------------------------------------------------

// fakeClock is the rollout clock of the tests: testkit.Clock, manual or
// auto.
type fakeClock = testkit.Clock

func newFakeClock(auto bool) *fakeClock { return testkit.NewClock(auto) }

// ---- the health endpoint ------------------------------------------------------

// healthServer answers GET /health/<stack set>/<region>/<account> with 200,
// or with the status set for the instance ("region/account") or its
// region, or 503 while the instance runs a tag set bad for it or its
// region (as a real service is unhealthy only while it runs the bad
// version).
type healthServer struct {
	*httptest.Server
	mu     sync.Mutex
	status map[string]int // region or "region/account" -> status
	hits   map[string]int // "region/account" -> requests
	world  *ctl
	bad    map[string]string // region or "region/account" -> tag
}

func newHealthServer(t *testing.T) *healthServer {
	h := &healthServer{status: map[string]int{}, hits: map[string]int{}, bad: map[string]string{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		unit := strings.TrimPrefix(r.URL.Path, "/health/")
		parts := strings.Split(unit, "/")
		if len(parts) != 3 {
			http.NotFound(w, r)
			return
		}
		h.mu.Lock()
		inst := parts[1] + "/" + parts[2]
		h.hits[inst]++
		code, ok := h.status[inst]
		if !ok {
			code, ok = h.status[parts[1]]
		}
		bad, world := h.bad[inst], h.world
		if bad == "" {
			bad = h.bad[parts[1]]
		}
		h.mu.Unlock()
		if !ok {
			code = http.StatusOK
		}
		if bad != "" {
			world.mu.Lock()
			if world.world[unit] == bad {
				code = http.StatusServiceUnavailable
			}
			world.mu.Unlock()
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *healthServer) set(region string, code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status[region] = code
}

// badTag makes the instances of where (a region, or "region/account")
// answer 503 while c shows them at tag.
func (h *healthServer) badTag(c *ctl, where, tag string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.world, h.bad[where] = c, tag
}

// healthBlock is a health_check block polling the endpoint; the URL uses
// the instance's output (ctl.unit.id = "<stack set>/<region>/<account>").
func (h *healthServer) healthBlock(extra string) string {
	return fmt.Sprintf(`    health_check {
      url      = "%s/health/${output.unit}"
      interval = "1s"
      timeout  = "2s"
      deadline = "10s"
      healthy  = 2
%s
    }`, h.URL, extra)
}

// ---- harness ------------------------------------------------------------------

// newRolloutHarness is newHarness with the fake clock.
func newRolloutHarness(t *testing.T, c *ctl, clock clock.Clock, files map[string]string) (*harness, string) {
	t.Helper()
	h, rev, _ := newRestartableHarness(t, c, clock, files)
	return h, rev
}

// newRestartableHarness also returns a function making a new reconciler
// on the same repository and state: a daemon restart.
func newRestartableHarness(t *testing.T, c *ctl, clock clock.Clock, files map[string]string) (*harness, string, func() *reconciler.Reconciler) {
	t.Helper()
	return newHarnessWith(t, c, clock, nil, files)
}

// newHarnessWith also registers the providers of extra.
func newHarnessWith(t *testing.T, c *ctl, clock clock.Clock, extra provider.Registry, files map[string]string) (*harness, string, func() *reconciler.Reconciler) {
	t.Helper()
	dir := t.TempDir()
	h := &harness{repo: filepath.Join(dir, "repo"), ctl: c}
	if err := os.MkdirAll(h.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, h.repo, "init", "-q")
	all := map[string]string{"templates/ctl/main.hcl": ctlTemplate}
	for k, v := range files {
		all[k] = v
	}
	rev := commitFiles(t, h.repo, all, "first")
	src, err := gitsource.Open(t.Context(), gitsource.Options{Repo: h.repo})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close state: %v", err)
		}
	})
	h.store = st
	build := func() *reconciler.Reconciler {
		reg := provider.Registry{"ctl": c}
		for k, p := range extra {
			reg[k] = p
		}
		rec, err := reconciler.New(reconciler.Options{
			Source: src, Store: st, Engine: engine.New(reg), Log: zerolog.Nop(), Clock: clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	h.rec = build()
	return h, rev, build
}

// rolloutHCL is stackSetHCL with a rollout block.
func rolloutHCL(name, tag string, regions, accounts []string, prefs, rollout string) string {
	s := strings.TrimSuffix(stackSetHCL(name, tag, regions, accounts, prefs), "}\n")
	return s + "  rollout {\n" + rollout + "\n  }\n}\n"
}

// reconcile runs one pass to its end and returns the stack set's operation.
func reconcileOp(t *testing.T, h *harness, name string) state.Operation {
	t.Helper()
	res, err := h.rec.Reconcile(context.Background())
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	for _, op := range res.Operations {
		if op.StackSet == name {
			return op
		}
	}
	t.Fatalf("Reconcile ran no operation of %s: %+v", name, res)
	return state.Operation{}
}

// background runs Reconcile in a goroutine; wait returns its result.
func background(t *testing.T, h *harness) (wait func() *reconciler.Result) {
	t.Helper()
	done := make(chan *reconciler.Result, 1)
	go func() {
		res, err := h.rec.Reconcile(context.Background())
		if err != nil {
			t.Errorf("Reconcile: %v", err)
		}
		done <- res
	}()
	var once sync.Once
	var res *reconciler.Result
	wait = func() *reconciler.Result {
		once.Do(func() {
			select {
			case res = <-done:
			case <-time.After(waitLimit):
				t.Fatalf("Reconcile did not return")
			}
		})
		return res
	}
	t.Cleanup(func() {
		_ = h.rec.Abort("web")
		h.ctl.openAll()
		wait()
	})
	return wait
}

// batchesOf maps "region/account" to the batch of each result.
func batchesOf(op state.Operation) map[string]int {
	out := map[string]int{}
	for _, r := range op.Results {
		out[r.Region+"/"+r.Account] = r.Batch
	}
	return out
}

// batchSizesOf counts the results per batch.
func batchSizesOf(op state.Operation) []int {
	var out []int
	for _, r := range op.Results {
		for len(out) < r.Batch {
			out = append(out, 0)
		}
		if r.Batch > 0 {
			out[r.Batch-1]++
		}
	}
	return out
}

// statusTip is the message of the status branch's tip ("" while there is
// no status branch), for polling.
func statusTip(t *testing.T, repo string) string {
	t.Helper()
	r, err := git.PlainOpen(repo)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Reference(plumbing.NewBranchReferenceName(gitsource.DefaultStatusBranch), true)
	if err != nil {
		return ""
	}
	c, err := r.CommitObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(c.Message)
}

// statusMessages lists the status branch's commit messages, oldest first.
func statusMessages(t *testing.T, repo string) []string {
	t.Helper()
	r, err := git.PlainOpen(repo)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Reference(plumbing.NewBranchReferenceName(gitsource.DefaultStatusBranch), true)
	if err != nil {
		t.Fatalf("status branch: %v", err)
	}
	iter, err := r.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	err = iter.ForEach(func(c *object.Commit) error {
		out = append(out, strings.TrimSpace(c.Message))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(out)
	return out
}

// updateTags lists the provider's update calls of a stack set in order, as
// "region/account tag".
func updateTags(c *ctl, stackSet string) []string {
	var out []string
	for _, e := range c.eventsOf(stackSet) {
		if e.start && e.op == "update" {
			out = append(out, e.region+"/"+e.account+" "+e.tag)
		}
	}
	return out
}

// ---- tests --------------------------------------------------------------------

// Batch sizes through the real scheduler: rolling, canary and
// min_in_service, for creates and for updates of a deployed fleet.
func TestRolloutBatchSizes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		regions  []string
		accounts int
		rollout  string
		create   []int // batch sizes of the first (create) operation
		update   []int // of the second (update) operation
	}{
		{"rolling 7 by 2", fourRegions[:1], 7, `pattern = "rolling"` + "\n" + `batch_size = 2`, []int{2, 2, 2, 1}, []int{2, 2, 2, 1}},
		{"canary 7", fourRegions[:1], 7, `pattern = "canary"`, []int{1, 2, 4}, []int{1, 2, 4}},
		{"canary 20 over 4 regions", fourRegions, 5, `pattern = "canary"` + "\n" + `batch_size = 2`, []int{2, 4, 8, 6}, []int{2, 4, 8, 6}},
		{"canary 1", fourRegions[:1], 1, `pattern = "canary"`, []int{1}, []int{1}},
		// New instances are not in service; updates keep 5 of 7 serving.
		{"min_in_service", fourRegions[:1], 7, `batch_size = 4` + "\n" + `min_in_service = 5`, []int{4, 3}, []int{2, 2, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCtl()
			clock := newFakeClock(true)
			accounts := accountIDs(tc.accounts)
			h, _ := newRolloutHarness(t, c, clock, map[string]string{"web.hcl": rolloutHCL("web", "v1", tc.regions, accounts, "", tc.rollout)})
			// The change set shows the batches the operation then runs.
			planned := func(want []int) {
				t.Helper()
				res, err := h.rec.Plan(context.Background(), "")
				if err != nil {
					t.Fatal(err)
				}
				if len(res.ChangeSets) != 1 || res.ChangeSets[0].Rollout == nil {
					t.Fatalf("plan %+v has no rollout", res)
				}
				if diff := cmp.Diff(want, res.ChangeSets[0].Rollout.Batches); diff != "" {
					t.Errorf("planned batches (-want +got):\n%s", diff)
				}
			}
			planned(tc.create)
			op := reconcileOp(t, h, "web")
			if op.Status != state.OperationSucceeded {
				t.Fatalf("create operation %s (%s), want SUCCEEDED", op.Status, op.Reason)
			}
			if diff := cmp.Diff(tc.create, batchSizesOf(op)); diff != "" {
				t.Errorf("create batches (-want +got):\n%s", diff)
			}
			if op.Rollout == nil || op.Rollout.Batches != len(tc.create) || op.Rollout.Phase != state.RolloutDone {
				t.Errorf("create rollout progress %+v, want DONE after %d batches", op.Rollout, len(tc.create))
			}
			// Batches follow region order, then account order.
			order := batchesOf(op)
			prev := 0
			for _, r := range tc.regions {
				for _, a := range accounts {
					b := order[r+"/"+a]
					if b < prev {
						t.Errorf("%s/%s is in batch %d, after an instance of batch %d: not in region then account order", r, a, b, prev)
					}
					prev = b
				}
			}

			commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", tc.regions, accounts, "", tc.rollout)}, "v2")
			planned(tc.update)
			op = reconcileOp(t, h, "web")
			if op.Status != state.OperationSucceeded {
				t.Fatalf("update operation %s (%s), want SUCCEEDED", op.Status, op.Reason)
			}
			if diff := cmp.Diff(tc.update, batchSizesOf(op)); diff != "" {
				t.Errorf("update batches (-want +got):\n%s", diff)
			}
		})
	}
}

// A pause holds the next batch until the clock passes it; each batch
// boundary writes one status commit saying "batch k/n".
func TestRolloutPauseAndProgress(t *testing.T) {
	c := newCtl()
	clock := newFakeClock(false)
	accounts := accountIDs(5)
	rollout := `batch_size = 2` + "\n" + `pause = "30s"`
	h, rev := newRolloutHarness(t, c, clock, map[string]string{"web.hcl": rolloutHCL("web", "v1", fourRegions[:1], accounts, "", rollout)})
	wait := background(t, h)
	creates := func() int {
		n := 0
		for _, e := range c.eventsOf("web") {
			if e.start && e.op == "create" {
				n++
			}
		}
		return n
	}
	for batch, want := range []int{2, 4, 5} {
		clock.WaitForWaiter(t, 30*time.Second, waitLimit)
		if got := creates(); got != want {
			t.Fatalf("pausing after batch %d: %d instances created, want %d", batch+1, got, want)
		}
		op, err := operationAt(h.store, "web", rev)
		if err != nil {
			t.Fatal(err)
		}
		if op.Status != state.OperationRunning || op.Rollout == nil || op.Rollout.Batch != batch+1 || op.Rollout.Batches != 3 || op.Rollout.Phase != state.RolloutPaused {
			t.Fatalf("pausing after batch %d: operation %s rollout %+v, want RUNNING, PAUSED in batch %d of 3", batch+1, op.Status, op.Rollout, batch+1)
		}
		if batch > 0 {
			// The previous batch's status commit (written when it passed
			// its gate) is on the status branch while this one pauses: it
			// is not held until the operation ends.
			eventually(t, fmt.Sprintf("the status commit of batch %d", batch), func() (bool, string) {
				msg := statusTip(t, h.repo)
				return strings.HasSuffix(msg, fmt.Sprintf("batch %d/3", batch)), msg
			})
		}
		clock.Advance(29 * time.Second)
		if got := creates(); got != want {
			t.Fatalf("29s into the pause after batch %d: %d instances created, want still %d", batch+1, got, want)
		}
		clock.Advance(time.Second)
	}
	res := wait()
	if len(res.Operations) != 1 || res.Operations[0].Status != state.OperationSucceeded {
		t.Fatalf("operations %+v, want one SUCCEEDED", res.Operations)
	}
	msgs := statusMessages(t, h.repo)
	want := []string{
		fmt.Sprintf("stackd: web CreateStackInstances %s RUNNING (2/5) batch 1/3", rev[:7]),
		fmt.Sprintf("stackd: web CreateStackInstances %s RUNNING (4/5) batch 2/3", rev[:7]),
		fmt.Sprintf("stackd: web CreateStackInstances %s SUCCEEDED (5/5)", rev[:7]),
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("status commits (-want +got):\n%s", diff)
	}
	doc, _ := statusDoc(t, h.repo, "web")
	if lo := doc.LastOperation; lo == nil || lo.Rollout == nil || lo.Rollout.Batches != 3 {
		t.Errorf("status/web.json last_operation %+v, want its rollout (3 batches)", lo)
	}
}

// A failing health check at batch 3 rolls back batches 3, 2 and 1 in that
// order to the previous revision; batch 4 is never touched.
func TestRolloutHealthCheckRollback(t *testing.T) {
	c := newCtl()
	clock := newFakeClock(true)
	hs := newHealthServer(t)
	regions := fourRegions[:2]
	accounts := accountIDs(4)
	rollout := "batch_size = 2\non_failure = \"rollback\"\n" + hs.healthBlock("")
	h, rev1 := newRolloutHarness(t, c, clock, map[string]string{"web.hcl": rolloutHCL("web", "v1", regions, accounts, "", rollout)})
	if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded {
		t.Fatalf("first operation %s (%s), want SUCCEEDED", op.Status, op.Reason)
	}
	before := instanceStatuses(t, h.store, "web")

	// v2 is unhealthy in region 2 (batches 3 and 4); it goes out.
	hs.badTag(c, regions[1], "v2")
	rev2 := commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", regions, accounts, "", rollout)}, "v2")
	op := reconcileOp(t, h, "web")
	if op.Status != state.OperationRolledBack {
		t.Fatalf("operation %s (%s), want ROLLED_BACK", op.Status, op.Reason)
	}
	for _, s := range []string{
		"batch 3 of 4 failed its health check",
		regions[1] + "/" + accounts[0],
		"answered 503, want 200",
		"rolled back 6 instances to " + rev1[:7],
	} {
		if !strings.Contains(op.Reason, s) {
			t.Errorf("reason %q does not say %q", op.Reason, s)
		}
	}
	if op.Rollout == nil || op.Rollout.FailedBatch != 3 {
		t.Errorf("rollout progress %+v, want failed batch 3", op.Rollout)
	}

	// The provider saw v2 go to batches 1-3, then v1 back to 3, 2, 1.
	r1, r2 := regions[0], regions[1]
	want := []string{
		r1 + "/" + accounts[0] + " v2", r1 + "/" + accounts[1] + " v2",
		r1 + "/" + accounts[2] + " v2", r1 + "/" + accounts[3] + " v2",
		r2 + "/" + accounts[0] + " v2", r2 + "/" + accounts[1] + " v2",
		r2 + "/" + accounts[0] + " v1", r2 + "/" + accounts[1] + " v1",
		r1 + "/" + accounts[2] + " v1", r1 + "/" + accounts[3] + " v1",
		r1 + "/" + accounts[0] + " v1", r1 + "/" + accounts[1] + " v1",
	}
	if diff := cmp.Diff(want, updateTags(c, "web")); diff != "" {
		t.Errorf("update calls (-want +got):\n%s", diff)
	}
	c.mu.Lock()
	for k, tag := range c.world {
		if tag != "v1" {
			t.Errorf("%s is at %s after the rollback, want v1", k, tag)
		}
	}
	c.mu.Unlock()

	after := instanceStatuses(t, h.store, "web")
	for _, r := range regions {
		for i, a := range accounts {
			k := r + "/" + a
			in := after[k]
			if in.Revision != rev1 || in.ConfigHash != before[k].ConfigHash {
				t.Errorf("%s at revision %s hash %s, want the previous %s %s", k, in.Revision, in.ConfigHash, rev1[:7], before[k].ConfigHash)
			}
			untouched := r == r2 && i >= 2
			switch {
			case untouched && in.Status != state.InstanceCancelComplete:
				t.Errorf("%s (batch 4) is %s, want CANCEL_COMPLETE", k, in.Status)
			case !untouched && (in.Status != state.InstanceOperationComplete || !strings.Contains(in.StatusReason, "rolled back to "+rev1[:7])):
				t.Errorf("%s is %s (%s), want OPERATION_COMPLETE rolled back to %s", k, in.Status, in.StatusReason, rev1[:7])
			}
		}
	}
	// Batch 4 was never health-checked under v2 either.
	hs.mu.Lock()
	for _, a := range accounts[2:] {
		if n := hs.hits[r2+"/"+a]; n != 2 {
			t.Errorf("%s/%s was health-checked %d times, want 2 (only in the first operation)", r2, a, n)
		}
	}
	hs.mu.Unlock()

	ss, err := h.store.StackSetByName("web")
	if err != nil {
		t.Fatal(err)
	}
	if ss.Revision != rev1 {
		t.Errorf("stack set revision %s after the rollback, want %s", ss.Revision, rev1[:7])
	}
	doc, msg := statusDoc(t, h.repo, "web")
	if !strings.HasPrefix(msg, fmt.Sprintf("stackd: web DeployStackSet %s ROLLED_BACK (0/8, 2 cancelled, 6 rolled back)\n", rev2[:7])) || !strings.Contains(msg, "batch 3 of 4 failed its health check") {
		t.Errorf("status commit %q, want ROLLED_BACK naming batch 3 and why", msg)
	}
	if lo := doc.LastOperation; lo == nil || lo.Status != state.OperationRolledBack || lo.Counts.RolledBack != 6 || lo.Counts.Cancelled != 2 {
		t.Errorf("status/web.json last_operation %+v, want ROLLED_BACK with 6 rolled back, 2 cancelled", lo)
	}
	if problems := h.store.Check(); len(problems) > 0 {
		t.Errorf("state check: %v", problems)
	}
}

// Failures within the tolerance neither stop nor roll back a rollout;
// beyond it, the batch fails and on_failure decides.
func TestRolloutFailureTolerance(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      []int // failing accounts (by index)
		onFailure string
		status    state.OperationStatus
		reason    string
	}{
		{"within tolerance", []int{1}, "rollback", state.OperationSucceeded, "1 instance failed within the failure tolerance"},
		// STRICT mode runs batch 3 one at a time once a failure is counted:
		// account 4 fails, account 5 never starts; 5 instances changed.
		{"exceeded, rollback", []int{1, 4}, "rollback", state.OperationRolledBack, "batch 3 of 4 failed: failure tolerance exceeded in region eu-west-1 (2 instances failed, tolerance 1); first failure eu-west-1/100000000004: Apply failed; ctl.unit: ctl: injected failure for eu-west-1/100000000004; rolled back 5 instances"},
		{"exceeded, stop", []int{1, 4}, "stop", state.OperationFailed, "batch 3 of 4 failed: failure tolerance exceeded in region eu-west-1 (2 instances failed, tolerance 1); first failure eu-west-1/100000000004: Apply failed; ctl.unit: ctl: injected failure for eu-west-1/100000000004; stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCtl()
			accounts := accountIDs(8)
			region := fourRegions[0]
			prefs := "    failure_tolerance_count = 1\n    max_concurrent_count = 2"
			rollout := fmt.Sprintf("batch_size = 2\non_failure = %q", tc.onFailure)
			h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, prefs, rollout)})
			if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded {
				t.Fatalf("first operation %s (%s)", op.Status, op.Reason)
			}
			c.mu.Lock()
			for _, i := range tc.fail {
				c.failTag[region+"/"+accounts[i]] = "v2" // v2 fails to deploy there; v1 deploys
			}
			c.mu.Unlock()
			commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, prefs, rollout)}, "v2")
			op := reconcileOp(t, h, "web")
			if op.Status != tc.status || !strings.Contains(op.Reason, tc.reason) {
				t.Errorf("operation %s (%s), want %s with a reason containing %q", op.Status, op.Reason, tc.status, tc.reason)
			}
			v1 := 0
			for _, u := range updateTags(c, "web") {
				if strings.HasSuffix(u, " v1") {
					v1++
				}
			}
			if tc.status != state.OperationRolledBack && v1 > 0 {
				t.Errorf("%d instances re-deployed v1: a %s operation rolled back", v1, tc.status)
			}
			if tc.status == state.OperationFailed {
				// Stopped: batch 4 never started.
				ins := instanceStatuses(t, h.store, "web")
				for _, a := range accounts[6:] {
					if s := ins[region+"/"+a].Status; s != state.InstanceCancelComplete {
						t.Errorf("%s (batch 4) is %s, want CANCEL_COMPLETE", a, s)
					}
				}
			}
		})
	}
}

// pause = "until_promoted" holds after each batch until Promote; Abort
// stops the rollout and, with on_failure = "rollback", rolls it back.
func TestRolloutPromoteAndAbort(t *testing.T) {
	for _, onFailure := range []string{"rollback", "stop"} {
		t.Run(onFailure, func(t *testing.T) {
			c := newCtl()
			accounts := accountIDs(3)
			region := fourRegions[0]
			rollout := fmt.Sprintf("pause = \"until_promoted\"\non_failure = %q", onFailure)
			h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", rollout)})

			if err := h.rec.Promote("web"); !errors.Is(err, reconciler.ErrNoRollout) {
				t.Errorf("Promote with nothing running: %v, want ErrNoRollout", err)
			}
			c.gate("web")
			wait := background(t, h)
			c.waitFor(t, "batch 1 in flight", func() bool { return len(c.blockedIn("web", region)) == 1 })
			if err := h.rec.Promote("web"); !errors.Is(err, reconciler.ErrNotWaiting) {
				t.Errorf("Promote while batch 1 deploys: %v, want ErrNotWaiting", err)
			}
			c.open("web")
			waiting := func(batch int) func() (bool, string) {
				return func() (bool, string) {
					ss, err := h.store.StackSetByName("web")
					if err != nil {
						return false, err.Error()
					}
					op, err := h.store.Operation(ss.LastOperation)
					if err != nil {
						return false, err.Error()
					}
					return op.Rollout != nil && op.Rollout.Phase == state.RolloutWaitingForPromotion && op.Rollout.Batch == batch,
						fmt.Sprintf("%s %+v", op.Status, op.Rollout)
				}
			}
			eventually(t, "the rollout to wait for promotion after batch 1", waiting(1))
			if n := len(c.eventsOf("web")); n != 2 {
				t.Fatalf("%d provider events while waiting after batch 1, want 2 (one create)", n)
			}
			if err := h.rec.Promote("web"); err != nil {
				t.Fatalf("Promote: %v", err)
			}
			eventually(t, "the rollout to wait for promotion after batch 2", waiting(2))
			eventually(t, "the status commit of batch 2", func() (bool, string) {
				msg := statusTip(t, h.repo)
				return strings.HasSuffix(msg, "batch 2/3 waiting for promotion"), msg
			})
			if err := h.rec.Abort("web"); err != nil {
				t.Fatalf("Abort: %v", err)
			}
			res := wait()
			op := res.Operations[0]
			want := state.OperationStopped
			if onFailure == "rollback" {
				want = state.OperationRolledBack
			}
			if op.Status != want || !strings.Contains(op.Reason, "aborted by stackd abort after batch 2 of 3 (while waiting for promotion)") {
				t.Errorf("operation %s (%s), want %s aborted after batch 2", op.Status, op.Reason, want)
			}
			ins := instanceStatuses(t, h.store, "web")
			if s := ins[region+"/"+accounts[2]].Status; s != state.InstanceCancelComplete {
				t.Errorf("batch 3 instance is %s, want CANCEL_COMPLETE", s)
			}
			var deletes []string
			for _, e := range c.eventsOf("web") {
				if e.start && e.op == "delete" {
					deletes = append(deletes, e.account)
				}
			}
			if onFailure == "rollback" {
				// A new stack set rolls back to nothing: batches 2, 1 deleted.
				if diff := cmp.Diff([]string{accounts[1], accounts[0]}, deletes); diff != "" {
					t.Errorf("rollback deletes (-want +got):\n%s", diff)
				}
				if _, ok := ins[region+"/"+accounts[0]]; ok {
					t.Errorf("instance of batch 1 still recorded after rolling back its creation")
				}
			} else if len(deletes) > 0 {
				t.Errorf("a stopped rollout deleted %v", deletes)
			}
			if err := h.rec.Abort("web"); !errors.Is(err, reconciler.ErrNoRollout) {
				t.Errorf("Abort after the end: %v, want ErrNoRollout", err)
			}
		})
	}
}

// Abort inside a batch acts at once: the instance in flight finishes, no
// other instance of the batch starts (CloudFormation's
// StopStackSetOperation), and with on_failure = "rollback" the one that
// finished is rolled back.
func TestRolloutAbortDuringBatch(t *testing.T) {
	for _, onFailure := range []string{"rollback", "stop"} {
		t.Run(onFailure, func(t *testing.T) {
			c := newCtl()
			accounts := accountIDs(8)
			region := fourRegions[0]
			rollout := fmt.Sprintf("batch_size = 4\non_failure = %q", onFailure)
			h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", rollout)})
			c.gate("web")
			wait := background(t, h)
			c.waitFor(t, "the first instance of batch 1 in flight", func() bool { return len(c.blockedIn("web", region)) == 1 })
			c.release(t, "web", region, accounts[0])
			c.waitFor(t, "the second instance of batch 1 in flight", func() bool {
				b := c.blockedIn("web", region)
				return len(b) == 1 && b[0] == accounts[1]
			})
			if err := h.rec.Abort("web"); err != nil {
				t.Fatalf("Abort: %v", err)
			}
			c.open("web")
			op := wait().Operations[0]
			want := state.OperationStopped
			if onFailure == "rollback" {
				want = state.OperationRolledBack
			}
			if op.Status != want || !strings.Contains(op.Reason, "aborted by stackd abort during batch 1 of 2") {
				t.Errorf("operation %s (%s), want %s aborted during batch 1", op.Status, op.Reason, want)
			}
			var created []string
			for _, e := range c.eventsOf("web") {
				if e.start && e.op == "create" {
					created = append(created, e.account)
				}
			}
			if diff := cmp.Diff(accounts[:2], created); diff != "" {
				t.Errorf("creates (-want +got): the instances in flight at the abort, no other:\n%s", diff)
			}
			ins := instanceStatuses(t, h.store, "web")
			for _, a := range accounts[2:] {
				if s := ins[region+"/"+a].Status; s != state.InstanceCancelComplete {
					t.Errorf("%s (never started) is %s, want CANCEL_COMPLETE", a, s)
				}
			}
			for _, a := range accounts[:2] {
				in, ok := ins[region+"/"+a]
				switch {
				case onFailure == "rollback" && ok:
					t.Errorf("%s is still recorded (%s) after rolling back its creation", a, in.Status)
				case onFailure == "stop" && in.Status != state.InstanceOperationComplete:
					t.Errorf("%s is %s, want OPERATION_COMPLETE (it finished before the stop)", a, in.Status)
				}
			}
			if problems := h.store.Check(); len(problems) > 0 {
				t.Errorf("state check: %v", problems)
			}
		})
	}
}

// The gate reads the instance records: a record that does not show the
// operation's revision (stale, or changed meanwhile) fails the batch, and
// the next batch never starts.
func TestRolloutStaleStatusFailsGate(t *testing.T) {
	c := newCtl()
	clock := newFakeClock(false)
	accounts := accountIDs(4)
	region := fourRegions[0]
	h, rev := newRolloutHarness(t, c, clock, map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", "batch_size = 2\npause = \"1m\"")})
	wait := background(t, h)
	clock.WaitForWaiter(t, time.Minute, waitLimit)
	ss, err := h.store.StackSetByName("web")
	if err != nil {
		t.Fatal(err)
	}
	in, err := h.store.Instance(ss.ID, region, accounts[1])
	if err != nil {
		t.Fatal(err)
	}
	in.Revision = "0000000000000000000000000000000000000000"
	if err := h.store.PutInstance(in); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	op := wait().Operations[0]
	if op.Status != state.OperationFailed || !strings.Contains(op.Reason, "batch 1 of 2 failed its gate: instance "+region+"/"+accounts[1]+" is recorded OPERATION_COMPLETE at revision 0000000, not OPERATION_COMPLETE at "+rev[:7]) {
		t.Errorf("operation %s (%s), want FAILED at batch 1's gate", op.Status, op.Reason)
	}
	creates := 0
	for _, e := range c.eventsOf("web") {
		if e.start {
			creates++
		}
	}
	if creates != 2 {
		t.Errorf("%d instances created, want 2: batch 2 started after a failed gate", creates)
	}
}

// A daemon stopped while a rollout holds for promotion resumes holding: the
// restart never lets the next batch start without a promotion.
func TestRolloutResumesHolding(t *testing.T) {
	c := newCtl()
	accounts := accountIDs(5)
	region := fourRegions[0]
	h, rev, restart := newRestartableHarness(t, c, newFakeClock(true), map[string]string{
		"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", "batch_size = 2\npause = \"until_promoted\""),
	})
	holding := func(batch int) func() (bool, string) {
		return func() (bool, string) {
			op, err := operationAt(h.store, "web", rev)
			if err != nil {
				return false, err.Error()
			}
			return op.Status == state.OperationRunning && op.Rollout != nil && op.Rollout.Phase == state.RolloutWaitingForPromotion && op.Rollout.Batch == batch,
				fmt.Sprintf("%s %+v", op.Status, op.Rollout)
		}
	}
	d := runDriver(t, h)
	eventually(t, "the first run to hold after batch 1", holding(1))
	d.stop(t)
	if n := len(c.eventsOf("web")); n != 4 {
		t.Fatalf("%d provider events before the restart, want 4 (batch 1)", n)
	}

	h.rec = restart()
	d = runDriver(t, h)
	t.Cleanup(func() { _ = h.rec.Abort("web"); d.stop(t) })
	// The events are counted before each promotion attempt: once Promote
	// succeeds, batch 2 may run before this goroutine looks again.
	eventsAtPromotion := -1
	eventually(t, "the restarted daemon to hold after batch 1 again", func() (bool, string) {
		ok, now := holding(1)()
		if !ok {
			return false, now
		}
		eventsAtPromotion = len(c.eventsOf("web"))
		return h.rec.Promote("web") == nil, now
	})
	if eventsAtPromotion != 4 {
		t.Fatalf("%d provider events when the restarted rollout was promoted, want still 4", eventsAtPromotion)
	}
	eventually(t, "the rollout to hold after batch 2", holding(2))
	if n := len(c.eventsOf("web")); n != 8 {
		t.Errorf("%d provider events holding after batch 2, want 8 (batches 1 and 2)", n)
	}
	if err := h.rec.Promote("web"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the operation to succeed", opStatusIs(h.store, "web", rev, state.OperationSucceeded))
	op, err := operationAt(h.store, "web", rev)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{2, 2, 1}, batchSizesOf(op)); diff != "" {
		t.Errorf("batches across the restart (-want +got):\n%s", diff)
	}
}

// The previous revision is loaded when a rollout that may roll back
// starts: a commit that is gone from the repository by the time a batch
// fails (a force-push, then a re-cloned cache or a gc) is still rolled
// back to.
func TestRolloutRollbackOutlivesThePreviousCommit(t *testing.T) {
	c := newCtl()
	clock := newFakeClock(true)
	hs := newHealthServer(t)
	regions := fourRegions[:2]
	accounts := accountIDs(1)
	rollout := "batch_size = 1\non_failure = \"rollback\"\n" + hs.healthBlock("")
	h, rev1 := newRolloutHarness(t, c, clock, map[string]string{"web.hcl": rolloutHCL("web", "v1", regions, accounts, "", rollout)})
	if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded {
		t.Fatalf("first operation %s (%s), want SUCCEEDED", op.Status, op.Reason)
	}

	hs.badTag(c, regions[1], "v2")
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", regions, accounts, "", rollout)}, "v2")
	c.gate("web")
	wait := background(t, h)
	c.waitFor(t, "batch 1 in flight", func() bool { return len(c.blockedIn("web", regions[0])) == 1 })
	// rev1's commit disappears from the repository.
	obj := filepath.Join(h.repo, ".git", "objects", rev1[:2], rev1[2:])
	if err := os.Remove(obj); err != nil {
		t.Fatalf("remove the commit object (it should be loose): %v", err)
	}
	if err := exec.Command("git", "-C", h.repo, "cat-file", "-e", rev1).Run(); err == nil {
		t.Fatalf("commit %s is still in the repository", rev1[:7])
	}
	c.open("web")

	res := wait()
	if len(res.Operations) != 1 {
		t.Fatalf("operations %+v", res.Operations)
	}
	op := res.Operations[0]
	if op.Status != state.OperationRolledBack || !strings.Contains(op.Reason, "batch 2 of 2 failed its health check") || !strings.Contains(op.Reason, "rolled back 2 instances to "+rev1[:7]) {
		t.Fatalf("operation %s (%s), want ROLLED_BACK after batch 2, 2 instances back at %s", op.Status, op.Reason, rev1[:7])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, tag := range c.world {
		if tag != "v1" {
			t.Errorf("%s is at %s after the rollback, want v1", k, tag)
		}
	}
}

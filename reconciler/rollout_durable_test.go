package reconciler_test

// Rollouts through failures, restarts and the next rollout (issue 14): each
// test here is one promise of docs/design.md §6, tried the way an operator breaks
// it.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

func shortRev(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

// deployFirst runs the first pass of the harness's repository: the stack
// set "web" must deploy.
func deployFirst(t *testing.T, h *harness) {
	t.Helper()
	if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded {
		t.Fatalf("first deploy %s (%s)", op.Status, op.Reason)
	}
}

// outOfService walks the provider calls of a stack set at tag and reports
// the most instances that were out of service at once: in flight (taken
// out) or failed (never back). It also returns the largest number in
// flight at once.
func outOfService(c *ctl, stackSet, tag string) (most, inFlight int) {
	out := map[string]bool{}
	running := map[string]bool{}
	c.mu.Lock()
	failing := map[string]bool{}
	for k, v := range c.fail {
		failing[k] = v
	}
	c.mu.Unlock()
	for _, e := range c.eventsOf(stackSet) {
		if e.tag != tag {
			continue
		}
		k := e.region + "/" + e.account
		if e.start {
			running[k], out[k] = true, true
		} else {
			delete(running, k)
			if !failing[k] {
				delete(out, k)
			}
		}
		most, inFlight = max(most, len(out)), max(inFlight, len(running))
	}
	return most, inFlight
}

// setFail makes the provider fail (or stop failing) for region/account.
func (c *ctl) setFail(region, account string, fail bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail[region+"/"+account] = fail
}

// startOrder lists the accounts the provider started at tag, in order.
func startOrder(c *ctl, stackSet, tag string) []string {
	var out []string
	for _, e := range c.eventsOf(stackSet) {
		if e.start && e.tag == tag {
			out = append(out, e.account)
		}
	}
	return out
}

func hasEvent(t *testing.T, st *state.Store, op state.Operation, status string) bool {
	t.Helper()
	evs, err := st.Events(op.ID)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(evs, func(e state.Event) bool { return e.Status == status })
}

// The first rollout after a stopped one: the instances the stopped rollout
// left CANCEL_COMPLETE still run the previous revision and serve, and the
// one whose apply failed does not. With min_in_service = 3 of 4 the fix
// goes out one instance at a time — the failed one first, since taking it
// costs no capacity — and never takes a serving instance below the bound.
func TestRolloutMinInServiceAfterAStoppedRollout(t *testing.T) {
	c := newCtl()
	region, accounts := fourRegions[0], accountIDs(4)
	prefs := "    max_concurrent_count = 4\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	body := "batch_size = 4\nmin_in_service = 3"
	h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, prefs, body)})
	if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded || !slices.Equal(batchSizesOf(op), []int{4}) {
		t.Fatalf("first deploy %s (%s) in batches %v, want SUCCEEDED in one batch of 4 (nothing serves yet)", op.Status, op.Reason, batchSizesOf(op))
	}

	c.setFail(region, accounts[0], true)
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, prefs, body)}, "v2")
	if op := reconcileOp(t, h, "web"); op.Status != state.OperationFailed {
		t.Fatalf("v2 %s (%s), want FAILED at batch 1", op.Status, op.Reason)
	}
	ins := instanceStatuses(t, h.store, "web")
	for _, a := range accounts[1:] {
		if in := ins[region+"/"+a]; in.Status != state.InstanceCancelComplete || !in.InService() {
			t.Fatalf("%s is %s (in service %v, %q), want CANCEL_COMPLETE and serving", a, in.Status, in.InService(), in.OutOfService)
		}
	}
	if in := ins[region+"/"+accounts[0]]; in.InService() {
		t.Fatalf("%s failed its apply and is in service", accounts[0])
	}

	c.setFail(region, accounts[0], false)
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v3", []string{region}, accounts, prefs, body)}, "v3")
	op := reconcileOp(t, h, "web")
	if op.Status != state.OperationSucceeded {
		t.Fatalf("v3 %s (%s), want SUCCEEDED", op.Status, op.Reason)
	}
	if diff := cmp.Diff([]int{1, 1, 1, 1}, op.Rollout.BatchSizes()); diff != "" {
		t.Errorf("v3's batch plan (-want +got):\n%s", diff)
	}
	if got := startOrder(c, "web", "v3"); len(got) == 0 || got[0] != accounts[0] {
		t.Errorf("v3 started %v, want the instance out of service first", got)
	}
	if most, _ := outOfService(c, "web", "v3"); most > 1 {
		t.Errorf("v3 had %d instances out of service at once; min_in_service 3 of 4 allows 1", most)
	}
}

// A failure tolerated inside a batch takes an instance out of service for
// good: the later batches are cut again from what serves, so that
// min_in_service still holds (the plan says so with a ROLLOUT_REPLANNED
// event); with no failure the plan recorded at the start is the plan run.
func TestRolloutToleratedFailureShrinksLaterBatches(t *testing.T) {
	c := newCtl()
	region, accounts := fourRegions[0], accountIDs(6)
	prefs := "    max_concurrent_count = 6\n    failure_tolerance_count = 1\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	body := "batch_size = 2\nmin_in_service = 4"
	h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, prefs, body)})
	deployFirst(t, h)

	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, prefs, body)}, "v2")
	op := reconcileOp(t, h, "web")
	if op.Status != state.OperationSucceeded || !slices.Equal(op.Rollout.BatchSizes(), []int{2, 2, 2}) || hasEvent(t, h.store, op, "ROLLOUT_REPLANNED") {
		t.Fatalf("v2 %s (%s) in batches %v, want SUCCEEDED as planned: 2, 2, 2", op.Status, op.Reason, op.Rollout.BatchSizes())
	}

	c.setFail(region, accounts[1], true)
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v3", []string{region}, accounts, prefs, body)}, "v3")
	op = reconcileOp(t, h, "web")
	if op.Status != state.OperationSucceeded || !strings.Contains(op.Reason, "1 instance failed within the failure tolerance") {
		t.Fatalf("v3 %s (%s), want SUCCEEDED with 1 failure tolerated", op.Status, op.Reason)
	}
	if diff := cmp.Diff([]int{2, 1, 1, 1, 1}, op.Rollout.BatchSizes()); diff != "" {
		t.Errorf("v3's batches (-want +got): after batch 1 lost an instance, 5 serve and min_in_service 4 allows one at a time\n%s", diff)
	}
	if !hasEvent(t, h.store, op, "ROLLOUT_REPLANNED") {
		t.Errorf("no ROLLOUT_REPLANNED event says why the plan changed")
	}
	if most, _ := outOfService(c, "web", "v3"); most > 2 {
		t.Errorf("v3 had %d instances out of service at once; min_in_service 4 of 6 allows 2", most)
	}
	if got := reconciler.Counts(&op).String(); got != "5/6, 1 failed" {
		t.Errorf("counts %s, want 5/6, 1 failed", got)
	}
}

// A canary grows only after a fully successful batch: a batch with a
// failure (within the tolerance) keeps the next batch at its size.
func TestRolloutCanaryGrowsOnlyAfterFullySuccessfulBatch(t *testing.T) {
	c := newCtl()
	region, accounts := fourRegions[0], accountIDs(8)
	prefs := "    max_concurrent_count = 8\n    failure_tolerance_count = 1\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	body := "pattern = \"canary\"\nbatch_size = 2"
	h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, prefs, body)})
	if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded || !slices.Equal(op.Rollout.BatchSizes(), []int{2, 4, 2}) {
		t.Fatalf("first deploy %s (%s) in %v, want SUCCEEDED in 2, 4, 2", op.Status, op.Reason, op.Rollout.BatchSizes())
	}
	c.setFail(region, accounts[1], true)
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, prefs, body)}, "v2")
	op := reconcileOp(t, h, "web")
	if op.Status != state.OperationSucceeded {
		t.Fatalf("v2 %s (%s)", op.Status, op.Reason)
	}
	if diff := cmp.Diff([]int{2, 2, 4}, op.Rollout.BatchSizes()); diff != "" {
		t.Errorf("canary batches after a failure in batch 1 (-want +got):\n%s", diff)
	}
	if _, inFlight := outOfService(c, "web", "v2"); inFlight > 4 {
		t.Errorf("%d instances in flight at once, want at most the largest batch (4)", inFlight)
	}
}

// A batch whose instances all failed within the tolerance has no healthy
// instance: it never passes its gate, and no later batch starts.
func TestRolloutBatchWithNoHealthyInstanceFails(t *testing.T) {
	c := newCtl()
	region, accounts := fourRegions[0], accountIDs(3)
	prefs := "    failure_tolerance_count = 1"
	body := "batch_size = 1"
	h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, prefs, body)})
	deployFirst(t, h)
	c.setFail(region, accounts[0], true)
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, prefs, body)}, "v2")
	op := reconcileOp(t, h, "web")
	want := "batch 1 of 3 failed its gate: none of its 1 instance deployed; first failure " + region + "/" + accounts[0] + ": "
	if op.Status != state.OperationFailed || !strings.Contains(op.Reason, want) {
		t.Fatalf("v2 %s (%s), want FAILED saying %q", op.Status, op.Reason, want)
	}
	if got := startOrder(c, "web", "v2"); !slices.Equal(got, accounts[:1]) {
		t.Errorf("v2 started %v, want only batch 1 (%s)", got, accounts[0])
	}
}

// Each instance rolls back to the revision it ran before the operation:
// after an operation that succeeded with a tolerated failure (the stack
// set's last clean revision stays the one before it), the instances it
// updated go back to it — not two revisions back — and the instance it
// failed goes back to its own.
func TestRolloutRollsBackEachInstanceToItsOwnRevision(t *testing.T) {
	c := newCtl()
	hs := newHealthServer(t)
	region, accounts := fourRegions[0], accountIDs(4)
	prefs := "    max_concurrent_count = 4\n    failure_tolerance_count = 1\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	body := "batch_size = 2\non_failure = \"rollback\"\n" + hs.healthBlock("")
	h, rev1 := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, prefs, body)})
	deployFirst(t, h)
	c.setFail(region, accounts[1], true)
	rev2 := commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, prefs, body)}, "v2")
	if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded || !strings.Contains(op.Reason, "within the failure tolerance") {
		t.Fatalf("v2 %s (%s), want SUCCEEDED with a tolerated failure", op.Status, op.Reason)
	}
	c.setFail(region, accounts[1], false)

	hs.badTag(c, region, "v3")
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v3", []string{region}, accounts, prefs, body)}, "v3")
	op := reconcileOp(t, h, "web")
	if op.Status != state.OperationRolledBack {
		t.Fatalf("v3 %s (%s), want ROLLED_BACK", op.Status, op.Reason)
	}
	want := map[string]string{accounts[0]: "v2", accounts[1]: "v1", accounts[2]: "v2", accounts[3]: "v2"}
	wantRev := map[string]string{accounts[0]: rev2, accounts[1]: rev1, accounts[2]: rev2, accounts[3]: rev2}
	ins := instanceStatuses(t, h.store, "web")
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, tag := range want {
		if got := c.world["web/"+region+"/"+a]; got != tag {
			t.Errorf("%s runs %s after the rollback, want %s (its revision before v3)", a, got, tag)
		}
		if in := ins[region+"/"+a]; in.Revision != wantRev[a] || !in.InService() {
			t.Errorf("%s recorded at %s (in service %v: %q), want %s and serving", a, shortRev(in.Revision), in.InService(), in.OutOfService, shortRev(wantRev[a]))
		}
	}
	for _, m := range op.Rollout.Plan[0].Members {
		if m.PreviousRevision != wantRev[m.Account] {
			t.Errorf("plan member %s records previous revision %s, want %s", m.Account, shortRev(m.PreviousRevision), shortRev(wantRev[m.Account]))
		}
	}
}

// A rollback respects the update pattern, as the Heat seed asks: batches
// roll back newest first, each followed by the rollout's pause and a
// health gate; a rolled-back batch that fails its gate ends the rollback
// in ROLLBACK_FAILED, saying which batch and instance, and the batches
// before it are left serving the new revision.
func TestRolloutRollbackIsPacedAndGated(t *testing.T) {
	c := newCtl()
	clock := newFakeClock(true)
	hs := newHealthServer(t)
	regions, accounts := fourRegions[:3], accountIDs(2)
	prefs := "    max_concurrent_count = 2\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	body := "batch_size = 2\npause = \"30s\"\non_failure = \"rollback\"\n" + hs.healthBlock("")
	h, rev1 := newRolloutHarness(t, c, clock, map[string]string{"web.hcl": rolloutHCL("web", "v1", regions, accounts, prefs, body)})
	deployFirst(t, h)
	pausesBefore := clock.Afters(30 * time.Second)

	// v2 is bad in the third region; the first region's first instance
	// has turned bad at v1 since (a rollback cannot bring it back).
	hs.badTag(c, regions[2], "v2")
	hs.badTag(c, regions[0]+"/"+accounts[0], "v1")
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", regions, accounts, prefs, body)}, "v2")
	op := reconcileOp(t, h, "web")
	wantWhere := "the rollback of batch 1 of 3 failed its gate: " + regions[0] + "/" + accounts[0] + ": health check failed after the rollback to " + rev1[:7]
	if op.Status != state.OperationRollbackFailed || !strings.Contains(op.Reason, "batch 3 of 3 failed its health check") || !strings.Contains(op.Reason, wantWhere) {
		t.Fatalf("v2 %s (%s), want ROLLBACK_FAILED saying %q", op.Status, op.Reason, wantWhere)
	}
	// The instance that failed the rollback's gate counts as failed, not
	// as rolled back.
	if got, want := reconciler.Counts(&op), (reconciler.OperationCounts{Total: 6, Failed: 1, RolledBack: 5}); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	// Forward: a pause after each of 3 batches; back: one after each of
	// the 3 rolled-back batches.
	if n := clock.Afters(30*time.Second) - pausesBefore; n != 6 {
		t.Errorf("%d pauses of 30s, want 6 (3 batches, 3 rollback batches)", n)
	}
	var back []string
	for _, e := range c.eventsOf("web") {
		if e.start && e.tag == "v1" && e.op == "update" {
			back = append(back, e.region)
		}
	}
	if want := []string{regions[2], regions[2], regions[1], regions[1], regions[0], regions[0]}; !slices.Equal(back, want) {
		t.Errorf("rolled back in region order %v, want newest batch first %v", back, want)
	}
	ins := instanceStatuses(t, h.store, "web")
	if in := ins[regions[0]+"/"+accounts[0]]; in.Status != state.InstanceOperationFailed || in.InService() || !strings.Contains(in.StatusReason, "health check failed after the rollback") {
		t.Errorf("%s/%s is %s (%s, in service %v), want OPERATION_FAILED out of service", regions[0], accounts[0], in.Status, in.StatusReason, in.InService())
	}
	if in := ins[regions[1]+"/"+accounts[0]]; in.Revision != rev1 || !in.InService() {
		t.Errorf("%s/%s at %s (in service %v), want rolled back to %s and serving", regions[1], accounts[0], shortRev(in.Revision), in.InService(), rev1[:7])
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Earlier batches are probed again at every gate (as Argo Rollouts'
// background analysis): an instance that degrades after its own batch
// passed fails the rollout at the next gate, and is recorded failed.
func TestRolloutReprobesEarlierBatches(t *testing.T) {
	c := newCtl()
	hs := newHealthServer(t)
	region, accounts := fourRegions[0], accountIDs(3)
	body := "batch_size = 1\n" + hs.healthBlock("")
	h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", body)})
	deployFirst(t, h)
	t.Cleanup(c.openAll)
	c.gate("web")
	rev2 := commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, "", body)}, "v2")
	wait := background(t, h)
	c.waitFor(t, "batch 1", func() bool { return slices.Equal(c.blockedIn("web", region), accounts[:1]) })
	c.release(t, "web", region, accounts[0])
	c.waitFor(t, "batch 2", func() bool { return slices.Equal(c.blockedIn("web", region), accounts[1:2]) })
	// Batch 1 passed its gate; its instance degrades now.
	hs.set(region+"/"+accounts[0], http.StatusInternalServerError)
	c.release(t, "web", region, accounts[1])
	op := wait().Operations[0]
	want := "batch 2 of 3 failed its health check: " + region + "/" + accounts[0] + ": health check failed after batch 1 passed its gate"
	if op.Status != state.OperationFailed || !strings.Contains(op.Reason, want) {
		t.Fatalf("v2 %s (%s), want FAILED saying %q", op.Status, op.Reason, want)
	}
	ins := instanceStatuses(t, h.store, "web")
	if in := ins[region+"/"+accounts[0]]; in.Status != state.InstanceOperationFailed || in.Revision != rev2 || in.InService() {
		t.Errorf("%s is %s at %s (in service %v), want OPERATION_FAILED at %s, out of service", accounts[0], in.Status, shortRev(in.Revision), in.InService(), rev2[:7])
	}
	if got := startOrder(c, "web", "v2"); !slices.Equal(got, accounts[:2]) {
		t.Errorf("v2 started %v, want batches 1 and 2 only", got)
	}
}

// A daemon killed in the middle of a batch resumes that batch: the same
// members, the same numbering; the member that finished before the kill
// is not applied again but is gated again.
func TestRolloutResumesTheInterruptedBatch(t *testing.T) {
	c := newCtl()
	hs := newHealthServer(t)
	region, accounts := fourRegions[0], accountIDs(4)
	prefs := "    max_concurrent_count = 2\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	body := "batch_size = 2\n" + hs.healthBlock("")
	h, restart, rev2 := gatedV2(t, c, accounts, prefs, body)
	d := runDriverWithGrace(t, h, time.Millisecond)
	c.waitFor(t, "batch 1", func() bool { return slices.Equal(c.blockedIn("web", region), accounts[:2]) })
	c.release(t, "web", region, accounts[0])
	eventually(t, accounts[0]+" to complete", func() (bool, string) {
		in := instanceStatuses(t, h.store, "web")[region+"/"+accounts[0]]
		return in.Revision == rev2, string(in.Status)
	})
	before, err := operationAt(h.store, "web", rev2)
	if err != nil {
		t.Fatal(err)
	}
	d.stop(t) // the daemon stops with accounts[1] in flight
	hs.mu.Lock()
	hitsBefore := hs.hits[region+"/"+accounts[0]]
	hs.mu.Unlock()

	c.open("web")
	h.rec = restart()
	d = runDriver(t, h)
	t.Cleanup(func() { d.stop(t) })
	eventually(t, "the resumed operation to succeed", opStatusIs(h.store, "web", rev2, state.OperationSucceeded))
	op, err := operationAt(h.store, "web", rev2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before.Rollout.Plan, op.Rollout.Plan); diff != "" {
		t.Errorf("the batch plan changed across the restart (-before +after):\n%s", diff)
	}
	if got := batchesOf(op); got[region+"/"+accounts[0]] != 1 || got[region+"/"+accounts[1]] != 1 || got[region+"/"+accounts[2]] != 2 {
		t.Errorf("batches %v, want accounts 0 and 1 in batch 1, 2 and 3 in batch 2", got)
	}
	got := startOrder(c, "web", "v2")
	if len(got) != 5 || !sameSet(got[:2], accounts[:2]) || got[2] != accounts[1] || !sameSet(got[3:], accounts[2:]) {
		t.Errorf("v2 calls %v: want batch 1 (%s once: it finished before the kill), %s again (it was in flight), then batch 2", got, accounts[0], accounts[1])
	}
	hs.mu.Lock()
	hitsAfter := hs.hits[region+"/"+accounts[0]]
	hs.mu.Unlock()
	if hitsAfter <= hitsBefore {
		t.Errorf("%s was not health-checked after the restart: the resumed batch must gate every member", accounts[0])
	}
	if got := reconciler.Counts(&op).String(); got != "4/4" {
		t.Errorf("counts %s, want 4/4", got)
	}
}

// A newer commit arriving while a rollout holds for promotion waits by
// default; with supersede = true it aborts the held rollout (which rolls
// back per on_failure) and runs at once.
func TestRolloutSupersede(t *testing.T) {
	for _, supersede := range []bool{false, true} {
		t.Run(fmt.Sprintf("supersede=%v", supersede), func(t *testing.T) {
			c := newCtl()
			region, accounts := fourRegions[0], accountIDs(4)
			body := func() string {
				return fmt.Sprintf("batch_size = 2\npause = \"until_promoted\"\non_failure = \"rollback\"\nsupersede = %v", supersede)
			}
			h, first := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", body())})
			d := runDriver(t, h)
			t.Cleanup(func() { _ = h.rec.Abort("web"); d.stop(t) })
			promoteUntil := func(rev string) {
				eventually(t, "the rollout at "+rev[:7]+" to succeed", func() (bool, string) {
					op, err := operationAt(h.store, "web", rev)
					if err != nil {
						return false, err.Error()
					}
					_ = h.rec.Promote("web")
					return op.Status == state.OperationSucceeded, string(op.Status)
				})
			}
			holding := func(rev string) {
				eventually(t, "the rollout at "+rev[:7]+" to hold after batch 1", func() (bool, string) {
					op, err := operationAt(h.store, "web", rev)
					if err != nil {
						return false, err.Error()
					}
					return op.Rollout != nil && op.Rollout.Phase == state.RolloutWaitingForPromotion && op.Rollout.Batch == 1, string(op.Status)
				})
			}
			promoteUntil(first)

			rev2 := commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, "", body())}, "v2")
			d.submit()
			holding(rev2)
			rev3 := commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v3", []string{region}, accounts, "", body())}, "v3")
			d.submit()
			if !supersede {
				eventually(t, "v3 to queue", opStatusIs(h.store, "web", rev3, state.OperationQueued))
				// The newer commit waits for the promotions of the held one.
				holding(rev2)
				promoteUntil(rev2)
				promoteUntil(rev3)
				return
			}
			eventually(t, "v2 to be rolled back", opStatusIs(h.store, "web", rev2, state.OperationRolledBack))
			op, err := operationAt(h.store, "web", rev2)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(op.Reason, "superseded by revision "+rev3[:7]) {
				t.Errorf("v2's reason %q, want it to say it was superseded by %s", op.Reason, rev3[:7])
			}
			promoteUntil(rev3)
			c.mu.Lock()
			defer c.mu.Unlock()
			for k, tag := range c.world {
				if tag != "v3" {
					t.Errorf("%s runs %s, want v3", k, tag)
				}
			}
		})
	}
}

// The deletions that follow a rollout's batches follow the operation
// preferences as every operation kind does: region_order, not the order of
// the works.
func TestRolloutDeletesFollowRegionOrder(t *testing.T) {
	c := newCtl()
	regions := []string{"ap-south-1", "eu-west-1", "us-east-1"}
	order := []string{"us-east-1", "ap-south-1", "eu-west-1"}
	prefs := `    region_order         = ["us-east-1", "ap-south-1", "eu-west-1"]
    max_concurrent_count = 1`
	h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", regions, accountIDs(2), prefs, "batch_size = 2")})
	deployFirst(t, h)
	before := len(c.eventsOf("web"))
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v1", regions, accountIDs(1), prefs, "batch_size = 2")}, "remove an account")
	if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded {
		t.Fatalf("delete %s (%s)", op.Status, op.Reason)
	}
	var deleted []string
	for _, e := range c.eventsOf("web")[before:] {
		if e.start && e.op == "delete" {
			deleted = append(deleted, e.region)
		}
	}
	if !slices.Equal(deleted, order) {
		t.Errorf("deleted in regions %v, want region_order %v", deleted, order)
	}
}

// A rollout a restart interrupted resumes at its own revision before a
// newer commit, which queues behind it as it would have while the daemon
// ran: a hold for promotion is held again, not superseded by the restart.
func TestRolloutInterruptedHoldResumesBeforeANewerCommit(t *testing.T) {
	c := newCtl()
	region, accounts := fourRegions[0], accountIDs(4)
	body := "batch_size = 2\npause = \"until_promoted\""
	h, rev1, restart := newRestartableHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", body)})
	d := runDriver(t, h)
	promoteUntil := func(rev string) {
		t.Helper()
		eventually(t, "the rollout at "+rev[:7]+" to succeed", func() (bool, string) {
			op, err := operationAt(h.store, "web", rev)
			if err != nil {
				return false, err.Error()
			}
			_ = h.rec.Promote("web")
			return op.Status == state.OperationSucceeded, string(op.Status)
		})
	}
	holding := func(rev string) func() (bool, string) {
		return func() (bool, string) {
			op, err := operationAt(h.store, "web", rev)
			if err != nil {
				return false, err.Error()
			}
			return op.Status == state.OperationRunning && op.Rollout != nil && op.Rollout.Phase == state.RolloutWaitingForPromotion && op.Rollout.Batch == 1, string(op.Status)
		}
	}
	promoteUntil(rev1)
	rev2 := commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, "", body)}, "v2")
	d.submit()
	eventually(t, "v2 to hold after batch 1", holding(rev2))
	d.stop(t)

	rev3 := commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v3", []string{region}, accounts, "", body)}, "v3")
	h.rec = restart()
	d = runDriver(t, h)
	t.Cleanup(func() { _ = h.rec.Abort("web"); d.stop(t) })
	eventually(t, "v2 to hold again and v3 to queue behind it", func() (bool, string) {
		ok, now := holding(rev2)()
		q, err := operationAt(h.store, "web", rev3)
		return ok && err == nil && q.Status == state.OperationQueued, fmt.Sprintf("v2 %s; v3 %s %v", now, q.Status, err)
	})
	promoteUntil(rev2)
	promoteUntil(rev3)
	if tags := updateTags(c, "web"); len(tags) != 8 {
		t.Errorf("updates %v, want v2 then v3 to every instance once (8)", tags)
	}
}

// A rollout interrupted after a member of its batch failed (within the
// tolerance) resumes with that member still failed — not left
// WAIT_IN_PROGRESS by the restart — and the state checks clean.
func TestRolloutResumeKeepsFailuresBeforeTheRestart(t *testing.T) {
	c := newCtl()
	clock := newFakeClock(false)
	region, accounts := fourRegions[0], accountIDs(4)
	prefs := "    max_concurrent_count = 2\n    failure_tolerance_count = 1\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	body := "batch_size = 2\npause = \"1m\""
	h, _, restart := newRestartableHarness(t, c, clock, map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, prefs, body)})
	wait := background(t, h)
	for range 2 {
		clock.WaitForWaiter(t, time.Minute, waitLimit)
		clock.Advance(time.Minute)
	}
	if op := wait().Operations[0]; op.Status != state.OperationSucceeded {
		t.Fatalf("first deploy %s (%s)", op.Status, op.Reason)
	}

	c.setFail(region, accounts[0], true)
	rev2 := commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, prefs, body)}, "v2")
	d := runDriverWithGrace(t, h, time.Millisecond)
	clock.WaitForWaiter(t, time.Minute, waitLimit) // batch 1 ran; its pause began
	d.stop(t)

	h.rec = restart()
	d = runDriver(t, h)
	t.Cleanup(func() { d.stop(t) })
	eventually(t, "the resumed operation to end", func() (bool, string) {
		clock.Advance(time.Minute)
		op, err := operationAt(h.store, "web", rev2)
		if err != nil {
			return false, err.Error()
		}
		return op.Status != state.OperationRunning, string(op.Status)
	})
	op, err := operationAt(h.store, "web", rev2)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != state.OperationSucceeded || !strings.Contains(op.Reason, "1 instance failed within the failure tolerance") {
		t.Errorf("v2 %s (%s), want SUCCEEDED with the failure before the restart tolerated", op.Status, op.Reason)
	}
	if in := instanceStatuses(t, h.store, "web")[region+"/"+accounts[0]]; in.Status != state.InstanceOperationFailed {
		t.Errorf("%s is %s after the resumed rollout, want OPERATION_FAILED (its outcome before the restart)", accounts[0], in.Status)
	}
	if problems := h.store.Check(); len(problems) > 0 {
		t.Errorf("state check: %v", problems)
	}
}

// Rolling back an instance whose update failed part way applies its
// previous revision again, although its record already shows it: the
// failed update may have changed the world (engine.Instance.Reapply).
func TestRolloutRollbackReappliesAFailedUpdate(t *testing.T) {
	c := newCtl()
	region, accounts := fourRegions[0], accountIDs(2)
	prefs := "    max_concurrent_count = 2\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	body := "batch_size = 2\non_failure = \"rollback\""
	h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, prefs, body)})
	deployFirst(t, h)
	c.mu.Lock()
	c.failTag[region+"/"+accounts[1]] = "v2"
	c.mu.Unlock()
	commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, prefs, body)}, "v2")
	op := reconcileOp(t, h, "web")
	if op.Status != state.OperationRolledBack {
		t.Fatalf("v2 %s (%s), want ROLLED_BACK", op.Status, op.Reason)
	}
	var back []string
	for _, e := range c.eventsOf("web") {
		if e.start && e.op == "update" && e.tag == "v1" {
			back = append(back, e.account)
		}
	}
	if !sameSet(back, accounts) {
		t.Errorf("v1 re-applied to %v, want both instances: the one whose update failed too", back)
	}
	if got := reconciler.Counts(&op).RolledBack; got != 2 {
		t.Errorf("%d rolled back, want 2", got)
	}
}

// An abort accepted mid-batch survives a restart that comes before the
// instances in flight settle: the resumed rollout starts nothing more and
// rolls back every instance the operation changed, the one that was in
// flight at the restart included.
func TestRolloutAbortSurvivesRestart(t *testing.T) {
	c := newCtl()
	region, accounts := fourRegions[0], accountIDs(4)
	body := "batch_size = 2\non_failure = \"rollback\""
	const abortPrefs = "    max_concurrent_count = 2\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	h, restart, rev2 := gatedV2(t, c, accounts, abortPrefs, body)
	d := runDriverWithGrace(t, h, time.Millisecond)
	c.waitFor(t, "batch 1", func() bool { return slices.Equal(c.blockedIn("web", region), accounts[:2]) })
	c.release(t, "web", region, accounts[0])
	eventually(t, accounts[0]+" to complete", func() (bool, string) {
		in := instanceStatuses(t, h.store, "web")[region+"/"+accounts[0]]
		return in.Revision == rev2, string(in.Status)
	})
	if err := h.rec.Abort("web"); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	d.stop(t) // before accounts[1], in flight, settles

	c.open("web")
	h.rec = restart()
	d = runDriver(t, h)
	t.Cleanup(func() { d.stop(t) })
	eventually(t, "the resumed operation to roll back", opStatusIs(h.store, "web", rev2, state.OperationRolledBack))
	op, err := operationAt(h.store, "web", rev2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(op.Reason, "aborted by stackd abort during batch 1 of 2") || !strings.Contains(op.Reason, "rolled back 2 instances") {
		t.Errorf("reason %q, want the abort during batch 1 and both of its instances rolled back", op.Reason)
	}
	ins := instanceStatuses(t, h.store, "web")
	for _, a := range accounts {
		if in := ins[region+"/"+a]; in.Revision == rev2 {
			t.Errorf("%s is at the aborted revision (%s)", a, in.Status)
		}
	}
	for _, a := range startOrder(c, "web", "v2") {
		if a == accounts[2] || a == accounts[3] {
			t.Errorf("%s started after the abort", a)
		}
	}
}

// A rollback keeps min_in_service too: when an instance of an earlier batch
// fails a later gate, the instances out of service are rolled back first,
// and no instance still serving is taken out while the failed one is out.
func TestRollbackRestoresOutOfServiceFirst(t *testing.T) {
	c := newCtl()
	hs := newHealthServer(t)
	region, accounts := fourRegions[0], accountIDs(6)
	prefs := "    max_concurrent_count = 2\n    failure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\""
	body := "batch_size = 2\nmin_in_service = 4\non_failure = \"rollback\"\n" + hs.healthBlock("")
	h, _, rev2 := gatedV2(t, c, accounts, prefs, body)
	d := runDriver(t, h)
	t.Cleanup(func() { d.stop(t) })
	c.waitFor(t, "batch 1", func() bool { return slices.Equal(c.blockedIn("web", region), accounts[:2]) })
	c.release(t, "web", region, accounts[0])
	c.release(t, "web", region, accounts[1])
	c.waitFor(t, "batch 2", func() bool { return slices.Equal(c.blockedIn("web", region), accounts[2:4]) })
	// Batch 1 passed its gate; now its first instance turns bad at v2, and
	// batch 2's gate, which probes every earlier batch too, fails.
	hs.badTag(c, region+"/"+accounts[0], "v2")
	c.release(t, "web", region, accounts[2])
	c.release(t, "web", region, accounts[3])
	c.open("web")
	eventually(t, "the rollback", opStatusIs(h.store, "web", rev2, state.OperationRolledBack))
	// The instances out of service (the bad one, and batch 2's, never
	// served at v2) are rolled back before accounts[1], which serves.
	order := startOrder(c, "web", "v1")[len(accounts):]
	if len(order) != 4 || order[3] != accounts[1] {
		t.Errorf("rollback order %v: want %s (serving) last", order, accounts[1])
	}
	if most, _ := outOfService(c, "web", "v1"); most > 2 {
		t.Errorf("%d instances out of service at once during the rollback, want at most 2 (6 - min_in_service 4)", most)
	}
}

// gatedV2 deploys web v1 to accounts of one region under the rollout body
// and preferences, then commits v2 with c's calls gated: the caller runs
// the driver and releases them.
func gatedV2(t *testing.T, c *ctl, accounts []string, prefs, body string) (*harness, func() *reconciler.Reconciler, string) {
	t.Helper()
	region := fourRegions[0]
	h, _, restart := newRestartableHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, prefs, body)})
	deployFirst(t, h)
	t.Cleanup(c.openAll)
	c.gate("web")
	rev2 := commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", "v2", []string{region}, accounts, prefs, body)}, "v2")
	return h, restart, rev2
}

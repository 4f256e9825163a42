package reconciler_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// An instance that failed its health gate is OPERATION_FAILED with the
// gate's reason: in the state, in the operation's results, in
// status/<stack_set>.json and in the status commit's counts.
func TestRolloutFailedGateMarksInstanceFailed(t *testing.T) {
	c := newCtl()
	hs := newHealthServer(t)
	regions := fourRegions[:2]
	accounts := accountIDs(2)
	hs.set(regions[1], http.StatusServiceUnavailable)
	rollout := "batch_size = 2\n" + hs.healthBlock("")
	h, rev := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", regions, accounts, "", rollout)})
	op := reconcileOp(t, h, "web")
	if op.Status != state.OperationFailed || !strings.Contains(op.Reason, "batch 2 of 2 failed its health check") {
		t.Fatalf("operation %s (%s), want FAILED at batch 2's health check", op.Status, op.Reason)
	}

	failed := func(region string) bool { return region == regions[1] }
	results := map[string]state.InstanceResult{}
	for _, res := range op.Results {
		results[res.Region+"/"+res.Account] = res
	}
	ins := instanceStatuses(t, h.store, "web")
	for _, r := range regions {
		for _, a := range accounts {
			k := r + "/" + a
			in, res := ins[k], results[k]
			if !failed(r) {
				if in.Status != state.InstanceOperationComplete || res.Status != state.InstanceOperationComplete {
					t.Errorf("%s is %s, result %s; want OPERATION_COMPLETE (healthy)", k, in.Status, res.Status)
				}
				continue
			}
			if in.Status != state.InstanceOperationFailed || !strings.Contains(in.StatusReason, "health check failed") || !strings.Contains(in.StatusReason, "answered 503, want 200") {
				t.Errorf("%s is %s (%s), want OPERATION_FAILED saying the health check answered 503", k, in.Status, in.StatusReason)
			}
			if in.Revision != rev {
				t.Errorf("%s recorded at %s, want %s (it runs the revision, unhealthy)", k, in.Revision, rev[:7])
			}
			if res.Status != state.InstanceOperationFailed || res.Reason != in.StatusReason || res.Batch != 2 || res.Action != "create" {
				t.Errorf("%s result %+v, want OPERATION_FAILED in batch 2 (create) with the instance's reason", k, res)
			}
		}
	}

	doc, msg := statusDoc(t, h.repo, "web")
	want := reconciler.OperationCounts{Total: 4, Succeeded: 2, Failed: 2}
	if lo := doc.LastOperation; lo == nil || lo.Counts != want {
		t.Errorf("status/web.json last_operation %+v, want counts %+v", doc.LastOperation, want)
	}
	for _, in := range doc.Instances {
		if failed(in.Region) && (in.Status != state.InstanceOperationFailed || !strings.Contains(in.Reason, "health check failed")) {
			t.Errorf("status/web.json instance %s/%s is %s (%s), want OPERATION_FAILED with the health check's reason", in.Region, in.Account, in.Status, in.Reason)
		}
	}
	if prefix := fmt.Sprintf("stackd: web CreateStackInstances %s FAILED (2/4, 2 failed)\n", rev[:7]); !strings.HasPrefix(msg, prefix) {
		t.Errorf("status commit %q, want it to start %q", msg, prefix)
	}
}

// A rollout killed during a batch resumes; the instance that finished
// after the last record of the operation (only its events and its instance
// record say so) still counts: the operation's counts are succeeded/total
// of all its instances, in the results, the status commit and the status
// document.
func TestRolloutResumedAfterKillCountsEveryInstance(t *testing.T) {
	c := newCtl()
	region := fourRegions[0]
	accounts := accountIDs(4)
	h, rev, restart := newRestartableHarness(t, c, newFakeClock(true), map[string]string{
		"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", "batch_size = 2"),
	})
	c.gate("web")
	t.Cleanup(c.openAll)
	d := runDriver(t, h)
	blocked := func(a string) func() bool {
		return func() bool { b := c.blockedIn("web", region); return len(b) == 1 && b[0] == a }
	}
	c.waitFor(t, "batch 1's first instance", blocked(accounts[0]))
	c.release(t, "web", region, accounts[0])
	c.waitFor(t, "batch 1's second instance", blocked(accounts[1]))
	c.release(t, "web", region, accounts[1])
	c.waitFor(t, "batch 2's first instance", blocked(accounts[2]))
	// What a kill from here on leaves on record: the operation as of batch
	// 2's start.
	var killed state.Operation
	eventually(t, "batch 2 to be recorded as deploying", func() (bool, string) {
		op, err := operationAt(h.store, "web", rev)
		if err != nil {
			return false, err.Error()
		}
		killed = op
		return op.Rollout != nil && op.Rollout.Batch == 2 && op.Rollout.Phase == state.RolloutDeploying, fmt.Sprintf("%+v", op.Rollout)
	})
	if len(killed.Results) != 2 || killed.Instances != 4 {
		t.Fatalf("operation recorded at batch 2 with %d results for %d instances, want 2 for 4", len(killed.Results), killed.Instances)
	}
	c.release(t, "web", region, accounts[2])
	c.waitFor(t, "batch 2's second instance", blocked(accounts[3]))
	d.stop(t)
	// The kill: the record written when batch 2 started, not the one the
	// graceful stop wrote (accounts[2] finished after it).
	if err := h.store.PutOperation(killed); err != nil {
		t.Fatal(err)
	}

	c.open("web")
	h.rec = restart()
	d = runDriver(t, h)
	t.Cleanup(func() { d.stop(t) })
	eventually(t, "the resumed operation to succeed", opStatusIs(h.store, "web", rev, state.OperationSucceeded))
	d.stop(t)
	op, err := operationAt(h.store, "web", rev)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, res := range op.Results {
		if res.Status != state.InstanceOperationComplete {
			t.Errorf("result %+v, want OPERATION_COMPLETE", res)
		}
		got[res.Account] = res.Batch
	}
	if len(op.Results) != 4 || got[accounts[0]] != 1 || got[accounts[1]] != 1 || got[accounts[2]] != 2 || got[accounts[3]] == 0 {
		t.Errorf("results by account and batch %v (%d results), want all 4, %s and %s in batch 1, %s in batch 2", got, len(op.Results), accounts[0], accounts[1], accounts[2])
	}
	want := reconciler.OperationCounts{Total: 4, Succeeded: 4}
	if c := reconciler.Counts(&op); c != want {
		t.Errorf("counts %+v, want %+v", c, want)
	}
	doc, msg := statusDoc(t, h.repo, "web")
	if lo := doc.LastOperation; lo == nil || lo.Counts != want {
		t.Errorf("status/web.json last_operation %+v, want counts %+v", doc.LastOperation, want)
	}
	if wantMsg := fmt.Sprintf("stackd: web CreateStackInstances %s SUCCEEDED (4/4)", rev[:7]); msg != wantMsg {
		t.Errorf("status commit %q, want %q", msg, wantMsg)
	}
}

package reconciler_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// A promote or abort sent to a replica that does not run the rollout is
// recorded for the operation (RecordRolloutRequest) and applied by the
// replica that runs it (ApplyRolloutRequests, on the notification), as
// docs/design.md §13 has it. The other replica is a second Reconciler on
// the same state.
func TestRolloutRequestsFromAnotherReplica(t *testing.T) {
	c := newCtl()
	region, accounts := fourRegions[0], accountIDs(3)
	body := "pause = \"until_promoted\""
	h, rev, restart := newRestartableHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", body)})
	other := restart() // runs nothing: its Promote finds no rollout
	if _, err := other.RecordRolloutRequest("web", "promote"); !errors.Is(err, reconciler.ErrNoRollout) {
		t.Errorf("RecordRolloutRequest with nothing running: %v, want ErrNoRollout", err)
	}
	c.gate("web")
	d := runDriver(t, h)
	t.Cleanup(func() { _ = h.rec.Abort("web"); d.stop(t) })
	c.waitFor(t, "batch 1 in flight", func() bool { return len(c.blockedIn("web", region)) == 1 })
	if _, err := other.RecordRolloutRequest("web", "promote"); !errors.Is(err, reconciler.ErrNotWaiting) {
		t.Errorf("RecordRolloutRequest(promote) while batch 1 deploys: %v, want ErrNotWaiting", err)
	}
	c.open("web")
	at := func(batch int, phase state.RolloutPhase) func() (bool, string) {
		return func() (bool, string) {
			op, err := operationAt(h.store, "web", rev)
			if err != nil {
				return false, err.Error()
			}
			return op.Rollout != nil && op.Rollout.Phase == phase && op.Rollout.Batch == batch, fmt.Sprintf("%s %+v", op.Status, op.Rollout)
		}
	}
	eventually(t, "the rollout to hold after batch 1", at(1, state.RolloutWaitingForPromotion))
	if err := other.Promote("web"); !errors.Is(err, reconciler.ErrNoRollout) {
		t.Fatalf("Promote on the other replica: %v, want ErrNoRollout (it does not run the rollout)", err)
	}
	opID, err := other.RecordRolloutRequest("web", "promote")
	if err != nil {
		t.Fatalf("RecordRolloutRequest(promote): %v", err)
	}
	op, _ := operationAt(h.store, "web", rev)
	if opID != op.ID {
		t.Fatalf("recorded for operation %s, want the running %s", opID, op.ID)
	}
	other.ApplyRolloutRequests(opID) // not its rollout: nothing happens
	h.rec.ApplyRolloutRequests(opID)
	eventually(t, "the promoted rollout to hold after batch 2", at(2, state.RolloutWaitingForPromotion))

	if _, err := other.RecordRolloutRequest("web", "abort"); err != nil {
		t.Fatalf("RecordRolloutRequest(abort): %v", err)
	}
	h.rec.ApplyRolloutRequests("") // wake-ups lost: every rollout looks
	eventually(t, "the aborted rollout to stop", func() (bool, string) {
		op, err := operationAt(h.store, "web", rev)
		return err == nil && op.Status == state.OperationStopped, fmt.Sprintf("%s %s %v", op.Status, op.Reason, err)
	})
	ins := instanceStatuses(t, h.store, "web")
	if s := ins[region+"/"+accounts[2]].Status; s != state.InstanceCancelComplete {
		t.Errorf("batch 3 instance is %s, want CANCEL_COMPLETE", s)
	}
}

// A replica that resumes a held rollout (a takeover, or a restart) finds
// a promotion recorded before it: the hold it resumes is released, as a
// recorded abort aborts.
func TestRolloutResumedHoldHonoursRecordedPromote(t *testing.T) {
	c := newCtl()
	region, accounts := fourRegions[0], accountIDs(3)
	body := "pause = \"until_promoted\""
	h, rev, restart := newRestartableHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", []string{region}, accounts, "", body)})
	d := runDriver(t, h)
	at := func(batch int) func() (bool, string) {
		return func() (bool, string) {
			op, err := operationAt(h.store, "web", rev)
			if err != nil {
				return false, err.Error()
			}
			return op.Status == state.OperationRunning && op.Rollout != nil && op.Rollout.Phase == state.RolloutWaitingForPromotion && op.Rollout.Batch == batch,
				fmt.Sprintf("%s %+v", op.Status, op.Rollout)
		}
	}
	eventually(t, "the rollout to hold after batch 1", at(1))
	d.stop(t) // the owner goes away while it holds
	if _, err := restart().RecordRolloutRequest("web", "promote"); err != nil {
		t.Fatalf("RecordRolloutRequest: %v", err)
	}
	h.rec = restart()
	d = runDriver(t, h)
	t.Cleanup(func() { _ = h.rec.Abort("web"); d.stop(t) })
	eventually(t, "the resumed rollout to pass the promoted hold and hold after batch 2", at(2))
}

package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stackd/stackd/state"
)

// An operation left RUNNING by a crash after its last instance finished has
// nothing left to apply; the next pass must still end it (and write its
// status), never leave it RUNNING.
func TestInterruptedOperationWithNothingLeftIsFinished(t *testing.T) {
	c := newCtl()
	c.openAll()
	env, _ := newHarness(t, c, map[string]string{"s.hcl": stackSetHCL("resume", "v1", []string{"r1"}, []string{accountID(1), accountID(2)}, "")})
	res, err := env.rec.Reconcile(context.Background())
	if err != nil || len(res.Operations) != 1 || res.Operations[0].Status != state.OperationSucceeded {
		t.Fatalf("first pass: %+v %v", res, err)
	}
	// Simulate the crash: the operation is RUNNING again, and the pass that
	// saw its revision forgotten.
	op := res.Operations[0]
	op.Status, op.Ended = state.OperationRunning, time.Time{}
	if err := env.store.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	if _, err := env.rec.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := env.store.Operation(op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != state.OperationSucceeded {
		t.Errorf("interrupted operation ended %s, want SUCCEEDED", got.Status)
	}
	if problems := env.store.Check(); len(problems) > 0 {
		t.Errorf("state check: %v", problems)
	}
}

package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/reconciler"
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

// A daemon stopped (or killed) after an operation's first instance finished
// resumes the operation on restart. The resumed run re-plans only what is
// left, which on its own would look like another kind of operation (the
// stack set record exists now); the operation must keep its kind and report
// every instance, those finished before the stop included.
func TestResumedOperationKeepsKindAndResults(t *testing.T) {
	for _, tc := range []struct {
		name string
		// kill: the stop records nothing after the operation's start, as a
		// SIGKILL would (a graceful stop records the results so far).
		kill bool
	}{
		{name: "graceful stop"},
		{name: "kill", kill: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCtl()
			t.Cleanup(c.openAll)
			h, rev, restart := newRestartableHarness(t, c, nil, map[string]string{
				"s.hcl": stackSetHCL("web", "v1", []string{"r1"}, []string{accountID(1), accountID(2)}, ""),
			})
			c.gate("web")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- h.rec.Run(ctx, make(chan struct{}), waitLimit) }()
			var first string
			c.waitFor(t, "the first instance in flight", func() bool {
				if b := c.blockedIn("web", "r1"); len(b) == 1 {
					first = b[0]
					return true
				}
				return false
			})
			// Stop, then let the instance in flight finish: the second one
			// never starts.
			cancel()
			c.release(t, "web", "r1", first)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
			case <-time.After(waitLimit):
				t.Fatalf("Run did not return within %s of the stop", waitLimit)
			}
			h.rec.Wait()
			op, err := operationAt(h.store, "web", rev)
			if err != nil {
				t.Fatal(err)
			}
			if op.Status != state.OperationRunning || op.Kind != reconciler.KindCreateStackInstances {
				t.Fatalf("operation after the stop: %s %s, want RUNNING CreateStackInstances", op.Kind, op.Status)
			}
			if tc.kill {
				op.Results = nil
				if err := h.store.PutOperation(op); err != nil {
					t.Fatal(err)
				}
			}

			c.openAll()
			h.rec = restart()
			if _, err := h.rec.Reconcile(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, err := h.store.Operation(op.ID)
			if err != nil {
				t.Fatal(err)
			}
			second := accountID(1)
			if first == second {
				second = accountID(2)
			}
			want := []state.InstanceResult{
				{Region: "r1", Account: first, Action: "create", Status: state.InstanceOperationComplete},
				{Region: "r1", Account: second, Action: "create", Status: state.InstanceOperationComplete},
			}
			if got.Status != state.OperationSucceeded || got.Kind != reconciler.KindCreateStackInstances {
				t.Errorf("resumed operation: %s %s (%s), want CreateStackInstances SUCCEEDED", got.Kind, got.Status, got.Reason)
			}
			if diff := cmp.Diff(want, got.Results); diff != "" {
				t.Errorf("resumed operation's results (-want +got):\n%s", diff)
			}
			creates := map[string]int{}
			for _, ev := range c.eventsOf("web") {
				if ev.start && ev.op == "create" {
					creates[ev.account]++
				}
			}
			if diff := cmp.Diff(map[string]int{first: 1, second: 1}, creates); diff != "" {
				t.Errorf("creates per account (-want +got):\n%s", diff)
			}
		})
	}
}

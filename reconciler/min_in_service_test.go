package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/state"
)

// A min_in_service the operation can never meet rejects the commit when it
// is planned (stackd plan and the applying pass alike), at the attribute,
// saying how many instances the operation has; below that it deploys. The
// instances left in service untouched count, and a first deploy is held to
// the same rule.
func TestRolloutMinInServiceAtPlanTime(t *testing.T) {
	accounts := accountIDs(4)
	body := func(min int) string { return fmt.Sprintf("batch_size = 2\nmin_in_service = %d", min) }
	// min_in_service is line 12 of web.hcl: 9 lines of stack set, then
	// "rollout {" and batch_size.
	const at = "web.hcl:12,"
	for _, tc := range []struct {
		name     string
		first    int      // min_in_service of the first deploy (4 instances)
		accounts []string // the second commit's accounts
		second   int      // and its min_in_service
		want     string   // diagnostic of the second commit; "" when it deploys
	}{
		{"below: 3 of 4", 1, accounts, 3, ""},
		{"at: 4 of 4", 1, accounts, 4, `min_in_service is 4, but the operation has 4 instances (4 to create or update, 0 left in service untouched); a rollout must take at least one instance out of service at a time, so min_in_service must be at most 3.`},
		{"above: 7 of 4", 1, accounts, 7, `min_in_service is 7, but the operation has 4 instances`},
		// 4 untouched (same tag, a new rollout block changes no instance)
		// plus 2 new targets: 6 instances.
		{"untouched count: 5 of 4+2", 1, accountIDs(6), 5, ""},
		{"untouched count: 6 of 4+2", 1, accountIDs(6), 6, `the operation has 6 instances (2 to create or update, 4 left in service untouched)`},
		{"first deploy at: 4 of 4", 4, nil, 0, `min_in_service is 4, but the operation has 4 instances (4 to create or update, 0 left in service untouched)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCtl()
			h, _ := newRolloutHarness(t, c, newFakeClock(true), map[string]string{"web.hcl": rolloutHCL("web", "v1", fourRegions[:1], accounts, "", body(tc.first))})
			check := func(diags []engine.Diagnostic, want string) {
				t.Helper()
				if len(diags) != 1 || !strings.HasPrefix(diags[0].String(), at) || diags[0].Summary != "min_in_service cannot be met" ||
					!strings.Contains(diags[0].Detail, `Stack set "web": `) || !strings.Contains(diags[0].Detail, want) {
					t.Fatalf("diagnostics %v, want one at %s containing %q", diags, at, want)
				}
			}
			reject := func(want string) {
				t.Helper()
				plan, err := h.rec.Plan(context.Background(), "")
				if err != nil {
					t.Fatal(err)
				}
				check(plan.Diagnostics, want)
				res, err := h.rec.Reconcile(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !res.Rejected || len(res.Operations) != 0 {
					t.Fatalf("reconcile %+v, want the commit rejected and nothing applied", res)
				}
				check(res.Diagnostics, want)
			}
			if tc.first >= 4 {
				reject(tc.want)
				if ss, err := h.store.ListStackSets(); err != nil || len(ss) != 0 {
					t.Fatalf("stack sets %v (%v) after a rejected first deploy, want none", ss, err)
				}
				return
			}
			if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded {
				t.Fatalf("first deploy %s (%s)", op.Status, op.Reason)
			}
			tag := "v2"
			if len(tc.accounts) != len(accounts) {
				tag = "v1" // the existing instances stay as they are
			}
			commitFiles(t, h.repo, map[string]string{"web.hcl": rolloutHCL("web", tag, fourRegions[:1], tc.accounts, "", body(tc.second))}, "second")
			if tc.want != "" {
				reject(tc.want)
				return
			}
			plan, err := h.rec.Plan(context.Background(), "")
			if err != nil || len(plan.Diagnostics) != 0 {
				t.Fatalf("plan: %v %v, want no diagnostics", plan, err)
			}
			if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded {
				t.Fatalf("second deploy %s (%s)", op.Status, op.Reason)
			}
		})
	}
}

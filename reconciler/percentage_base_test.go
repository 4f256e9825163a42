package reconciler_test

import (
	"strings"
	"testing"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// The base of failure tolerance percentages is every instance of the
// region, suspended accounts' included (README, docs/design.md §5; the seed: "all
// the stack instances of the region"), for every operation: a later
// operation, whose suspended accounts were recorded SKIPPED_SUSPENDED_ACCOUNT
// by the first one, counts them as the first did, in every region.
// With a rollout the batches' failures count against the same base.
func TestPercentageBaseSameForLaterOperations(t *testing.T) {
	for _, tc := range []struct{ name, rollout string }{
		{"sliding window", ""},
		{"rolling", "  rollout {\n    pattern    = \"rolling\"\n    batch_size = 3\n  }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) { testPercentageBase(t, tc.rollout) })
	}
}

func testPercentageBase(t *testing.T, rollout string) {
	const (
		r1 = "eu-west-1"
		r2 = "us-east-1"
		p1 = "100000000001"
		p2 = "100000000002"
		p3 = "100000000003"
		s1 = "100000000004"
		s2 = "100000000005"
	)
	org := `organization {
  management_account = "000000000000"
  organizational_unit "ou-a" {
    accounts = ["` + p1 + `", "` + p2 + `", "` + p3 + `"]
    account "` + s1 + `" { suspended = true }
    account "` + s2 + `" { suspended = true }
  }
}
`
	ss := func(tag string) string {
		return `stack_set "pct" {
  template         = "./templates/ctl"
  permission_model = "SERVICE_MANAGED"
  vars             = { tag = "` + tag + `" }
  deployment_targets {
    regions              = ["` + r1 + `", "` + r2 + `"]
    organizational_units = ["ou-a"]
  }
  operation_preferences {
    region_concurrency_type      = "SEQUENTIAL"
    region_order                 = ["` + r1 + `", "` + r2 + `"]
    failure_tolerance_percentage = 50
  }
` + rollout + `}
`
	}
	c := newCtl()
	// 50% of the region's 5 instances is a tolerance of 2: the two
	// failures in the first region never cancel the second region. On a
	// base of the 3 deployable instances the tolerance would be 1.
	c.fail[r1+"/"+p1] = true
	c.fail[r1+"/"+p2] = true
	h, _ := newHarness(t, c, map[string]string{"org.hcl": org, "pct.hcl": ss("v1")})

	check := func(step, tag string, kind state.OperationKind) {
		t.Helper()
		res := reconcileRev(t, h)
		if len(res.Operations) != 1 {
			t.Fatalf("%s: operations %+v, want one", step, res.Operations)
		}
		op := res.Operations[0]
		if op.Kind != kind {
			t.Errorf("%s: operation kind %s, want %s", step, op.Kind, kind)
		}
		if op.Status != state.OperationSucceeded || !strings.Contains(op.Reason, "2 instances failed within the failure tolerance") {
			t.Errorf("%s: operation %s (%s), want SUCCEEDED with 2 failures within the tolerance of 2 (50%% of 5)", step, op.Status, op.Reason)
		}
		ins := instanceStatuses(t, h.store, "pct")
		want := map[string]state.InstanceStatus{
			r1 + "/" + p1: state.InstanceOperationFailed, r1 + "/" + p2: state.InstanceOperationFailed,
			r1 + "/" + p3: state.InstanceOperationComplete,
			r2 + "/" + p1: state.InstanceOperationComplete, r2 + "/" + p2: state.InstanceOperationComplete,
			r2 + "/" + p3: state.InstanceOperationComplete,
		}
		for _, r := range []string{r1, r2} {
			for _, a := range []string{s1, s2} {
				want[r+"/"+a] = state.InstanceSkippedSuspendedAccount
			}
		}
		for k, w := range want {
			if got := ins[k].Status; got != w {
				t.Errorf("%s: %s is %s (%s), want %s", step, k, got, ins[k].StatusReason, w)
			}
		}
		for _, a := range []string{p1, p2, p3} {
			if got := c.tagOf("pct", r2, a); got != tag {
				t.Errorf("%s: %s/%s has tag %q, want %q (the second region deployed)", step, r2, a, got, tag)
			}
		}
	}
	check("create", "v1", reconciler.KindCreateStackInstances)

	// A variable change: the suspended accounts are already recorded as
	// skipped, and still count.
	commitFiles(t, h.repo, map[string]string{"pct.hcl": ss("v2")}, "v2")
	check("variable change", "v2", reconciler.KindDeployStackSet)
}

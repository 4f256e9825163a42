package reconciler_test

import (
	"strings"
	"testing"
)

// TestPassPlansInParallelReportsFirstFailure: instances are planned in
// parallel, yet a commit that some instances cannot plan is rejected with
// the diagnostics of the first of them in target order, as one at a time
// would, and nothing is applied.
func TestPassPlansInParallelReportsFirstFailure(t *testing.T) {
	accounts := accountIDs(40)
	// Accounts 07, 13 and 31 ask for a negative count: they cannot plan.
	tmpl := `variable "tag" { type = string }

resource "ctl" "unit" {
  count = contains(["100000000007", "100000000013", "100000000031"], target.account) ? -1 : 1
  tag   = var.tag
}
`
	for range 5 {
		c := newCtl()
		h, _ := newHarness(t, c, map[string]string{
			"web.hcl":                stackSetHCL("web", "v1", []string{"eu"}, accounts, ""),
			"templates/ctl/main.hcl": tmpl,
		})
		res := reconcileRev(t, h)
		if !res.Rejected || len(res.Operations) != 0 {
			t.Fatalf("reconcile %+v, want the commit rejected and nothing applied", res)
		}
		var text []string
		for _, d := range res.Diagnostics {
			text = append(text, d.String()+": "+d.Detail)
		}
		all := strings.Join(text, "\n")
		if !strings.Contains(all, "instance eu/100000000007") || strings.Contains(all, "100000000013") || strings.Contains(all, "100000000031") {
			t.Fatalf("diagnostics:\n%s\nwant those of eu/100000000007 only (the first that cannot plan)", all)
		}
		if got := c.eventsOf("web"); len(got) != 0 {
			t.Fatalf("provider calls %v for a rejected commit", got)
		}
	}
}

package reconciler_test

// The RFS seed's stack-set rules (issue 16), each tried on a real
// repository through the real reconciler.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// rfsTemplate has variables with defaults a stack set may add to its vars
// or remove from them.
const rfsTemplate = `variable "tag" {
  type = string
}
variable "size" {
  type    = string
  default = "s"
}
variable "tier" {
  type    = string
  default = "t"
}
variable "secret" {
  type      = string
  default   = "none"
  sensitive = true
}
variable "blob" {
  type    = string
  default = ""
}
variable "blob2" {
  type    = string
  default = ""
}

resource "ctl" "unit" {
  tag = "${var.tag}/${var.size}/${var.tier}"
}
`

// reconcileRev reconciles the repository's head and returns the result.
func reconcileRev(t *testing.T, h *harness) *reconciler.Result {
	t.Helper()
	res, err := h.rec.Reconcile(context.Background())
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// wantRejected checks that the commit was rejected with a diagnostic
// whose summary and text contain the given strings, at file:line.
func wantRejected(t *testing.T, res *reconciler.Result, file string, line int, summary string, texts ...string) {
	t.Helper()
	if !res.Rejected {
		t.Fatalf("the commit was accepted (operations %+v); want a rejection %q", res.Operations, summary)
	}
	var all []string
	for _, d := range res.Diagnostics {
		all = append(all, fmt.Sprintf("%s:%d: %s", d.File, d.Line, d))
		if d.Summary != summary || d.File != file || line > 0 && d.Line != line {
			continue
		}
		ok := true
		for _, x := range texts {
			ok = ok && strings.Contains(d.Detail, x)
		}
		if ok {
			return
		}
	}
	t.Fatalf("diagnostics:\n%s\nwant %q at %s:%d saying %q", strings.Join(all, "\n"), summary, file, line, texts)
}

// wantSucceeded checks the pass ran one operation of name that succeeded.
func wantSucceeded(t *testing.T, res *reconciler.Result, name string) state.Operation {
	t.Helper()
	if res.Rejected {
		t.Fatalf("rejected: %+v", res.Diagnostics)
	}
	for _, op := range res.Operations {
		if op.StackSet == name {
			if op.Status != state.OperationSucceeded {
				t.Fatalf("operation %s %s: %s (%+v)", op.Kind, op.Status, op.Reason, op.Results)
			}
			return op
		}
	}
	t.Fatalf("no operation of %s ran: %+v", name, res)
	return state.Operation{}
}

// lineOf is the 1-based line of the first line of file containing s.
func lineOf(t *testing.T, repo, file, s string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%s has no line containing %q", file, s)
	return 0
}

func (c *ctl) tagOf(stackSet, region, account string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.world[stackSet+"/"+region+"/"+account]
}

// webHCL renders stack set "web" over rfsTemplate with the vars body and
// an instance_override body for account 1.
func webHCL(vars, override string) string {
	return `stack_set "web" {
  template = "./templates/rfs"
  vars = {
` + vars + `
  }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["100000000000", "100000000001"]
  }
  instance_override { # web override
    accounts = ["100000000001"]
` + override + `
  }
}
`
}

// Item 4: DeleteStackInstances follows region_order, max concurrency and
// failure tolerance exactly as creates do.
func TestDeleteStackInstancesFollowsPreferences(t *testing.T) {
	c := newCtl()
	regions := []string{"ap-south-1", "eu-west-1", "us-east-1"}
	order := []string{"us-east-1", "ap-south-1", "eu-west-1"}
	prefs := func(comment string) string {
		return `    # ` + comment + `
    region_order            = ["us-east-1", "ap-south-1", "eu-west-1"]
    failure_tolerance_count = 0
    max_concurrent_count    = 1`
	}
	h, _ := newHarness(t, c, map[string]string{"del.hcl": stackSetHCL("del", "v1", regions, accountIDs(3), prefs("create"))})
	wantSucceeded(t, reconcileRev(t, h), "del")
	checkSequential(t, c.eventsOf("del"), order)

	// Remove two accounts; the second delete in the first region of
	// region_order fails. The tolerance of 0 is exceeded there: the other
	// regions' deletes are cancelled, not run (alphabetical order would
	// have deleted in ap-south-1 first).
	c.mu.Lock()
	c.fail["us-east-1/"+accountID(2)] = true
	c.mu.Unlock()
	before := len(c.eventsOf("del"))
	commitFiles(t, h.repo, map[string]string{"del.hcl": stackSetHCL("del", "v1", regions, accountIDs(1), prefs("delete"))}, "remove two accounts")
	res := reconcileRev(t, h)
	if len(res.Operations) != 1 {
		t.Fatalf("operations %+v", res)
	}
	op := res.Operations[0]
	if op.Kind != reconciler.KindDeleteStackInstances || op.Status != state.OperationFailed {
		t.Fatalf("operation %s %s (%s), want DeleteStackInstances FAILED", op.Kind, op.Status, op.Reason)
	}
	var deleted []string
	for _, e := range c.eventsOf("del")[before:] {
		if e.start {
			deleted = append(deleted, e.region+"/"+e.account)
		}
	}
	if want := []string{"us-east-1/" + accountID(1), "us-east-1/" + accountID(2)}; strings.Join(deleted, " ") != strings.Join(want, " ") {
		t.Errorf("deletes ran %v, want %v (region_order's first region, then stop)", deleted, want)
	}
	ins := instanceStatuses(t, h.store, "del")
	for _, r := range order[1:] {
		for _, a := range accountIDs(3)[1:] {
			if got := ins[r+"/"+a].Status; got != state.InstanceCancelComplete {
				t.Errorf("%s/%s: %s, want CANCEL_COMPLETE", r, a, got)
			}
		}
	}

	// Once the failure is gone the next commit deletes the rest, region
	// by region in region_order, one instance at a time.
	c.mu.Lock()
	delete(c.fail, "us-east-1/"+accountID(2))
	c.mu.Unlock()
	before = len(c.eventsOf("del"))
	commitFiles(t, h.repo, map[string]string{"del.hcl": stackSetHCL("del", "v1", regions, accountIDs(1), prefs("retry"))}, "retry")
	wantSucceeded(t, reconcileRev(t, h), "del")
	deletes := c.eventsOf("del")[before:]
	checkSequential(t, deletes, order)
	if order, _, _ := regionSpans(deletes); len(order) != 3 {
		t.Errorf("the retry deleted in regions %v, want all three", order)
	}
	c.mu.Lock()
	for k, n := range c.maxInFlight {
		if strings.HasPrefix(k, "del/") && n > 1 {
			t.Errorf("%s had %d calls in flight; max_concurrent_count is 1", k, n)
		}
	}
	c.mu.Unlock()
}

// Item 5: failure tolerance percentages have one base, the operation's
// instances of the region with suspended accounts counted (the seed: all
// the stack instances of the region), for the scheduler and the final
// status alike; max_concurrent_percentage must be a positive integer.
func TestFailureTolerancePercentageBase(t *testing.T) {
	c := newCtl()
	org := `organization {
  management_account = "000000000000"
  organizational_unit "ou-a" {
    accounts = ["100000000001", "100000000002", "100000000003"]
    account "100000000004" { suspended = true }
    account "100000000005" { suspended = true }
  }
}
`
	ss := func(prefs string) string {
		return `stack_set "pct" {
  template         = "./templates/ctl"
  permission_model = "SERVICE_MANAGED"
  vars             = { tag = "v1" }
  deployment_targets {
    regions              = ["eu-west-1"]
    organizational_units = ["ou-a"]
  }
  operation_preferences {
` + prefs + `
  }
}
`
	}
	// 40% of 5 instances is a tolerance of 2; of the 3 deployable ones it
	// would be 1, and the third instance would be cancelled.
	c.fail["eu-west-1/100000000001"] = true
	c.fail["eu-west-1/100000000002"] = true
	h, _ := newHarness(t, c, map[string]string{"org.hcl": org, "pct.hcl": ss(`    failure_tolerance_percentage = 40`)})
	res := reconcileRev(t, h)
	if len(res.Operations) != 1 {
		t.Fatalf("operations: %+v", res)
	}
	op := res.Operations[0]
	if op.Status != state.OperationSucceeded || !strings.Contains(op.Reason, "2 instances failed within the failure tolerance") {
		t.Errorf("operation %s (%s), want SUCCEEDED with 2 failures within the tolerance of 2 (40%% of 5)", op.Status, op.Reason)
	}
	ins := instanceStatuses(t, h.store, "pct")
	want := map[string]string{
		"100000000001": state.InstanceOperationFailed, "100000000002": state.InstanceOperationFailed,
		"100000000003": state.InstanceOperationComplete,
		"100000000004": state.InstanceSkippedSuspendedAccount, "100000000005": state.InstanceSkippedSuspendedAccount,
	}
	for a, w := range want {
		if got := ins["eu-west-1/"+a].Status; got != w {
			t.Errorf("%s: %s, want %s", a, got, w)
		}
	}

	// Three failures exceed it: the operation fails, on the same base.
	c.mu.Lock()
	c.fail["eu-west-1/100000000003"] = true
	c.mu.Unlock()
	commitFiles(t, h.repo, map[string]string{"pct.hcl": strings.Replace(ss(`    failure_tolerance_percentage = 40`), `"v1"`, `"v2"`, 1)}, "v2")
	res = reconcileRev(t, h)
	if len(res.Operations) != 1 || res.Operations[0].Status != state.OperationFailed {
		t.Errorf("three failures with a tolerance of 2: %+v, want FAILED", res.Operations)
	}

	commitFiles(t, h.repo, map[string]string{"pct.hcl": ss(`    max_concurrent_percentage = 0`)}, "zero percent")
	res = reconcileRev(t, h)
	wantRejected(t, res, "pct.hcl", lineOf(t, h.repo, "pct.hcl", "max_concurrent_percentage"), "Invalid max_concurrent_percentage", "positive integer")
}


package reconciler_test

// The RFS seed's stack-set rules (issue 16, items 1-6), each tried on a
// real repository through the real reconciler: override rules read for
// GitOps, the vars_body/vars_uri limits, override OUs, deletes following
// operation preferences, one base for failure tolerance percentages, and
// overrides recorded on instances.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// Item 1: a changed instance_override must name exactly the stack set's
// variables; an unchanged one only has to stay a subset when they change.
func TestOverrideRulesChangedVersusUnchanged(t *testing.T) {
	c := newCtl()
	h, _ := newHarness(t, c, map[string]string{
		"templates/rfs/main.hcl": rfsTemplate,
		"web.hcl": webHCL(`    tag  = "v1"
    size = "m"`, `    vars               = { size = "xl" }
    use_stack_set_vars = ["tag"]`),
	})
	wantSucceeded(t, reconcileRev(t, h), "web")
	if got := c.tagOf("web", "eu-west-1", "100000000001"); got != "v1/xl/t" {
		t.Fatalf("overridden instance has %q, want v1/xl/t", got)
	}

	// A variable added to the stack set does not force editing the
	// override: the overridden instance takes the stack set's value.
	commitFiles(t, h.repo, map[string]string{"web.hcl": webHCL(`    tag  = "v1"
    size = "m"
    tier = "gold"`, `    vars               = { size = "xl" }
    use_stack_set_vars = ["tag"]`)}, "add tier to the stack set")
	wantSucceeded(t, reconcileRev(t, h), "web")
	for acct, want := range map[string]string{"100000000000": "v1/m/gold", "100000000001": "v1/xl/gold"} {
		if got := c.tagOf("web", "eu-west-1", acct); got != want {
			t.Errorf("after adding tier, %s has %q, want %q", acct, got, want)
		}
	}

	// Editing the override makes it a new UpdateStackInstances request: it
	// must now name tier too.
	commitFiles(t, h.repo, map[string]string{"web.hcl": webHCL(`    tag  = "v1"
    size = "m"
    tier = "gold"`, `    vars               = { size = "xxl" }
    use_stack_set_vars = ["tag"]`)}, "edit the override without tier")
	res := reconcileRev(t, h)
	wantRejected(t, res, "web.hcl", lineOf(t, h.repo, "web.hcl", "# web override"), "Incomplete override", "missing: tier", `use_stack_set_vars = ["tier"]`, "new or changed")
	if got := c.tagOf("web", "eu-west-1", "100000000001"); got != "v1/xl/gold" {
		t.Errorf("a rejected commit changed the instance: %q", got)
	}

	commitFiles(t, h.repo, map[string]string{"web.hcl": webHCL(`    tag  = "v1"
    size = "m"
    tier = "gold"`, `    vars               = { size = "xxl" }
    use_stack_set_vars = ["tag", "tier"]`)}, "edit the override with every variable")
	wantSucceeded(t, reconcileRev(t, h), "web")
	if got := c.tagOf("web", "eu-west-1", "100000000001"); got != "v1/xxl/gold" {
		t.Fatalf("edited override: %q, want v1/xxl/gold", got)
	}

	// Removing a variable the unchanged override only keeps (tier, in
	// use_stack_set_vars) is allowed.
	commitFiles(t, h.repo, map[string]string{"web.hcl": webHCL(`    tag  = "v1"
    size = "m"`, `    vars               = { size = "xxl" }
    use_stack_set_vars = ["tag", "tier"]`)}, "remove tier from the stack set")
	wantSucceeded(t, reconcileRev(t, h), "web")
	if got := c.tagOf("web", "eu-west-1", "100000000001"); got != "v1/xxl/t" {
		t.Errorf("after removing tier: %q, want v1/xxl/t (the template's default)", got)
	}

	// Removing a variable the override overrides (size) is rejected, at
	// the override's value, saying what would be right.
	commitFiles(t, h.repo, map[string]string{"web.hcl": webHCL(`    tag  = "v1"`, `    vars               = { size = "xxl" }
    use_stack_set_vars = ["tag", "tier"]`)}, "remove size from the stack set")
	res = reconcileRev(t, h)
	wantRejected(t, res, "web.hcl", lineOf(t, h.repo, "web.hcl", `vars               = { size = "xxl" }`), "Override of an unknown variable",
		`overrides variable "size"`, "remove it from this override's vars too")

	// The same block edited in the same commit (size gone, tier dropped) is
	// a new request naming exactly the variables: accepted.
	commitFiles(t, h.repo, map[string]string{"web.hcl": webHCL(`    tag  = "v1"`, `    use_stack_set_vars = ["tag"]`)}, "remove size everywhere")
	wantSucceeded(t, reconcileRev(t, h), "web")
	if got := c.tagOf("web", "eu-west-1", "100000000001"); got != "v1/s/t" {
		t.Errorf("after removing size everywhere: %q, want v1/s/t", got)
	}

	// A new block keeping a variable the stack set does not set is rejected.
	commitFiles(t, h.repo, map[string]string{"web.hcl": webHCL(`    tag  = "v1"`, `    use_stack_set_vars = ["tag", "size"]`)}, "a new request naming size")
	wantRejected(t, reconcileRev(t, h), "web.hcl", 0, "Override of an unknown variable", `keeps variable "size"`)
}

// Item 2: the merged inline variables are limited in characters (a CJK
// character counts once), the merged vars_file content in bytes, each on
// its own.
func TestOverrideLimitsSeparately(t *testing.T) {
	c := newCtl()
	cjk := func(n int) string { return strings.Repeat("漢", n) }
	ss := func(inline, overrideInline, overrideBlob2 string) string {
		return `stack_set "big" {
  template  = "./templates/rfs"
  vars      = { tag = "v1", size = "` + inline + `" }
  vars_file = "./big.tfvars"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["100000000000", "100000000001"]
  }
  instance_override { # big override
    accounts           = ["100000000001"]
    vars               = { size = "` + overrideInline + `", blob2 = "` + overrideBlob2 + `" }
    use_stack_set_vars = ["tag", "blob"]
  }
}
`
	}
	// 40,000 CJK characters inline are 120,000 bytes but within 51,200
	// characters; the vars_file holds 600 KB more, limited on its own.
	blob := strings.Repeat("b", 600<<10)
	h, _ := newHarness(t, c, map[string]string{
		"templates/rfs/main.hcl": rfsTemplate,
		"big.tfvars":             "blob  = \"" + blob + "\"\nblob2 = \"x\"\n",
		"big.hcl":                ss(cjk(40000), cjk(40000), strings.Repeat("c", 300<<10)),
	})
	wantSucceeded(t, reconcileRev(t, h), "big")

	commitFiles(t, h.repo, map[string]string{"big.hcl": ss(cjk(51200), "m", "y")}, "stack set inline over 51,200 characters")
	wantRejected(t, reconcileRev(t, h), "big.hcl", 1, "Variables too long", "characters")
	commitFiles(t, h.repo, map[string]string{"big.hcl": ss("m", cjk(51200), "y")}, "override inline over 51,200 characters")
	wantRejected(t, reconcileRev(t, h), "big.hcl", lineOf(t, h.repo, "big.hcl", "# big override"), "Overridden variables too long", "characters", "51200")

	// The override puts 500 KB into blob2, a vars_file variable: the
	// instance's vars_file content becomes 1.1 MB.
	commitFiles(t, h.repo, map[string]string{"big.hcl": ss("m", "m", strings.Repeat("c", 500<<10))}, "vars_file content over 1 MiB")
	res := reconcileRev(t, h)
	wantRejected(t, res, "big.hcl", lineOf(t, h.repo, "big.hcl", "# big override"), "Overridden vars_file content too large", "1048576")
	for _, d := range res.Diagnostics {
		if d.Summary == "Variables too long" || d.Summary == "Overridden variables too long" {
			t.Errorf("small inline vars reported too long: %s", d)
		}
	}
}

const rfsOrg = `organization {
  management_account = "000000000000"
  organizational_unit "ou-root" {
    accounts = ["100000000009"]
    organizational_unit "ou-prod" {
      accounts = ["100000000001"]
      organizational_unit "ou-prod-eu" {
        accounts = ["100000000002", "100000000003"]
      }
      organizational_unit "ou-prod-empty" {
      }
    }
  }
  organizational_unit "ou-other" {
    accounts = ["100000000008"]
  }
}
`

func orgStackSet(ou string) string {
	return `stack_set "org" {
  template         = "./templates/rfs"
  permission_model = "SERVICE_MANAGED"
  vars             = { tag = "v1", size = "m" }
  deployment_targets {
    regions              = ["eu-west-1"]
    organizational_units = ["ou-prod"]
  }
  instance_override { # org override
    organizational_units = ["` + ou + `"]
    vars                 = { size = "xl" }
    use_stack_set_vars   = ["tag"]
  }
}
`
}

// Item 3: an override selects only OUs the stack set manages.
func TestOverrideOUsMustBeManaged(t *testing.T) {
	c := newCtl()
	h, _ := newHarness(t, c, map[string]string{
		"templates/rfs/main.hcl": rfsTemplate, "org.hcl": rfsOrg, "stack.hcl": orgStackSet("ou-prod-eu"),
	})
	wantSucceeded(t, reconcileRev(t, h), "org")
	for acct, want := range map[string]string{"100000000001": "v1/m/t", "100000000002": "v1/xl/t", "100000000003": "v1/xl/t"} {
		if got := c.tagOf("org", "eu-west-1", acct); got != want {
			t.Errorf("%s: %q, want %q", acct, got, want)
		}
	}
	for _, tc := range []struct{ ou, summary, text string }{
		{"ou-root", "Override of an unmanaged organizational unit", `"ou-root" is a parent of [ou-prod]`},
		{"ou-other", "Override of an unmanaged organizational unit", "does not manage"},
		{"ou-prod-empty", "Override of an unmanaged organizational unit", "holds no target account"},
		{"ou-nope", "Unknown organizational unit", "does not define"},
	} {
		t.Run(tc.ou, func(t *testing.T) {
			commitFiles(t, h.repo, map[string]string{"stack.hcl": orgStackSet(tc.ou)}, "override on "+tc.ou)
			wantRejected(t, reconcileRev(t, h), "stack.hcl", lineOf(t, h.repo, "stack.hcl", "organizational_units = [\""+tc.ou), tc.summary, tc.text)
			if got := c.tagOf("org", "eu-west-1", "100000000002"); got != "v1/xl/t" {
				t.Errorf("a rejected override changed ou-prod-eu's instance: %q", got)
			}
		})
	}
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
	want := map[string]state.InstanceStatus{
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

// Item 6: the override an instance was deployed with is recorded on it and
// shown in status/<stack_set>.json, sensitive values redacted.
func TestOverridesRecordedAndVisible(t *testing.T) {
	c := newCtl()
	h, _ := newHarness(t, c, map[string]string{
		"templates/rfs/main.hcl": rfsTemplate,
		"web.hcl": webHCL(`    tag    = "v1"
    size   = "m"
    secret = "base-secret-value"`, `    vars               = { size = "xl", secret = "override-secret-value" }
    use_stack_set_vars = ["tag"]`),
	})
	wantSucceeded(t, reconcileRev(t, h), "web")
	doc, _ := statusDoc(t, h.repo, "web")
	byAcct := map[string]reconciler.InstanceStatus{}
	for _, in := range doc.Instances {
		byAcct[in.Account] = in
	}
	if ov := byAcct["100000000000"].Overrides; ov != nil {
		t.Errorf("an instance no override matches shows overrides %s", ov)
	}
	var got map[string]any
	if err := json.Unmarshal(byAcct["100000000001"].Overrides, &got); err != nil {
		t.Fatalf("overrides of the overridden instance: %s: %v", byAcct["100000000001"].Overrides, err)
	}
	want := map[string]any{
		"vars":               map[string]any{"size": "xl", "secret": "<sensitive>"},
		"use_stack_set_vars": []any{"tag"},
		"block":              fmt.Sprintf("web.hcl:%d", lineOf(t, h.repo, "web.hcl", "# web override")),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status overrides (-want +got):\n%s", diff)
	}
	raw := runGit(t, h.repo, "show", "stackd/status:"+reconciler.StatusPath("web"))
	if strings.Contains(raw, "secret-value") || strings.Contains(raw, "digest") {
		t.Errorf("status/web.json shows a secret or the digest:\n%s", raw)
	}
	// The state records the block's digest, which the override rules use.
	if in := instanceStatuses(t, h.store, "web")["eu-west-1/100000000001"]; !strings.Contains(string(in.Overrides), `"digest"`) {
		t.Errorf("the instance record %s has no digest", in.Overrides)
	}
}

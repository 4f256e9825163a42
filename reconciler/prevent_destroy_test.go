package reconciler_test

import (
	"strings"
	"testing"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// protectedTemplate protects its resource, and the one of the module it
// calls, with lifecycle.prevent_destroy.
const protectedTemplate = `variable "tag" {
  type = string
}

resource "ctl" "unit" {
  tag = var.tag
  lifecycle {
    prevent_destroy = true
  }
}

module "inner" {
  source = "./inner"
}
`

const protectedModule = `resource "ctl" "inner" {
  tag = "inner"
  lifecycle {
    prevent_destroy = true
  }
}
`

// Removing a target while the template still protects its resources with
// prevent_destroy is refused, as Terraform refuses to destroy them while
// the configuration says so: one diagnostic per protected resource, in the
// root template and in modules, and nothing deleted. Removing
// prevent_destroy in the same commit lets the removal through, and so does
// removing the whole stack set (its configuration goes with it).
func TestRemovedTargetWithPreventDestroy(t *testing.T) {
	c := newCtl()
	regions := []string{"eu-west-1"}
	h, _ := newHarness(t, c, map[string]string{
		"templates/ctl/main.hcl":       protectedTemplate,
		"templates/ctl/inner/main.hcl": protectedModule,
		"guarded.hcl":                  stackSetHCL("guarded", "v1", regions, accountIDs(2), ""),
		"gone.hcl":                     stackSetHCL("gone", "v1", regions, accountIDs(1), ""),
	})
	res := reconcileRev(t, h)
	wantSucceeded(t, res, "guarded")
	wantSucceeded(t, res, "gone")

	before := len(c.eventsOf("guarded"))
	commitFiles(t, h.repo, map[string]string{"guarded.hcl": stackSetHCL("guarded", "v1", regions, accountIDs(1), "")}, "remove a target")
	res = reconcileRev(t, h)
	wantRejected(t, res, "templates/ctl/main.hcl", 5, "Instance cannot be destroyed", "Removing target eu-west-1/"+accountID(1), "ctl.unit", "prevent_destroy")
	wantRejected(t, res, "templates/ctl/inner/main.hcl", 1, "Instance cannot be destroyed", "module.inner.ctl.inner")
	if got := c.eventsOf("guarded")[before:]; len(got) != 0 {
		t.Errorf("the refused removal called the provider: %+v", got)
	}

	// prevent_destroy removed in the same commit: the target goes.
	commitFiles(t, h.repo, map[string]string{
		"templates/ctl/main.hcl":       strings.Replace(protectedTemplate, "prevent_destroy = true", "prevent_destroy = false", 1),
		"templates/ctl/inner/main.hcl": strings.Replace(protectedModule, "prevent_destroy = true", "prevent_destroy = false", 1),
	}, "unprotect")
	res = reconcileRev(t, h)
	deleted := false
	for _, r := range wantSucceeded(t, res, "guarded").Results {
		deleted = deleted || r.Account == accountID(1) && r.Action == state.ActionDelete && r.Status == state.InstanceOperationComplete
	}
	if !deleted {
		t.Errorf("the unprotected commit did not delete the removed target's instance")
	}

	// Protected again, the whole stack set "gone" is removed: its
	// configuration goes with it, so its resources are deleted.
	commitFiles(t, h.repo, map[string]string{
		"templates/ctl/main.hcl":       protectedTemplate,
		"templates/ctl/inner/main.hcl": protectedModule,
		"gone.hcl":                     "# stack set gone was removed\n",
	}, "remove stack set gone")
	res = reconcileRev(t, h)
	if op := wantSucceeded(t, res, "gone"); op.Kind != reconciler.KindDeleteStackSet {
		t.Errorf("operation %s, want DeleteStackSet", op.Kind)
	}
}

package reconciler_test

import (
	"context"
	"testing"

	"github.com/stackd/stackd/state"
)

// A template's check block that fails for some instances is a warning in
// the stack set's change set, naming those instances once, and never
// blocks the operation, as Terraform's check blocks never block an apply.
func TestCheckWarningsInChangeSet(t *testing.T) {
	c := newCtl()
	tmpl := `variable "tag" { type = string }
resource "ctl" "unit" { tag = var.tag }
check "tag_is_versioned" {
  assert {
    condition     = substr(var.tag, 0, 1) == "v"
    error_message = "tag ${var.tag} is not a version."
  }
}
`
	defs := `stack_set "web" {
  template = "./templates/chk"
  vars     = { tag = "v1" }
  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = ["111111111111", "222222222222"]
  }
  instance_override {
    accounts = ["222222222222"]
    vars     = { tag = "latest" }
  }
}
`
	h, _ := newHarness(t, c, map[string]string{"templates/chk/main.hcl": tmpl, "web.hcl": defs})
	res, err := h.rec.Plan(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diagnostics) != 0 {
		t.Fatalf("plan diagnostics: got %v, want none (a check only warns)", res.Diagnostics)
	}
	if len(res.ChangeSets) != 1 {
		t.Fatalf("got %d change sets, want 1", len(res.ChangeSets))
	}
	cs := res.ChangeSets[0]
	if len(cs.Diagnostics) != 1 {
		t.Fatalf("change set diagnostics: got %v, want one grouped warning", cs.Diagnostics)
	}
	d := cs.Diagnostics[0]
	if d.Severity != "warning" || d.Summary != "Check block assertion failed" || d.File != "templates/chk/main.hcl" || d.Line != 5 {
		t.Errorf("warning: got %+v, want a check assertion warning at templates/chk/main.hcl:5", d)
	}
	want := `tag latest is not a version. (stack set "web", instances eu-west-1/222222222222, us-east-1/222222222222)`
	if d.Detail != want {
		t.Errorf("detail: got %q, want %q", d.Detail, want)
	}
	if cs.Summary.InstancesToCreate != 4 {
		t.Errorf("instances to create: got %d, want 4", cs.Summary.InstancesToCreate)
	}
	if op := reconcileOp(t, h, "web"); op.Status != state.OperationSucceeded {
		t.Errorf("operation: got %s, want %s (a check never blocks)", op.Status, state.OperationSucceeded)
	}
	ins := instanceStatuses(t, h.store, "web")
	if len(ins) != 4 {
		t.Errorf("got %d instances, want 4", len(ins))
	}
	for k, in := range ins {
		if in.Status != state.InstanceOperationComplete {
			t.Errorf("instance %s: got %s, want %s", k, in.Status, state.InstanceOperationComplete)
		}
	}
}

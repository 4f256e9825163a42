package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/provider"
)

// An update of terraform_data's input keeps its id, as Terraform plans it:
// what refers to the id does not change; what refers to output does.
func TestTerraformDataUpdateKeepsID(t *testing.T) {
	const tmpl = `
variable "v" { type = string }
resource "terraform_data" "d" {
  input = var.v
}
resource "rec" "by_id" {
  name    = "by_id"
  content = terraform_data.d.id
}
resource "rec" "by_output" {
  name    = "by_output"
  content = terraform_data.d.output
}
`
	e := New(provider.Registry{"rec": newRecorder()})
	j := newJournal()
	step := func(v string) *InstancePlan {
		t.Helper()
		inst, err := builtinInstance(t, e, map[string]string{"defs.hcl": webDefs(`{ v = "` + v + `" }`), "t/main.tf": tmpl})
		if err != nil {
			t.Fatal(err)
		}
		p, diags := e.Plan(inst, j.list())
		if diags.HasErrors() {
			t.Fatalf("plan: %s", diags.Error())
		}
		if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
			t.Fatalf("apply: %v", err)
		}
		return p
	}
	step("a")
	p := step("b")
	want := map[string]string{"terraform_data.d": "Update", "rec.by_id": "NoOp", "rec.by_output": "Update"}
	if diff := cmp.Diff(want, actions(p)); diff != "" {
		t.Errorf("input a -> b (-want +got):\n%s", diff)
	}
	if got := afterValue(change(p, "rec.by_output"), "content"); got != KnownAfterApplyPlaceholder {
		t.Errorf("rec.by_output content = %v, want %s", got, KnownAfterApplyPlaceholder)
	}
	if p := step("b"); actions(p)["rec.by_output"] != "NoOp" || actions(p)["terraform_data.d"] != "NoOp" {
		t.Errorf("same input again: %v, want all NoOp", actions(p))
	}
}

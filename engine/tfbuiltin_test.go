package engine

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Terraform's built-in provider (engine/provider/tfbuiltin): every
// engine has terraform_data and terraform_remote_state by their names.

const tfDataTmpl = `
terraform {
  required_providers {
    terraform = { source = "terraform.io/builtin/terraform" }
  }
}
variable "v" { type = string }
variable "trigger" { type = string }
resource "terraform_data" "d" {
  input            = { v = var.v }
  triggers_replace = [var.trigger]
}
resource "rec" "use" {
  name    = "use"
  content = terraform_data.d.output.v
}
output "out" { value = terraform_data.d.output }
output "id" { value = terraform_data.d.id }
`

// builtinInstance loads files with e (so that the built-in types and
// data sources resolve) and returns the instance of stack set "web" in
// eu/111.
func builtinInstance(t *testing.T, e *Engine, files map[string]string) (*Instance, error) {
	t.Helper()
	fsys := fstest.MapFS{}
	for n, c := range files {
		fsys[n] = &fstest.MapFile{Data: []byte(c)}
	}
	defs, diags := e.Load(fsys, ".")
	if diags.HasErrors() {
		return nil, diags
	}
	return &Instance{StackSet: defs.StackSet("web"), StackSetID: "ss", Target: config.Target{Region: "eu", Account: "111"}}, nil
}

func webDefs(vars string) string {
	return `
stack_set "web" {
  template = "./t"
  vars     = ` + vars + `
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`
}

func change(p *InstancePlan, id string) *changeset.ResourceChange {
	for _, c := range p.Changes() {
		if c.ResourceChange.LogicalResourceId == id {
			rc := c.ResourceChange
			return &rc
		}
	}
	return nil
}

func afterValue(rc *changeset.ResourceChange, name string) any {
	if rc == nil {
		return nil
	}
	for _, pc := range rc.PropertyChanges {
		if pc.Name == name {
			return pc.AfterValue
		}
	}
	return nil
}

func TestTerraformData(t *testing.T) {
	rec := newRecorder()
	e := New(provider.Registry{"rec": rec})
	j := newJournal()
	step := func(t *testing.T, v, trigger string) (*InstancePlan, *ApplyResult) {
		t.Helper()
		inst, err := builtinInstance(t, e, map[string]string{"defs.hcl": webDefs(`{ v = "` + v + `", trigger = "` + trigger + `" }`), "t/main.tf.hcl": tfDataTmpl})
		if err != nil {
			t.Fatal(err)
		}
		p, diags := e.Plan(inst, j.list())
		if diags.HasErrors() {
			t.Fatalf("plan: %s", diags.Error())
		}
		res, err := e.Apply(context.Background(), p, j, nil)
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		return p, res
	}
	outV := func(res *ApplyResult) string { return res.Outputs["out"].GetAttr("v").AsString() }

	// Create: output is known after apply, as in Terraform's plan.
	p, res := step(t, "a", "t1")
	if diff := cmp.Diff(map[string]string{"terraform_data.d": "Create", "rec.use": "Create"}, actions(p)); diff != "" {
		t.Fatalf("create actions (-want +got):\n%s", diff)
	}
	if got := afterValue(change(p, "rec.use"), "content"); got != KnownAfterApplyPlaceholder {
		t.Errorf("create: rec.use content = %v, want %s", got, KnownAfterApplyPlaceholder)
	}
	id := res.Outputs["id"].AsString()
	if _, err := uuid.Parse(id); err != nil || outV(res) != "a" {
		t.Fatalf("after create: id %q output %#v, want a UUID and {v = a}", id, res.Outputs["out"])
	}
	if got := rec.world["phys-use"].GetAttr("content").AsString(); got != "a" {
		t.Errorf("rec.use content after create = %q, want a", got)
	}

	// No change: a no-op.
	p, res = step(t, "a", "t1")
	if diff := cmp.Diff(map[string]string{"terraform_data.d": "NoOp", "rec.use": "NoOp"}, actions(p)); diff != "" {
		t.Errorf("no-op actions (-want +got):\n%s", diff)
	}
	if res.Outputs["id"].AsString() != id || outV(res) != "a" {
		t.Errorf("no-op changed the outputs: %#v", res.Outputs)
	}

	// input changes: an update in place; output is known after apply.
	p, res = step(t, "b", "t1")
	if diff := cmp.Diff(map[string]string{"terraform_data.d": "Update", "rec.use": "Update"}, actions(p)); diff != "" {
		t.Errorf("update actions (-want +got):\n%s", diff)
	}
	if rc := change(p, "terraform_data.d"); rc == nil || rc.Replacement != changeset.ReplacementFalse {
		t.Errorf("update: change %+v, want Replacement False", rc)
	}
	if got := afterValue(change(p, "rec.use"), "content"); got != KnownAfterApplyPlaceholder {
		t.Errorf("update: rec.use content = %v, want %s", got, KnownAfterApplyPlaceholder)
	}
	if res.Outputs["id"].AsString() != id || outV(res) != "b" {
		t.Errorf("after update: id %v output %#v, want id %s and {v = b}", res.Outputs["id"], res.Outputs["out"], id)
	}
	if got := rec.world["phys-use"].GetAttr("content").AsString(); got != "b" {
		t.Errorf("rec.use content after update = %q, want b", got)
	}

	// triggers_replace changes: a replacement (Replacement True), new id.
	p, res = step(t, "b", "t2")
	if got := actions(p)["terraform_data.d"]; got != "Replace" {
		t.Errorf("trigger change: action %s, want Replace", got)
	}
	rc := change(p, "terraform_data.d")
	if rc == nil || rc.Replacement != changeset.ReplacementTrue {
		t.Fatalf("trigger change: change %+v, want Replacement True", rc)
	}
	found := false
	for _, d := range rc.Details {
		if d.Target.Name == "triggers_replace" && d.Target.RequiresRecreation == "Always" {
			found = true
		}
	}
	if !found {
		t.Errorf("trigger change: details %+v, want triggers_replace requiring recreation Always", rc.Details)
	}
	if nid := res.Outputs["id"].AsString(); nid == id || outV(res) != "b" {
		t.Errorf("after replace: id %q (was %q) output %#v, want a new id and {v = b}", nid, id, res.Outputs["out"])
	}
	if p, _ = step(t, "b", "t2"); actions(p)["terraform_data.d"] != "NoOp" {
		t.Errorf("after replace, the same configuration plans %s, want NoOp", actions(p)["terraform_data.d"])
	}
}

// A sensitive input makes output sensitive, in the change set and in
// the record.
func TestTerraformDataSensitive(t *testing.T) {
	e := New(provider.Registry{"rec": newRecorder()})
	inst, err := builtinInstance(t, e, map[string]string{"defs.hcl": webDefs(`{ pw = "s3cret-value" }`), "t/main.hcl": `
variable "pw" {
  type      = string
  sensitive = true
}
resource "terraform_data" "d" { input = var.pw }
resource "rec" "use" {
  name    = "use"
  content = terraform_data.d.output
}
`})
	if err != nil {
		t.Fatal(err)
	}
	j := newJournal()
	planApply(t, e, inst, j)
	for _, r := range j.list() {
		if r.Address == "terraform_data.d" && !contains(r.Sensitive, "output") {
			t.Errorf("terraform_data.d recorded with sensitive %v, want output among them", r.Sensitive)
		}
	}
	p, diags := e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, c := range p.Changes() {
		for _, pc := range c.ResourceChange.PropertyChanges {
			if strings.Contains(pc.AfterValue.(string), "s3cret") {
				t.Errorf("%s.%s shows the secret", c.ResourceChange.LogicalResourceId, pc.Name)
			}
		}
	}
}

const remoteStateJSON = `{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"l",
 "outputs":{"vpc_id":{"value":"vpc-%s","type":"string"},"token":{"value":"tok-123","type":"string","sensitive":true}},"resources":[]}`

func TestTerraformRemoteState(t *testing.T) {
	rec := newRecorder()
	e := New(provider.Registry{"rec": rec})
	tmpl := func(config string) string {
		return `
data "terraform_remote_state" "net" {
  backend  = "local"
  config   = ` + config + `
  defaults = { region = "eu-west-1" }
}
resource "rec" "app" {
  name    = "app"
  content = "${data.terraform_remote_state.net.outputs.vpc_id}/${data.terraform_remote_state.net.outputs.region}"
  secret  = data.terraform_remote_state.net.outputs.token
}
output "vpc" { value = data.terraform_remote_state.net.outputs.vpc_id }
`
	}
	files := func(config, vpc string) map[string]string {
		return map[string]string{
			"defs.hcl": webDefs("{}"), "t/main.hcl": tmpl(config),
			"t/network/terraform.tfstate": strings.Replace(remoteStateJSON, "%s", vpc, 1),
		}
	}
	good := `{ path = "network/terraform.tfstate" }`
	inst, err := builtinInstance(t, e, files(good, "1"))
	if err != nil {
		t.Fatal(err)
	}
	j := newJournal()
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := afterValue(change(p, "rec.app"), "content"); got != "vpc-1/eu-west-1" {
		t.Errorf("content = %v, want vpc-1/eu-west-1 (the state's output and a default)", got)
	}
	if got := afterValue(change(p, "rec.app"), "secret"); got != SensitivePlaceholder {
		t.Errorf("secret = %v, want %s (the state records the output sensitive)", got, SensitivePlaceholder)
	}
	res, err := e.Apply(context.Background(), p, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Outputs["vpc"].AsString(); got != "vpc-1" {
		t.Errorf("output vpc = %q, want vpc-1", got)
	}
	if p, _ = e.Plan(inst, j.list()); actions(p)["rec.app"] != "NoOp" {
		t.Errorf("same state: %s, want NoOp", actions(p)["rec.app"])
	}

	// A commit that changes only the state file changes the template's
	// hash (so its instances are planned again) and the plan.
	inst2, err := builtinInstance(t, e, files(good, "2"))
	if err != nil {
		t.Fatal(err)
	}
	if inst2.StackSet.Template.Hash == inst.StackSet.Template.Hash {
		t.Error("the template's hash does not cover the state file it reads")
	}
	if p, _ = e.Plan(inst2, j.list()); actions(p)["rec.app"] != "Update" || afterValue(change(p, "rec.app"), "content") != "vpc-2/eu-west-1" {
		t.Errorf("new state: %v content %v, want Update to vpc-2/eu-west-1", actions(p)["rec.app"], afterValue(change(p, "rec.app"), "content"))
	}

	// Refused, each with a diagnostic at the attribute that says it.
	for _, tc := range []struct{ name, config, backend, want string }{
		{"absolute path", `{ path = "/var/lib/terraform.tfstate" }`, "local", "is absolute"},
		{"outside the template", `{ path = "../other/terraform.tfstate" }`, "local", "template's directories"},
		{"missing", `{ path = "network/nothere.tfstate" }`, "local", "not in the definitions repository"},
		{"s3", `{ bucket = "b", key = "k" }`, "s3", `backend "s3" would read state from outside the repository`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := files(tc.config, "1")
			fs["t/main.hcl"] = strings.Replace(fs["t/main.hcl"], `backend  = "local"`, `backend  = "`+tc.backend+`"`, 1)
			fs["other/terraform.tfstate"] = fs["t/network/terraform.tfstate"]
			inst, err := builtinInstance(t, e, fs)
			if err != nil {
				t.Fatal(err)
			}
			_, diags := e.Plan(inst, nil)
			if !diags.HasErrors() {
				t.Fatal("planned")
			}
			var found bool
			for _, d := range diags {
				if strings.Contains(d.Detail, tc.want) && d.Subject != nil && d.Subject.Filename == "t/main.hcl" && d.Subject.Start.Line >= 2 && d.Subject.Start.Line <= 4 {
					found = true
				}
			}
			if !found {
				t.Errorf("diagnostics %s: want one at t/main.hcl:2-4 saying %q", diags.Error(), tc.want)
			}
		})
	}
}

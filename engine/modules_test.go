package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

const modDefs = `stack_set "s" {
  template = "./t"
  vars     = { level = "warn" }
  deployment_targets {
    regions  = ["r"]
    accounts = ["a"]
  }
}`

func modFiles(level string) map[string]string {
	return map[string]string{
		"d.hcl": strings.Replace(modDefs, `"warn"`, `"`+level+`"`, 1),
		"t/main.hcl": `
variable "level" { type = string }
module "monitoring" {
  source = "./modules/monitoring"
  region = target.region
  level  = var.level
}
resource "rec" "app" {
  name    = "app"
  content = module.monitoring.alert_id
}
output "alerts" { value = module.monitoring.alert_id }
`,
		"t/modules/monitoring/main.hcl": `
variable "region" { type = string }
variable "level" { type = string }
module "alerts" {
  source = "./modules/alerts"
  level  = var.level
}
resource "rec" "dashboard" {
  name    = "dash-${var.region}"
  content = module.alerts.id
}
output "alert_id" { value = module.alerts.id }
`,
		"t/modules/monitoring/modules/alerts/main.hcl": `
variable "level" { type = string }
resource "rec" "rule" {
  name    = "rule"
  content = "level=${var.level}"
}
output "id" { value = rec.rule.id }
`,
	}
}

func TestModulesTwoLevels(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	inst := &Instance{StackSet: mustLoad(t, modFiles("warn"), reg).StackSet("s"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
	j := newJournal()
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got := map[string]string{}
	for _, c := range p.Changes() {
		rc := c.ResourceChange
		mi := ""
		if rc.ModuleInfo != nil {
			mi = rc.ModuleInfo.LogicalIdHierarchy + " " + rc.ModuleInfo.TypeHierarchy
		}
		got[rc.FullAddress()] = rc.LogicalResourceId + " | " + mi
	}
	want := map[string]string{
		"module.monitoring.module.alerts.rec.rule": "rec.rule | monitoring/alerts MODULE::modules::monitoring/MODULE::modules::alerts",
		"module.monitoring.rec.dashboard":          "rec.dashboard | monitoring MODULE::modules::monitoring",
		"rec.app":                                  "rec.app | ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("changes (-want +got):\n%s", diff)
	}
	res, err := e.Apply(context.Background(), p, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outputs["alerts"].AsString() != "phys-rule" {
		t.Errorf("output through two modules: %#v", res.Outputs["alerts"])
	}
	if got := rec.world["phys-app"].GetAttr("content").AsString(); got != "phys-rule" {
		t.Errorf("app content: %q", got)
	}
	if p, _ := e.Plan(inst, j.list()); p.HasChanges() {
		t.Fatalf("re-plan after apply has changes: %v", actions(p))
	}

	// A variable change inside the nested module: the rule is modified,
	// with its module hierarchy.
	inst.StackSet = mustLoad(t, modFiles("error"), reg).StackSet("s")
	p, _ = e.Plan(inst, j.list())
	// The rule's attributes are known only after its update, so what reads
	// them through the modules is planned as a Dynamic update, caused
	// Automatically by the module (ROS's nested-stack rule)...
	if diff := cmp.Diff(map[string]string{
		"module.monitoring.module.alerts.rec.rule": "Update", "module.monitoring.rec.dashboard": "Update", "rec.app": "Update",
	}, actions(p)); diff != "" {
		t.Fatal(diff)
	}
	for _, c := range p.Changes() {
		rc := c.ResourceChange
		d := rc.Details[0]
		switch rc.FullAddress() {
		case "module.monitoring.module.alerts.rec.rule":
			if rc.ModuleInfo == nil || rc.ModuleInfo.LogicalIdHierarchy != "monitoring/alerts" || d.ChangeSource != changeset.SourceParameterReference || d.Evaluation != "Static" {
				t.Errorf("rule change: %+v", rc)
			}
		case "module.monitoring.rec.dashboard":
			if d.ChangeSource != changeset.SourceAutomatic || *d.CausingEntity != "module.alerts" || d.Evaluation != "Dynamic" {
				t.Errorf("dashboard change: %+v", d)
			}
		case "rec.app":
			if d.ChangeSource != changeset.SourceAutomatic || *d.CausingEntity != "module.monitoring" {
				t.Errorf("app change: %+v", d)
			}
		}
	}
	// ...and applying finds their values unchanged: only the rule is updated.
	rec.calls = nil
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 1 || !strings.HasPrefix(rec.calls[0], "update module.monitoring.module.alerts.rec.rule") {
		t.Errorf("calls: %v", rec.calls)
	}

	// Removing the module removes its resources, dependents first.
	files := modFiles("warn")
	files["t/main.hcl"] = `
variable "level" { type = string }
resource "rec" "app" {
  name    = "app"
  content = "standalone"
}
`
	inst.StackSet = mustLoad(t, files, reg).StackSet("s")
	p, _ = e.Plan(inst, j.list())
	var removed []string
	for _, c := range p.Changes() {
		if c.ResourceChange.Action == "Remove" {
			removed = append(removed, c.ResourceChange.FullAddress())
		}
	}
	if diff := cmp.Diff([]string{"module.monitoring.rec.dashboard", "module.monitoring.module.alerts.rec.rule"}, removed); diff != "" {
		t.Errorf("removals (-want +got):\n%s", diff)
	}
}

func TestModuleDiagnostics(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"cycle": {map[string]string{
			"t/main.hcl":   `module "a" { source = "./m" }`,
			"t/m/main.hcl": `module "b" { source = "../" }`,
		}, "Module cycle"},
		"unknown argument": {map[string]string{
			"t/main.hcl":   "module \"a\" {\n  source = \"./m\"\n  nope = 1\n}",
			"t/m/main.hcl": `variable "x" { default = 1 }`,
		}, "Unsupported module argument"},
		"missing argument": {map[string]string{
			"t/main.hcl":   `module "a" { source = "./m" }`,
			"t/m/main.hcl": `variable "x" { type = string }`,
		}, "Missing module argument"},
		"unknown output": {map[string]string{
			"t/main.hcl":   "module \"a\" { source = \"./m\" }\nresource \"rec\" \"x\" {\n  name = module.a.nope\n}",
			"t/m/main.hcl": `output "id" { value = "x" }`,
		}, "has no output"},
		"escaping source": {map[string]string{
			"t/main.hcl": `module "a" { source = "../../../x" }`,
		}, "leaves the repository"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"d.hcl": strings.Replace(modDefs, `vars     = { level = "warn" }`, "", 1)}
			for k, v := range tc.files {
				files[k] = v
			}
			_, diags := load(t, files, reg)
			if !strings.Contains(diags.Error(), tc.want) {
				t.Errorf("got %q, want %q", diags.Error(), tc.want)
			}
		})
	}
}

func TestScopeMetadataAndDeletionPolicy(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	files := func(policy, owner string) map[string]string {
		return map[string]string{
			"d.hcl": strings.Replace(modDefs, `vars     = { level = "warn" }`, `vars     = { owner = "`+owner+`" }`, 1),
			"t/main.hcl": `
variable "owner" { type = string }
resource "rec" "x" {
  name            = "x"
  deletion_policy = "` + policy + `"
  metadata        = { owner = var.owner }
}`,
		}
	}
	inst := &Instance{StackSet: mustLoad(t, files("Delete", "a"), reg).StackSet("s"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
	j := newJournal()
	planApply(t, e, inst, j)
	inst.StackSet = mustLoad(t, files("Retain", "b"), reg).StackSet("s")
	p, _ := e.Plan(inst, j.list())
	rc := p.Changes()[0].ResourceChange
	if diff := cmp.Diff([]string{"Metadata", "DeletionPolicy"}, rc.Scope); diff != "" {
		t.Errorf("scope: %s", diff)
	}
	b, _ := json.Marshal(rc.Details)
	for _, want := range []string{`"ChangeSource":"ParameterReference","CausingEntity":"var.owner","Evaluation":"Static","Target":{"Attribute":"Metadata","Name":null`,
		`"Target":{"Attribute":"DeletionPolicy","Name":null,"RequiresRecreation":"Never"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("details %s\nwant %s", b, want)
		}
	}
	rec.calls = nil
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 0 {
		t.Errorf("metadata/policy change called the provider: %v", rec.calls)
	}
	if r := j.list()[0]; r.DeletionPolicy != "Retain" || string(r.Metadata) != `{"owner":"b"}` {
		t.Errorf("recorded %+v", r)
	}
	if p, _ := e.Plan(inst, j.list()); p.HasChanges() {
		t.Error("re-plan has changes")
	}
}

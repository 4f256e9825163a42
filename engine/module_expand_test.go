package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// expandFiles is a template calling one module with count, once with
// for_each (a key with a dot and a bracket in it), and a resource that
// depends on the counted call and reads its instances' outputs.
func expandFiles(zones, teams string) map[string]string {
	return map[string]string{
		"d.hcl": strings.Replace(modDefs, `vars     = { level = "warn" }`, "", 1),
		"t/main.hcl": `
locals {
  zones = ` + zones + `
  teams = ` + teams + `
}
module "zone" {
  count  = length(local.zones)
  source = "./m"
  name   = "zone-${local.zones[count.index]}-${count.index}"
}
module "team" {
  for_each = local.teams
  source   = "./m"
  name     = "team-${each.key}-${each.value}"
}
resource "rec" "after" {
  name       = "after"
  content    = join(",", module.zone[*].name)
  depends_on = [module.zone]
}
output "teams" { value = { for k, m in module.team : k => m.name } }
`,
		"t/m/main.hcl": `
variable "name" { type = string }
resource "rec" "r" {
  name = var.name
}
output "name" { value = rec.r.name }
`,
	}
}

// TestModuleCountForEach: module calls with count and for_each plan one
// module instance per element, at Terraform's addresses, with count.index
// and each in their arguments and module.NAME a tuple or an object of the
// instances' outputs; a resource's depends_on on a module call orders it
// after the call's resources; removing instances removes their resources
// at the addresses recorded.
func TestModuleCountForEach(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	inst := &Instance{StackSet: mustLoad(t, expandFiles(`["a", "b"]`, `{ "x.y[1]" = "one", c = "two" }`), reg).StackSet("s"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
	j := newJournal()
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got := map[string]string{}
	for _, rp := range p.Resources {
		mi := ""
		if rp.Module != nil {
			mi = rp.Module.LogicalIdHierarchy
		}
		got[rp.Address] = rp.Action.String() + " " + rp.After.GetAttr("name").AsString() + " | " + mi
	}
	want := map[string]string{
		`module.zone[0].rec.r`:        "Create zone-a-0 | zone[0]",
		`module.zone[1].rec.r`:        "Create zone-b-1 | zone[1]",
		`module.team["c"].rec.r`:      `Create team-c-two | team["c"]`,
		`module.team["x.y[1]"].rec.r`: `Create team-x.y[1]-one | team["x.y[1]"]`,
		`rec.after`:                   "Create after | ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	for _, rp := range p.Resources {
		if rp.Address == "rec.after" {
			if c := rp.After.GetAttr("content").AsString(); c != "zone-a-0,zone-b-1" {
				t.Errorf("rec.after content %q, want the outputs of module.zone[*] in order", c)
			}
		}
	}
	if teams := p.Outputs["teams"]; !teams.IsKnown() || teams.GetAttr("x.y[1]").AsString() != "team-x.y[1]-one" {
		t.Errorf("output teams = %#v, want the for_each instances' outputs by key", teams)
	}
	res, err := e.Apply(context.Background(), p, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 5 {
		t.Errorf("created %d, want 5", res.Created)
	}
	after := j.recs["rec.after"]
	for _, d := range []string{"module.zone[0].rec.r", "module.zone[1].rec.r"} {
		if !slices.Contains(after.DependsOn, d) {
			t.Errorf("rec.after recorded depends on %v, want %s in it (depends_on = [module.zone])", after.DependsOn, d)
		}
	}
	if again, _ := e.Plan(inst, j.list()); again.HasChanges() {
		t.Fatalf("re-plan after apply: %v, want no changes", actions(again))
	}

	// One zone and one team fewer: their resources are removed, named with
	// their module instances.
	inst.StackSet = mustLoad(t, expandFiles(`["a"]`, `{ c = "two" }`), reg).StackSet("s")
	p, diags = e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	removed := map[string]string{}
	for _, c := range p.Changes() {
		rc := c.ResourceChange
		if rc.Action == "Remove" {
			removed[rc.FullAddress()] = rc.LogicalResourceId + " | " + rc.ModuleInfo.LogicalIdHierarchy
		}
	}
	if diff := cmp.Diff(map[string]string{
		`module.zone[1].rec.r`:        "rec.r | zone[1]",
		`module.team["x.y[1]"].rec.r`: `rec.r | team["x.y[1]"]`,
	}, removed); diff != "" {
		t.Errorf("removals (-want +got):\n%s", diff)
	}
	if a := actions(p); a["rec.after"] != "Update" || a["module.zone[0].rec.r"] != "NoOp" {
		t.Errorf("actions %v: want rec.after updated (one zone less), module.zone[0] kept", a)
	}
	planApply(t, e, inst, j)
	if _, ok := j.recs[`module.team["x.y[1]"].rec.r`]; ok || len(j.recs) != 3 {
		t.Errorf("recorded after the removal: %v", slices.Sorted(mapKeys(j.recs)))
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestModuleMetaDiagnostics: what Terraform refuses of module calls'
// count, for_each and depends_on, stackd refuses with a diagnostic.
func TestModuleMetaDiagnostics(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	mod := `variable "x" {
  type    = string
  default = "d"
}
output "o" { value = var.x }`
	cases := map[string]struct {
		main string
		want string
	}{
		"count and for_each":        {"module \"a\" {\n  source   = \"./m\"\n  count    = 1\n  for_each = {}\n}", `Invalid combination of "count" and "for_each"`},
		"key of a single call":      {"module \"a\" { source = \"./m\" }\noutput \"o\" { value = module.a[0].o }", "Unexpected module instance key"},
		"count.index without count": {"module \"a\" {\n  source = \"./m\"\n  x      = count.index\n}", `Reference to "count" in non-counted context`},
		"each without for_each":     {"module \"a\" {\n  source = \"./m\"\n  x      = each.key\n}", `Reference to "each" in a context without for_each`},
		"depends_on an attribute":   {"resource \"rec\" \"r\" { name = \"r\" }\nmodule \"a\" {\n  source     = \"./m\"\n  depends_on = [rec.r.id]\n}", "Invalid depends_on reference"},
		"depends_on undeclared":     {"module \"a\" {\n  source     = \"./m\"\n  depends_on = [module.nope]\n}", "Reference to undeclared resource"},
		"count cycle":               {"module \"a\" {\n  source = \"./m\"\n  count  = length(module.a)\n}", "cannot refer to itself"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{
				"d.hcl":        strings.Replace(modDefs, `vars     = { level = "warn" }`, "", 1),
				"t/main.hcl":   tc.main,
				"t/m/main.hcl": mod,
			}
			_, diags := load(t, files, reg)
			if !strings.Contains(diags.Error(), tc.want) {
				t.Errorf("got %q, want %q", diags.Error(), tc.want)
			}
		})
	}
	// Known only at apply: Terraform's error, at plan.
	files := map[string]string{
		"d.hcl":        strings.Replace(modDefs, `vars     = { level = "warn" }`, "", 1),
		"t/main.hcl":   "resource \"rec\" \"r\" { name = \"r\" }\nmodule \"a\" {\n  source = \"./m\"\n  count  = length(rec.r.id)\n}",
		"t/m/main.hcl": mod,
	}
	inst := &Instance{StackSet: mustLoad(t, files, reg).StackSet("s"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
	if _, diags := New(reg).Plan(inst, nil); !strings.Contains(diags.Error(), "Invalid count argument") {
		t.Errorf("count known only after apply: got %q, want Invalid count argument", diags.Error())
	}
}

// TestMovedModuleInstances: moved blocks name module instances as
// Terraform does: a call that gains count moves to module.NAME[0], a
// resource moves from one call to another, and neither is re-created;
// a move to an instance of a call without count is refused, and a
// removed block forgets every instance of a call.
func TestMovedModuleInstances(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	mod := "variable \"name\" { type = string }\nresource \"rec\" \"r\" { name = var.name }\n"
	files := func(main string) map[string]string {
		return map[string]string{"d.hcl": strings.Replace(modDefs, `vars     = { level = "warn" }`, "", 1), "t/main.hcl": main, "t/m/main.hcl": mod}
	}
	inst := &Instance{StackSet: mustLoad(t, files("module \"a\" {\n  source = \"./m\"\n  name = \"a\"\n}\nmodule \"b\" {\n  source = \"./m\"\n  name = \"b\"\n}\n"), reg).StackSet("s"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
	j := newJournal()
	planApply(t, e, inst, j)
	inst.StackSet = mustLoad(t, files(`
module "a" {
  count  = 1
  source = "./m"
  name   = "a"
}
moved {
  from = module.a
  to   = module.a[0]
}
module "c" {
  source = "./m"
  name   = "b"
}
moved {
  from = module.b.rec.r
  to   = module.c.rec.r
}
`), reg).StackSet("s")
	p, diags := e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if diff := cmp.Diff([]string{"module.a.rec.r -> module.a[0].rec.r", "module.b.rec.r -> module.c.rec.r"}, p.sortedMoves()); diff != "" {
		t.Errorf("moves (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"module.a[0].rec.r": "NoOp", "module.c.rec.r": "NoOp"}, actions(p)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	rec.calls = nil
	planApply(t, e, inst, j)
	if len(rec.calls) != 0 {
		t.Errorf("the moves called the provider: %v", rec.calls)
	}
	if _, ok := j.recs["module.a[0].rec.r"]; !ok || len(j.recs) != 2 {
		t.Errorf("recorded %v, want module.a[0].rec.r and module.c.rec.r", slices.Sorted(mapKeys(j.recs)))
	}
	// Every instance of a removed call is forgotten, none destroyed.
	inst.StackSet = mustLoad(t, files(`
module "c" {
  source = "./m"
  name   = "b"
}
removed {
  from = module.a
  lifecycle { destroy = false }
}
`), reg).StackSet("s")
	p, diags = e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, rp := range p.Resources {
		if rp.Address == "module.a[0].rec.r" && !rp.Change.ResourceChange.Retained() {
			t.Errorf("module.a[0].rec.r: %s %+v, want forgotten (removed, destroy = false)", rp.Action, rp.Change.ResourceChange)
		}
	}
	// A call without count has no instance [0] to move to.
	_, diags = load(t, files(`
module "a" {
  source = "./m"
  name   = "a"
}
moved {
  from = module.a
  to   = module.a[0]
}
`), reg)
	if !strings.Contains(diags.Error(), "Moved object still exists") {
		t.Errorf("move to an instance of a call without count: got %q, want Moved object still exists", diags.Error())
	}
}

// TestForEachOverResources: for_each may range over another resource
// with for_each (or any map whose keys are known at plan), each.value
// being its object with what is known only after apply unknown; a count,
// or for_each keys, known only after apply are refused with Terraform's
// words at the expression.
func TestForEachOverResources(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	defs := strings.Replace(modDefs, `vars     = { level = "warn" }`, "", 1)
	main := `
resource "rec" "a" {
  for_each = toset(["x", "y"])
  name     = "a-${each.key}"
}
resource "rec" "b" {
  for_each = rec.a
  name     = "b-${each.key}"
  content  = each.value.id
}
resource "rec" "n" {
  count = length(rec.a)
  name  = "n-${count.index}"
}
`
	inst := &Instance{StackSet: mustLoad(t, map[string]string{"d.hcl": defs, "t/main.hcl": main}, reg).StackSet("s"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, rp := range p.Resources {
		if strings.HasPrefix(rp.Address, "rec.b[") && rp.After.GetAttr("content").IsKnown() {
			t.Errorf("%s: content %#v, want unknown until rec.a is applied", rp.Address, rp.After.GetAttr("content"))
		}
	}
	if diff := cmp.Diff(map[string]string{
		`rec.a["x"]`: "Create", `rec.a["y"]`: "Create", `rec.b["x"]`: "Create", `rec.b["y"]`: "Create", "rec.n[0]": "Create", "rec.n[1]": "Create",
	}, actions(p)); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
	j := newJournal()
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.world["phys-b-y"].GetAttr("content").AsString(); got != "phys-a-y" {
		t.Errorf(`rec.b["y"] applied with content %q, want rec.a["y"]'s id phys-a-y`, got)
	}
	if again, _ := e.Plan(inst, j.list()); again.HasChanges() {
		t.Errorf("re-plan after apply: %v, want no changes", actions(again))
	}

	for name, tc := range map[string]struct{ meta, summary, detail string }{
		"map keys":  {`for_each = { (rec.a["x"].id) = 1 }`, "Invalid for_each argument", `The "for_each" map includes keys derived from resource attributes that cannot be determined until apply`},
		"set":       {`for_each = toset([rec.a["x"].id])`, "Invalid for_each argument", `The "for_each" set includes values derived from resource attributes that cannot be determined until apply`},
		"count":     {`count = length(rec.a["x"].id)`, "Invalid count argument", `The "count" value depends on resource attributes that cannot be determined until apply`},
		"keys only": {`for_each = { for k, v in rec.a : k => v.id }`, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"d.hcl": defs, "t/main.hcl": `
resource "rec" "a" {
  for_each = toset(["x", "y"])
  name     = "a-${each.key}"
}
resource "rec" "c" {
  ` + tc.meta + `
  name = "c"
}
`}
			inst := &Instance{StackSet: mustLoad(t, files, reg).StackSet("s"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
			_, diags := e.Plan(inst, nil)
			if tc.summary == "" {
				if diags.HasErrors() {
					t.Fatalf("got %v, want no error (the keys are known, the values need not be)", diags)
				}
				return
			}
			if len(diags) != 1 || diags[0].Summary != tc.summary || !strings.HasPrefix(diags[0].Detail, tc.detail) ||
				diags[0].Subject == nil || diags[0].Subject.Start.Line != 7 {
				t.Errorf("got %v, want one %q at t/main.hcl:7 saying %q", diags, tc.summary, tc.detail)
			}
		})
	}
}

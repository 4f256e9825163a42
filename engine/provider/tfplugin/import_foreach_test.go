package tfplugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
)

// forEachImportDefs is a stack set whose template has one p6_thing per
// key, and (with imports) an import block with for_each adopting them.
func forEachImportDefs(dir, imports string) fstest.MapFS {
	return fstest.MapFS{
		"d.hcl": {Data: []byte(`stack_set "s" {
  template = "./t"
  vars = { dir = "` + dir + `" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111"]
  }
}`)},
		"t/main.hcl": {Data: []byte(`
terraform {
  required_providers {
    p6 = { source = "registry.example.com/stackd/p6", version = "~> 1.0" }
  }
}
variable "dir" { type = string }
provider "p6" {
  region = target.region
  dir    = "${var.dir}/${target.account}"
  prefix = "pre"
  token  = "provider-token-secret"
}
resource "p6_thing" "a" {
  for_each = toset(["x", "y"])
  name     = "${each.key}-${target.region}"
  content  = "c-${each.key}"
}
` + imports)},
	}
}

// TestBridgeImportForEach: an import block with for_each adopts one
// existing object per element, each.key and each.value in to and id.
func TestBridgeImportForEach(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	// The objects exist, made by an apply whose record is then forgotten.
	defs, diags := e.Load(forEachImportDefs(world, ""), ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	p, _ := e.PlanContext(ctx, inst, nil)
	if _, err := e.Apply(ctx, p, &memJournal{recs: map[string]engine.ResourceState{}}, nil); err != nil {
		t.Fatal(err)
	}
	defs, diags = e.Load(forEachImportDefs(world, `
import {
  for_each = { x = "eu-west-1", y = "eu-west-1" }
  to       = p6_thing.a[each.key]
  id       = "pre${each.key}-${each.value}"
}
`), ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst.StackSet = defs.StackSet("s")
	p, diags = e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := map[string]string{}
	for _, c := range p.Changes() {
		got[c.ResourceChange.LogicalResourceId] = string(c.ResourceChange.Action) + " " + c.ResourceChange.PhysicalResourceId
	}
	want := map[string]string{`p6_thing.a["x"]`: "Import prex-eu-west-1", `p6_thing.a["y"]`: "Import prey-eu-west-1"}
	if len(got) != 2 || got[`p6_thing.a["x"]`] != want[`p6_thing.a["x"]`] || got[`p6_thing.a["y"]`] != want[`p6_thing.a["y"]`] {
		t.Fatalf("plan of the imports: got %v, want %v", got, want)
	}
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatalf("apply of the imports: %v", err)
	}
	for addr, id := range map[string]string{`p6_thing.a["x"]`: "prex-eu-west-1", `p6_thing.a["y"]`: "prey-eu-west-1"} {
		if rec := j.recs[addr]; rec.PhysicalID != id {
			t.Errorf("%s recorded with physical id %q, want %q", addr, rec.PhysicalID, id)
		}
	}
	again, diags := e.PlanContext(ctx, inst, j.list())
	if diags.HasErrors() || again.HasChanges() {
		t.Errorf("plan after the imports: %v, changes %v; want none", diags, again.Changes())
	}
	// to needs a key from each; each is only for imports with for_each.
	for _, tc := range []struct{ block, want string }{
		{"import {\n  for_each = toset([\"x\"])\n  to = p6_thing.a\n  id = each.key\n}\n", "needs an instance key from each"},
		{"import {\n  to = p6_thing.a[each.key]\n  id = \"x\"\n}\n", "Invalid import address"},
		{"import {\n  for_each = toset([p6_thing.a[\"x\"].id])\n  to = p6_thing.a[each.key]\n  id = each.key\n}\n", "Invalid import for_each"},
	} {
		if _, diags := e.Load(forEachImportDefs(world, tc.block), "."); !strings.Contains(diags.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error saying %q", tc.block, diags, tc.want)
		}
	}
}

// TestBridgeImportThenReplace: an imported object that differs from the
// configuration in a replacement-forcing attribute (name) plans a
// replacement after the import, as Terraform's plan does, and the apply
// replaces it.
func TestBridgeImportThenReplace(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	defs, diags := e.Load(forEachImportDefs(world, ""), ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	p, _ := e.PlanContext(ctx, inst, nil)
	if _, err := e.Apply(ctx, p, &memJournal{recs: map[string]engine.ResourceState{}}, nil); err != nil {
		t.Fatal(err)
	}
	// p6_thing.a["x"] adopts the object made as "y": its name differs.
	defs, diags = e.Load(forEachImportDefs(world, `
import {
  for_each = toset(["x"])
  to       = p6_thing.a[each.key]
  id       = "prey-eu-west-1"
}
`), ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst.StackSet = defs.StackSet("s")
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	p, diags = e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var rcx *string
	for _, rp := range p.Resources {
		if rp.Address == `p6_thing.a["x"]` && rp.Action != engine.Replace {
			t.Errorf(`p6_thing.a["x"]: got %s, want Replace (imported, then replaced)`, rp.Action)
		}
	}
	for _, c := range p.Changes() {
		rc := c.ResourceChange
		if rc.LogicalResourceId != `p6_thing.a["x"]` {
			continue
		}
		s := string(rc.Action) + " " + rc.PhysicalResourceId + " " + rc.Replacement
		rcx = &s
		named := false
		for _, d := range rc.Details {
			named = named || d.Target.Name == "name" && d.Target.RequiresRecreation == "Always"
		}
		if !named {
			t.Errorf("details %+v: want name, RequiresRecreation Always", rc.Details)
		}
	}
	if rcx == nil || *rcx != "Import prey-eu-west-1 True" {
		t.Fatalf(`change of p6_thing.a["x"]: got %v, want "Import prey-eu-west-1 True"`, rcx)
	}
	res, err := e.Apply(ctx, p, j, nil)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	// x replaced what it imported; y, not imported, is created anew.
	if res.Replaced != 1 || res.Created != 1 {
		t.Errorf("apply: %d replaced, %d created; want 1 and 1", res.Replaced, res.Created)
	}
	if rec := j.recs[`p6_thing.a["x"]`]; rec.PhysicalID != "prex-eu-west-1" {
		t.Errorf(`p6_thing.a["x"] recorded with physical id %q, want the new object prex-eu-west-1`, rec.PhysicalID)
	}
	again, diags := e.PlanContext(ctx, inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, rp := range again.Resources {
		if rp.Address == `p6_thing.a["x"]` && rp.Action != engine.NoOp {
			t.Errorf(`plan after apply: p6_thing.a["x"] %s, want NoOp`, rp.Action)
		}
	}
}

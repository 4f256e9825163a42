package tfplugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
)

// The planned object of a create and of an import, as Terraform's plan
// shows it: what the provider planned, computed-only attributes
// included, and for an import the change from the imported object.

// plannedAttr is the attribute name of a planned resource's object (unmarked),
// and whether the planned object has it.
func plannedAttr(rp *engine.ResourcePlan, name string) (cty.Value, bool) {
	if rp.After == cty.NilVal || !rp.After.Type().IsObjectType() || !rp.After.Type().HasAttribute(name) {
		return cty.NilVal, false
	}
	v, _ := rp.After.GetAttr(name).UnmarkDeep()
	return v, true
}

// TestBridgePlannedCreate: a create's planned object holds the
// computed-only attribute the provider plans (p6's region, from its
// provider block), known at plan time, and the id it leaves unknown, as
// in Terraform's plan; the change set lists only the properties.
func TestBridgePlannedCreate(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	defs, diags := e.Load(forEachImportDefs(world, ""), ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	p, diags := e.PlanContext(testCtx(t), inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	n := 0
	for _, rp := range p.Resources {
		n++
		for name, want := range map[string]string{"region": "eu-west-1", "mode": "0644"} {
			v, ok := plannedAttr(rp, name)
			if !ok || !v.IsKnown() || v.IsNull() || v.AsString() != want {
				t.Errorf("%s: planned %s = %#v (present %v), want %q", rp.Address, name, v, ok, want)
			}
		}
		// p6 plans no id for an object that is not "named": known after apply.
		if v, ok := plannedAttr(rp, "id"); !ok || v.IsKnown() {
			t.Errorf("%s: planned id = %#v (present %v), want unknown", rp.Address, v, ok)
		}
		for _, pc := range rp.Change.ResourceChange.PropertyChanges {
			if pc.Name == "region" || pc.Name == "id" {
				t.Errorf("%s: the change set lists %s, an attribute only the provider sets", rp.Address, pc.Name)
			}
		}
	}
	if n != 2 {
		t.Fatalf("planned %d resources, want 2", n)
	}
}

// TestBridgeImportThenUpdate: an imported object that differs from the
// configuration in a property the provider changes in place (content)
// plans the import and that update, as Terraform's plan does: the
// provider plans it with the imported object as the prior state, the
// change names the property with its imported value, the planned object
// has what the import found (id, region); the apply updates the object
// and the next plan is a no-op.
func TestBridgeImportThenUpdate(t *testing.T) {
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
	// The record is forgotten; x is imported with other content, y as it is.
	fsys := forEachImportDefs(world, `
import {
  for_each = toset(["x", "y"])
  to       = p6_thing.a[each.key]
  id       = "pre${each.key}-eu-west-1"
}
`)
	tmpl := string(fsys["t/main.hcl"].Data)
	fsys["t/main.hcl"] = &fstest.MapFile{Data: []byte(strings.Replace(tmpl, `content  = "c-${each.key}"`, `content  = each.key == "x" ? "changed" : "c-${each.key}"`, 1))}
	defs, diags = e.Load(fsys, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst.StackSet = defs.StackSet("s")
	p, diags = e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, rp := range p.Resources {
		rc := rp.Change.ResourceChange
		if rp.Action != engine.Create || rc.Action != "Import" || rc.Replacement == "True" {
			t.Errorf("%s: got %s (%s, replacement %s), want an import, not replaced", rp.Address, rp.Action, rc.Action, rc.Replacement)
		}
		for name, want := range map[string]string{"id": rc.PhysicalResourceId, "region": "eu-west-1", "mode": "0644"} {
			if v, ok := plannedAttr(rp, name); !ok || !v.IsKnown() || v.IsNull() || v.AsString() != want {
				t.Errorf("%s: planned %s = %#v, want %q (the imported object's)", rp.Address, name, v, want)
			}
		}
		var details []string
		for _, d := range rc.Details {
			details = append(details, d.Target.Name+" "+d.Target.RequiresRecreation)
		}
		var before any
		for _, pc := range rc.PropertyChanges {
			if pc.Name == "content" {
				before = pc.BeforeValue
			}
		}
		switch rp.Address {
		case `p6_thing.a["x"]`:
			if strings.Join(details, ",") != "content Never" || before != "c-x" {
				t.Errorf(`p6_thing.a["x"]: details %v, content before %v; want the update of content from "c-x" (import+update)`, details, before)
			}
		case `p6_thing.a["y"]`:
			if len(details) != 0 {
				t.Errorf(`p6_thing.a["y"]: details %v, want none (imported as configured)`, details)
			}
		}
	}
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatalf("apply: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(world, "111", "prex-eu-west-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct{ Content string }
	if err := json.Unmarshal(b, &obj); err != nil || obj.Content != "changed" {
		t.Errorf("the imported object holds content %q (%v), want %q: the import's update was applied", obj.Content, err, "changed")
	}
	again, diags := e.PlanContext(ctx, inst, j.list())
	if diags.HasErrors() || again.HasChanges() {
		t.Errorf("plan after the apply: %v, changes %v; want none", diags, again.Changes())
	}
}

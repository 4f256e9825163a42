package tfplugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
)

// TestBridgeCreateAppliesItsPlan: a create whose configuration was wholly
// known when it was planned is applied with the provider's plan from
// then, not planned again: planned for the change set, again right
// before the apply, in the apply's walk and applied, it costs one
// PlanResourceChange and one ApplyResourceChange. The objects
// are as configured and the next plan is a no-op. A plan kept for a
// configuration that changed since is not the one applied.
func TestBridgeCreateAppliesItsPlan(t *testing.T) {
	e, pool, _ := newBridgeEngine(t, 6)
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
	before := pool.Calls()
	if _, diags := e.PlanContext(ctx, inst, nil); diags.HasErrors() {
		t.Fatal(diags)
	}
	p, diags := e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatal(err)
	}
	got := pool.Calls()
	if plans, applies := got.Plans-before.Plans, got.Applies-before.Applies; plans != 2 || applies != 2 {
		t.Errorf("2 creates planned twice and applied: %d PlanResourceChange and %d ApplyResourceChange calls, want 2 and 2", plans, applies)
	}
	for _, key := range []string{"x", "y"} {
		b, err := os.ReadFile(filepath.Join(world, "111", "pre"+key+"-eu-west-1.json"))
		if err != nil {
			t.Fatal(err)
		}
		var obj struct{ Content string }
		if err := json.Unmarshal(b, &obj); err != nil || obj.Content != "c-"+key {
			t.Errorf("object %s holds content %q (%v), want %q", key, obj.Content, err, "c-"+key)
		}
	}
	again, diags := e.PlanContext(ctx, inst, j.list())
	if diags.HasErrors() || again.HasChanges() {
		t.Errorf("plan after the apply: %v, changes %v; want none", diags, again.Changes())
	}

	// Planned with one configuration, then planned and applied with
	// another (the template changed in between): the first plans are
	// not applied.
	world2 := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world2, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	fsys := forEachImportDefs(world2, "")
	defs, diags = e.Load(fsys, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst2 := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-2", Target: inst.Target}
	if _, diags := e.PlanContext(ctx, inst2, nil); diags.HasErrors() {
		t.Fatal(diags)
	}
	tmpl := string(fsys["t/main.hcl"].Data)
	fsys["t/main.hcl"].Data = []byte(strings.Replace(tmpl, `content  = "c-${each.key}"`, `content  = "d-${each.key}"`, 1))
	defs, diags = e.Load(fsys, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst2.StackSet = defs.StackSet("s")
	p2, diags := e.PlanContext(ctx, inst2, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	before = pool.Calls()
	if _, err := e.Apply(ctx, p2, &memJournal{recs: map[string]engine.ResourceState{}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := pool.Calls(); got.Applies-before.Applies != 2 {
		t.Errorf("the second apply made %d ApplyResourceChange calls, want 2", got.Applies-before.Applies)
	}
	b, err := os.ReadFile(filepath.Join(world2, "111", "prex-eu-west-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct{ Content string }
	if err := json.Unmarshal(b, &obj); err != nil || obj.Content != "d-x" {
		t.Errorf("object x holds content %q (%v), want %q", obj.Content, err, "d-x")
	}
}

// TestBridgeKeptPlanLookupsAreNotUses: finding a create's kept plan makes
// no call of the provider, so it is not one of the uses after which a
// process is retired (MaxUses): planned three times and applied, two
// creates use their process four times (two plans, two applies), not ten,
// and one process serves them all.
func TestBridgeKeptPlanLookupsAreNotUses(t *testing.T) {
	e, pool, _ := newBridgeEngineWith(t, 6, PoolOptions{MaxUses: 5})
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
	var p *engine.InstancePlan
	for range 3 {
		if p, diags = e.PlanContext(ctx, inst, nil); diags.HasErrors() {
			t.Fatal(diags)
		}
	}
	if _, err := e.Apply(ctx, p, &memJournal{recs: map[string]engine.ResourceState{}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := pool.Calls(); got.Plans != 2 || got.Applies != 2 {
		t.Fatalf("%d plans and %d applies, want 2 and 2", got.Plans, got.Applies)
	}
	// One configured process and one validating process.
	if got := pool.Started(); got != 2 {
		t.Errorf("%d processes started, want 2: the configured one served 4 uses of its 5", got)
	}
}

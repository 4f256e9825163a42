package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// lifecycle.create_before_destroy: a replacement is created before the
// object it replaces is deleted, and the old object is recorded as
// deposed in between, so no failure or crash loses or leaks it.

const cbdTmpl = `
variable "name" { type = string }
resource "rec" "app" {
  name    = var.name
  content = "x"
  lifecycle {
    create_before_destroy = %s
  }
}
`

type cbdEnv struct {
	rec *recorder
	e   *Engine
	reg provider.Registry
	j   *memJournal
}

func newCBD() *cbdEnv {
	r := newRecorder()
	reg := provider.Registry{"rec": r}
	return &cbdEnv{rec: r, e: New(reg), reg: reg, j: newJournal()}
}

func (c *cbdEnv) inst(t *testing.T, name string, cbd bool) *Instance {
	t.Helper()
	flag := "false"
	if cbd {
		flag = "true"
	}
	defs := mustLoad(t, map[string]string{"defs.hcl": `
stack_set "web" {
  template = "./t"
  vars     = { name = "` + name + `" }
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`, "t/main.hcl": strings.Replace(cbdTmpl, "%s", flag, 1)}, c.reg)
	return &Instance{StackSet: defs.StackSets[0], StackSetID: "ss", Target: config.Target{Region: "eu", Account: "111"}}
}

func (c *cbdEnv) apply(t *testing.T, inst *Instance) (*InstancePlan, error) {
	t.Helper()
	p, diags := c.e.Plan(inst, c.j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, err := c.e.Apply(context.Background(), p, c.j, nil)
	return p, err
}

func (c *cbdEnv) calls() []string {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	var out []string
	for _, call := range c.rec.calls {
		f := strings.Fields(call)
		out = append(out, f[0]+" "+f[len(f)-1])
	}
	return out
}

func (c *cbdEnv) only(t *testing.T) ResourceState {
	t.Helper()
	l := c.j.list()
	if len(l) != 1 {
		t.Fatalf("recorded %+v", l)
	}
	return l[0]
}

func TestCreateBeforeDestroyOrder(t *testing.T) {
	for _, cbd := range []bool{true, false} {
		c := newCBD()
		if _, err := c.apply(t, c.inst(t, "a", cbd)); err != nil {
			t.Fatal(err)
		}
		p, err := c.apply(t, c.inst(t, "b", cbd))
		if err != nil {
			t.Fatal(err)
		}
		if p.Resources[0].Action != Replace || p.Resources[0].CreateBeforeDestroy != cbd {
			t.Errorf("cbd=%v: plan %s cbd=%v", cbd, p.Resources[0].Action, p.Resources[0].CreateBeforeDestroy)
		}
		got := c.calls()[1:]
		// The recorder logs a create with its request id; what matters is the order.
		kinds := []string{strings.Fields(got[0])[0], strings.Fields(got[1])[0]}
		want := []string{"delete", "create"}
		if cbd {
			want = []string{"create", "delete"}
		}
		if kinds[0] != want[0] || kinds[1] != want[1] {
			t.Errorf("cbd=%v: calls %v, want %v", cbd, got, want)
		}
		if r := c.only(t); r.PhysicalID != "phys-b" || r.Deposed != nil || r.Status != StatusApplied {
			t.Errorf("cbd=%v: recorded %+v", cbd, r)
		}
		if _, ok := c.rec.world["phys-a"]; ok {
			t.Errorf("cbd=%v: the old object is still in the world", cbd)
		}
	}
}

// The replacement fails: the old object was never touched and is the
// recorded resource again.
func TestCreateBeforeDestroyReplacementFails(t *testing.T) {
	c := newCBD()
	if _, err := c.apply(t, c.inst(t, "a", true)); err != nil {
		t.Fatal(err)
	}
	c.rec.failOn = "rec.app"
	if _, err := c.apply(t, c.inst(t, "b", true)); err == nil {
		t.Fatal("apply succeeded")
	}
	if r := c.only(t); r.PhysicalID != "phys-a" || r.Deposed != nil || r.Status != StatusApplied || !strings.Contains(string(r.Inputs), `"a"`) {
		t.Errorf("recorded %+v, want the old object", r)
	}
	if _, ok := c.rec.world["phys-a"]; !ok {
		t.Error("the old object was deleted although its replacement failed")
	}
	for _, call := range c.calls() {
		if strings.HasPrefix(call, "delete") {
			t.Errorf("a delete was called: %v", c.calls())
		}
	}
}

// The old object's delete fails: the new one is the resource, the old one
// stays recorded as deposed, the next plan says so, and the next apply
// deletes it without touching the new one.
func TestCreateBeforeDestroyDeposedCleanup(t *testing.T) {
	c := newCBD()
	if _, err := c.apply(t, c.inst(t, "a", true)); err != nil {
		t.Fatal(err)
	}
	c.rec.failDelete = "phys-a"
	_, err := c.apply(t, c.inst(t, "b", true))
	if err == nil || !strings.Contains(err.Error(), "delete the replaced object phys-a: delete refused") {
		t.Fatalf("apply: %v", err)
	}
	r := c.only(t)
	if r.PhysicalID != "phys-b" || r.Deposed == nil || r.Deposed.PhysicalID != "phys-a" || r.Deposed.RequestID == "" {
		t.Fatalf("recorded %+v (deposed %+v)", r, r.Deposed)
	}
	c.rec.failDelete = ""
	before := len(c.calls())
	p, err := c.apply(t, c.inst(t, "b", true))
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasChanges() || p.Resources[0].Action != NoOp || !p.Resources[0].DeposedCleanup {
		t.Errorf("plan with a deposed object: changes=%v %s cleanup=%v", p.HasChanges(), p.Resources[0].Action, p.Resources[0].DeposedCleanup)
	}
	if got := c.calls()[before:]; len(got) != 1 || got[0] != "delete phys-a" {
		t.Errorf("cleanup calls %v, want only the deposed object's delete", got)
	}
	if r := c.only(t); r.Deposed != nil || r.PhysicalID != "phys-b" {
		t.Errorf("recorded %+v", r)
	}
}

// A crash between the replacement's create and the old object's delete:
// the resumed apply creates nothing twice (same request id) and deletes
// the old object.
func TestCreateBeforeDestroyCrashResumes(t *testing.T) {
	for crashAt := 1; crashAt <= 3; crashAt++ {
		c := newCBD()
		if _, err := c.apply(t, c.inst(t, "a", true)); err != nil {
			t.Fatal(err)
		}
		c.j.saves, c.j.crashAfter = 0, crashAt
		if _, err := c.apply(t, c.inst(t, "b", true)); err == nil {
			t.Fatalf("crash at save %d: apply succeeded", crashAt)
		}
		c.j.crashAfter = -1
		if _, err := c.apply(t, c.inst(t, "b", true)); err != nil {
			t.Fatalf("crash at save %d: resumed apply: %v", crashAt, err)
		}
		if r := c.only(t); r.PhysicalID != "phys-b" || r.Deposed != nil {
			t.Errorf("crash at save %d: recorded %+v", crashAt, r)
		}
		if len(c.rec.world) != 1 {
			t.Errorf("crash at save %d: world %v, want only the new object", crashAt, c.rec.world)
		}
		creates := map[string]bool{}
		for _, call := range c.rec.calls[1:] {
			if f := strings.Fields(call); f[0] == "create" {
				creates[f[2]] = true
			}
		}
		if len(creates) != 1 {
			t.Errorf("crash at save %d: creates with request ids %v, want one", crashAt, creates)
		}
	}
}

// Removing a resource that still has a deposed object deletes both.
func TestRemovedResourceDeletesItsDeposedObject(t *testing.T) {
	c := newCBD()
	if _, err := c.apply(t, c.inst(t, "a", true)); err != nil {
		t.Fatal(err)
	}
	c.rec.failDelete = "phys-a"
	if _, err := c.apply(t, c.inst(t, "b", true)); err == nil {
		t.Fatal("apply succeeded")
	}
	c.rec.failDelete = ""
	inst := c.inst(t, "b", true)
	p := PlanDestroy(inst, c.j.list())
	if _, err := c.e.Apply(context.Background(), p, c.j, nil); err != nil {
		t.Fatal(err)
	}
	if len(c.rec.world) != 0 || len(c.j.list()) != 0 {
		t.Errorf("world %v, recorded %v", c.rec.world, c.j.list())
	}
}

// replacingUpdater is the recorder with an Update that makes a new object
// and deletes the old one itself, as a custom resource answering Update
// with a new PhysicalResourceId does.
type replacingUpdater struct{ *recorder }

func (r replacingUpdater) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	id := "phys-" + req.Properties.GetAttr("content").AsString()
	r.log("update %s %s", req.LogicalID, id)
	r.mu.Lock()
	r.world[id] = req.Properties
	r.mu.Unlock()
	res := provider.Result{PhysicalID: id, Attributes: map[string]cty.Value{"id": cty.StringVal(id), "digest": cty.StringVal("d-" + id)}}
	if err := r.Delete(ctx, provider.Request{LogicalID: req.LogicalID, PhysicalID: req.PhysicalID}); err != nil {
		return res, &provider.SupersededError{OldPhysicalID: req.PhysicalID, NewPhysicalID: id, Err: err}
	}
	return res, nil
}

// An update that replaced the object but could not delete the old one:
// the new object is the resource and the old one is deposed, so the next
// apply deletes it and does not update (and so replace) again.
func TestSupersededObjectDeletedLater(t *testing.T) {
	c := newCBD()
	c.reg["rec"] = replacingUpdater{c.rec}
	c.e = New(c.reg)
	inst := func(content string) *Instance {
		defs := mustLoad(t, map[string]string{"defs.hcl": `
stack_set "web" {
  template = "./t"
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`, "t/main.hcl": `resource "rec" "app" {
  name    = "n"
  content = "` + content + `"
}`}, c.reg)
		return &Instance{StackSet: defs.StackSets[0], StackSetID: "ss", Target: config.Target{Region: "eu", Account: "111"}}
	}
	if _, err := c.apply(t, inst("a")); err != nil {
		t.Fatal(err)
	}
	c.rec.failDelete = "phys-n"
	_, err := c.apply(t, inst("b"))
	if err == nil || !strings.Contains(err.Error(), `replaced "phys-n" by "phys-b"`) {
		t.Fatalf("apply: %v", err)
	}
	r := c.only(t)
	if r.PhysicalID != "phys-b" || r.Status != StatusApplied || !strings.Contains(string(r.Inputs), `"b"`) || r.Deposed == nil || r.Deposed.PhysicalID != "phys-n" {
		t.Fatalf("recorded %+v (deposed %+v), want phys-b with phys-n deposed", r, r.Deposed)
	}
	// While the old object cannot be deleted, nothing else is done: one
	// more replacement would depose the current object too.
	before := len(c.calls())
	if _, err := c.apply(t, inst("c")); err == nil || !strings.Contains(err.Error(), "delete the replaced object phys-n: delete refused") {
		t.Fatalf("apply with the deposed object undeletable: %v", err)
	}
	if got := c.calls()[before:]; len(got) != 1 || got[0] != "delete phys-n" {
		t.Errorf("calls %v, want only the old object's delete", got)
	}
	if r := c.only(t); r.PhysicalID != "phys-b" || r.Deposed == nil || r.Deposed.PhysicalID != "phys-n" {
		t.Fatalf("recorded %+v (deposed %+v), want phys-b with phys-n deposed", r, r.Deposed)
	}
	c.rec.failDelete = ""
	before = len(c.calls())
	p, err := c.apply(t, inst("b"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Resources[0].Action != NoOp || !p.Resources[0].DeposedCleanup {
		t.Errorf("plan: %s cleanup=%v, want the deposed object's cleanup only", p.Resources[0].Action, p.Resources[0].DeposedCleanup)
	}
	if got := c.calls()[before:]; len(got) != 1 || got[0] != "delete phys-n" {
		t.Errorf("calls %v, want only the old object's delete", got)
	}
	if len(c.rec.world) != 1 || c.rec.world["phys-b"] == cty.NilVal {
		t.Errorf("world %v, want phys-b alone", c.rec.world)
	}
}

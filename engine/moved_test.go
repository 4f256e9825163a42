package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// refactorEnv plans and applies successive versions of one template
// (files under tmpl/) on one instance, with one journal.
type refactorEnv struct {
	t   *testing.T
	rec *recorder
	reg provider.Registry
	e   *Engine
	j   *memJournal
}

func newRefactorEnv(t *testing.T) *refactorEnv {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	return &refactorEnv{t: t, rec: rec, reg: reg, e: New(reg), j: newJournal()}
}

func (env *refactorEnv) instance(files map[string]string) *Instance {
	env.t.Helper()
	all := map[string]string{"web.hcl": dynamicDefs}
	for n, c := range files {
		all["tmpl/"+n] = c
	}
	defs := mustLoad(env.t, all, env.reg)
	return &Instance{StackSet: defs.StackSet("web"), StackSetID: "id-1", Target: config.Target{Region: "eu", Account: "111"}}
}

func (env *refactorEnv) plan(files map[string]string) (*InstancePlan, hcl.Diagnostics) {
	env.t.Helper()
	p, diags := env.e.Plan(env.instance(files), env.j.list())
	if diags.HasErrors() {
		env.t.Fatalf("plan: %s", diags.Error())
	}
	return p, diags
}

func (env *refactorEnv) apply(p *InstancePlan) {
	env.t.Helper()
	if _, err := env.e.Apply(context.Background(), p, env.j, nil); err != nil {
		env.t.Fatalf("apply: %v", err)
	}
}

// addrs are the recorded addresses with their physical ids.
func (env *refactorEnv) addrs() map[string]string {
	out := map[string]string{}
	for _, r := range env.j.list() {
		out[r.Address] = r.PhysicalID
	}
	return out
}

// calls returns the provider calls made since the last call, without
// request ids.
func (env *refactorEnv) calls() []string {
	env.rec.mu.Lock()
	defer env.rec.mu.Unlock()
	var out []string
	for _, c := range env.rec.calls {
		f := strings.Fields(c)
		out = append(out, f[0]+" "+f[1])
	}
	env.rec.calls = nil
	return out
}

func TestMovedBlocks(t *testing.T) {
	cases := []struct {
		name          string
		before, after map[string]string
		// moves are the plan's "FROM -> TO"; actions its actions.
		moves   []string
		actions map[string]string
		// recorded are the addresses and physical ids after the apply.
		recorded map[string]string
		calls    []string
	}{{
		name:     "resource renamed",
		before:   map[string]string{"main.tf": `resource "rec" "a" { name = "one" }`},
		after:    map[string]string{"main.tf": "resource \"rec\" \"b\" { name = \"one\" }\nmoved {\n  from = rec.a\n  to   = rec.b\n}\n"},
		moves:    []string{"rec.a -> rec.b"},
		actions:  map[string]string{"rec.b": "NoOp"},
		recorded: map[string]string{"rec.b": "phys-one"},
	}, {
		name:     "renamed and changed",
		before:   map[string]string{"main.tf": `resource "rec" "a" { name = "one" }`},
		after:    map[string]string{"main.tf": "resource \"rec\" \"b\" {\n  name    = \"one\"\n  content = \"x\"\n}\nmoved {\n  from = rec.a\n  to   = rec.b\n}\n"},
		moves:    []string{"rec.a -> rec.b"},
		actions:  map[string]string{"rec.b": "Update"},
		recorded: map[string]string{"rec.b": "phys-one"},
		calls:    []string{"update rec.b"},
	}, {
		name:   "count members keep their keys",
		before: map[string]string{"main.tf": "resource \"rec\" \"a\" {\n  count = 2\n  name  = \"n${count.index}\"\n}\n"},
		after: map[string]string{"main.tf": "resource \"rec\" \"b\" {\n  count = 2\n  name  = \"n${count.index}\"\n}\n",
			"moved.tf": "moved {\n  from = rec.a\n  to   = rec.b\n}\n"},
		moves:    []string{"rec.a[0] -> rec.b[0]", "rec.a[1] -> rec.b[1]"},
		actions:  map[string]string{"rec.b[0]": "NoOp", "rec.b[1]": "NoOp"},
		recorded: map[string]string{"rec.b[0]": "phys-n0", "rec.b[1]": "phys-n1"},
	}, {
		name:   "one instance into for_each",
		before: map[string]string{"main.tf": `resource "rec" "a" { name = "one" }`},
		after: map[string]string{"main.tf": "resource \"rec\" \"a\" {\n  for_each = toset([\"one\"])\n  name     = each.key\n}\n" +
			"moved {\n  from = rec.a\n  to   = rec.a[\"one\"]\n}\n"},
		moves:    []string{`rec.a -> rec.a["one"]`},
		actions:  map[string]string{`rec.a["one"]`: "NoOp"},
		recorded: map[string]string{`rec.a["one"]`: "phys-one"},
	}, {
		name:     "count added: implicit move to [0]",
		before:   map[string]string{"main.tf": `resource "rec" "a" { name = "n0" }`},
		after:    map[string]string{"main.tf": "resource \"rec\" \"a\" {\n  count = 2\n  name  = \"n${count.index}\"\n}\n"},
		moves:    []string{"rec.a -> rec.a[0]"},
		actions:  map[string]string{"rec.a[0]": "NoOp", "rec.a[1]": "Create"},
		recorded: map[string]string{"rec.a[0]": "phys-n0", "rec.a[1]": "phys-n1"},
		calls:    []string{"create rec.a[1]"},
	}, {
		name:     "count removed: implicit move from [0]",
		before:   map[string]string{"main.tf": "resource \"rec\" \"a\" {\n  count = 1\n  name  = \"n${count.index}\"\n}\n"},
		after:    map[string]string{"main.tf": `resource "rec" "a" { name = "n0" }`},
		moves:    []string{"rec.a[0] -> rec.a"},
		actions:  map[string]string{"rec.a": "NoOp"},
		recorded: map[string]string{"rec.a": "phys-n0"},
	}, {
		name:   "chain of moves",
		before: map[string]string{"main.tf": `resource "rec" "a" { name = "one" }`},
		after: map[string]string{"main.tf": "resource \"rec\" \"c\" { name = \"one\" }\n" +
			"moved {\n  from = rec.b\n  to   = rec.c\n}\nmoved {\n  from = rec.a\n  to   = rec.b\n}\n"},
		moves:    []string{"rec.a -> rec.c"},
		actions:  map[string]string{"rec.c": "NoOp"},
		recorded: map[string]string{"rec.c": "phys-one"},
	}, {
		name: "module call renamed",
		before: map[string]string{"main.tf": "module \"a\" { source = \"./m\" }\n",
			"m/main.tf": `resource "rec" "x" { name = "one" }`},
		after: map[string]string{"main.tf": "module \"b\" { source = \"./m\" }\nmoved {\n  from = module.a\n  to   = module.b\n}\n",
			"m/main.tf": `resource "rec" "x" { name = "one" }`},
		moves:    []string{"module.a.rec.x -> module.b.rec.x"},
		actions:  map[string]string{"module.b.rec.x": "NoOp"},
		recorded: map[string]string{"module.b.rec.x": "phys-one"},
	}, {
		name: "resource out of a module",
		before: map[string]string{"main.tf": "module \"a\" { source = \"./m\" }\n",
			"m/main.tf": `resource "rec" "x" { name = "one" }`},
		after:    map[string]string{"main.tf": "resource \"rec\" \"x\" { name = \"one\" }\nmoved {\n  from = module.a.rec.x\n  to   = rec.x\n}\n"},
		moves:    []string{"module.a.rec.x -> rec.x"},
		actions:  map[string]string{"rec.x": "NoOp"},
		recorded: map[string]string{"rec.x": "phys-one"},
	}, {
		name:   "moved block inside a module",
		before: map[string]string{"main.tf": "module \"a\" { source = \"./m\" }\n", "m/main.tf": `resource "rec" "x" { name = "one" }`},
		after: map[string]string{"main.tf": "module \"a\" { source = \"./m\" }\n",
			"m/main.tf": "resource \"rec\" \"y\" { name = \"one\" }\nmoved {\n  from = rec.x\n  to   = rec.y\n}\n"},
		moves:    []string{"module.a.rec.x -> module.a.rec.y"},
		actions:  map[string]string{"module.a.rec.y": "NoOp"},
		recorded: map[string]string{"module.a.rec.y": "phys-one"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newRefactorEnv(t)
			p, _ := env.plan(tc.before)
			env.apply(p)
			env.calls()
			p, _ = env.plan(tc.after)
			if diff := cmp.Diff(tc.moves, p.sortedMoves()); diff != "" {
				t.Errorf("moves (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.actions, actions(p)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if !p.HasChanges() {
				t.Errorf("a plan that moves resources has no changes")
			}
			moved := 0
			for _, c := range p.Changes() {
				rc := c.ResourceChange
				if rc.MovedFrom == "" {
					continue
				}
				moved++
				if rc.Action != changeset.Modify || rc.PhysicalResourceId == "" {
					t.Errorf("%s: moved change is %s with physical id %q, want a Modify of the recorded object", rc.LogicalResourceId, rc.Action, rc.PhysicalResourceId)
				}
			}
			if moved != len(tc.moves) {
				t.Errorf("changes naming a move: got %d, want %d", moved, len(tc.moves))
			}
			env.apply(p)
			if diff := cmp.Diff(tc.recorded, env.addrs()); diff != "" {
				t.Errorf("recorded after apply (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.calls, env.calls()); diff != "" {
				t.Errorf("provider calls (-want +got):\n%s", diff)
			}
			// Moved for good: the next plan is a no-op.
			again, _ := env.plan(tc.after)
			if again.HasChanges() {
				t.Errorf("plan after the move: got %v, want no changes", actions(again))
			}
		})
	}
}

func TestMovedOntoExistingObjectIsNotMade(t *testing.T) {
	env := newRefactorEnv(t)
	p, _ := env.plan(map[string]string{"main.tf": "resource \"rec\" \"a\" { name = \"one\" }\nresource \"rec\" \"b\" { name = \"two\" }\n"})
	env.apply(p)
	p, diags := env.plan(map[string]string{"main.tf": "resource \"rec\" \"b\" { name = \"two\" }\nmoved {\n  from = rec.a\n  to   = rec.b\n}\n"})
	if want := map[string]string{"rec.a": "Delete", "rec.b": "NoOp"}; !cmp.Equal(want, actions(p)) {
		t.Errorf("actions: got %v, want %v", actions(p), want)
	}
	if len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || !strings.Contains(diags[0].Detail, "rec.a could not move to rec.b") {
		t.Errorf("diagnostics: got %v, want one warning that rec.a could not move", diags)
	}
}

func TestMoveInterruptedIsFinished(t *testing.T) {
	env := newRefactorEnv(t)
	p, _ := env.plan(map[string]string{"main.tf": `resource "rec" "a" { name = "one" }`})
	env.apply(p)
	// An apply recorded rec.b and stopped before it forgot rec.a.
	old := env.j.list()[0]
	moved := old
	moved.Address = "rec.b"
	if err := env.j.Save(context.Background(), moved); err != nil {
		t.Fatal(err)
	}
	after := map[string]string{"main.tf": "resource \"rec\" \"b\" { name = \"one\" }\nmoved {\n  from = rec.a\n  to   = rec.b\n}\n"}
	p, diags := env.plan(after)
	if len(diags) > 0 || !cmp.Equal(map[string]string{"rec.b": "NoOp"}, actions(p)) {
		t.Fatalf("plan: got %v (%v), want rec.b NoOp and no diagnostics", actions(p), diags)
	}
	env.calls()
	env.apply(p)
	if got := env.addrs(); !cmp.Equal(map[string]string{"rec.b": "phys-one"}, got) {
		t.Errorf("recorded: got %v, want rec.b only", got)
	}
	if got := env.calls(); len(got) > 0 {
		t.Errorf("provider calls: got %v, want none", got)
	}
}

func TestMovedFromInstanceStillDeclared(t *testing.T) {
	env := newRefactorEnv(t)
	counted := "resource \"rec\" \"a\" {\n  count = 2\n  name  = \"n${count.index}\"\n}\n"
	p, _ := env.plan(map[string]string{"main.tf": counted})
	env.apply(p)
	_, diags := env.e.Plan(env.instance(map[string]string{"main.tf": counted + "resource \"rec\" \"b\" { name = \"b\" }\nmoved {\n  from = rec.a[1]\n  to   = rec.b\n}\n"}), env.j.list())
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "Moved object still exists") || !strings.Contains(diags.Error(), "main.tf:1") {
		t.Fatalf("got %v, want an error at main.tf:1 that rec.a[1] is still declared", diags)
	}
}

func TestRemovedBlocks(t *testing.T) {
	cases := []struct {
		name, block string
		retained    bool
		calls       []string
	}{
		{"kept in the world", "removed {\n  from = rec.a\n  lifecycle {\n    destroy = false\n  }\n}\n", true, nil},
		{"destroyed", "removed {\n  from = rec.a\n  lifecycle {\n    destroy = true\n  }\n}\n", false, []string{"delete rec.a"}},
		{"destroy by default", "removed {\n  from = rec.a\n}\n", false, []string{"delete rec.a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newRefactorEnv(t)
			p, _ := env.plan(map[string]string{"main.tf": "resource \"rec\" \"a\" { name = \"one\" }\nresource \"rec\" \"b\" { name = \"two\" }\n"})
			env.apply(p)
			env.calls()
			after := map[string]string{"main.tf": "resource \"rec\" \"b\" { name = \"two\" }\n" + tc.block}
			p, _ = env.plan(after)
			var rc *changeset.ResourceChange
			for _, c := range p.Changes() {
				if c.ResourceChange.LogicalResourceId == "rec.a" {
					rc = &c.ResourceChange
				}
			}
			if rc == nil || rc.Action != changeset.Remove || rc.Retained() != tc.retained {
				t.Fatalf("change of rec.a: got %+v, want a Remove, retained %v", rc, tc.retained)
			}
			env.apply(p)
			if diff := cmp.Diff(tc.calls, env.calls()); diff != "" {
				t.Errorf("provider calls (-want +got):\n%s", diff)
			}
			if _, ok := env.rec.world["phys-one"]; ok != tc.retained {
				t.Errorf("object in the world after apply: got %v, want %v", ok, tc.retained)
			}
			if got := env.addrs(); !cmp.Equal(map[string]string{"rec.b": "phys-two"}, got) {
				t.Errorf("recorded: got %v, want rec.b only", got)
			}
			if again, _ := env.plan(after); again.HasChanges() {
				t.Errorf("plan after apply: got %v, want no changes", actions(again))
			}
		})
	}
}

func TestRefactoringDiagnostics(t *testing.T) {
	cases := []struct{ name, tmpl, want string }{
		{"moved from a declared resource", "resource \"rec\" \"a\" { name = \"a\" }\nresource \"rec\" \"b\" { name = \"b\" }\nmoved {\n  from = rec.a\n  to   = rec.b\n}\n", "that resource is still declared at tmpl/main.tf:1"},
		{"ambiguous destination", "resource \"rec\" \"b\" { name = \"b\" }\nresource \"rec\" \"c\" { name = \"c\" }\nmoved {\n  from = rec.a\n  to   = rec.b\n}\nmoved {\n  from = rec.a\n  to   = rec.c\n}\n", "Each resource can move to only one destination address"},
		{"ambiguous source", "resource \"rec\" \"c\" { name = \"c\" }\nmoved {\n  from = rec.a\n  to   = rec.c\n}\nmoved {\n  from = rec.b\n  to   = rec.c\n}\n", "Each resource can have moved from only one source address"},
		{"cycle", "moved {\n  from = rec.a\n  to   = rec.b\n}\nmoved {\n  from = rec.b\n  to   = rec.a\n}\n", "Cyclic dependency in move statements"},
		{"module to resource", "resource \"rec\" \"b\" { name = \"b\" }\nmoved {\n  from = module.a\n  to   = rec.b\n}\n", "are not of one kind"},
		{"type mismatch", "moved {\n  from = rec.a\n  to   = other.b\n}\n", "Resource type mismatch"},
		{"data source", "moved {\n  from = data.rec.a\n  to   = data.rec.b\n}\n", "Data sources cannot be named"},
		{"quoted", "moved {\n  from = \"rec.a\"\n  to   = rec.b\n}\n", "without quotes"},
		{"into for_each from a resource without it", "resource \"rec\" \"a\" { name = \"a\" }\nmoved {\n  from = rec.a\n  to   = rec.a[\"x\"]\n}\n", "Moved object still exists"},
		{"removed still declared", "resource \"rec\" \"a\" { name = \"a\" }\nremoved {\n  from = rec.a\n}\n", "Removed resource still exists"},
		{"removed instance", "removed {\n  from = rec.a[0]\n}\n", "Resource instance keys not allowed"},
		{"removed provisioner", "removed {\n  from = rec.a\n  provisioner \"local-exec\" {}\n}\n", "Unsupported provisioner block"},
	}
	reg := provider.Registry{"rec": newRecorder()}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load(t, map[string]string{"web.hcl": dynamicDefs, "tmpl/main.tf": tc.tmpl}, reg)
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) || !strings.Contains(diags.Error(), "tmpl/main.tf:") {
				t.Fatalf("got %v, want an error at tmpl/main.tf saying %q", diags, tc.want)
			}
		})
	}
}

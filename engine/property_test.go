package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// randomTemplate writes a template of n resources whose properties mix
// literals, variables (one sensitive), functions, count, for_each and
// references to earlier resources' attributes (known at plan or only after
// apply).
func randomTemplate(rnd *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString(`variable "a" { type = string }
variable "b" { type = number }
variable "s" {
  type      = string
  sensitive = true
}
variable "l" { type = list(string) }
`)
	var single []int // resources without count/for_each, referable as rec.rN.ATTR
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("r%d", i)
		content := []string{`"lit"`, `var.a`, `"${var.a}-${var.b}"`, `upper(var.a)`, `join(",", var.l)`, `var.s`, `format("%s/%d", target.region, var.b)`}
		expr := content[rnd.IntN(len(content))]
		if len(single) > 0 && rnd.IntN(2) == 0 {
			dep := fmt.Sprintf("rec.r%d", single[rnd.IntN(len(single))])
			attr := []string{"id", "digest", "name"}[rnd.IntN(3)]
			expr = fmt.Sprintf(`format("%%s:%%s", %s, %s.%s)`, expr, dep, attr)
		}
		switch rnd.IntN(4) {
		case 0:
			fmt.Fprintf(&b, "resource \"rec\" %q {\n  count   = %d\n  name    = \"%s-${count.index}\"\n  content = %s\n}\n", name, rnd.IntN(3), name, expr)
		case 1:
			fmt.Fprintf(&b, "resource \"rec\" %q {\n  for_each = toset(var.l)\n  name     = \"%s-${each.key}\"\n  content  = %s\n}\n", name, name, expr)
		default:
			single = append(single, i)
			tags := ""
			if rnd.IntN(2) == 0 {
				tags = "\n  tags    = { k = var.a, n = tostring(var.b) }"
			}
			nameExpr := fmt.Sprintf("%q", name)
			if rnd.IntN(3) == 0 {
				nameExpr = fmt.Sprintf(`"%s-${var.a}"`, name) // changes replace the resource
			}
			fmt.Fprintf(&b, "resource \"rec\" %q {\n  name    = %s\n  content = %s%s\n}\n", name, nameExpr, expr, tags)
		}
	}
	return b.String()
}

func randomVars(rnd *rand.Rand) string {
	words := []string{"alpha", "beta", "gamma", "delta"}
	return fmt.Sprintf(`{ a = %q, b = %d, s = %q, l = [%q, %q] }`,
		words[rnd.IntN(4)], rnd.IntN(5), "secret-"+words[rnd.IntN(4)], words[rnd.IntN(2)], words[2+rnd.IntN(2)])
}

// Property: applying a plan and planning again yields no changes — for
// random templates, and again after random variable changes.
func TestApplyThenReplanHasNoChanges(t *testing.T) {
	applied := map[Action]int{}
	defer func() {
		// The property must have been exercised: creates, updates,
		// replacements and deletes all happened.
		for _, a := range []Action{Create, Update, Replace, Delete} {
			if applied[a] == 0 {
				t.Errorf("no %s in any round: %v", a, applied)
			}
		}
	}()
	for seed := uint64(0); seed < 150; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 7))
		tmpl := randomTemplate(rnd, 2+rnd.IntN(8))
		reg := provider.Registry{"rec": newRecorder()}
		e := New(reg)
		j := newJournal()
		inst := &Instance{StackSetID: "id", Target: config.Target{Region: "r", Account: "a"}}
		for round := 0; round < 3; round++ {
			defs := fmt.Sprintf(`stack_set "s" {
  template = "./t"
  vars     = %s
  deployment_targets {
    regions  = ["r"]
    accounts = ["a"]
  }
}`, randomVars(rnd))
			d, diags := load(t, map[string]string{"d.hcl": defs, "t/main.hcl": tmpl}, reg)
			if diags.HasErrors() {
				t.Fatalf("seed %d: %s\n%s", seed, diags.Error(), tmpl)
			}
			inst.StackSet = d.StackSet("s")
			p, diags := e.Plan(inst, j.list())
			if diags.HasErrors() {
				t.Fatalf("seed %d round %d: plan: %s", seed, round, diags.Error())
			}
			for _, r := range p.Resources {
				applied[r.Action]++
			}
			if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
				t.Fatalf("seed %d round %d: apply: %v", seed, round, err)
			}
			again, _ := e.Plan(inst, j.list())
			if again.HasChanges() {
				t.Fatalf("seed %d round %d: re-plan after apply has changes %v\ntemplate:\n%s", seed, round, actions(again), tmpl)
			}
			for _, c := range p.Changes() {
				for _, pc := range c.ResourceChange.PropertyChanges {
					if strings.Contains(ValueString(pc.AfterValue)+ValueString(pc.BeforeValue), "secret-") {
						t.Fatalf("seed %d: sensitive value in the change set: %+v", seed, pc)
					}
				}
			}
		}
	}
}

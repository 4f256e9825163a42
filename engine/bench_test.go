package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// benchDefs builds definitions with R regions × A accounts and a template
// of n resources whose contents depend on vars and the target.
func benchDefs(regions, accounts, n int, counted bool) fstest.MapFS {
	var rs, as []string
	for i := 0; i < regions; i++ {
		rs = append(rs, fmt.Sprintf("%q", fmt.Sprintf("region-%d", i)))
	}
	for i := 0; i < accounts; i++ {
		as = append(as, fmt.Sprintf("%q", fmt.Sprintf("%012d", i)))
	}
	defs := fmt.Sprintf(`stack_set "fleet" {
  template = "./tmpl"
  vars = { version = "v1", owner = "team" }
  deployment_targets {
    regions  = [%s]
    accounts = [%s]
  }
}`, strings.Join(rs, ","), strings.Join(as, ","))
	var tmpl strings.Builder
	tmpl.WriteString("variable \"version\" { type = string }\nvariable \"owner\" { type = string }\n")
	if counted {
		fmt.Fprintf(&tmpl, `resource "rec" "r" {
  count   = %d
  name    = "r-${count.index}"
  content = "version=${var.version} owner=${var.owner} region=${target.region} account=${target.account} i=${count.index}"
}
`, n)
	} else {
		for i := 0; i < n; i++ {
			fmt.Fprintf(&tmpl, `resource "rec" "r%d" {
  name    = "r%d"
  content = "version=${var.version} owner=${var.owner} region=${target.region} account=${target.account}"
}
`, i, i)
		}
	}
	return fstest.MapFS{
		"fleet.hcl":     {Data: []byte(defs)},
		"tmpl/main.hcl": {Data: []byte(tmpl.String())},
	}
}

func BenchmarkLoad1000Instances(b *testing.B) {
	fsys := benchDefs(10, 100, 10, false)
	reg := provider.Registry{"rec": newRecorder()}
	b.ReportAllocs()
	for b.Loop() {
		if _, diags := config.Load(fsys, ".", reg); diags.HasErrors() {
			b.Fatal(diags.Error())
		}
	}
}

func benchPlan(b *testing.B, n int, counted, applied bool) {
	reg := provider.Registry{"rec": newRecorder()}
	e := New(reg)
	defs, diags := config.Load(benchDefs(1, 1, n, counted), ".", reg)
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	inst := &Instance{StackSet: defs.StackSets[0], StackSetID: "id", Target: config.Target{Region: "region-0", Account: "000000000000"}}
	j := newJournal()
	if applied {
		p, _ := e.Plan(inst, nil)
		if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
			b.Fatal(err)
		}
	}
	recorded := j.list()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, diags := e.Plan(inst, recorded)
		if diags.HasErrors() {
			b.Fatal(diags.Error())
		}
		if applied && p.HasChanges() {
			b.Fatal("unexpected changes")
		}
	}
}

// One target, 10 resources, nothing recorded: the per-instance cost of a create plan.
func BenchmarkPlanCreate10(b *testing.B) { benchPlan(b, 10, false, false) }

// One target, 10 resources, all recorded and unchanged: the per-instance cost of a no-op plan.
func BenchmarkPlanNoop10(b *testing.B) { benchPlan(b, 10, false, true) }

// One instance with 1,000 counted resources, unchanged (issue: big-template plan < 50 ms).
func BenchmarkPlanNoop1000Count(b *testing.B) { benchPlan(b, 1000, true, true) }

func BenchmarkApplyCreate10(b *testing.B) {
	reg := provider.Registry{"rec": newRecorder()}
	e := New(reg)
	defs, _ := config.Load(benchDefs(1, 1, 10, false), ".", reg)
	inst := &Instance{StackSet: defs.StackSets[0], StackSetID: "id", Target: config.Target{Region: "region-0", Account: "000000000000"}}
	b.ReportAllocs()
	for b.Loop() {
		p, _ := e.Plan(inst, nil)
		if _, err := e.Apply(context.Background(), p, newJournal(), nil); err != nil {
			b.Fatal(err)
		}
	}
}

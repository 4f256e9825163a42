package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// ---- limits of loading and planning ---------------------------------------------

const limitDefs = `stack_set "s" {
  template = "./t"
  vars     = { secret = "hunter2", n = 3 }
  deployment_targets {
    regions  = ["r"]
    accounts = ["1"]
  }
}`

const limitVars = `variable "secret" {
  type      = string
  sensitive = true
}
variable "n" { type = number }
`

// planTemplate loads limitDefs with tmpl as t/main.hcl (and files) and
// plans its one instance under ctx.
func planTemplate(t *testing.T, ctx context.Context, reg provider.Registry, tmpl string, files map[string]string) (*InstancePlan, hcl.Diagnostics) {
	t.Helper()
	return planWith(t, ctx, New(reg), reg, tmpl, files)
}

func planWith(t *testing.T, ctx context.Context, e *Engine, reg provider.Registry, tmpl string, files map[string]string) (*InstancePlan, hcl.Diagnostics) {
	t.Helper()
	all := map[string]string{"d.hcl": limitDefs, "t/main.hcl": limitVars + tmpl}
	for k, v := range files {
		all[k] = v
	}
	defs, diags := load(t, all, reg)
	if diags.HasErrors() {
		return nil, diags
	}
	ss := defs.StackSet("s")
	return e.PlanContext(ctx, &Instance{StackSet: ss, StackSetID: "id", Target: ss.Targets()[0]}, nil)
}

// wantDiag fails unless diags has an error whose summary and detail hold
// every string of want, located in file.
func wantDiag(t *testing.T, diags hcl.Diagnostics, file string, want ...string) *hcl.Diagnostic {
	t.Helper()
	for _, d := range diags {
		text := d.Summary + ": " + d.Detail
		ok := d.Severity == hcl.DiagError
		for _, w := range want {
			ok = ok && strings.Contains(text, w)
		}
		if ok && file != "" && (d.Subject == nil || d.Subject.Filename != file || d.Subject.Start.Line == 0) {
			t.Fatalf("diagnostic %q is not located in %s: %v", text, file, d.Subject)
		}
		if ok {
			return d
		}
	}
	t.Fatalf("got diagnostics %v, want an error with %q", diags, want)
	return nil
}

func TestForEachOfSensitiveValues(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	for _, tc := range []struct{ name, forEach string }{
		{"a tuple holding a sensitive value", `[var.secret]`},
		{"a set of it", `toset([var.secret, "x"])`},
		{"a sensitive value", `toset([upper(var.secret)])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := planTemplate(t, context.Background(), reg, `
resource "rec" "x" {
  for_each = `+tc.forEach+`
  name     = each.key
}`, nil)
			d := wantDiag(t, diags, "t/main.hcl", "Invalid for_each argument", "Sensitive values", "cannot be used as for_each arguments")
			if strings.Contains(d.Detail, "hunter2") {
				t.Errorf("the diagnostic shows the sensitive value: %s", d.Detail)
			}
		})
	}
	// A map's values may be sensitive: they are each.value, not keys.
	p, diags := planTemplate(t, context.Background(), reg, `
resource "rec" "x" {
  for_each = { a = var.secret }
  name     = each.key
  secret   = each.value
}`, nil)
	if diags.HasErrors() || len(p.Resources) != 1 {
		t.Fatalf("a map with sensitive values: %v", diags)
	}
}

// panicky is a provider that panics when its properties are validated
// (plan) or its schema is asked for (load).
type panicky struct {
	*recorder
	inSchema bool
}

func (p panicky) Schema() provider.Schema {
	if p.inSchema {
		var names []string
		_ = names[len(p.calls)] // out of range: a runtime error
	}
	return p.recorder.Schema()
}

func (p panicky) ValidateProperties(provider.Target, cty.Value) error {
	panic(fmt.Sprintf("cannot validate %#v", cty.StringVal("hunter2")))
}

func TestPanicsAreDiagnostics(t *testing.T) {
	t.Run("planning", func(t *testing.T) {
		reg := provider.Registry{"rec": panicky{recorder: newRecorder()}}
		e := New(reg)
		var log bytes.Buffer
		e.SetLogger(zerolog.New(&log))
		p, diags := planWith(t, context.Background(), e, reg, `
resource "rec" "x" {
  name = "x"
}`, nil)
		if p != nil {
			t.Fatal("a plan that panicked returned a plan")
		}
		d := wantDiag(t, diags, "t/main.hcl", "Internal error", "rec.x", `planning stack set "s" at r/1`)
		if strings.Contains(d.Detail, "hunter2") || strings.Contains(d.Detail, "goroutine") {
			t.Errorf("the diagnostic shows the panic's value or stack: %s", d.Detail)
		}
		// The log has the stack, not the value.
		if l := log.String(); !strings.Contains(l, "engine panicked") || !strings.Contains(l, "ValidateProperties") || strings.Contains(l, "hunter2") {
			t.Errorf("the log of the panic: %s", l)
		}
	})
	t.Run("loading", func(t *testing.T) {
		reg := provider.Registry{"rec": panicky{recorder: newRecorder(), inSchema: true}}
		fsys := fstest.MapFS{"d.hcl": {Data: []byte(limitDefs)}, "t/main.hcl": {Data: []byte(limitVars + `resource "rec" "x" { name = "x" }`)}}
		e := New(reg)
		e.SetLogger(zerolog.Nop())
		defs, diags := e.Load(fsys, ".")
		if defs == nil {
			t.Fatal("Load returned nil definitions")
		}
		wantDiag(t, diags, "", "Internal error", "index out of range", "loading the definitions")
	})
}

func TestDeepNestingInTemplates(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	deep := strings.Repeat("(", 1500000) + "1" + strings.Repeat(")", 1500000)
	_, diags := planTemplate(t, context.Background(), reg, `
resource "rec" "x" {
  name = "x-${`+deep+`}"
}`, nil)
	if d := wantDiag(t, diags, "t/main.hcl", "Nesting too deep"); d.Subject.Start.Line != 8 {
		t.Errorf("the diagnostic is at line %d, want 8", d.Subject.Start.Line)
	}
}

// fanOut writes a module tree: level 0 calls level 1 six times, and so on
// to level depth, which holds one resource.
func fanOut(depth, width int) map[string]string {
	files := map[string]string{}
	dir := "t"
	for level := 0; level < depth; level++ {
		var b strings.Builder
		if level == 0 {
			b.WriteString(limitVars)
		}
		for i := 0; i < width; i++ {
			fmt.Fprintf(&b, "module \"m%d\" {\n  source = \"./next\"\n}\n", i)
		}
		files[dir+"/main.hcl"] = b.String()
		dir += "/next"
	}
	files[dir+"/main.hcl"] = "resource \"rec\" \"leaf\" {\n  name = \"leaf\"\n}\n"
	return files
}

func TestModuleFanOutIsCountedBeforeItIsExpanded(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	files := fanOut(config.MaxModuleDepth, 6)
	files["d.hcl"] = limitDefs
	_, diags := load(t, files, reg)
	// 6 + 36 + 216 + 1296: the template four levels above the leaves is
	// the first over MaxModuleInstances.
	d := wantDiag(t, diags, "t/next/next/next/next/main.hcl", "Too many module instances", fmt.Sprint(config.MaxModuleInstances))
	if d.Subject.Start.Line == 0 {
		t.Error("no line")
	}

	// Within the module limit, resource instances are counted across
	// modules before each count is expanded.
	files = fanOut(2, 3) // 3 + 9 module instances, 9 leaves
	files["t/next/next/main.hcl"] = "resource \"rec\" \"leaf\" {\n  count = 1200\n  name  = \"leaf-${count.index}\"\n}\n"
	_, diags = planTemplate(t, context.Background(), reg, "", files)
	wantDiag(t, diags, "t/next/next/main.hcl", "Too many resources", "module.m2.module.m", fmt.Sprint(config.MaxResourcesPerInstance))
}

func TestFunctionResultLimits(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	big := `format("%1000000s", "x")` // 1,000,000 bytes: within the limit
	tests := []struct{ name, expr, want string }{
		{"setproduct", `length(setproduct(range(1024), range(1024), range(1024)))`, "functions may build collections of at most 10000 elements"},
		{"setproduct of sets", `length(setproduct(toset(range(200)), toset(range(200))))`, "at most 10000 elements"},
		{"concat", `length(concat(local.lf, local.lf))`, "at most 10000 elements"},
		{"flatten", `length(flatten([local.lf, [local.lf]]))`, "at most 10000 elements"},
		{"formatlist", `length(formatlist("%2000s", range(1000)))`, "strings of at most 1048576 bytes"},
		{"split", `length(split("", local.s))`, "at most 10000 elements"},
		{"join", `length(join("", [local.s, local.s]))`, "strings of at most 1048576 bytes"},
		{"format width", `length(format("%2000000s", "x"))`, "strings of at most 1048576 bytes"},
		{"format", `length(format("%s%s", local.s, local.s))`, "strings of at most 1048576 bytes"},
		{"strrev", `length(strrev("${local.s}${local.s}"))`, "strings of at most 1048576 bytes"},
		{"indent", `length(indent(100000000, "a\nb"))`, "strings of at most 1048576 bytes"},
		{"replace", `length(replace(local.s, " ", "xx"))`, "strings of at most 1048576 bytes"},
		{"regex_replace", `length(regex_replace(local.s, " ", "$0$0"))`, "strings of at most 1048576 bytes"},
		{"jsonencode", `length(jsonencode([local.s, local.s]))`, "strings of at most 1048576 bytes"},
		{"regexall work", `length(regexall("(?:${join("|", [for i in range(600) : format(" +a%03d", i)])})", local.s))`, "is too much work"},
		{"regex_replace work", `length(regex_replace(local.s, "(?:${join("|", [for i in range(600) : format(" +a%03d", i)])})", "x"))`, "is too much work"},
		{"jsondecode nested", `jsondecode("${join("", [for i in range(600) : "["])}1${join("", [for i in range(600) : "]"])}")`, "nests more than 512 levels"},
		{"tonumber", `tonumber("1e100000000") > 0`, "numbers must be smaller than 1e1000"},
		{"parseint", `parseint("${join("", [for i in range(1000) : "99999"])}", 10)`, "numbers must be smaller than 1e1000"},
		{"arithmetic", `(1e900 * 1e900) > 0`, "numbers must be smaller than 1e1000"},
		{"a number in a template", `"n=${tonumber("1e999") * 1e5}"`, "numbers must be smaller than 1e1000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := planTemplate(t, context.Background(), reg, `
locals {
  lf = flatten([for i in range(100) : range(100)])
  s  = `+big+`
}
resource "rec" "x" {
  name    = "x"
  content = jsonencode(`+tc.expr+`)
}`, nil)
			wantDiag(t, diags, "t/main.hcl", tc.want)
		})
	}
	// Within the limits, the same functions work.
	p, diags := planTemplate(t, context.Background(), reg, `
resource "rec" "x" {
  name    = "x"
  content = jsonencode([length(setproduct(range(100), range(100))), substr(`+big+`, 999999, 1), length(distinct(range(300)))])
}`, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := p.Resources[0].After.GetAttr("content").AsString(); got != `[10000,"x",300]` {
		t.Errorf("content = %s", got)
	}
}

func TestBuiltBytesLimit(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	for _, tc := range []struct{ name, tmpl string }{
		{"templates over many resources", `
locals { s = format("%1000000s", "x") }
resource "rec" "x" {
  count   = 1000
  name    = "x-${count.index}"
  content = "${local.s}${local.s}"
}`},
		{"properties over many resources", `
locals { s = format("%1000000s", "x") }
resource "rec" "x" {
  count   = 1000
  name    = "x-${count.index}"
  content = local.s
}`},
		{"nested for expressions", `
locals { l = range(1000) }
resource "rec" "x" {
  name    = "x"
  content = jsonencode([for a in local.l : [for b in local.l : [for c in local.l : 1]]])
}`},
		{"doubling through locals", `
locals {
  a0 = format("%500000s", "x")
  a1 = "${local.a0}${local.a0}"
  a2 = "${local.a1}${local.a1}"
  a3 = "${local.a2}${local.a2}"
  a4 = "${local.a3}${local.a3}"
  a5 = "${local.a4}${local.a4}"
  a6 = "${local.a5}${local.a5}"
  a7 = "${local.a6}${local.a6}"
  a8 = "${local.a7}${local.a7}"
  a9 = "${local.a8}${local.a8}"
  a10 = "${local.a9}${local.a9}"
}
resource "rec" "x" {
  name    = "x"
  content = local.a10
}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := planTemplate(t, context.Background(), reg, tc.tmpl, nil)
			wantDiag(t, diags, "t/main.hcl", "MiB")
		})
	}
}

// The instances planned under one WithPlanBudget context (one ref) share
// MaxPlannedBytes for the properties their change sets keep.
func TestPlannedBytesAcrossARef(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	files := map[string]string{"d.hcl": strings.Replace(limitDefs, `regions  = ["r"]`, `regions  = ["r1", "r2"]`, 1), "t/main.hcl": limitVars + `
locals { s = format("%1000000s", "x") }
resource "rec" "x" {
  count   = 40
  name    = "x-${count.index}"
  content = local.s
}`}
	defs := mustLoad(t, files, reg)
	ss := defs.StackSet("s")
	e := New(reg)
	ctx, cancel := config.WithPlanBudget(context.Background(), time.Hour)
	defer cancel()
	tg := ss.Targets()
	if _, diags := e.PlanContext(ctx, &Instance{StackSet: ss, StackSetID: "id", Target: tg[0]}, nil); diags.HasErrors() {
		t.Fatalf("the first instance (40 MiB of properties): %v", diags)
	}
	_, diags := e.PlanContext(ctx, &Instance{StackSet: ss, StackSetID: "id", Target: tg[1]}, nil)
	wantDiag(t, diags, "t/main.hcl", "instances planned for this revision", fmt.Sprintf("%d MiB", config.MaxPlannedBytes>>20))
	// Each on its own, the instances plan.
	if _, diags := e.Plan(&Instance{StackSet: ss, StackSetID: "id", Target: tg[1]}, nil); diags.HasErrors() {
		t.Fatalf("the second instance alone: %v", diags)
	}
}

// The expressions of the definitions (and of the template variables'
// defaults) one Load evaluates share MaxBuiltBytes: each value is kept.
func TestLoadBudget(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	defs := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			// 40,000 bytes: within what one stack set's vars may hold.
			fmt.Fprintf(&b, "stack_set \"s%d\" {\n  template = \"./t\"\n  vars     = { x = format(\"%%40000s\", \"%d\") }\n  deployment_targets {\n    regions  = [\"r\"]\n    accounts = [\"1\"]\n  }\n}\n", i, i)
		}
		return b.String()
	}
	files := map[string]string{"d.hcl": defs(1800), "t/main.hcl": `variable "x" { type = string }`}
	_, diags := load(t, files, reg)
	wantDiag(t, diags, "d.hcl", fmt.Sprintf("built more than %d MiB", config.MaxBuiltBytes>>20))
	files["d.hcl"] = defs(100)
	if _, diags := load(t, files, reg); diags.HasErrors() {
		t.Fatalf("100 stack sets of 40 KB vars: %v", diags)
	}
}

func TestValueNestingLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("locals {\n  l0 = 1\n")
	for i := 1; i <= config.MaxNesting+5; i++ {
		fmt.Fprintf(&b, "  l%d = [local.l%d]\n", i, i-1)
	}
	fmt.Fprintf(&b, "}\nresource \"rec\" \"x\" {\n  name = \"x\"\n  content = jsonencode(local.l%d)\n}\n", config.MaxNesting+5)
	_, diags := planTemplate(t, context.Background(), provider.Registry{"rec": newRecorder()}, b.String(), nil)
	wantDiag(t, diags, "t/main.hcl", "Value nested too deeply")
}

// stopper is a provider that ends a plan's context when it validates its
// n-th resource, and counts the validations.
type stopper struct {
	*recorder
	n, calls int
	cancel   context.CancelFunc
}

func (s *stopper) ValidateProperties(provider.Target, cty.Value) error {
	if s.calls++; s.calls == s.n {
		s.cancel()
	}
	return nil
}

func TestPlanBudget(t *testing.T) {
	tmpl := `
resource "rec" "x" {
  count   = 5000
  name    = "x-${count.index}"
  content = join(",", [for i in range(100) : "${i}"])
}`
	t.Run("a budget that ran out", func(t *testing.T) {
		ctx, cancel := config.WithPlanBudget(context.Background(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		p, diags := planTemplate(t, ctx, provider.Registry{"rec": newRecorder()}, tmpl, nil)
		if p != nil {
			t.Fatal("a stopped plan returned a plan")
		}
		wantDiag(t, diags, "", "Planning took too long", "took longer than the budget of 1ns")
		if err := config.PlanStopped(diags); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("PlanStopped = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("a deadline of the caller's", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		_, diags := planTemplate(t, ctx, provider.Registry{"rec": newRecorder()}, tmpl, nil)
		d := wantDiag(t, diags, "", "Planning took too long", "ran past its deadline")
		if strings.Contains(d.Detail, "budget") {
			t.Errorf("the diagnostic names a budget the caller did not set: %s", d.Detail)
		}
	})
	t.Run("stops between the members of a count", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &stopper{recorder: newRecorder(), n: 10, cancel: cancel}
		_, diags := planTemplate(t, ctx, provider.Registry{"rec": s}, tmpl, nil)
		wantDiag(t, diags, "", "Planning cancelled")
		if !errors.Is(config.PlanStopped(diags), context.Canceled) {
			t.Errorf("PlanStopped = %v, want Canceled", config.PlanStopped(diags))
		}
		if s.calls != s.n {
			t.Errorf("the plan validated %d resources after its context ended at the %dth, want none", s.calls-s.n, s.n)
		}
	})
	t.Run("stops inside an expression", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m := config.NewMeter(ctx)
		expr, _ := hclsyntax.ParseExpression([]byte(`[for i in range(10) : upper("x")]`), "x.hcl", hcl.InitialPos)
		config.GuardExpr(expr)
		_, diags := expr.Value(&hcl.EvalContext{Functions: m.Functions()})
		wantDiag(t, diags, "x.hcl", "planning was stopped: context canceled")
	})
}

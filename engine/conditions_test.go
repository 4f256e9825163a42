package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Variables and custom conditions as Terraform 1.11 has them, evaluated
// per target: validations, nullable, optional() defaults, ephemeral
// variables, preconditions, postconditions, output preconditions and
// check blocks (warnings, never blocking).

// condDefs is a stack set on two accounts of one region whose template is
// tmpl; the override gives account 222 its own vars.
func condDefs(t *testing.T, reg provider.Registry, vars, override, tmpl string) *config.StackSet {
	t.Helper()
	defs := mustLoad(t, map[string]string{"defs.hcl": `
stack_set "web" {
  template = "./t"
  vars     = ` + vars + `
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111", "222"]
  }
  instance_override {
    accounts = ["222"]
    vars     = ` + override + `
  }
}`, "t/main.hcl": tmpl}, reg)
	return defs.StackSets[0]
}

func condInst(ss *config.StackSet, account string) *Instance {
	return &Instance{StackSet: ss, StackSetID: "ss", Target: config.Target{Region: "eu", Account: account}}
}

// diagsOf returns the diagnostics of severity sev with the summary.
func diagsOf(diags hcl.Diagnostics, sev hcl.DiagnosticSeverity, summary string) []*hcl.Diagnostic {
	var out []*hcl.Diagnostic
	for _, d := range diags {
		if d.Severity == sev && d.Summary == summary {
			out = append(out, d)
		}
	}
	return out
}

func TestVariableValidationPerTarget(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	ss := condDefs(t, reg, `{ name = "web-prod" }`, `{ name = "x" }`, `
variable "name" {
  type = string
  validation {
    condition     = var.name != "x"
    error_message = "The name must not be ${var.name}."
  }
  validation {
    condition     = substr(var.name, 0, 3) == "web" || var.name == "x"
    error_message = "The name must start with web."
  }
}
resource "rec" "app" { name = var.name }
`)
	e := New(reg)
	if _, diags := e.Plan(condInst(ss, "111"), nil); diags.HasErrors() {
		t.Fatalf("account 111 (valid name): %s", diags.Error())
	}
	p, diags := e.Plan(condInst(ss, "222"), nil)
	if p != nil {
		t.Errorf("account 222: got a plan, want none")
	}
	got := diagsOf(diags, hcl.DiagError, "Invalid value for variable")
	if len(got) != 1 {
		t.Fatalf("account 222: got %d %q errors, want 1 (the first validation only): %v", len(got), "Invalid value for variable", diags)
	}
	d := got[0]
	if !strings.Contains(d.Detail, "The name must not be x.") ||
		!strings.Contains(d.Detail, `validation rule of variable "name" at t/main.hcl:4,3-13`) {
		t.Errorf("detail: got %q, want the error message and the validation's place", d.Detail)
	}
	if d.Subject == nil || d.Subject.Filename != "t/main.hcl" || d.Subject.Start.Line != 2 {
		t.Errorf("subject: got %v, want the variable block at t/main.hcl:2", d.Subject)
	}
}

func TestVariableValidationRulesAtLoad(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	tests := []struct{ name, tmpl, summary string }{
		{"must refer to the variable", `
variable "n" {
  type = string
  validation {
    condition     = length("abc") > 1
    error_message = "x"
  }
}`, "Invalid variable validation condition"},
		{"error_message required", `
variable "n" {
  validation { condition = var.n != "" }
}`, "Missing required argument"},
		{"null default with nullable = false", `
variable "n" {
  type     = string
  default  = null
  nullable = false
}`, "Invalid default value for variable"},
		{"check without assert", `
check "c" {}
`, "Zero assert blocks"},
		{"self in a precondition", `
resource "rec" "a" {
  name = "a"
  lifecycle {
    precondition {
      condition     = self.name != ""
      error_message = "x"
    }
  }
}`, "Unknown reference"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load(t, map[string]string{"defs.hcl": `
stack_set "web" {
  template = "./t"
  vars     = { n = "v" }
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`, "t/main.hcl": tc.tmpl}, reg)
			found := false
			for _, d := range diags {
				found = found || d.Severity == hcl.DiagError && d.Summary == tc.summary
			}
			if !found {
				t.Errorf("got %v, want an error %q", diags, tc.summary)
			}
		})
	}
}

func TestOptionalDefaultsAndNullable(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	ss := condDefs(t, reg, `{ cfg = { size = 3 }, label = "a" }`, `{ cfg = { size = 5, tier = "gold" }, label = null }`, `
variable "cfg" {
  type = object({
    size = number
    tier = optional(string, "basic")
    tags = optional(map(string), {})
  })
}
variable "label" {
  type     = string
  default  = "fallback"
  nullable = false
}
variable "other" {
  type    = object({ a = optional(string, "da") })
  default = {}
}
resource "rec" "app" {
  name    = "app"
  content = "${var.cfg.size}-${var.cfg.tier}-${length(var.cfg.tags)}-${var.label}-${var.other.a}"
}
`)
	e := New(reg)
	for account, want := range map[string]string{"111": "3-basic-0-a-da", "222": "5-gold-0-fallback-da"} {
		p, diags := e.Plan(condInst(ss, account), nil)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", account, diags.Error())
		}
		got := p.Resources[0].After.GetAttr("content")
		if !got.RawEquals(cty.StringVal(want)) {
			t.Errorf("%s: content got %#v, want %q", account, got, want)
		}
	}
}

const preconditionTmpl = `
variable "size" { type = number }
resource "rec" "first" { name = "first" }
resource "rec" "second" {
  name = "second"
  lifecycle {
    precondition {
      condition     = var.size < 10
      error_message = "size must be below 10, not ${var.size}."
    }
    precondition {
      condition     = rec.first.id == "phys-other"
      error_message = "rec.first has id ${rec.first.id}."
    }
  }
}
`

// A precondition known at plan fails the plan; one known only after apply
// is evaluated at apply and stops the instance there, before the resource
// is created, as Terraform.
func TestPreconditions(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	ss := condDefs(t, reg, `{ size = 3 }`, `{ size = 12 }`, preconditionTmpl)
	e := New(reg)

	_, diags := e.Plan(condInst(ss, "222"), nil)
	got := diagsOf(diags, hcl.DiagError, "Resource precondition failed")
	if len(got) != 1 || got[0].Detail != "size must be below 10, not 12." || got[0].Subject.Start.Line != 8 {
		t.Fatalf("plan of 222: got %v, want one precondition error at line 8", diags)
	}

	j := newJournal()
	p, diags := e.Plan(condInst(ss, "111"), j.list())
	if diags.HasErrors() {
		t.Fatalf("plan of 111: the second precondition is unknown until apply, want no error: %s", diags.Error())
	}
	_, err := e.Apply(context.Background(), p, j, nil)
	if err == nil || !strings.Contains(err.Error(), "rec.first has id phys-first.") {
		t.Fatalf("apply of 111: got %v, want the precondition's message", err)
	}
	if _, ok := j.recs["rec.second"]; ok {
		t.Errorf("rec.second was created although its precondition failed")
	}
	if _, ok := j.recs["rec.first"]; !ok {
		t.Errorf("rec.first was not created; it has no condition")
	}
}

func TestPostconditionsAndOutputPreconditions(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	ss := condDefs(t, reg, `{ want = "phys-app" }`, `{ want = "phys-other" }`, `
variable "want" { type = string }
resource "rec" "app" {
  name = "app"
  lifecycle {
    postcondition {
      condition     = self.id == var.want
      error_message = "rec.app got id ${self.id}, want ${var.want}."
    }
  }
}
output "id" {
  value = rec.app.id
  precondition {
    condition     = var.want != ""
    error_message = "want must be set."
  }
}
`)
	e := New(reg)
	j := newJournal()
	p := planApply(t, e, condInst(ss, "111"), j)
	if p == nil {
		t.Fatal("no plan")
	}
	// Once recorded, self is known at plan: the postcondition fails there.
	j2 := newJournal()
	p2, diags := e.Plan(condInst(ss, "222"), j2.list())
	if diags.HasErrors() {
		t.Fatalf("first plan of 222: self.id is unknown until apply, want no error: %s", diags.Error())
	}
	if _, err := e.Apply(context.Background(), p2, j2, nil); err == nil || !strings.Contains(err.Error(), "rec.app got id phys-app, want phys-other.") {
		t.Fatalf("apply of 222: got %v, want the postcondition's message", err)
	}
	_, diags = e.Plan(condInst(ss, "222"), j2.list())
	if got := diagsOf(diags, hcl.DiagError, "Resource postcondition failed"); len(got) != 1 {
		t.Errorf("second plan of 222: got %v, want the postcondition error", diags)
	}

	ss = condDefs(t, reg, `{ want = "" }`, `{ want = "x" }`, strings.Replace(`
variable "want" { type = string }
output "id" {
  value = var.want
  precondition {
    condition     = var.want != ""
    error_message = "want must be set."
  }
}`, "\t", "  ", -1))
	_, diags = e.Plan(condInst(ss, "111"), nil)
	if got := diagsOf(diags, hcl.DiagError, "Module output value precondition failed"); len(got) != 1 || got[0].Detail != "want must be set." {
		t.Errorf("output precondition: got %v", diags)
	}
	if _, diags := e.Plan(condInst(ss, "222"), nil); diags.HasErrors() {
		t.Errorf("output precondition holds for 222: %s", diags.Error())
	}
}

// A false assert is a warning: the plan is made and applies.
func TestCheckBlockWarns(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	ss := condDefs(t, reg, `{ replicas = 1 }`, `{ replicas = 3 }`, `
variable "replicas" { type = number }
locals { ha = var.replicas >= 2 }
resource "rec" "app" { name = "app" }
check "high_availability" {
  assert {
    condition     = local.ha
    error_message = "${var.replicas} replica is not highly available."
  }
  assert {
    condition     = rec.app.id != ""
    error_message = "no id"
  }
}
`)
	e := New(reg)
	j := newJournal()
	p, diags := e.Plan(condInst(ss, "111"), j.list())
	if diags.HasErrors() || p == nil {
		t.Fatalf("plan of 111: a check never blocks: %v", diags)
	}
	w := diagsOf(diags, hcl.DiagWarning, "Check block assertion failed")
	if len(w) != 1 || w[0].Detail != "1 replica is not highly available." || w[0].Subject.Start.Line != 7 {
		t.Errorf("plan of 111: got %v, want one warning at line 7 (the unknown assert skipped)", diags)
	}
	if !p.HasChanges() {
		t.Errorf("plan of 111: want rec.app created")
	}
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatalf("apply of 111: a check never blocks: %v", err)
	}
	if _, diags := e.Plan(condInst(ss, "222"), nil); len(diags) != 0 {
		t.Errorf("plan of 222: got %v, want no diagnostics", diags)
	}
}

// Ephemeral variables reach locals and conditions, never what stackd
// records; their values are redacted as sensitive ones.
func TestEphemeralVariables(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	base := `
variable "token" {
  type      = string
  ephemeral = true
  validation {
    condition     = var.token != "abc"
    error_message = "token ${var.token} is too short."
  }
}
locals { token_ok = substr(var.token, 0, 6) == "s3cr3t" }
`
	ss := condDefs(t, reg, `{ token = "s3cr3t-long" }`, `{ token = "abc" }`, base+`
resource "rec" "app" { name = local.token_ok ? "long" : "short" }
`)
	if !ss.SensitiveVar("token") {
		t.Errorf("an ephemeral variable is redacted as a sensitive one: SensitiveVar got false")
	}
	e := New(reg)
	_, diags := e.Plan(condInst(ss, "111"), nil)
	if got := diagsOf(diags, hcl.DiagError, "Invalid use of ephemeral value"); len(got) != 1 {
		t.Fatalf("a resource name derived from an ephemeral value: got %v, want one error", diags)
	}
	ss = condDefs(t, reg, `{ token = "s3cr3t-long" }`, `{ token = "abc" }`, base+`
resource "rec" "app" { name = "app" }
check "token" {
  assert {
    condition     = local.token_ok
    error_message = "short token"
  }
}
`)
	if _, diags := e.Plan(condInst(ss, "111"), nil); len(diags) != 0 {
		t.Errorf("111: got %v, want no diagnostics", diags)
	}
	_, diags = e.Plan(condInst(ss, "222"), nil)
	v := diagsOf(diags, hcl.DiagError, "Invalid value for variable")
	if len(v) != 1 || strings.Contains(v[0].Detail, "abc") || !strings.Contains(v[0].Detail, "will not be displayed") {
		t.Errorf("222: got %v, want the validation error with its message withheld", diags)
	}
	for _, out := range []string{`output "t" { value = var.token }`, `output "t" { value = local.token_ok }`} {
		ss = condDefs(t, reg, `{ token = "s3cr3t-long" }`, `{ token = "abc" }`, base+out)
		_, diags = e.Plan(condInst(ss, "111"), nil)
		if got := diagsOf(diags, hcl.DiagError, "Invalid use of ephemeral value"); len(got) != 1 {
			t.Errorf("%s: got %v, want one error", out, diags)
		}
	}
}

// An ephemeral value crosses a module call only into an ephemeral
// variable and out of an ephemeral output, as in Terraform; the root
// template's outputs are recorded and never ephemeral.
func TestEphemeralModuleBoundaries(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	root := func(varEphemeral, outEphemeral, rootOut string) map[string]string {
		return map[string]string{"defs.hcl": `
stack_set "web" {
  template = "./t"
  vars     = { token = "s3cr3t-long" }
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`, "t/main.hcl": `
variable "token" {
  type      = string
  ephemeral = true
}
module "m" {
  source = "./mod"
  token  = var.token
}
resource "rec" "app" { name = "app" }
check "token" {
  assert {
    condition     = module.m.ok
    error_message = "bad token"
  }
}
` + rootOut, "t/mod/main.hcl": `
variable "token" {
  type      = string
  ephemeral = ` + varEphemeral + `
}
output "ok" {
  value     = substr(var.token, 0, 6) == "s3cr3t"
  ephemeral = ` + outEphemeral + `
}
`}
	}
	e := New(reg)
	tests := []struct {
		name                     string
		varEph, outEph, rootOut  string
		wantSummary, wantMessage string
	}{
		{name: "ephemeral variable and output", varEph: "true", outEph: "true"},
		{name: "module variable not ephemeral", varEph: "false", outEph: "true", wantSummary: "Invalid use of ephemeral value", wantMessage: "not declared as accepting ephemeral values"},
		{name: "module output not ephemeral", varEph: "true", outEph: "false", wantSummary: "Invalid use of ephemeral value", wantMessage: "not declared as returning an ephemeral value"},
		{name: "root output ephemeral", varEph: "true", outEph: "true", rootOut: `output "x" {
  value     = 1
  ephemeral = true
}`, wantSummary: "Ephemeral output not allowed", wantMessage: "root module"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defs := mustLoad(t, root(tc.varEph, tc.outEph, tc.rootOut), reg)
			_, diags := e.Plan(condInst(defs.StackSets[0], "111"), nil)
			if tc.wantSummary == "" {
				if len(diags) != 0 {
					t.Errorf("got %v, want no diagnostics", diags)
				}
				return
			}
			got := diagsOf(diags, hcl.DiagError, tc.wantSummary)
			if len(got) != 1 || !strings.Contains(got[0].Detail, tc.wantMessage) {
				t.Errorf("got %v, want one error %q saying %q", diags, tc.wantSummary, tc.wantMessage)
			}
		})
	}
}

// Data sources have preconditions and postconditions (self is what was
// read); a check block's scoped data source that cannot be read is a
// warning, and it cannot be referenced from outside its check block.
func TestDataConditionsAndScopedData(t *testing.T) {
	e := New(provider.Registry{"rec": newRecorder()})
	tmpl := `
variable "want" { type = string }
data "terraform_remote_state" "net" {
  backend = "local"
  config  = { path = "network/terraform.tfstate" }
  lifecycle {
    precondition {
      condition     = var.want != ""
      error_message = "want is empty."
    }
    postcondition {
      condition     = self.outputs.vpc_id == var.want
      error_message = "vpc is ${self.outputs.vpc_id}, want ${var.want}."
    }
  }
}
check "missing" {
  data "terraform_remote_state" "gone" {
    backend = "local"
    config  = { path = "nowhere/terraform.tfstate" }
  }
  assert {
    condition     = data.terraform_remote_state.gone.outputs.vpc_id == "x"
    error_message = "unreached"
  }
}
resource "rec" "app" { name = "app" }
`
	plan := func(want, extra string) hcl.Diagnostics {
		t.Helper()
		inst, err := builtinInstance(t, e, map[string]string{
			"defs.hcl": webDefs(`{ want = "` + want + `" }`), "t/main.hcl": tmpl + extra,
			"t/network/terraform.tfstate": strings.Replace(remoteStateJSON, "%s", "1", 1),
		})
		if err != nil {
			return err.(hcl.Diagnostics)
		}
		_, diags := e.Plan(inst, nil)
		return diags
	}
	diags := plan("vpc-1", "")
	if diags.HasErrors() {
		t.Fatalf("want vpc-1: %s", diags.Error())
	}
	warned := false
	for _, d := range diags {
		warned = warned || d.Severity == hcl.DiagWarning
		if d.Detail == "unreached" {
			t.Errorf("an assert on a data source that could not be read was evaluated: %v", d)
		}
	}
	t.Logf("warnings of the check block: %v", diags)
	if !warned {
		t.Errorf("want vpc-1: got %v, want a warning for the scoped data source", diags)
	}
	if got := diagsOf(plan("vpc-2", ""), hcl.DiagError, "Resource postcondition failed"); len(got) != 1 || got[0].Detail != "vpc is vpc-1, want vpc-2." {
		t.Errorf("want vpc-2: got %v, want the data source's postcondition error", got)
	}
	if got := diagsOf(plan("", ""), hcl.DiagError, "Resource precondition failed"); len(got) != 1 || got[0].Detail != "want is empty." {
		t.Errorf("want empty: got %v, want the data source's precondition error", got)
	}
	outside := `output "leak" { value = data.terraform_remote_state.gone.outputs }`
	if got := diagsOf(plan("vpc-1", outside), hcl.DiagError, "Reference to scoped resource"); len(got) != 1 {
		t.Errorf("reference from outside the check: got %v, want one error", plan("vpc-1", outside))
	}
}

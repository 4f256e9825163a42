package config

import (
	"testing"
	"testing/fstest"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// loadTemplateText loads a stack set over the template src and returns
// the template.
func loadTemplateText(t *testing.T, vars, src string) (*StackSet, *Template) {
	t.Helper()
	fsys := fstest.MapFS{
		"defs.hcl": {Data: []byte(`
stack_set "web" {
  template = "./t"
  vars     = ` + vars + `
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`)},
		"t/main.hcl": {Data: []byte(src)},
	}
	defs, diags := Load(fsys, ".", provider.Registry{})
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	ss := defs.StackSets[0]
	return ss, ss.Template
}

// Variable blocks decode as Terraform 1.11's: nullable defaults to true,
// optional() attributes get their defaults in the default value and in
// values given, validations are kept in order.
func TestVariableDecoding(t *testing.T) {
	ss, tmpl := loadTemplateText(t, `{ cfg = { size = 2 }, plain = null }`, `
variable "plain" {}
variable "cfg" {
  type = object({
    size = number
    tier = optional(string, "basic")
    tags = optional(list(string))
  })
  default   = { size = 1 }
  nullable  = false
  ephemeral = true
  validation {
    condition     = var.cfg.size > 0
    error_message = "size must be positive."
  }
  validation {
    condition     = var.cfg.tier != ""
    error_message = "tier must be set."
  }
}
output "o" {
  value     = 1
  ephemeral = true
  precondition {
    condition     = var.plain == null
    error_message = "plain is set."
  }
}
check "c" {
  assert {
    condition     = true
    error_message = "a"
  }
  assert {
    condition     = true
    error_message = "b"
  }
}
`)
	plain, cfg := tmpl.Variables["plain"], tmpl.Variables["cfg"]
	if !plain.Nullable || plain.Ephemeral || plain.TypeDefaults != nil || len(plain.Validations) != 0 || plain.Type != cty.DynamicPseudoType {
		t.Errorf("plain: got %+v, want a nullable variable of any type without validations", plain)
	}
	if cfg.Nullable || !cfg.Ephemeral || cfg.TypeDefaults == nil || len(cfg.Validations) != 2 {
		t.Errorf("cfg: got nullable %v, ephemeral %v, defaults %v, %d validations; want false, true, set, 2",
			cfg.Nullable, cfg.Ephemeral, cfg.TypeDefaults != nil, len(cfg.Validations))
	}
	wantDefault := cty.ObjectVal(map[string]cty.Value{"size": cty.NumberIntVal(1), "tier": cty.StringVal("basic"), "tags": cty.NullVal(cty.List(cty.String))})
	if !cfg.Default.RawEquals(wantDefault) {
		t.Errorf("cfg default: got %#v, want %#v", cfg.Default, wantDefault)
	}
	wantGiven := cty.ObjectVal(map[string]cty.Value{"size": cty.NumberIntVal(2), "tier": cty.StringVal("basic"), "tags": cty.NullVal(cty.List(cty.String))})
	if got := ss.Vars["cfg"]; !got.RawEquals(wantGiven) {
		t.Errorf("cfg given: got %#v, want %#v", got, wantGiven)
	}
	if got := ss.Vars["plain"]; !got.IsNull() {
		t.Errorf("plain given null: got %#v, want null (nullable)", got)
	}
	if !ss.SensitiveVar("cfg") || ss.SensitiveVar("plain") {
		t.Errorf("SensitiveVar: an ephemeral variable is redacted, a plain one is not")
	}
	if o := tmpl.Outputs["o"]; !o.Ephemeral || len(o.Preconditions) != 1 {
		t.Errorf("output o: got ephemeral %v, %d preconditions; want true, 1", o.Ephemeral, len(o.Preconditions))
	}
	if c := tmpl.Checks["c"]; c == nil || len(c.Asserts) != 2 || c.Data != "" {
		t.Errorf("check c: got %+v, want two asserts and no data", c)
	}
	for _, node := range []string{"var.cfg", "check.c"} {
		found := false
		for _, n := range tmpl.Order {
			found = found || n == node
		}
		if !found {
			t.Errorf("order %v lacks the condition node %s", tmpl.Order, node)
		}
	}
}

// nullable = false turns a null given into the default, or refuses it
// without one.
func TestVariableConvertNullable(t *testing.T) {
	withDefault := &Variable{Name: "a", Type: cty.String, Default: cty.StringVal("d"), Nullable: true}
	if got, err := withDefault.Convert(cty.NullVal(cty.String)); err != nil || !got.IsNull() {
		t.Errorf("nullable: got %#v, %v; want null", got, err)
	}
	withDefault.Nullable = false
	if got, err := withDefault.Convert(cty.NullVal(cty.String)); err != nil || !got.RawEquals(cty.StringVal("d")) {
		t.Errorf("nullable = false: got %#v, %v; want the default", got, err)
	}
	required := &Variable{Name: "b", Type: cty.String}
	if _, err := required.Convert(cty.NullVal(cty.String)); err == nil {
		t.Errorf("nullable = false without a default: got no error")
	}
	if got, err := required.Convert(cty.NumberIntVal(3)); err != nil || !got.RawEquals(cty.StringVal("3")) {
		t.Errorf("conversion: got %#v, %v; want \"3\"", got, err)
	}
}

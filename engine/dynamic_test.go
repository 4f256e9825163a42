package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// blockRecorder is the recorder with a schema of nested blocks, as
// Terraform providers have: rule blocks holding tag blocks.
type blockRecorder struct{ *recorder }

var ruleSpec = &hcldec.BlockListSpec{TypeName: "rule", Nested: hcldec.ObjectSpec{
	"port": &hcldec.AttrSpec{Name: "port", Type: cty.Number, Required: true},
	"tag": &hcldec.BlockListSpec{TypeName: "tag", Nested: hcldec.ObjectSpec{
		"key": &hcldec.AttrSpec{Name: "key", Type: cty.String},
	}},
}}

func (blockRecorder) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{
			"name": {Type: cty.String, Required: true, Recreation: provider.Always},
			"rule": {Type: hcldec.ImpliedType(ruleSpec), Block: ruleSpec, Recreation: provider.Never},
		},
		Attributes: []string{"id", "digest"},
	}
}

// dynamicDefs is dynamicVarDefs without variables.
const dynamicDefs = `
stack_set "web" {
  template = "./tmpl"
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}
`

const dynamicVarDefs = `
stack_set "web" {
  template = "./tmpl"
  vars = { ports = [80, 443] }
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}
`

// ruleVal is a rule block's value.
func ruleVal(port int64, tags ...string) cty.Value {
	tv := cty.ListValEmpty(cty.Object(map[string]cty.Type{"key": cty.String}))
	if len(tags) > 0 {
		var vs []cty.Value
		for _, t := range tags {
			vs = append(vs, cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(t)}))
		}
		tv = cty.ListVal(vs)
	}
	return cty.ObjectVal(map[string]cty.Value{"port": cty.NumberIntVal(port), "tag": tv})
}

func TestDynamicBlocks(t *testing.T) {
	tmpl := `
variable "ports" { type = list(number) }
resource "rec" "config" {
  name = "config"
}
resource "blk" "fw" {
  name = "fw"
  rule {
    port = 22
  }
  dynamic "rule" {
    for_each = var.ports
    iterator = p
    content {
      port = p.value
      dynamic "tag" {
        for_each = ["a-${p.key}", "b"]
        content { key = "${tag.value}-${p.value}" }
      }
    }
  }
  rule {
    port = 8080
    dynamic "tag" {
      for_each = rec.config.id == "" ? [] : [rec.config.id]
      content { key = tag.value }
    }
  }
}
`
	rec := newRecorder()
	reg := provider.Registry{"rec": rec, "blk": blockRecorder{rec}}
	e := New(reg)
	defs := mustLoad(t, map[string]string{"web.hcl": dynamicVarDefs, "tmpl/main.hcl": tmpl}, reg)
	ss := defs.StackSet("web")
	// A reference inside a dynamic block's content is a dependency.
	if got := ss.Template.Resources["blk.fw"].Deps; !cmp.Equal(got, []string{"rec.config"}) {
		t.Errorf("deps of blk.fw: got %v, want [rec.config]", got)
	}
	inst := &Instance{StackSet: ss, StackSetID: "id-1", Target: config.Target{Region: "eu", Account: "111"}}
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var fw *ResourcePlan
	for _, rp := range p.Resources {
		if rp.Address == "blk.fw" {
			fw = rp
		}
	}
	if fw == nil {
		t.Fatalf("no plan for blk.fw: %v", actions(p))
	}
	rules := fw.After.GetAttr("rule")
	// The blocks keep their order: static, generated, static; the last one's
	// tag depends on an id known after apply.
	if n := rules.LengthInt(); n != 4 {
		t.Fatalf("rule blocks: got %d, want 4", n)
	}
	want := []cty.Value{ruleVal(22), ruleVal(80, "a-0-80", "b-80"), ruleVal(443, "a-1-443", "b-443")}
	for i, w := range want {
		if got := rules.Index(cty.NumberIntVal(int64(i))); !got.RawEquals(w) {
			t.Errorf("rule %d: got %#v, want %#v", i, got, w)
		}
	}
	if last := rules.Index(cty.NumberIntVal(3)); last.GetAttr("tag").IsKnown() {
		t.Errorf("rule 3's tag: got %#v, want unknown (for_each known after apply)", last.GetAttr("tag"))
	}

	j := newJournal()
	planApply(t, e, inst, j)
	applied := rec.world["phys-fw"].GetAttr("rule")
	wantLast := ruleVal(8080, "phys-config")
	if got := applied.Index(cty.NumberIntVal(3)); !got.RawEquals(wantLast) {
		t.Errorf("applied rule 3: got %#v, want %#v", got, wantLast)
	}
	// Applied as planned: the next plan changes nothing.
	again, diags := e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if again.HasChanges() {
		t.Errorf("plan after apply: got %v, want no changes", actions(again))
	}
	// Another variable value changes the generated blocks only.
	inst.Vars = map[string]cty.Value{"ports": cty.ListVal([]cty.Value{cty.NumberIntVal(80)})}
	upd, diags := e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := actions(upd); got["blk.fw"] != "Update" || got["rec.config"] != "NoOp" {
		t.Errorf("after dropping a port: got %v, want blk.fw Update, rec.config NoOp", got)
	}
}

func TestDynamicBlockUnknownForEach(t *testing.T) {
	tmpl := `
resource "rec" "config" {
  name = "config"
}
resource "blk" "fw" {
  name = "fw"
  dynamic "rule" {
    for_each = rec.config.id == "" ? [] : [rec.config.id]
    content { port = 1 }
  }
}
`
	rec := newRecorder()
	reg := provider.Registry{"rec": rec, "blk": blockRecorder{rec}}
	e := New(reg)
	defs := mustLoad(t, map[string]string{"web.hcl": dynamicDefs, "tmpl/main.hcl": tmpl}, reg)
	inst := &Instance{StackSet: defs.StackSet("web"), StackSetID: "id-1", Target: config.Target{Region: "eu", Account: "111"}}
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, c := range p.Changes() {
		if c.ResourceChange.LogicalResourceId != "blk.fw" {
			continue
		}
		for _, pc := range c.ResourceChange.PropertyChanges {
			if pc.Name == "rule" && pc.AfterValue != KnownAfterApplyPlaceholder {
				t.Errorf("rule: got %v, want %s (a dynamic block of unknown for_each is unknown)", pc.AfterValue, KnownAfterApplyPlaceholder)
			}
		}
	}
	j := newJournal()
	planApply(t, e, inst, j)
	if got := rec.world["phys-fw"].GetAttr("rule"); got.LengthInt() != 1 {
		t.Errorf("applied rules: got %#v, want one", got)
	}
}

func TestDynamicBlockDiagnostics(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"meta block", `dynamic "lifecycle" {
    for_each = []
    content {}
  }`, `cannot generate "lifecycle" blocks`},
		{"unknown type", `dynamic "nosuch" {
    for_each = []
    content {}
  }`, `Blocks of type "nosuch" are not expected here`},
		{"no content", `dynamic "rule" {
    for_each = []
  }`, "needs one content block"},
		{"two contents", `dynamic "rule" {
    for_each = []
    content { port = 1 }
    content { port = 2 }
  }`, "may have one content block"},
		{"no for_each", `dynamic "rule" {
    content { port = 1 }
  }`, `"for_each" is required`},
		{"bad iterator", `dynamic "rule" {
    for_each = []
    iterator = "r"
    content { port = 1 }
  }`, "iterator takes a name without quotes"},
		{"bad content", `dynamic "rule" {
    for_each = []
    content {
      port = 1
      nope = 1
    }
  }`, `"nope" is not expected here`},
		{"undeclared reference in content", `dynamic "rule" {
    for_each = [1]
    content { port = var.nope }
  }`, "An input variable named \"nope\" is not declared"},
		{"undeclared reference in for_each", `dynamic "rule" {
    for_each = local.nope
    content { port = 1 }
  }`, "A local value named \"nope\" is not declared"},
		{"nested unknown type", `rule {
    port = 1
    dynamic "nosuch" {
      for_each = []
      content {}
    }
  }`, `Blocks of type "nosuch" are not expected here`},
	}
	rec := newRecorder()
	reg := provider.Registry{"rec": rec, "blk": blockRecorder{rec}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := "resource \"blk\" \"fw\" {\n  name = \"fw\"\n  " + tc.body + "\n}\n"
			_, diags := load(t, map[string]string{"web.hcl": dynamicDefs, "tmpl/main.hcl": tmpl}, reg)
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", diags, tc.want)
			}
			if !strings.Contains(diags.Error(), "main.hcl:") {
				t.Errorf("diagnostic without file and line: %v", diags)
			}
		})
	}
}

func TestDynamicBlockPlanErrors(t *testing.T) {
	cases := []struct{ name, forEach, want string }{
		{"null", "null", "Cannot use a null value in for_each"},
		{"number", "3", "An iterable collection is required"},
	}
	rec := newRecorder()
	reg := provider.Registry{"rec": rec, "blk": blockRecorder{rec}}
	e := New(reg)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := "resource \"blk\" \"fw\" {\n  name = \"fw\"\n  dynamic \"rule\" {\n    for_each = " + tc.forEach + "\n    content { port = 1 }\n  }\n}\n"
			defs := mustLoad(t, map[string]string{"web.hcl": dynamicDefs, "tmpl/main.hcl": tmpl}, reg)
			inst := &Instance{StackSet: defs.StackSet("web"), StackSetID: "id-1", Target: config.Target{Region: "eu", Account: "111"}}
			_, diags := e.Plan(inst, nil)
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) || !strings.Contains(diags.Error(), "main.hcl:4") {
				t.Fatalf("got %v, want an error at main.hcl:4 saying %q", diags, tc.want)
			}
		})
	}
}

package tfplugin

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// A nested attribute's configured value is decoded as Terraform decodes
// it: its optional and computed fields may be left out (null), a required
// one may not; every nesting mode; the value is of the implied type.
func TestNestedAttributeConfigType(t *testing.T) {
	fields := func() map[string]*Attribute {
		return map[string]*Attribute{
			"color": {Type: cty.String, Optional: true},
			"size":  {Type: cty.Number, Optional: true, Computed: true},
			"id":    {Type: cty.String, Computed: true},
			"token": {Type: cty.String, Optional: true, Sensitive: true},
			"inner": {Optional: true, NestedType: &Object{Nesting: NestingSingle, Attributes: map[string]*Attribute{
				"a": {Type: cty.String, Optional: true},
				"b": {Type: cty.String, Optional: true},
			}}},
		}
	}
	withRequired := fields()
	withRequired["key"] = &Attribute{Type: cty.String, Required: true}
	b := &Block{Attributes: map[string]*Attribute{
		"single": {Optional: true, NestedType: &Object{Nesting: NestingSingle, Attributes: fields()}},
		"list":   {Optional: true, NestedType: &Object{Nesting: NestingList, Attributes: fields()}},
		"set":    {Optional: true, NestedType: &Object{Nesting: NestingSet, Attributes: fields()}},
		"map":    {Optional: true, NestedType: &Object{Nesting: NestingMap, Attributes: fields()}},
		"req":    {Optional: true, NestedType: &Object{Nesting: NestingSingle, Attributes: withRequired}},
	}}
	schema := blockSchema(b, true)
	for _, tc := range []struct {
		prop, src, wantErr string
		check              func(cty.Value) bool
	}{
		{prop: "single", src: `{ color = "blue" }`, check: func(v cty.Value) bool {
			return v.GetAttr("color").AsString() == "blue" && v.GetAttr("size").IsNull() && v.GetAttr("inner").IsNull()
		}},
		{prop: "single", src: `{}`, check: func(v cty.Value) bool { return !v.IsNull() && v.GetAttr("token").IsNull() }},
		{prop: "single", src: `{ inner = { a = "x" } }`, check: func(v cty.Value) bool {
			return v.GetAttr("inner").GetAttr("a").AsString() == "x" && v.GetAttr("inner").GetAttr("b").IsNull()
		}},
		{prop: "single", src: `{ size = 3, id = "set by hand" }`, check: func(v cty.Value) bool { return v.GetAttr("id").AsString() == "set by hand" }},
		{prop: "list", src: `[{ color = "a" }, { size = 2 }]`, check: func(v cty.Value) bool {
			l := v.AsValueSlice()
			return len(l) == 2 && l[0].GetAttr("size").IsNull() && l[1].GetAttr("color").IsNull()
		}},
		{prop: "set", src: `[{ color = "a" }, { color = "b" }]`, check: func(v cty.Value) bool { return v.LengthInt() == 2 }},
		{prop: "map", src: `{ x = { color = "a" }, y = {} }`, check: func(v cty.Value) bool {
			return v.Index(cty.StringVal("y")).GetAttr("color").IsNull()
		}},
		{prop: "req", src: `{ key = "k" }`, check: func(v cty.Value) bool { return v.GetAttr("key").AsString() == "k" }},
		{prop: "req", src: `{ color = "a" }`, wantErr: `attribute "key" is required`},
		// An attribute the object does not have is dropped, as Terraform
		// drops it (hashicorp/terraform#33570): the same result.
		{prop: "single", src: `{ nope = 1, color = "c" }`, check: func(v cty.Value) bool {
			return !v.Type().HasAttribute("nope") && v.GetAttr("color").AsString() == "c"
		}},
	} {
		t.Run(tc.prop+" "+tc.src, func(t *testing.T) {
			p := schema.Properties[tc.prop]
			expr, diags := hclsyntax.ParseExpression([]byte(tc.src), "t.tf", hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			v, diags := expr.Value(nil)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			got, err := convert.Convert(v, p.ConfigType())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %#v, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Type().Equals(p.Type) {
				t.Errorf("type %#v, want the implied %#v", got.Type(), p.Type)
			}
			if !tc.check(got) {
				t.Errorf("got %#v", got)
			}
		})
	}
}

// In a nested block, a nested attribute decodes the same way.
func TestNestedAttributeInBlock(t *testing.T) {
	b := &Block{BlockTypes: map[string]*NestedBlock{
		"rule": {Nesting: NestingList, Block: Block{Attributes: map[string]*Attribute{
			"name": {Type: cty.String, Required: true},
			"opts": {Optional: true, NestedType: &Object{Nesting: NestingSingle, Attributes: map[string]*Attribute{
				"a": {Type: cty.String, Optional: true},
				"b": {Type: cty.Number, Optional: true},
			}}},
		}}},
	}}
	p := blockSchema(b, true).Properties["rule"]
	f, diags := hclsyntax.ParseConfig([]byte("rule {\n  name = \"r\"\n  opts = { a = \"x\" }\n}\n"), "t.tf", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	v, diags := hcldec.Decode(f.Body, &hcldec.ObjectSpec{"rule": p.Block}, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	rule := v.GetAttr("rule")
	if !rule.Type().Equals(p.Type) {
		t.Errorf("type %#v, want %#v", rule.Type(), p.Type)
	}
	opts := rule.Index(cty.NumberIntVal(0)).GetAttr("opts")
	if opts.GetAttr("a").AsString() != "x" || !opts.GetAttr("b").IsNull() {
		t.Errorf("opts = %#v", opts)
	}
}

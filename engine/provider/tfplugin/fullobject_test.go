package tfplugin

import (
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// fullObject drops the marks of the configuration at any depth (values
// are encoded for the provider without them) and fills what is not set.
func TestFullObjectDropsMarksAtAnyDepth(t *testing.T) {
	b := &Block{Attributes: map[string]*Attribute{
		"s":     {Type: cty.String, Optional: true},
		"l":     {Type: cty.List(cty.String), Optional: true},
		"m":     {Type: cty.Map(cty.String), Optional: true},
		"unset": {Type: cty.String, Optional: true},
	}}
	secret := func(v cty.Value) cty.Value { return v.Mark(provider.SensitiveMark) }
	v := secret(cty.ObjectVal(map[string]cty.Value{
		"s": secret(cty.StringVal("x")),
		"l": cty.ListVal([]cty.Value{cty.StringVal("a"), secret(cty.StringVal("b"))}),
		"m": secret(cty.MapVal(map[string]cty.Value{"k": secret(cty.StringVal("v"))})),
	}))
	got, err := fullObject(b, v, b.ImpliedType())
	if err != nil {
		t.Fatal(err)
	}
	if got.ContainsMarked() {
		t.Errorf("fullObject kept marks: %#v", got)
	}
	want := cty.ObjectVal(map[string]cty.Value{
		"s":     cty.StringVal("x"),
		"l":     cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}),
		"m":     cty.MapVal(map[string]cty.Value{"k": cty.StringVal("v")}),
		"unset": cty.NullVal(cty.String),
	})
	if !got.RawEquals(want) {
		t.Errorf("fullObject = %#v, want %#v", got, want)
	}
}

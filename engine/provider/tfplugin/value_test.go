package tfplugin

import (
	"strings"
	"testing"

	"github.com/stackd/stackd/engine/provider"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/msgpack"
)

func TestValueEncoding(t *testing.T) {
	ty := cty.Object(map[string]cty.Type{"name": cty.String, "n": cty.Number, "tags": cty.List(cty.String)})
	v := cty.ObjectVal(map[string]cty.Value{
		"name": cty.StringVal("x").Mark("sensitive"),
		"n":    cty.UnknownVal(cty.Number),
		"tags": cty.ListVal([]cty.Value{cty.StringVal("a")}),
	})
	b, err := encodeValue(v, ty)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeValue(b, nil, ty)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := v.UnmarkDeep()
	if !got.RawEquals(want) {
		t.Errorf("msgpack round trip = %#v, want %#v", got, want)
	}

	// A provider may answer JSON instead of msgpack.
	got, err = decodeValue(nil, []byte(`{"name":"j","n":2,"tags":["b"]}`), ty)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetAttr("name").AsString() != "j" || got.GetAttr("tags").LengthInt() != 1 {
		t.Errorf("JSON decode = %#v", got)
	}
	// Neither is null.
	if got, err := decodeValue(nil, nil, ty); err != nil || !got.IsNull() {
		t.Errorf("empty DynamicValue = %#v, %v; want null", got, err)
	}
	// Malformed answers are errors, never panics.
	for _, bad := range [][]byte{{0xc1}, {0x81, 0xa4}, []byte("garbage"), {0xdf, 0xff, 0xff, 0xff, 0xff}} {
		if _, err := decodeValue(bad, nil, ty); err == nil {
			t.Errorf("decode of % x: no error", bad)
		}
	}
	if _, err := decodeValue(nil, []byte(`{"name":`), ty); err == nil {
		t.Error("decode of truncated JSON: no error")
	}
	// A value of the wrong shape is refused without its content in the error.
	_, err = encodeValue(cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("hunter2")}), ty)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("encode of a non-conforming value: %v; want an error without the value", err)
	}
	// Null stands for the zero value.
	b, err = encodeValue(cty.NilVal, ty)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := msgpack.Unmarshal(b, ty); !got.IsNull() {
		t.Errorf("encode(NilVal) = %#v, want null", got)
	}
}

func TestFormatPath(t *testing.T) {
	for _, tc := range []struct {
		p    cty.Path
		want string
	}{
		{cty.GetAttrPath("a"), "a"},
		{cty.GetAttrPath("tag").IndexInt(0).GetAttr("key"), "tag[0].key"},
		{cty.GetAttrPath("labels").IndexString("env"), `labels["env"]`},
		{cty.Path{cty.IndexStep{Key: cty.UnknownVal(cty.String)}}, "[?]"},
		{nil, ""},
	} {
		if got := provider.FormatPath(tc.p); got != tc.want {
			t.Errorf("FormatPath = %q, want %q", got, tc.want)
		}
	}
}

func TestImpliedTypeNesting(t *testing.T) {
	inner := Block{Attributes: map[string]*Attribute{"k": {Type: cty.String, Optional: true}}}
	dyn := Block{Attributes: map[string]*Attribute{"v": {Type: cty.DynamicPseudoType, Optional: true}}}
	b := &Block{
		Attributes: map[string]*Attribute{
			"m": {NestedType: &Object{Nesting: NestingMap, Attributes: map[string]*Attribute{
				"s": {Type: cty.String, Sensitive: true},
			}}},
			"l": {NestedType: &Object{Nesting: NestingSet, Attributes: map[string]*Attribute{"x": {Type: cty.Bool}}}},
		},
		BlockTypes: map[string]*NestedBlock{
			"single": {Block: inner, Nesting: NestingSingle},
			"group":  {Block: inner, Nesting: NestingGroup},
			"set":    {Block: inner, Nesting: NestingSet},
			"map":    {Block: inner, Nesting: NestingMap},
			"dynl":   {Block: dyn, Nesting: NestingList},
		},
	}
	obj := cty.Object(map[string]cty.Type{"k": cty.String})
	want := cty.Object(map[string]cty.Type{
		"m":      cty.Map(cty.Object(map[string]cty.Type{"s": cty.String})),
		"l":      cty.Set(cty.Object(map[string]cty.Type{"x": cty.Bool})),
		"single": obj, "group": obj, "set": cty.Set(obj), "map": cty.Map(obj),
		"dynl": cty.DynamicPseudoType,
	})
	if got := b.ImpliedType(); !got.Equals(want) {
		t.Errorf("ImpliedType = %#v\nwant %#v", got, want)
	}
	if !b.IsSensitive(cty.GetAttrPath("m").IndexString("a").GetAttr("s")) {
		t.Error("m[\"a\"].s is not sensitive")
	}
	v := cty.ObjectVal(map[string]cty.Value{
		"m": cty.MapVal(map[string]cty.Value{
			"a": cty.ObjectVal(map[string]cty.Value{"s": cty.StringVal("1")}),
			"b": cty.ObjectVal(map[string]cty.Value{"s": cty.StringVal("2")}),
		}),
		"l":      cty.NullVal(want.AttributeType("l")),
		"single": cty.NullVal(obj), "group": cty.NullVal(obj),
		"set": cty.SetValEmpty(obj), "map": cty.MapValEmpty(obj), "dynl": cty.NullVal(cty.DynamicPseudoType),
	})
	var got []string
	for _, p := range b.SensitivePaths(v) {
		got = append(got, provider.FormatPath(p))
	}
	if strings.Join(sorted(got), " ") != `m["a"].s m["b"].s` {
		t.Errorf("SensitivePaths = %v", got)
	}
}

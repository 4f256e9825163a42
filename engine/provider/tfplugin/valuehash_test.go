package tfplugin

import (
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// validKey tells configurations apart as their values differ, and only
// then: a kept plan or validation is found for an equal configuration and
// never for another.
func TestValidKeyTellsValuesApart(t *testing.T) {
	obj := func(a, b cty.Value) cty.Value { return cty.ObjectVal(map[string]cty.Value{"a": a, "b": b}) }
	dyn := cty.Object(map[string]cty.Type{"d": cty.DynamicPseudoType})
	values := map[string]cty.Value{
		"a=x":           obj(cty.StringVal("x"), cty.NullVal(cty.String)),
		"b=x":           obj(cty.NullVal(cty.String), cty.StringVal("x")),
		"a=empty":       obj(cty.StringVal(""), cty.NullVal(cty.String)),
		"a=null":        obj(cty.NullVal(cty.String), cty.NullVal(cty.String)),
		"a=xy":          obj(cty.StringVal("xy"), cty.NullVal(cty.String)),
		"a=x,b=y":       obj(cty.StringVal("x"), cty.StringVal("y")),
		"a=xy,b=empty":  obj(cty.StringVal("xy"), cty.StringVal("")),
		"list ab":       cty.ObjectVal(map[string]cty.Value{"l": cty.ListVal([]cty.Value{cty.StringVal("ab")})}),
		"list a,b":      cty.ObjectVal(map[string]cty.Value{"l": cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})}),
		"list empty":    cty.ObjectVal(map[string]cty.Value{"l": cty.ListValEmpty(cty.String)}),
		"list null":     cty.ObjectVal(map[string]cty.Value{"l": cty.NullVal(cty.List(cty.String))}),
		"map a=b":       cty.ObjectVal(map[string]cty.Value{"l": cty.MapVal(map[string]cty.Value{"a": cty.StringVal("b")})}),
		"map ab=":       cty.ObjectVal(map[string]cty.Value{"l": cty.MapVal(map[string]cty.Value{"ab": cty.StringVal("")})}),
		"n=1":           cty.ObjectVal(map[string]cty.Value{"n": cty.NumberIntVal(1)}),
		"n=1.5":         cty.ObjectVal(map[string]cty.Value{"n": cty.NumberFloatVal(1.5)}),
		"n=-1":          cty.ObjectVal(map[string]cty.Value{"n": cty.NumberIntVal(-1)}),
		"t=true":        cty.ObjectVal(map[string]cty.Value{"t": cty.True}),
		"t=false":       cty.ObjectVal(map[string]cty.Value{"t": cty.False}),
		"d=string 1":    cty.ObjectVal(map[string]cty.Value{"d": cty.StringVal("1")}),
		"tuple 1,x":     cty.ObjectVal(map[string]cty.Value{"d": cty.TupleVal([]cty.Value{cty.NumberIntVal(1), cty.StringVal("x")})}),
		"set x,y":       cty.ObjectVal(map[string]cty.Value{"s": cty.SetVal([]cty.Value{cty.StringVal("x"), cty.StringVal("y")})}),
		"nested a=x":    cty.ObjectVal(map[string]cty.Value{"o": obj(cty.StringVal("x"), cty.NullVal(cty.String))}),
		"nested b=x":    cty.ObjectVal(map[string]cty.Value{"o": obj(cty.NullVal(cty.String), cty.StringVal("x"))}),
		"nested null":   cty.ObjectVal(map[string]cty.Value{"o": cty.NullVal(obj(cty.StringVal(""), cty.StringVal("")).Type())}),
		"empty object":  cty.EmptyObjectVal,
		"long string":   obj(cty.StringVal(string(make([]byte, 2000))), cty.NullVal(cty.String)),
		"longer string": obj(cty.StringVal(string(make([]byte, 2001))), cty.NullVal(cty.String)),
	}
	seen := map[[32]byte]string{}
	for name, v := range values {
		k, ok := validKey("t", v, v.Type())
		if !ok {
			t.Errorf("%s: not hashed", name)
			continue
		}
		if other, dup := seen[k]; dup {
			t.Errorf("%s and %s have the same key", name, other)
		}
		seen[k] = name
		if k2, _ := validKey("t2", v, v.Type()); k2 == k {
			t.Errorf("%s: the same key for two resource types", name)
		}
	}
	// A dynamically typed attribute: the value's type is part of the key.
	dynamic := map[string]cty.Value{
		"string 1":          cty.StringVal("1"),
		"number 1":          cty.NumberIntVal(1),
		"list of strings":   cty.ListValEmpty(cty.String),
		"list of numbers":   cty.ListValEmpty(cty.Number),
		"set of strings":    cty.SetValEmpty(cty.String),
		"empty tuple":       cty.EmptyTupleVal,
		"null string":       cty.NullVal(cty.String),
		"null number":       cty.NullVal(cty.Number),
		"list of one a":     cty.ListVal([]cty.Value{cty.StringVal("a")}),
		"set of one a":      cty.SetVal([]cty.Value{cty.StringVal("a")}),
		"tuple of one a":    cty.TupleVal([]cty.Value{cty.StringVal("a")}),
		"object of one a":   cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("a")}),
		"map of one a":      cty.MapVal(map[string]cty.Value{"a": cty.StringVal("a")}),
		"object of a=empty": cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("")}),
	}
	seen = map[[32]byte]string{}
	for name, d := range dynamic {
		k, ok := validKey("t", cty.ObjectVal(map[string]cty.Value{"d": d}), dyn)
		if !ok {
			t.Errorf("dynamic %s: not hashed", name)
			continue
		}
		if other, dup := seen[k]; dup {
			t.Errorf("dynamic %s and %s have the same key", name, other)
		}
		seen[k] = name
	}
}

// Equal values have equal keys however they were built; values validKey
// cannot vouch for (unknown, marked) have none.
func TestValidKeyOfEqualValues(t *testing.T) {
	a := cty.ObjectVal(map[string]cty.Value{
		"s": cty.SetVal([]cty.Value{cty.StringVal("x"), cty.StringVal("y")}),
		"n": cty.NumberFloatVal(2),
		"m": cty.MapVal(map[string]cty.Value{"k": cty.StringVal("v"), "j": cty.StringVal("w")}),
	})
	b := cty.ObjectVal(map[string]cty.Value{
		"m": cty.MapVal(map[string]cty.Value{"j": cty.StringVal("w"), "k": cty.StringVal("v")}),
		"n": cty.NumberIntVal(2),
		"s": cty.SetVal([]cty.Value{cty.StringVal("y"), cty.StringVal("x")}),
	})
	ka, oka := validKey("t", a, a.Type())
	kb, okb := validKey("t", b, b.Type())
	if !oka || !okb || ka != kb {
		t.Errorf("equal values: keys equal %v, hashed %v %v; want equal keys", ka == kb, oka, okb)
	}
	for name, v := range map[string]cty.Value{
		"unknown":        cty.ObjectVal(map[string]cty.Value{"s": cty.UnknownVal(cty.String)}),
		"marked":         cty.ObjectVal(map[string]cty.Value{"s": cty.StringVal("x").Mark(provider.SensitiveMark)}),
		"marked element": cty.ObjectVal(map[string]cty.Value{"l": cty.ListVal([]cty.Value{cty.StringVal("x").Mark(provider.SensitiveMark)})}),
		"nil":            cty.NilVal,
	} {
		ty := cty.DynamicPseudoType
		if v != cty.NilVal {
			ty = v.Type()
		}
		if _, ok := validKey("t", v, ty); ok {
			t.Errorf("%s: hashed, want no key", name)
		}
	}
}

func BenchmarkValidKey(b *testing.B) {
	cfg := cty.ObjectVal(map[string]cty.Value{
		"filename":             cty.StringVal("/var/lib/stackd/targets/000000000042/region-007/fleet/3.conf"),
		"content":              cty.StringVal("version=v1\nowner=platform\nregion=region-007\naccount=000000000042\nindex=3\n"),
		"content_base64":       cty.NullVal(cty.String),
		"sensitive_content":    cty.NullVal(cty.String),
		"source":               cty.NullVal(cty.String),
		"file_permission":      cty.NullVal(cty.String),
		"directory_permission": cty.NullVal(cty.String),
		"id":                   cty.NullVal(cty.String),
		"content_md5":          cty.NullVal(cty.String),
		"content_sha1":         cty.NullVal(cty.String),
		"content_sha256":       cty.NullVal(cty.String),
		"content_sha512":       cty.NullVal(cty.String),
		"content_base64sha256": cty.NullVal(cty.String),
		"content_base64sha512": cty.NullVal(cty.String),
	})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := validKey("local_file", cfg, cfg.Type()); !ok {
			b.Fatal("not hashed")
		}
	}
}

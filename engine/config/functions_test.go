package config

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/stackd/stackd/engine/config/funcs"
	"github.com/stackd/stackd/engine/provider"
)

// Collections over the limit cannot be built by functions, for
// expressions or literals; functions refuse them anyway, before the
// conversions that cost as the square of their size.
func TestFunctionsRefuseLargeCollections(t *testing.T) {
	big := make([]cty.Value, MaxCollectionElements+1)
	for i := range big {
		big[i] = cty.StringVal(fmt.Sprint(i))
	}
	for _, name := range []string{"distinct", "toset", "tolist", "sort", "chunklist", "keys", "reverse"} {
		args := []cty.Value{cty.ListVal(big)}
		if name == "toset" || name == "tolist" || name == "keys" {
			args = []cty.Value{cty.TupleVal(big)}
		}
		if name == "chunklist" {
			args = append(args, cty.NumberIntVal(1)) // 10,001 lists
		}
		_, err := functions[name].Call(args)
		if err == nil || !strings.Contains(err.Error(), "at most 10000 elements") {
			t.Errorf("%s of %d elements: got %v, want the limit", name, len(big), err)
		}
	}
}

// The limited functions answer as Terraform's own (package funcs) within the limits: with
// marked, unknown and null arguments too.
func TestLimitedFunctionsKeepSemantics(t *testing.T) {
	secret := cty.StringVal("s3cr3t").Mark(provider.SensitiveMark)
	list := cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b"), cty.StringVal("a")})
	tests := []struct {
		name string
		f    function.Function
		args []cty.Value
	}{
		{"range", stdlib.RangeFunc, []cty.Value{cty.NumberIntVal(1), cty.NumberIntVal(10), cty.NumberIntVal(3)}},
		{"range", stdlib.RangeFunc, []cty.Value{cty.NumberIntVal(-3)}},
		{"range", stdlib.RangeFunc, []cty.Value{cty.UnknownVal(cty.Number)}},
		{"setproduct", stdlib.SetProductFunc, []cty.Value{list, list}},
		{"concat", stdlib.ConcatFunc, []cty.Value{list, cty.ListVal([]cty.Value{secret})}},
		{"flatten", stdlib.FlattenFunc, []cty.Value{cty.TupleVal([]cty.Value{list, cty.TupleVal([]cty.Value{list})})}},
		{"distinct", stdlib.DistinctFunc, []cty.Value{list}},
		{"join", stdlib.JoinFunc, []cty.Value{cty.StringVal("-"), list}},
		{"join", stdlib.JoinFunc, []cty.Value{secret, list}},
		{"format", stdlib.FormatFunc, []cty.Value{cty.StringVal("%5s|%-3d|%.2f"), cty.StringVal("x"), cty.NumberIntVal(7), cty.NumberFloatVal(1.234)}},
		{"formatlist", stdlib.FormatListFunc, []cty.Value{cty.StringVal("%s=%s"), list, cty.StringVal("v")}},
		{"replace", stdlib.ReplaceFunc, []cty.Value{cty.StringVal("aXbXc"), cty.StringVal("X"), cty.StringVal("--")}},
		{"regex_replace", stdlib.RegexReplaceFunc, []cty.Value{cty.StringVal("a1b22c"), cty.StringVal("[0-9]+"), cty.StringVal("<$0>")}},
		{"regexall", stdlib.RegexAllFunc, []cty.Value{cty.StringVal("(a)(b)?"), cty.StringVal("abaab")}},
		{"indent", stdlib.IndentFunc, []cty.Value{cty.NumberIntVal(2), cty.StringVal("a\nb\n")}},
		{"split", stdlib.SplitFunc, []cty.Value{cty.StringVal(","), cty.StringVal("a,b,,c")}},
		{"strrev", stdlib.ReverseFunc, []cty.Value{secret}},
		{"upper", stdlib.UpperFunc, []cty.Value{cty.StringVal("ǆx")}},
		{"jsonencode", stdlib.JSONEncodeFunc, []cty.Value{cty.ObjectVal(map[string]cty.Value{"a": list, "b": cty.NumberIntVal(1)})}},
		{"jsondecode", stdlib.JSONDecodeFunc, []cty.Value{cty.StringVal(`{"a": [1, "x", {"b": null}]}`)}},
		{"csvdecode", stdlib.CSVDecodeFunc, []cty.Value{cty.StringVal("a,b\n1,2\n3,4\n")}},
		{"toset", stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)), []cty.Value{cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.NumberIntVal(1)})}},
		{"tolist", stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)), []cty.Value{cty.TupleVal([]cty.Value{cty.StringVal("a"), secret})}},
		{"tonumber", stdlib.MakeToFunc(cty.Number), []cty.Value{cty.StringVal("1e300")}},
		{"parseint", stdlib.ParseIntFunc, []cty.Value{cty.StringVal("ff"), cty.NumberIntVal(16)}},
		{"pow", stdlib.PowFunc, []cty.Value{cty.NumberIntVal(2), cty.NumberIntVal(10)}},
		{"merge", stdlib.MergeFunc, []cty.Value{cty.ObjectVal(map[string]cty.Value{"a": cty.True}), cty.NullVal(cty.EmptyObject)}},
		{"zipmap", stdlib.ZipmapFunc, []cty.Value{cty.ListVal([]cty.Value{cty.StringVal("k")}), cty.ListVal([]cty.Value{secret})}},
		{"chunklist", stdlib.ChunklistFunc, []cty.Value{list, cty.NumberIntVal(2)}},
	}
	metered := NewMeter(context.Background()).Functions()
	// Terraform's own functions, where they differ from go-cty's (tolist
	// keeps the marks of elements on them).
	terraform := funcs.Table(funcs.Options{SensitiveMark: provider.SensitiveMark})
	for _, tc := range tests {
		f := tc.f
		if tf, ok := terraform[tc.name]; ok {
			f = tf
		}
		want, werr := f.Call(tc.args)
		for _, table := range []map[string]function.Function{functions, metered} {
			got, gerr := table[tc.name].Call(tc.args)
			if (werr == nil) != (gerr == nil) || werr == nil && !got.RawEquals(want) {
				t.Errorf("%s%v = %#v, %v; go-cty says %#v, %v", tc.name, tc.args, got, gerr, want, werr)
			}
		}
	}
}

// Through hcl (which converts arguments to parameter types), the limited
// functions answer as go-cty's own: tuples of one type and of mixed
// types, objects, unknown and sensitive values.
func TestLimitedFunctionsThroughHCL(t *testing.T) {
	raw := map[string]function.Function{
		"distinct": stdlib.DistinctFunc, "chunklist": stdlib.ChunklistFunc, "setunion": stdlib.SetUnionFunc,
		"setintersection": stdlib.SetIntersectionFunc, "setsubtract": stdlib.SetSubtractFunc,
		"tolist": stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)), "toset": stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tomap": stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)), "length": stdlib.LengthFunc,
		"range": stdlib.RangeFunc,
	}
	vars := map[string]cty.Value{
		"secret":  cty.StringVal("s").Mark(provider.SensitiveMark),
		"unknown": cty.UnknownVal(cty.String),
		"dyn":     cty.DynamicVal,
	}
	for _, src := range []string{
		`distinct(["a", "b", "a"])`,
		`distinct([1, "1", true])`,
		`distinct([var.secret, "s"])`,
		`distinct([var.unknown, "x"])`,
		`chunklist([1, 2, 3, 4, 5], 2)`,
		`chunklist(["a", 1], 1)`,
		`setunion(["a"], ["b", "a"], [1])`,
		`setintersection(["a", "b"], ["b"])`,
		`setsubtract(["a", "b"], ["b", var.secret])`,
		`tolist([1, 2, 3])`,
		`tolist([1, "a"])`,
		`tolist([var.dyn, 1])`,
		`toset(["b", "a", "b"])`,
		`toset([{a = 1}, {a = 2}])`,
		`tomap({a = 1, b = 2})`,
		`tomap({a = 1, b = "x"})`,
		`tomap({a = [1], b = []})`,
		`tolist(var.dyn)`,
		`length(toset([for i in range(100) : "k${i}"]))`,
		`distinct({a = 1})`,
		`setunion(1, 2)`,
	} {
		expr, diags := hclsyntax.ParseExpression([]byte(src), "x.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		want, wdiags := expr.Value(&hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)}, Functions: raw})
		got, gdiags := expr.Value(&hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)}, Functions: functions})
		if wdiags.HasErrors() != gdiags.HasErrors() || !wdiags.HasErrors() && !got.RawEquals(want) {
			t.Errorf("%s = %#v %v; go-cty says %#v %v", src, got, gdiags, want, wdiags)
		}
	}
}

// A tuple of one element type converts without go-cty's pairwise type
// unification (which took 2.3 s for 10,000 elements).
func TestLargeTuplesConvertQuickly(t *testing.T) {
	elems := make([]cty.Value, MaxCollectionElements)
	for i := range elems {
		elems[i] = cty.StringVal(fmt.Sprint(i))
	}
	for _, name := range []string{"tolist", "toset", "setunion", "chunklist"} {
		args := []cty.Value{cty.TupleVal(elems)}
		if name == "chunklist" {
			args = append(args, cty.NumberIntVal(100))
		}
		// Counted, not timed: the conversion compares no pair of types.
		v, err := functions[name].Call(args)
		if err != nil || !v.IsKnown() {
			t.Errorf("%s of %d strings: %v", name, len(elems), err)
		}
	}
}

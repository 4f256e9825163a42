package tfplugin

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// The protocol 6 test provider serves provider::p6::label through
// GetFunctions and CallFunction, on a process that is not configured, as
// Terraform calls functions; through hcl it answers as Terraform does for
// known, unknown, sensitive and failing calls. The protocol 5 provider
// offers none.
func TestProviderFunctions(t *testing.T) {
	c := start(t, 6, nil)
	fc := c.(FunctionCaller)
	fns, err := fc.Functions(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	sig := fns["label"]
	if sig == nil || len(sig.Params) != 1 || sig.Variadic == nil || !sig.Return.Equals(cty.String) {
		t.Fatalf("functions = %v, want label(prefix, parts...) string", fns)
	}
	call := func(args []cty.Value) (cty.Value, error) { return fc.CallFunction(testCtx(t), "label", sig, args) }
	table := map[string]function.Function{"provider::p6::label": sig.Cty(call)}
	vars := map[string]cty.Value{
		"secret":  cty.StringVal("s3cr3t").Mark("sensitive"),
		"unknown": cty.UnknownVal(cty.String),
	}
	for _, tc := range []struct {
		src     string
		want    cty.Value
		wantErr string
	}{
		{src: `provider::p6::label("web", "eu", "1")`, want: cty.StringVal("WEB-EU-1")},
		{src: `provider::p6::label("web")`, want: cty.StringVal("WEB")},
		{src: `provider::p6::label("web", var.secret)`, want: cty.StringVal("WEB-S3CR3T").Mark("sensitive")},
		{src: `provider::p6::label("web", var.unknown)`, want: cty.UnknownVal(cty.String)},
		{src: `provider::p6::label("", "x")`, wantErr: "the prefix must not be empty"},
		{src: `provider::p6::label()`, wantErr: "Not enough function arguments"},
	} {
		expr, diags := hclsyntax.ParseExpression([]byte(tc.src), "main.tf", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", tc.src, diags)
		}
		got, diags := expr.Value(&hcl.EvalContext{Functions: table, Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)}})
		if tc.wantErr != "" {
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.wantErr) {
				t.Errorf("%s: got %#v %v, want an error saying %q", tc.src, got, diags, tc.wantErr)
			}
			continue
		}
		if diags.HasErrors() || !got.RawEquals(tc.want) {
			t.Errorf("%s = %#v %v, want %#v", tc.src, got, diags, tc.want)
		}
	}

	fns5, err := start(t, 5, nil).(FunctionCaller).Functions(testCtx(t))
	if err != nil || len(fns5) != 0 {
		t.Errorf("protocol 5 provider's functions = %v, %v; want none", fns5, err)
	}
}

package config

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// templatestring takes, as in Terraform 1.11, a direct reference to a named
// value (a local, a variable, a resource's attribute, indexed or not) also
// when the template's expressions are guarded as loading guards them; any
// other expression, parentheses included, is refused with Terraform's
// error.
func TestTemplateStringReferenceThroughGuards(t *testing.T) {
	vars := map[string]cty.Value{
		"local": cty.ObjectVal(map[string]cty.Value{
			"tpl":  cty.StringVal("Hi ${name}!"),
			"tpls": cty.MapVal(map[string]cty.Value{"a": cty.StringVal("A=${name}")}),
		}),
		"var": cty.ObjectVal(map[string]cty.Value{"tpl": cty.StringVal("var ${name}")}),
		"rec": cty.ObjectVal(map[string]cty.Value{
			"x": cty.ObjectVal(map[string]cty.Value{"content": cty.StringVal("res ${name}")}),
		}),
	}
	for _, tc := range []struct{ expr, want, wantErr string }{
		{expr: `templatestring(local.tpl, { name = "ann" })`, want: "Hi ann!"},
		{expr: `templatestring(local.tpls["a"], { name = "ann" })`, want: "A=ann"},
		{expr: `templatestring(var.tpl, { name = "ann" })`, want: "var ann"},
		{expr: `templatestring(rec.x.content, { name = "ann" })`, want: "res ann"},
		{expr: `upper(templatestring(local.tpl, { name = "ann" }))`, want: "HI ANN!"},
		{expr: `templatestring((local.tpl), { name = "ann" })`, wantErr: "must be a direct reference"},
		{expr: `templatestring(upper(local.tpl), { NAME = "ann" })`, wantErr: "must be a direct reference"},
		{expr: `templatestring("Hi $${name}", { name = "ann" })`, wantErr: "does not support providing a literal template"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			expr, diags := hclsyntax.ParseExpression([]byte(tc.expr), "t.tf", hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			GuardExpr(expr)
			v, diags := expr.Value(&hcl.EvalContext{Variables: vars, Functions: functions})
			if tc.wantErr != "" {
				if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.wantErr) {
					t.Fatalf("got %#v, %v; want an error saying %q", v, diags, tc.wantErr)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if v.AsString() != tc.want {
				t.Errorf("got %q, want %q", v.AsString(), tc.want)
			}
		})
	}
}

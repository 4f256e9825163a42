package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/changeset"
)

func hclsyntaxValidIdentifier(s string) bool { return hclsyntax.ValidIdentifier(s) }

func invalidName(kind, name string, rng hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid " + kind + " name",
		Detail:   fmt.Sprintf("%q is not a valid %s name: a name must start with a letter or underscore and may contain only letters, digits, underscores and dashes.", name, kind),
		Subject:  rng.Ptr(),
	}
}

func ptrRange(r hcl.Range) *hcl.Range { return &r }

func asPathError(err error, pe **fs.PathError) bool { return errors.As(err, pe) }

// evalConst evaluates an expression that may use functions but no
// variables, under the meter of the Load that parsed it (limits.go), or a
// meter of its own: what it builds counts against MaxBuiltBytes, and its
// value is checked by checkValue.
func evalConst(expr hcl.Expression, what string) (cty.Value, hcl.Diagnostics) {
	m := loadMeterOf(expr)
	if m == nil {
		GuardExpr(expr)
		m = NewMeter(context.Background())
	}
	v, diags := expr.Value(&hcl.EvalContext{Functions: m.Functions()})
	if diags.HasErrors() {
		return v, diags
	}
	if d := CheckValue(m, v, what, expr.Range()); d != nil {
		return cty.NilVal, diags.Append(d)
	}
	return v, diags
}

// constValue evaluates an expression that may use functions but no variables.
func constValue(expr hcl.Expression, ty cty.Type, what string) (cty.Value, hcl.Diagnostics) {
	v, diags := evalConst(expr, what)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	if !v.IsWhollyKnown() {
		// No variables are in scope, so only an expression the parser could
		// not read (it reported why) evaluates to an unknown value.
		return cty.NilVal, diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for " + what,
			Detail:   fmt.Sprintf("The value of %s must be a constant known when the definitions are loaded.", what),
			Subject:  expr.Range().Ptr(),
		})
	}
	if ty == cty.DynamicPseudoType {
		return v, diags
	}
	conv, err := convert.Convert(v, ty)
	if err != nil || conv.IsNull() {
		msg := "a value is required"
		if err != nil {
			msg = err.Error()
		}
		return cty.NilVal, diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for " + what,
			Detail:   fmt.Sprintf("Invalid value for %s: %s.", what, msg),
			Subject:  expr.Range().Ptr(),
		})
	}
	return conv, diags
}

func boolAttr(a *hcl.Attribute, dst *bool) hcl.Diagnostics {
	if a == nil {
		return nil
	}
	v, diags := constValue(a.Expr, cty.Bool, a.Name)
	if !diags.HasErrors() {
		*dst = v.True()
	}
	return diags
}

func stringAttr(a *hcl.Attribute, dst *string) hcl.Diagnostics {
	if a == nil {
		return nil
	}
	v, diags := constValue(a.Expr, cty.String, a.Name)
	if !diags.HasErrors() {
		*dst = v.AsString()
	}
	return diags
}

func stringListAttr(a *hcl.Attribute, dst *[]string) hcl.Diagnostics {
	if a == nil {
		return nil
	}
	v, diags := constValue(a.Expr, cty.List(cty.String), a.Name)
	if diags.HasErrors() {
		return diags
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value for " + a.Name, Detail: "The list must not contain null.", Subject: a.Expr.Range().Ptr()})
		}
		out = append(out, e.AsString())
	}
	*dst = out
	return diags
}

func intAttr(a *hcl.Attribute, dst *int) hcl.Diagnostics {
	if a == nil {
		return nil
	}
	v, diags := constValue(a.Expr, cty.Number, a.Name)
	if diags.HasErrors() {
		return diags
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != 0 || i < 0 || i > 1<<31 {
		return diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Invalid value for " + a.Name,
			Detail:  fmt.Sprintf("%s must be a non-negative whole number; got %s.", a.Name, bf.Text('g', -1)),
			Subject: a.Expr.Range().Ptr(),
		})
	}
	*dst = int(i)
	return diags
}

// DiagnosticsJSON converts hcl diagnostics to their JSON form.
func DiagnosticsJSON(diags hcl.Diagnostics) []changeset.Diagnostic {
	out := make([]changeset.Diagnostic, 0, len(diags))
	for _, d := range diags {
		j := changeset.Diagnostic{Severity: changeset.SeverityError, Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			j.Severity = changeset.SeverityWarning
		}
		if d.Subject != nil {
			j.File, j.Line, j.Column = d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column
		}
		out = append(out, j)
	}
	return out
}

package config

// The variable files of a template directory — terraform.tfvars,
// terraform.tfvars.json, *.auto.tfvars(.json) — loaded as Terraform loads
// them for the root module: in that order, a later file's value winning.
// The stack set's own values (vars, vars_file, instance overrides) act as
// Terraform's -var and -var-file, so they win over all of them. A module's
// variable files are not read, as Terraform does not read them.

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// TFVar is a value a template's variable files give a variable.
type TFVar struct {
	Value cty.Value
	Range hcl.Range // where the file sets it
}

// readTFVarsFiles reads the values of the template's variable files, a
// later file's winning.
func readTFVarsFiles(files []*hcl.File) (map[string]TFVar, hcl.Diagnostics) {
	out := map[string]TFVar{}
	var diags hcl.Diagnostics
	for _, f := range files {
		attrs, d := f.Body.JustAttributes()
		diags = append(diags, d...)
		for _, n := range SortedKeys(attrs) {
			a := attrs[n]
			v, d := constValue(a.Expr, cty.DynamicPseudoType, "variable "+n)
			diags = append(diags, d...)
			if !d.HasErrors() {
				out[n] = TFVar{Value: v, Range: a.NameRange}
			}
		}
	}
	return out, diags
}

// checkTFVars warns of values for variables the template does not declare,
// as Terraform does for its variable files.
func (t *Template) checkTFVars() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, n := range SortedKeys(t.TFVars) {
		if _, ok := t.Variables[n]; !ok {
			diags = diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagWarning, Summary: "Value for undeclared variable",
				Detail:  fmt.Sprintf("The template's variable file sets %q, but the template declares no variable of that name; the value is not used.", n),
				Subject: t.TFVars[n].Range.Ptr(),
			})
		}
	}
	return diags
}

// withTFVars is the stack set's variables (raw, set at ranges) over the
// values the root template's variable files give its declared variables.
// fromTFVars names the variables only a variable file sets.
func withTFVars(t *Template, raw map[string]cty.Value, ranges map[string]hcl.Range) (vals map[string]cty.Value, rngs map[string]hcl.Range, fromTFVars map[string]bool) {
	if len(t.TFVars) == 0 {
		return raw, ranges, nil
	}
	vals, rngs, fromTFVars = map[string]cty.Value{}, map[string]hcl.Range{}, map[string]bool{}
	for n, tv := range t.TFVars {
		if _, declared := t.Variables[n]; declared {
			vals[n], rngs[n], fromTFVars[n] = tv.Value, tv.Range, true
		}
	}
	for n, v := range raw {
		vals[n], rngs[n] = v, ranges[n]
		delete(fromTFVars, n)
	}
	return vals, rngs, fromTFVars
}

// bindWithTFVars binds the stack set's variables over the template's
// variable files' (bindVars). What only a variable file sets counts as a
// file's value toward the stack set's limits.
func (ss *StackSet) bindWithTFVars(raw map[string]cty.Value, ranges map[string]hcl.Range) hcl.Diagnostics {
	diags := ss.Template.checkTFVars()
	vals, rngs, fromTFVars := withTFVars(ss.Template, raw, ranges)
	if len(fromTFVars) > 0 {
		if ss.fileVars == nil {
			ss.fileVars = map[string]bool{}
		}
		for n := range fromTFVars {
			ss.fileVars[n] = true
		}
	}
	return append(diags, ss.bindVars(vals, rngs)...)
}

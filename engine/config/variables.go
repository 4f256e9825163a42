package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Variable blocks as Terraform 1.11 reads them: type constraints with
// optional(type, default) attributes, default, description, sensitive,
// nullable, ephemeral and validation blocks.

// EphemeralMark is the cty mark of values derived from ephemeral
// variables: the engine refuses them wherever a value is recorded
// (resource and data source arguments, provider configurations, outputs,
// count and for_each), as Terraform refuses them where a value persists.
const EphemeralMark = "ephemeral"

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"}, {Name: "default"}, {Name: "sensitive"}, {Name: "description"},
		{Name: "nullable"}, {Name: "ephemeral"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

// CheckRule is one condition and the message shown when it is false: a
// variable's validation, a precondition or postcondition, a check block's
// assert.
type CheckRule struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

var checkRuleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true}, {Name: "error_message", Required: true},
	},
}

// decodeCheckRule decodes a validation, precondition, postcondition or
// assert block.
func decodeCheckRule(b *hcl.Block) (*CheckRule, hcl.Diagnostics) {
	content, diags := b.Body.Content(checkRuleSchema)
	if diags.HasErrors() {
		return nil, diags
	}
	return &CheckRule{
		Condition:    content.Attributes["condition"].Expr,
		ErrorMessage: content.Attributes["error_message"].Expr,
		DeclRange:    b.DefRange,
	}, diags
}

// Exprs are the rule's expressions, for reference analysis.
func (r *CheckRule) Exprs() []hcl.Expression {
	return []hcl.Expression{r.Condition, r.ErrorMessage}
}

func (t *Template) addVariable(b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	v := &Variable{Name: name, Type: cty.DynamicPseudoType, Nullable: true, DeclRange: b.DefRange}
	var diags hcl.Diagnostics
	if prev, ok := t.Variables[name]; ok {
		return diags.Append(duplicate("variable", name, prev.DeclRange, b.DefRange))
	}
	if !hclsyntaxValidIdentifier(name) {
		diags = diags.Append(invalidName("variable", name, b.LabelRanges[0]))
	}
	content, cdiags := b.Body.Content(variableSchema)
	diags = append(diags, cdiags...)
	if a, ok := content.Attributes["type"]; ok {
		ty, defaults, tdiags := typeexpr.TypeConstraintWithDefaults(a.Expr)
		diags = append(diags, tdiags...)
		if !tdiags.HasErrors() {
			v.Type, v.TypeDefaults = ty, defaults
		}
	}
	diags = append(diags, boolAttr(content.Attributes["sensitive"], &v.Sensitive)...)
	diags = append(diags, stringAttr(content.Attributes["description"], &v.Description)...)
	diags = append(diags, boolAttr(content.Attributes["nullable"], &v.Nullable)...)
	diags = append(diags, boolAttr(content.Attributes["ephemeral"], &v.Ephemeral)...)
	t.ephemeral = t.ephemeral || v.Ephemeral
	if a, ok := content.Attributes["default"]; ok {
		val, vdiags := evalConst(a.Expr, fmt.Sprintf("the default of variable %q", name))
		diags = append(diags, vdiags...)
		if !vdiags.HasErrors() {
			if v.TypeDefaults != nil && !val.IsNull() {
				val = v.TypeDefaults.Apply(val)
			}
			conv, err := convert.Convert(val, v.Type)
			switch {
			case err != nil:
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid default value for variable",
					Detail:   fmt.Sprintf("The default of variable %q does not match its type: %s.", name, err),
					Subject:  a.Expr.Range().Ptr(),
				})
			case conv.IsNull() && !v.Nullable:
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid default value for variable",
					Detail:   "A null default value is not valid when nullable=false.",
					Subject:  a.Expr.Range().Ptr(),
				})
			default:
				v.Default = conv
			}
		}
	}
	for _, vb := range content.Blocks {
		rule, rdiags := decodeCheckRule(vb)
		diags = append(diags, rdiags...)
		if rule == nil {
			continue
		}
		if !refersToVar(rule.Condition, name) {
			diags = diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid variable validation condition",
				Detail:   fmt.Sprintf("The condition for variable %q must refer to var.%s in order to test incoming values.", name, name),
				Subject:  rule.Condition.Range().Ptr(),
			})
			continue
		}
		v.Validations = append(v.Validations, rule)
	}
	t.Variables[name] = v
	return diags
}

// refersToVar reports whether expr refers to var.name.
func refersToVar(expr hcl.Expression, name string) bool {
	for _, tr := range expr.Variables() {
		if tr.RootName() != "var" || len(tr) < 2 {
			continue
		}
		if a, ok := tr[1].(hcl.TraverseAttr); ok && a.Name == name {
			return true
		}
	}
	return false
}

// Convert is the value of the variable given a value for it, as Terraform
// prepares an input variable: the defaults of optional attributes
// applied, converted to the type; with nullable = false a null is the
// default (an error without one).
func (v *Variable) Convert(given cty.Value) (cty.Value, error) {
	if given.IsNull() && !v.Nullable {
		if v.Default == cty.NilVal {
			return cty.NilVal, fmt.Errorf("required variable may not be set to null (it is declared nullable = false)")
		}
		return v.Default, nil
	}
	if v.TypeDefaults != nil && !given.IsNull() {
		given = v.TypeDefaults.Apply(given)
	}
	return convert.Convert(given, v.Type)
}

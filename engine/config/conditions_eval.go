package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/provider"
)

// Evaluating custom conditions for one instance, as Terraform evaluates
// them: variable validations, preconditions and postconditions of
// resources and data sources, output preconditions (errors that stop the
// instance), and check blocks (warnings, never blocking). A condition not
// known yet is skipped: at plan, it is evaluated again at apply, when it
// is known. The engine calls these with its evaluation contexts; values
// derived from ephemeral variables are refused wherever stackd records a
// value (RefuseEphemeral).

// Diagnostic summaries, in Terraform's words.
const (
	SummaryVariable      = "Invalid value for variable"
	SummaryPrecondition  = "Resource precondition failed"
	SummaryPostcondition = "Resource postcondition failed"
	SummaryOutput        = "Module output value precondition failed"
	SummaryCheck         = "Check block assertion failed"
)

// evalRule evaluates one rule in ctx: failed tells a known false
// condition, msg is then its error message (withheld when it holds a
// sensitive or ephemeral value). diags are problems with the rule itself
// (errors): a condition that is not a bool, a message that is not a
// string.
func evalRule(rule *CheckRule, ctx *hcl.EvalContext) (failed bool, msg string, diags hcl.Diagnostics) {
	v, d := rule.Condition.Value(ctx)
	diags = append(diags, d...)
	if d.HasErrors() || !v.IsKnown() {
		return false, "", diags
	}
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return false, "", diags.Append(Errorf(rule.Condition.Range(), "Invalid condition result",
			"Condition expression must return either true or false, not null."))
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil {
		return false, "", diags.Append(Errorf(rule.Condition.Range(), "Invalid condition result",
			"Invalid condition result value: %s.", err))
	}
	if b.True() {
		return false, "", diags
	}
	mv, d := rule.ErrorMessage.Value(ctx)
	diags = append(diags, d...)
	if d.HasErrors() {
		return true, "Failed to evaluate condition error message.", diags
	}
	switch {
	case mv.HasMarkDeep(EphemeralMark):
		return true, "The error message included an ephemeral value, so it will not be displayed.", diags
	case mv.HasMarkDeep(provider.SensitiveMark):
		return true, "The error message included a sensitive value, so it will not be displayed.", diags
	case !mv.IsWhollyKnown():
		return true, "The error message is not known until apply.", diags
	}
	s, err := convert.Convert(mv, cty.String)
	if err != nil || s.IsNull() {
		return true, "", diags.Append(Errorf(rule.ErrorMessage.Range(), "Invalid error message",
			"Unsuitable value for error message: a string is required."))
	}
	return true, strings.TrimSpace(s.AsString()), diags
}

// evalRules evaluates rules in ctx; each false one is a diagnostic of
// severity sev with the summary, its detail the error message (and then,
// when set, what suffix says of the rule), at subject's range.
func evalRules(rules []*CheckRule, ctx *hcl.EvalContext, sev hcl.DiagnosticSeverity, summary string, subject func(*CheckRule) hcl.Range, suffix func(*CheckRule) string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, rule := range rules {
		failed, msg, d := evalRule(rule, ctx)
		diags = append(diags, d...)
		if !failed {
			continue
		}
		if suffix != nil {
			msg += suffix(rule)
		}
		rng := subject(rule)
		diags = diags.Append(&hcl.Diagnostic{Severity: sev, Summary: summary, Detail: msg, Subject: rng.Ptr()})
	}
	return diags
}

func conditionRange(r *CheckRule) hcl.Range { return r.Condition.Range() }

// ValidateVariable evaluates v's validation blocks in ctx (which holds the
// instance's value of v): errors naming the variable, the message and the
// validation that checked it, as Terraform words them.
func ValidateVariable(v *Variable, ctx *hcl.EvalContext) hcl.Diagnostics {
	return evalRules(v.Validations, ctx, hcl.DiagError, SummaryVariable,
		func(*CheckRule) hcl.Range { return v.DeclRange },
		func(r *CheckRule) string {
			return fmt.Sprintf("\n\nThis was checked by the validation rule of variable %q at %s.", v.Name, r.DeclRange)
		})
}

// CheckAsserts evaluates a check block's asserts in ctx: a false one is a
// warning, never an error, and so is an assert that cannot be evaluated,
// as in Terraform.
func CheckAsserts(c *Check, ctx *hcl.EvalContext) hcl.Diagnostics {
	return AsWarnings(evalRules(c.Asserts, ctx, hcl.DiagWarning, SummaryCheck, conditionRange, nil))
}

// AsWarnings returns copies of diags with errors turned into warnings.
func AsWarnings(diags hcl.Diagnostics) hcl.Diagnostics {
	out := make(hcl.Diagnostics, 0, len(diags))
	for _, d := range diags {
		if d == nil {
			continue
		}
		c := *d
		c.Severity = hcl.DiagWarning
		out = append(out, &c)
	}
	return out
}

// Preconditions evaluates the precondition blocks of a resource or data
// source member in ctx (which holds its count or each).
func Preconditions(l Lifecycle, ctx *hcl.EvalContext) hcl.Diagnostics {
	return evalRules(l.Preconditions, ctx, hcl.DiagError, SummaryPrecondition, conditionRange, nil)
}

// Postconditions evaluates the postcondition blocks of a resource or data
// source member in ctx with self its value; those that depend on what is
// not known yet are skipped (a plan: they are evaluated at apply).
func Postconditions(l Lifecycle, ctx *hcl.EvalContext, self cty.Value) hcl.Diagnostics {
	if len(l.Postconditions) == 0 {
		return nil
	}
	child := ctx.NewChild()
	child.Variables = map[string]cty.Value{"self": self}
	return evalRules(l.Postconditions, child, hcl.DiagError, SummaryPostcondition, conditionRange, nil)
}

// OutputPreconditions evaluates an output's precondition blocks in ctx.
func OutputPreconditions(o *Output, ctx *hcl.EvalContext) hcl.Diagnostics {
	if len(o.Preconditions) == 0 {
		return nil
	}
	return evalRules(o.Preconditions, ctx, hcl.DiagError, SummaryOutput, conditionRange, nil)
}

// RefuseEphemeral is an error at rng when v, a value of t's evaluation,
// holds a value derived from an ephemeral variable (nil otherwise; at
// once for a template where none can occur: EphemeralValues): stackd records what it plans (state,
// change sets, status) as Terraform persists resource arguments and
// outputs, so ephemeral values may flow only into locals and conditions.
func (t *Template) RefuseEphemeral(v cty.Value, rng hcl.Range, detail string, args ...any) *hcl.Diagnostic {
	if !t.ephemeral || v == cty.NilVal || !v.HasMarkDeep(EphemeralMark) {
		return nil
	}
	return Errorf(rng, "Invalid use of ephemeral value", detail, args...)
}

// EphemeralProperties refuses ephemeral values in obj, the evaluated
// properties of props (a resource, a data source or a provider block),
// naming the first property that holds one.
func (t *Template) EphemeralProperties(props map[string]*hcl.Attribute, obj cty.Value, declRange hcl.Range, what string) *hcl.Diagnostic {
	if !t.ephemeral || obj == cty.NilVal || !obj.HasMarkDeep(EphemeralMark) {
		return nil
	}
	if obj.Type().IsObjectType() && obj.IsKnown() && !obj.IsNull() {
		for _, name := range SortedKeys(props) {
			if !obj.Type().HasAttribute(name) {
				continue
			}
			if d := t.RefuseEphemeral(obj.GetAttr(name), props[name].Expr.Range(),
				"%s: ephemeral values are not valid for %q, because stackd records it (state, change sets, status); use them only in locals and conditions.", what, name); d != nil {
				return d
			}
		}
	}
	return Errorf(declRange, "Invalid use of ephemeral value",
		"%s: ephemeral values are not valid in its arguments, because stackd records them (state, change sets, status); use them only in locals and conditions.", what)
}

// EphemeralOutput is the value v of output o: an ephemeral output (ephemeral
// = true, allowed in modules only, as in Terraform) passes ephemeral
// values to its caller and is itself ephemeral; any other output refuses
// them, since stackd records outputs. root tells o is the instance
// template's own.
func (t *Template) EphemeralOutput(o *Output, v cty.Value, root bool) (cty.Value, *hcl.Diagnostic) {
	if !o.Ephemeral {
		return v, t.RefuseEphemeral(v, o.Expr.Range(), "Output %q is not declared as returning an ephemeral value (ephemeral = true), so it cannot be set to a result derived from one.", o.Name)
	}
	if root {
		return v, Errorf(o.DeclRange, "Ephemeral output not allowed",
			"Ephemeral outputs are not allowed in context of a root module: stackd records the outputs of a stack set's template. Remove ephemeral = true from output %q.", o.Name)
	}
	return v.Mark(EphemeralMark), nil
}

// EphemeralValues reports whether values derived from ephemeral variables
// can occur in t's evaluation: it declares an ephemeral variable or calls
// a module with an ephemeral output. Plans of other templates never look
// for them (a deep walk of every value).
func (t *Template) EphemeralValues() bool { return t.ephemeral }

// modulesReturnEphemeral reports whether a module t calls has an
// ephemeral output.
func (t *Template) modulesReturnEphemeral() bool {
	for _, mc := range t.Modules {
		if mc.Template == nil {
			continue
		}
		for _, o := range mc.Template.Outputs {
			if o.Ephemeral {
				return true
			}
		}
	}
	return false
}

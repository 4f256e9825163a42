package funcs

import (
	"fmt"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/customdecode"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// templateFileFunc renders a file of FS as a template with the given vars.
// Templates see only their vars and the functions of the table, minus the
// template functions themselves (no recursion).
func (t *table) templateFileFunc(all func() map[string]function.Function) function.Function {
	params := []function.Parameter{
		{Name: "path", Type: cty.String, AllowMarked: true},
		{Name: "vars", Type: cty.DynamicPseudoType},
	}
	load := func(pathVal cty.Value) (hcl.Expression, error) {
		p, marks := pathVal.Unmark()
		src, err := t.readFile(p.AsString(), marks)
		if err != nil {
			return nil, err
		}
		return t.parseTemplate(src, p.AsString())
	}
	render := makeRender(all, true)
	return function.New(&function.Spec{
		Params: params,
		Type: func(args []cty.Value) (cty.Type, error) {
			if !args[0].IsKnown() || !args[1].IsKnown() {
				return cty.DynamicPseudoType, nil
			}
			expr, err := load(args[0])
			if err != nil {
				return cty.DynamicPseudoType, err
			}
			v, err := render(expr, args[1])
			return v.Type(), err
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			expr, err := load(args[0])
			if err != nil {
				return cty.DynamicVal, err
			}
			v, err := render(expr, args[1])
			return v.WithMarks(args[0].Marks()), err
		},
	})
}

// parseTemplate parses a template's source, passing it and its expression
// to Options.Template.
func (t *table) parseTemplate(src []byte, name string) (hcl.Expression, error) {
	if t.o.Template != nil {
		if err := t.o.Template(src, name, nil); err != nil {
			return nil, err
		}
	}
	expr, diags := hclsyntax.ParseTemplate(src, name, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return nil, diags
	}
	if t.o.Template != nil {
		if err := t.o.Template(nil, name, expr); err != nil {
			return nil, err
		}
	}
	return expr, nil
}

// makeRender returns a renderer of template expressions with the vars of a
// templatefile or templatestring call.
func makeRender(all func() map[string]function.Function, allowFS bool) func(hcl.Expression, cty.Value) (cty.Value, error) {
	// The templates' table is built once, at the first call: Table has
	// returned (and Wrap has run) by then, and nothing changes it after.
	inner := sync.OnceValue(func() map[string]function.Function {
		given := all()
		fns := make(map[string]function.Function, len(given))
		for name, f := range given {
			plain := plainName(name)
			switch {
			case templateFuncs[plain]:
				fns[name] = refusedFunc(f, fmt.Errorf("cannot recursively call %s from inside another template function", plain))
			case !allowFS && fileFuncs[plain]:
				fns[name] = refusedFunc(f, fmt.Errorf("cannot use filesystem access functions like %s in templatestring templates; consider passing the function result as a template variable instead", plain))
			default:
				fns[name] = f
			}
		}
		return fns
	})
	return func(expr hcl.Expression, vars cty.Value) (cty.Value, error) {
		if ty := vars.Type(); !ty.IsMapType() && !ty.IsObjectType() {
			return cty.DynamicVal, function.NewArgErrorf(1, "invalid vars value: must be a map")
		}
		ctx := &hcl.EvalContext{Variables: vars.AsValueMap()}
		for n := range ctx.Variables {
			if !hclsyntax.ValidIdentifier(n) {
				return cty.DynamicVal, function.NewArgErrorf(1, "invalid template variable name %q: must start with a letter, followed by zero or more letters, digits, and underscores", n)
			}
		}
		for _, tr := range expr.Variables() {
			if _, ok := ctx.Variables[tr.RootName()]; !ok {
				return cty.DynamicVal, function.NewArgErrorf(1, "vars map does not contain key %q, referenced at %s", tr.RootName(), tr[0].SourceRange())
			}
		}
		ctx.Functions = inner()
		v, diags := expr.Value(ctx)
		if diags.HasErrors() {
			return cty.DynamicVal, diags
		}
		return v, nil
	}
}

// refusedFunc has f's parameters and fails every call with err.
func refusedFunc(f function.Function, err error) function.Function {
	return function.New(&function.Spec{
		Params:   f.Params(),
		VarParam: f.VarParam(),
		Type:     func([]cty.Value) (cty.Type, error) { return cty.NilType, err },
		Impl:     func([]cty.Value, cty.Type) (cty.Value, error) { return cty.NilVal, err },
	})
}

// templateStringFunc renders a string from elsewhere (a reference, never a
// literal template) as a template with the given vars.
func (t *table) templateStringFunc(all func() map[string]function.Function) function.Function {
	render := makeRender(all, false)
	return function.New(&function.Spec{
		Params: []function.Parameter{
			{Name: "template", Type: customdecode.ExpressionClosureType},
			{Name: "vars", Type: cty.DynamicPseudoType},
		},
		Type:         function.StaticReturnType(cty.String),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			closure := customdecode.ExpressionClosureFromVal(args[0])
			if err := checkTemplateStringExpr(closure.Expression); err != nil {
				return cty.UnknownVal(retType), err
			}
			tv, diags := closure.Value()
			if diags.HasErrors() {
				return cty.UnknownVal(retType), function.NewArgErrorf(0, "invalid template expression: %s", diags.Error())
			}
			if !tv.IsKnown() {
				return cty.UnknownVal(retType), nil
			}
			if tv.Type() != cty.String || tv.IsNull() {
				return cty.UnknownVal(retType), function.NewArgErrorf(0, "invalid template value: a string is required")
			}
			tv, marks := tv.Unmark()
			expr, err := t.parseTemplate([]byte(tv.AsString()), "<templatestring argument>")
			if err != nil {
				return cty.UnknownVal(retType), function.NewArgErrorf(0, "invalid template: %s", err)
			}
			v, err := render(expr, args[1])
			if err != nil {
				return cty.UnknownVal(retType), err
			}
			v, err = convert.Convert(v, cty.String)
			if err != nil {
				return cty.UnknownVal(retType), fmt.Errorf("invalid template result: %s", err)
			}
			return v.WithMarks(marks), nil
		},
	})
}

// checkTemplateStringExpr refuses, as Terraform does, a template argument
// that is not a reference to a string defined elsewhere.
func checkTemplateStringExpr(expr hcl.Expression) error {
	// What wraps the argument without being syntax (the guards a caller
	// puts around expressions, a dynamic block's iterator) is seen
	// through; parentheses are syntax, and refused as in Terraform.
	expr = hcl.UnwrapExpression(expr)
	switch e := expr.(type) {
	case *hclsyntax.TemplateWrapExpr:
		return function.NewArgErrorf(0, "invalid template expression: templatestring is only for rendering templates retrieved dynamically from elsewhere; to treat the inner expression as template syntax, write the reference expression directly without any template interpolation syntax")
	case *hclsyntax.TemplateExpr:
		if len(e.Parts) == 1 {
			if _, ok := e.Parts[0].(*hclsyntax.LiteralValueExpr); ok {
				return function.NewArgErrorf(0, "invalid template expression: templatestring is only for rendering templates retrieved dynamically from elsewhere, and so does not support providing a literal template; consider using a template string expression instead")
			}
		}
		return function.NewArgErrorf(0, "invalid template expression: templatestring is only for rendering templates retrieved dynamically from elsewhere; to render an inline template, consider using a plain template string expression")
	}
	if !isReference(expr) {
		return function.NewArgErrorf(0, "invalid template expression: must be a direct reference to a single string from elsewhere, containing valid Terraform template syntax")
	}
	return nil
}

// isReference is true for a traversal of something in scope, possibly
// indexed or splatted.
func isReference(expr hcl.Expression) bool {
	switch e := expr.(type) {
	case *hclsyntax.ScopeTraversalExpr:
		return true
	case *hclsyntax.RelativeTraversalExpr:
		return isReference(e.Source)
	case *hclsyntax.IndexExpr:
		return isReference(e.Collection)
	case *hclsyntax.SplatExpr:
		return isReference(e.Source)
	}
	return false
}

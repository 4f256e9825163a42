package config

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"weak"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// guardExprs puts guards into a parsed file's (or expression's) syntax
// tree, where evaluating it builds what no function call counts: the
// collection of each for expression is counted (its length times
// elementCost) before it is iterated, each interpolated part of a string
// template is counted before it is appended and refused if it is a number
// out of range, and arithmetic refuses results out of range. The guards
// find the meter of their evaluation context (meterOf); without one they
// only check numbers. load, when set, is the meter of the Load that parsed
// the tree (see evalConst); the arguments of function calls get a guard
// that only carries it. Guarding is idempotent.
func guardExprs(node hclsyntax.Node, load *Meter) {
	if node == nil {
		return
	}
	wrap := func(e hclsyntax.Expression) guard {
		return guard{&hclsyntax.ParenthesesExpr{Expression: e, SrcRange: e.Range()}, load}
	}
	hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
		switch e := n.(type) {
		case *hclsyntax.ForExpr:
			if _, done := e.CollExpr.(*collGuard); !done {
				e.CollExpr = &collGuard{wrap(e.CollExpr)}
			}
			for _, x := range []*hclsyntax.Expression{&e.KeyExpr, &e.ValExpr, &e.CondExpr} {
				if _, done := (*x).(*iterGuard); *x != nil && !done {
					*x = &iterGuard{wrap(*x)}
				}
			}
		case *hclsyntax.TemplateExpr:
			for i, part := range e.Parts {
				switch part.(type) {
				case *hclsyntax.LiteralValueExpr, *partGuard:
					continue
				}
				e.Parts[i] = &partGuard{wrap(part)}
			}
		case *hclsyntax.FunctionCallExpr:
			for i, arg := range e.Args {
				if _, done := arg.(*argGuard); !done {
					e.Args[i] = &argGuard{wrap(arg)}
				}
			}
		case *hclsyntax.BinaryOpExpr:
			if op, ok := guardedOps[e.Op]; ok {
				e.Op = op
			}
		}
		return nil
	})
}

// guardExpr guards an expression that is hcl's native syntax.
func GuardExpr(expr hcl.Expression) {
	if n, ok := expr.(hclsyntax.Node); ok {
		guardExprs(n, nil)
	}
}

// guard is what every guard embeds: a ParenthesesExpr around what it
// guards passes on everything but Value, and walks of the syntax tree
// (references, for one) see through it to the guarded expression, as do
// hcl's static analyses (hcl.ExprList, hcl.ExprAsKeyword, type
// expressions) through UnwrapExpression. load is the meter of the Load
// that parsed it (nil for a tree parsed on its own).
type guard struct {
	*hclsyntax.ParenthesesExpr
	load *Meter
}

func (g guard) UnwrapExpression() hcl.Expression { return g.Expression }

func (g guard) loadMeter() *Meter { return g.load }

// argGuard only carries the load meter, for the expressions of the
// definitions whose only guards are function arguments.
type argGuard struct{ guard }

// loadMeterOf is the meter of the Load that parsed expr, found on its
// guards (nil when it has none, or it was parsed on its own).
func loadMeterOf(expr hcl.Expression) *Meter {
	n, ok := expr.(hclsyntax.Node)
	if !ok {
		return nil
	}
	var m *Meter
	hclsyntax.VisitAll(n, func(n hclsyntax.Node) hcl.Diagnostics {
		if g, ok := n.(interface{ loadMeter() *Meter }); ok && m == nil {
			m = g.loadMeter()
		}
		return nil
	})
	return m
}

// loadMeters holds the meter of each Load (the definitions and templates
// it parses count together against MaxBuiltBytes), by its parser; an
// entry goes with its parser.
var loadMeters sync.Map // weak.Pointer[hclparse.Parser] -> *meter

// loadMeterFor is the meter of the Load parsing with p.
func loadMeterFor(p *hclparse.Parser) *Meter {
	w := weak.Make(p)
	if m, ok := loadMeters.Load(w); ok {
		return m.(*Meter)
	}
	m, loaded := loadMeters.LoadOrStore(w, NewMeter(context.Background()))
	if !loaded {
		runtime.AddCleanup(p, func(w weak.Pointer[hclparse.Parser]) { loadMeters.Delete(w) }, w)
	}
	return m.(*Meter)
}

// collGuard guards the collection of a for expression.
type collGuard struct{ guard }

func (g *collGuard) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	m := meterOf(ctx)
	v, diags := g.Expression.Value(ctx)
	if diags.HasErrors() {
		if diags, ok := m.pass(diags, g.Range()); ok {
			return v, diags
		}
		return cty.DynamicVal, nil
	}
	var d *hcl.Diagnostic
	if err := m.Stopped(); err != nil {
		d = guardDiag(g.Range(), "Planning stopped", stoppedError{err}.Error()+".")
	} else if n := length(v); n > MaxCollectionElements {
		d = guardDiag(g.Range(), "Too many elements", fmt.Sprintf("A for expression here iterates over %d elements; at most %d are allowed.", n, MaxCollectionElements))
	} else if err := m.charge(satMul(n, elementCost)); err != nil {
		d = guardDiag(g.Range(), "Value too large", "A for expression over "+fmt.Sprint(n)+" elements here is too much: "+err.Error()+".")
	}
	if d != nil {
		if diags, ok := m.pass(diags.Append(d), g.Range()); ok {
			return cty.DynamicVal, diags
		}
		return cty.DynamicVal, nil
	}
	return v, diags
}

// iterGuard guards the key, value and condition of a for expression: past
// MaxIterationErrors, their errors are dropped.
type iterGuard struct{ guard }

func (g *iterGuard) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	v, diags := g.Expression.Value(ctx)
	if !diags.HasErrors() {
		return v, diags
	}
	if diags, ok := meterOf(ctx).pass(diags, g.Range()); ok {
		return v, diags
	}
	return cty.DynamicVal, nil
}

// partGuard guards an interpolated part of a string template.
type partGuard struct{ guard }

func (g *partGuard) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	v, diags := g.Expression.Value(ctx)
	if diags.HasErrors() {
		return v, diags
	}
	u, ok := known(v)
	if !ok {
		return v, diags
	}
	switch u.Type() {
	case cty.String:
		if err := meterOf(ctx).charge(int64(len(u.AsString())) + elementCost); err != nil {
			return cty.UnknownVal(cty.String), diags.Append(guardDiag(g.Range(), "Value too large", "The string template here is too long: "+err.Error()+"."))
		}
	case cty.Number:
		if !numberOK(u.AsBigFloat()) {
			return cty.UnknownVal(cty.String), diags.Append(guardDiag(g.Range(), "Number out of range",
				fmt.Sprintf("This number is too large to write as text: numbers must be smaller than 1e%d (and, unless zero, larger than 1e-%d) in magnitude.", MaxNumberDigits, MaxNumberDigits)))
		}
	}
	return v, diags
}

func guardDiag(rng hcl.Range, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()}
}

// guardedOps are hcl's arithmetic operations, refusing results out of
// range (1e999 * 1e999 * …).
var guardedOps = func() map[*hclsyntax.Operation]*hclsyntax.Operation {
	out := map[*hclsyntax.Operation]*hclsyntax.Operation{}
	for _, op := range []*hclsyntax.Operation{hclsyntax.OpAdd, hclsyntax.OpSubtract, hclsyntax.OpMultiply, hclsyntax.OpDivide, hclsyntax.OpModulo} {
		impl := op.Impl
		g := &hclsyntax.Operation{Type: op.Type, ShortCircuit: op.ShortCircuit}
		g.Impl = wrapFunc(impl, nil, func(args []cty.Value) (cty.Value, error) {
			v, err := impl.Call(args)
			if err == nil && badNumber(v) {
				return cty.NilVal, fmt.Errorf("the result is out of range: numbers must be smaller than 1e%d (and, unless zero, larger than 1e-%d) in magnitude", MaxNumberDigits, MaxNumberDigits)
			}
			return v, err
		})
		out[op] = g
	}
	return out
}()

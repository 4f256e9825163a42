package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// Limits of the engine. Definitions come from Git, and every ref but the
// deploy branch is untrusted (DESIGN.md §9 "Untrusted input"): anyone who
// can push a branch makes stackd load and plan it. Each limit below bounds
// work before it is done, so that no input can crash the daemon (a stack
// overflow is fatal; no recover catches it), exhaust its memory or keep a
// planner busy for long. Going over a limit is a diagnostic naming the file
// and line, never a panic.
//
// The limits that live elsewhere, for reference: MaxVarsFileSize
// (definitions.go, 1 MiB per vars_file), the blob sizes gitsource reads
// from object headers before the content, and the byte limit of rendered
// Markdown change sets (changeset.MarkdownOptions.MaxBytes).
const (
	// MaxTemplateFileSize bounds each definitions and template file: 4 MiB,
	// far above any hand-written file (the examples are a few KB), and
	// small enough that parsing one stays within tens of milliseconds.
	MaxTemplateFileSize = 4 << 20

	// MaxNesting bounds how deeply expressions nest in a file: brackets,
	// string interpolations (${…}) and template directives (%{if}, %{for})
	// and, within one list item, argument or attribute, the operators and
	// bracket groups chained after one another (a+b+c, !!x, a?b:c?d:e,
	// x[0][1]). hcl's parser and evaluator recurse once for each, and a
	// stack overflow is a fatal error of the whole process; 512 is far
	// beyond readable code and far below what overflows the stack.
	MaxNesting = 512

	// MaxNumberDigits bounds numbers: a number literal has at most 1,000
	// digits and an exponent within ±1,000, and a computed number must be
	// zero or between 1e-1000 and 1e1000 in magnitude (see numberOK).
	// Writing a number as text costs time proportional to its exponent
	// (1e100000000 takes minutes), and every number is written out in
	// templates, change sets and the state. float64 stops at 1.8e308.
	MaxNumberDigits = 1000

	// MaxModuleDepth bounds how deeply modules call modules.
	MaxModuleDepth = 8

	// MaxModuleInstances bounds the module calls one stack set's template
	// expands to, counting each module block once per instance of the
	// template that holds it: module blocks have no count, but six calls
	// of a module over eight levels are 1.7 million module instances.
	// The total is counted as each template is loaded, before anything is
	// evaluated. 1,000 is well above real module trees (tens).
	MaxModuleInstances = 1000

	// MaxCount bounds the count or for_each expansion of one resource.
	MaxCount = 10000

	// MaxResourcesPerInstance bounds the resources of one stack instance
	// across all its modules: resource blocks times their module
	// instances when the template is loaded, and resource instances
	// (after count and for_each) while it is planned, counted before each
	// expansion is made. The same as MaxCount, so one resource may use the
	// whole allowance; CloudFormation allows 500 resources per stack.
	MaxResourcesPerInstance = 10000

	// MaxCollectionElements bounds collections: those functions build
	// (range, setproduct, concat, flatten, formatlist, split, jsondecode,
	// toset, ...: checked from the arguments before the result is built),
	// those for expressions iterate over, and the list, object and block
	// literals of a file (checked before it is parsed). 10,000 elements,
	// like MaxCount. setproduct(range(1024), range(1024), range(1024))
	// would otherwise ask for 25 GB; and go-cty's work on one collection
	// can grow with the square of its size, and cannot be interrupted:
	// converting a tuple of mixed types to a list or set of any type
	// compares every pair of element types (2.3 s for 10,000; 55 s for
	// 100,000; the functions convert tuples of one type without that),
	// and sets hash with CRC-32, for which colliding elements are easy to
	// make. See also MaxDistinctElements.
	MaxCollectionElements = 10000

	// MaxDistinctElements bounds the lists distinct takes: it compares
	// every pair of elements (go-cty's implementation), and 10,000 took 22
	// seconds, which no context can interrupt. 2,000: under a second.
	MaxDistinctElements = 2000

	// MaxFunctionStringBytes bounds the strings a function builds (join,
	// format, formatlist, replace, indent, jsonencode, strrev, ...): 1 MiB,
	// checked from the arguments before the string is built. Templates
	// can still hold longer literal text.
	MaxFunctionStringBytes = 1 << 20

	// MaxBuiltBytes bounds what planning one instance may build, and
	// what one Load may build evaluating the definitions and the defaults
	// of template variables: the results of functions, the strings
	// templates put together, the elements for expressions iterate over,
	// and the values kept (resource properties, variables), each counted
	// at its size in bytes (at least elementCost per value). 64 MiB:
	// 10,000 resources with 1 KiB of properties each use 10 MiB. Most of it
	// is garbage once the instance is planned, but it bounds what the
	// daemon holds at once and the time it takes to build.
	MaxBuiltBytes = 64 << 20

	// MaxPlannedBytes bounds the resource properties of all the instances
	// planned under one WithPlanBudget context (one ref): change sets keep
	// them, so they stay in memory until the ref's change sets are
	// written. 64 MiB: a fleet of 10,000 instances of a 10-resource
	// template with 300 bytes of properties per resource uses 30 MiB.
	MaxPlannedBytes = 64 << 20

	// MaxIterationErrors bounds the errors the iterations of for
	// expressions report for one instance: 100, then one diagnostic says
	// more were left out. A for expression reports an error for each
	// element it fails on, and for expressions nest: a million errors
	// would take more memory than the plan.
	MaxIterationErrors = 100

	// MaxRegexWork bounds a regular expression function's pattern bytes ×
	// string bytes (2^25: a 1 KiB pattern over 32 KiB, a 32-byte one over
	// 1 MiB; 0.1 s of matching here). Go's regexp is linear in that
	// product, and no context can stop a match: a branch's 4 MB pattern
	// over a long string would hold its plan for hours.
	MaxRegexWork = 1 << 25

	// MaxPlanErrors bounds the failed nodes a plan of one instance goes on
	// past (a plan reports every independent error), its modules' counted
	// too: 50, then it stops and says so. Diagnostics of a branch anyone can push go to status
	// commits and the state; 10,000 failing resource blocks must not make
	// megabytes of them.
	MaxPlanErrors = 50

	// MaxNodeDiagnostics bounds the diagnostics one block reports: 10,
	// then one says how many more there were. One string template can
	// hold tens of thousands of failing interpolations, each its own
	// diagnostic.
	MaxNodeDiagnostics = 10

	// MaxRevisionDiagnostics bounds the diagnostics of a revision across
	// its stack sets: 200, then one says how many more were left out.
	MaxRevisionDiagnostics = 200

	// DefaultPlanBudget is the time Engine.PlanContext gives planning one
	// instance when its context carries no budget of its own (see
	// WithPlanBudget): the backstop for callers that set none. Planning an
	// instance takes milliseconds; a plan that runs 30 s is a hostile one.
	DefaultPlanBudget = 30 * time.Second
)

// elementCost is what MaxBuiltBytes counts for each value of a collection
// (and each scalar): the size of a cty.Value in a slice.
const elementCost = 32

// ---- the budget of a plan ----------------------------------------------------

type budgetKey struct{}

type refKey struct{}

// refMeter counts what the instances planned under one WithPlanBudget
// context keep: their resources' properties.
type refMeter struct{ props atomic.Int64 }

// WithPlanBudget returns a context that ends after d, for planning one
// ref under a time budget: the engine's plan entry points check it
// between instances, resources, expansions and function calls and stop
// with a diagnostic "Planning took longer than the budget of d". The
// instances planned under it also share MaxPlannedBytes. Callers plan
// each untrusted ref under one such context.
func WithPlanBudget(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(ctx, budgetKey{}, d)
	ctx = context.WithValue(ctx, refKey{}, &refMeter{})
	return context.WithTimeout(ctx, d)
}

// planStopped is the Extra of the diagnostic of a plan its context
// stopped.
type planStopped struct{ err error }

// PlanStopped returns the context error that stopped a plan whose
// diagnostics are diags (context.DeadlineExceeded when it ran out of its
// budget, context.Canceled), or nil when its context did not stop it.
func PlanStopped(diags hcl.Diagnostics) error {
	for _, d := range diags {
		if s, ok := d.Extra.(planStopped); ok {
			return s.err
		}
	}
	return nil
}

// stoppedDiag is the diagnostic of a plan its context stopped.
func stoppedDiag(ctx context.Context, rng *hcl.Range) *hcl.Diagnostic {
	err := ctx.Err()
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Subject: rng, Extra: planStopped{err}}
	budget, _ := ctx.Value(budgetKey{}).(time.Duration)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && budget > 0:
		d.Summary = "Planning took too long"
		d.Detail = fmt.Sprintf("Planning took longer than the budget of %s, so it was stopped; nothing from it is deployed. Make the definitions cheaper to evaluate (fewer instances, smaller collections, simpler expressions).", budget)
	case errors.Is(err, context.DeadlineExceeded):
		d.Summary = "Planning took too long"
		d.Detail = "Planning ran past its deadline, so it was stopped; nothing from it is deployed."
	default:
		d.Summary = "Planning cancelled"
		d.Detail = "Planning was cancelled before it finished; nothing from it is deployed."
	}
	return d
}

// ---- the meter -----------------------------------------------------------------

// meter measures the work of one plan (or apply) of an instance, or of one
// expression of the definitions: the bytes built against MaxBuiltBytes,
// the resources against MaxResourcesPerInstance, and the context that
// ends it. Module walkers share their instance's meter.
type meter struct {
	ctx       context.Context
	ref       *refMeter // nil without WithPlanBudget
	built     atomic.Int64
	resources int // resource instances planned (the walker is sequential)
	// failedNodes counts the nodes that failed in the whole plan, modules
	// included (see MaxPlanErrors; the walker is sequential).
	failedNodes int

	mu sync.Mutex // guards what follows
	// at is what is being evaluated: a node and its range, for the report
	// of a panic.
	at      string
	atRange *hcl.Range
	// admitted are the errors of iterations let through (at most
	// MaxIterationErrors, and one saying there were more).
	admitted map[*hcl.Diagnostic]bool

	// only, when set, names the functions the table of functions() needs
	// (those the template calls); nil: all.
	only      map[string]bool
	funcsOnce sync.Once
	funcs     map[string]function.Function
}

func newMeter(ctx context.Context) *meter {
	ref, _ := ctx.Value(refKey{}).(*refMeter)
	return &meter{ctx: ctx, ref: ref}
}

// errOverBuilt is what going over MaxBuiltBytes says.
var errOverBuilt = fmt.Errorf("evaluating this instance built more than %d MiB of values (functions, string templates, for expressions and resource properties); make the definitions build smaller values", MaxBuiltBytes>>20)

// charge counts n bytes built; over MaxBuiltBytes it fails. A nil meter
// counts nothing.
func (m *meter) charge(n int64) error {
	if m == nil {
		return nil
	}
	if m.built.Add(n) > MaxBuiltBytes || n < 0 {
		m.built.Store(math.MaxInt64 / 2)
		return errOverBuilt
	}
	return nil
}

// stopped returns the context's error once it has ended.
func (m *meter) stopped() error {
	if m == nil || m.ctx == nil {
		return nil
	}
	return m.ctx.Err()
}

// setAt records what is evaluated now, for a panic's report.
func (m *meter) setAt(what string, rng *hcl.Range) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.at, m.atRange = what, rng
	m.mu.Unlock()
}

func (m *meter) where() (string, *hcl.Range) {
	if m == nil {
		return "", nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.at, m.atRange
}

// meterFunc names the function through which the guards of expressions
// find the meter of their evaluation context: no expression can call it
// (a function name is an identifier; this one has a space).
const meterFunc = " meter"

var meterType = cty.Capsule("meter", reflect.TypeOf((*meter)(nil)).Elem())

// functions is the function table evaluated under m: every function of
// functions, counting its result (estimated from its arguments, before it
// is built) against MaxBuiltBytes and failing once m's context ends.
func (m *meter) functions() map[string]function.Function {
	m.funcsOnce.Do(func() {
		m.funcs = make(map[string]function.Function, len(functions)+1)
		for name, f := range functions {
			if m.only != nil && !m.only[name] {
				continue
			}
			est := sizeOf[name]
			before := func(args []cty.Value) error {
				if err := m.stopped(); err != nil {
					return stoppedError{err}
				}
				return nil
			}
			m.funcs[name] = wrapFunc(f, before, func(args []cty.Value) (cty.Value, error) {
				cost := int64(elementCost)
				if est != nil {
					s := est(args)
					if err := s.check(); err != nil {
						return cty.NilVal, err // f's own wrapper says so too
					}
					cost = s.cost
				}
				if err := m.charge(cost); err != nil {
					return cty.NilVal, err
				}
				return f.Call(args)
			})
		}
		self := cty.CapsuleVal(meterType, m)
		m.funcs[meterFunc] = function.New(&function.Spec{
			Type: function.StaticReturnType(meterType),
			Impl: func([]cty.Value, cty.Type) (cty.Value, error) { return self, nil },
		})
	})
	return m.funcs
}

// stoppedError is a function's error when the plan's context ended.
type stoppedError struct{ err error }

func (e stoppedError) Error() string { return "planning was stopped: " + e.err.Error() }
func (e stoppedError) Unwrap() error { return e.err }

// meterOf finds the meter of an evaluation context (nil when it has none).
func meterOf(ctx *hcl.EvalContext) *meter {
	for c := ctx; c != nil; c = c.Parent() {
		if f, ok := c.Functions[meterFunc]; ok {
			v, err := f.Call(nil)
			if err != nil {
				return nil
			}
			m, _ := v.EncapsulatedValue().(*meter)
			return m
		}
	}
	return nil
}

// pass lets the error diagnostics of iterations through, up to
// MaxIterationErrors; then one diagnostic says so, and later ones are
// dropped. Errors already let through (they pass each enclosing for
// expression on their way up) stay. ok false: every error was dropped
// (the caller returns an unknown value instead).
func (m *meter) pass(diags hcl.Diagnostics, rng hcl.Range) (_ hcl.Diagnostics, ok bool) {
	if m == nil || !diags.HasErrors() {
		return diags, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.admitted == nil {
		m.admitted = map[*hcl.Diagnostic]bool{}
	}
	var out hcl.Diagnostics
	for _, d := range diags {
		switch {
		case d.Severity != hcl.DiagError || m.admitted[d]:
		case len(m.admitted) < MaxIterationErrors:
			m.admitted[d] = true
		case len(m.admitted) == MaxIterationErrors:
			d = guardDiag(rng, "Too many errors",
				fmt.Sprintf("The iterations of for expressions failed more than %d times; the later errors are not reported.", MaxIterationErrors))
			m.admitted[d] = true
		default:
			continue
		}
		out = append(out, d)
	}
	return out, out.HasErrors()
}

// ---- values ------------------------------------------------------------------

// valueInfo is what inspect finds in a value.
type valueInfo struct {
	cost      int64 // elementCost per value, plus the bytes of strings
	deep      bool  // nested deeper than MaxNesting
	badNumber bool  // holds a number numberOK refuses
}

// inspect walks v, stopping once its cost is over max (or it is too
// deep): values computed from references (a list in a list in a local,
// and so on) can nest deeper than their source, and go-cty and the
// renderers recurse through them.
func inspect(v cty.Value, max int64) valueInfo {
	var info valueInfo
	var walk func(v cty.Value, depth int)
	walk = func(v cty.Value, depth int) {
		if info.cost > max || info.deep {
			return
		}
		if depth > MaxNesting {
			info.deep = true
			return
		}
		info.cost += elementCost
		v, ok := known(v)
		if !ok {
			return
		}
		switch ty := v.Type(); {
		case ty == cty.String:
			info.cost += int64(len(v.AsString()))
		case ty == cty.Number:
			if !numberOK(v.AsBigFloat()) {
				info.badNumber = true
			}
		case v.CanIterateElements():
			for it := v.ElementIterator(); it.Next() && info.cost <= max && !info.deep; {
				k, e := it.Element()
				if ty.IsMapType() || ty.IsObjectType() {
					info.cost += int64(len(k.AsString()))
				}
				walk(e, depth+1)
			}
		}
	}
	walk(v, 0)
	return info
}

// checkValue checks a value evaluated for a node (a local, an output, a
// module argument, a resource's properties, an expression of the
// definitions) and counts its size against the meter: a diagnostic at rng
// when it nests too deeply, holds a number out of range or goes over
// MaxBuiltBytes.
func checkValue(m *meter, v cty.Value, what string, rng hcl.Range) *hcl.Diagnostic {
	_, d := checkValueCost(m, v, what, rng)
	return d
}

// checkProperties is checkValue for a resource's properties, which the
// plan keeps: they count against MaxPlannedBytes too.
func checkProperties(m *meter, v cty.Value, what string, rng hcl.Range) *hcl.Diagnostic {
	cost, d := checkValueCost(m, v, what, rng)
	if d != nil || m == nil || m.ref == nil {
		return d
	}
	if m.ref.props.Add(cost) > MaxPlannedBytes {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Value too large", Subject: rng.Ptr(),
			Detail: fmt.Sprintf("With %s, the resource properties of the instances planned for this revision come to more than %d MiB; change sets keep them. Make the properties smaller.", what, MaxPlannedBytes>>20)}
	}
	return nil
}

// largestProperty is where a diagnostic about the size of r's properties
// points: the expression of the largest one (the resource's block when
// none is set).
func largestProperty(r *Resource, props map[string]cty.Value) hcl.Range {
	rng, most := r.DeclRange, int64(-1)
	for _, name := range sortedKeys(props) {
		a := r.Properties[name]
		if a == nil {
			continue
		}
		if c := inspect(props[name], MaxBuiltBytes).cost; c > most {
			rng, most = a.Expr.Range(), c
		}
	}
	return rng
}

func checkValueCost(m *meter, v cty.Value, what string, rng hcl.Range) (int64, *hcl.Diagnostic) {
	max := int64(MaxBuiltBytes)
	if m != nil {
		max = MaxBuiltBytes - m.built.Load()
	}
	info := inspect(v, max)
	fail := func(summary, detail string) (int64, *hcl.Diagnostic) {
		return info.cost, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()}
	}
	switch {
	case info.deep:
		return fail("Value nested too deeply", fmt.Sprintf("The value of %s nests more than %d levels deep.", what, MaxNesting))
	case info.badNumber:
		return fail("Number out of range", fmt.Sprintf("The value of %s holds a number out of range: numbers must be smaller than 1e%d (and, unless zero, larger than 1e-%d) in magnitude.", what, MaxNumberDigits, MaxNumberDigits))
	case info.cost > max && m == nil:
		return fail("Value too large", fmt.Sprintf("The value of %s is larger than %d MiB.", what, MaxBuiltBytes>>20))
	}
	if err := m.charge(info.cost); err != nil {
		return fail("Value too large", fmt.Sprintf("The value of %s is too large: %s.", what, err))
	}
	return info.cost, nil
}

// ---- guards in expressions ----------------------------------------------------

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
func guardExprs(node hclsyntax.Node, load *meter) {
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
func guardExpr(expr hcl.Expression) {
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
	load *meter
}

func (g guard) UnwrapExpression() hcl.Expression { return g.Expression }

func (g guard) loadMeter() *meter { return g.load }

// argGuard only carries the load meter, for the expressions of the
// definitions whose only guards are function arguments.
type argGuard struct{ guard }

// loadMeterOf is the meter of the Load that parsed expr, found on its
// guards (nil when it has none, or it was parsed on its own).
func loadMeterOf(expr hcl.Expression) *meter {
	n, ok := expr.(hclsyntax.Node)
	if !ok {
		return nil
	}
	var m *meter
	hclsyntax.VisitAll(n, func(n hclsyntax.Node) hcl.Diagnostics {
		if g, ok := n.(interface{ loadMeter() *meter }); ok && m == nil {
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
func loadMeterFor(p *hclparse.Parser) *meter {
	w := weak.Make(p)
	if m, ok := loadMeters.Load(w); ok {
		return m.(*meter)
	}
	m, loaded := loadMeters.LoadOrStore(w, newMeter(context.Background()))
	if !loaded {
		runtime.AddCleanup(p, func(w weak.Pointer[hclparse.Parser]) { loadMeters.Delete(w) }, w)
	}
	return m.(*meter)
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
	if err := m.stopped(); err != nil {
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

// ---- panics -----------------------------------------------------------------------

// contain is deferred by the engine's entry points: a panic in loading or
// planning becomes a diagnostic of what was being done (no stack trace:
// the log has it), so that hostile definitions cannot take the daemon
// down. what names the work ("planning stack set web at eu-west-1/111");
// m, when set, tells what was being evaluated.
func (e *Engine) contain(diags *hcl.Diagnostics, what string, m *meter) {
	p := recover()
	if p == nil {
		return
	}
	at, rng := m.where()
	where := what
	if at != "" {
		where += ", evaluating " + at
	}
	kind := describePanic(p)
	e.logger().Error().Str("panic", kind).Str("while", where).Str("stack", string(debug.Stack())).
		Msg("engine panicked: reported as a diagnostic")
	*diags = append(*diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Internal error",
		Detail: fmt.Sprintf("stackd failed unexpectedly (%s) while %s; nothing from these definitions is deployed. "+
			"This is a bug in stackd: please report it with the daemon's log.", kind, where),
		Subject: rng,
	})
}

// describePanic names a panic without values of the definitions: Go's
// runtime errors and short messages as they are, other panics by type
// (a panic's message may quote a value, and values may be sensitive).
func describePanic(p any) string {
	var msg string
	switch v := p.(type) {
	case runtime.Error:
		return "panic: " + v.Error()
	case error:
		msg = v.Error()
	case string:
		msg = v
	}
	if msg == "" || len(msg) > 200 || strings.ContainsAny(msg, "\"'`") || strings.Contains(msg, "cty.") {
		return fmt.Sprintf("panic of type %T", p)
	}
	return "panic: " + msg
}

// SetLogger sets where the engine logs what only operators need (the
// stack of a panic it turned into a diagnostic). The default is zerolog's
// global logger.
func (e *Engine) SetLogger(l zerolog.Logger) { e.log = &l }

func (e *Engine) logger() *zerolog.Logger {
	if e.log != nil {
		return e.log
	}
	return &zlog.Logger
}

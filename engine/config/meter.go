package config

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// meter measures the work of one plan (or apply) of an instance, or of one
// expression of the definitions: the bytes built against MaxBuiltBytes,
// the resources against MaxResourcesPerInstance, and the context that
// ends it. Module walkers share their instance's meter.
type Meter struct {
	Ctx       context.Context
	ref       *refMeter // nil without WithPlanBudget
	built     atomic.Int64
	Resources int // resource instances planned (the walker is sequential)
	// failedNodes counts the nodes that failed in the whole plan, modules
	// included (see MaxPlanErrors; the walker is sequential).
	FailedNodes int

	mu sync.Mutex // guards what follows
	// at is what is being evaluated: a node and its range, for the report
	// of a panic.
	at      string
	atRange *hcl.Range
	// admitted are the errors of iterations let through (at most
	// MaxIterationErrors, and one saying there were more).
	admitted map[*hcl.Diagnostic]bool

	// Only, when set, names the functions the table of Functions needs
	// (those the template calls); nil: all.
	Only map[string]bool
	// Template is the root module of the plan: its files are what the
	// file functions read (nil: none).
	Template *Template
	// Apply makes the impure functions (timestamp, uuid, bcrypt) known:
	// while planning they are unknown, as in Terraform.
	Apply bool
	// PlanTime is what plantimestamp returns (unknown when zero).
	PlanTime time.Time
	// ProviderFunctions serves the provider-defined functions
	// (provider::NAME::FUNC) of the template's providers (nil: none).
	ProviderFunctions ProviderFunctions
	funcsOnce         sync.Once
	funcs             map[string]function.Function
}

func NewMeter(ctx context.Context) *Meter {
	ref, _ := ctx.Value(refKey{}).(*refMeter)
	return &Meter{Ctx: ctx, ref: ref}
}

// errOverBuilt is what going over MaxBuiltBytes says.
var errOverBuilt = fmt.Errorf("evaluating this instance built more than %d MiB of values (functions, string templates, for expressions and resource properties); make the definitions build smaller values", MaxBuiltBytes>>20)

// charge counts n bytes built; over MaxBuiltBytes it fails. A nil meter
// counts nothing.
func (m *Meter) charge(n int64) error {
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
func (m *Meter) Stopped() error {
	if m == nil || m.Ctx == nil {
		return nil
	}
	return m.Ctx.Err()
}

// setAt records what is evaluated now, for a panic's report.
func (m *Meter) SetAt(what string, rng *hcl.Range) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.at, m.atRange = what, rng
	m.mu.Unlock()
}

func (m *Meter) Where() (string, *hcl.Range) {
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

var meterType = cty.Capsule("meter", reflect.TypeOf((*Meter)(nil)).Elem())

// Functions is the function table evaluated under m (newFunctionTable):
// every function counting its result (estimated from its arguments,
// before it is built) against MaxBuiltBytes and failing once m's context
// ends. It is built at the first call: set Only, Template, Apply,
// PlanTime and ProviderFunctions before.
func (m *Meter) Functions() map[string]function.Function {
	m.funcsOnce.Do(func() { m.funcs = newFunctionTable(m) })
	return m.funcs
}

// metered returns f (the function name, without "core::") counting its
// result against m and failing once m's context ends.
func (m *Meter) metered(name string, f function.Function) function.Function {
	est := sizeOf[name]
	after := checkedAfter[name]
	before := func(args []cty.Value) error {
		if err := m.Stopped(); err != nil {
			return stoppedError{err}
		}
		return nil
	}
	return wrapFunc(f, before, func(args []cty.Value) (cty.Value, error) {
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
		v, err := f.Call(args)
		if err == nil && after {
			// What no estimate bounds before (a file read, a template
			// rendered) counts once it is built.
			if err := m.charge(inspect(v, MaxBuiltBytes+1).cost); err != nil {
				return cty.NilVal, err
			}
		}
		return v, err
	})
}

// selfFunc is the function meterOf calls to find m.
func (m *Meter) selfFunc() function.Function {
	self := cty.CapsuleVal(meterType, m)
	return function.New(&function.Spec{
		Type: function.StaticReturnType(meterType),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) { return self, nil },
	})
}

// stoppedError is a function's error when the plan's context ended.
type stoppedError struct{ err error }

func (e stoppedError) Error() string { return "planning was stopped: " + e.err.Error() }

func (e stoppedError) Unwrap() error { return e.err }

// meterOf finds the meter of an evaluation context (nil when it has none).
func meterOf(ctx *hcl.EvalContext) *Meter {
	for c := ctx; c != nil; c = c.Parent() {
		if f, ok := c.Functions[meterFunc]; ok {
			v, err := f.Call(nil)
			if err != nil {
				return nil
			}
			m, _ := v.EncapsulatedValue().(*Meter)
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
func (m *Meter) pass(diags hcl.Diagnostics, rng hcl.Range) (_ hcl.Diagnostics, ok bool) {
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
func CheckValue(m *Meter, v cty.Value, what string, rng hcl.Range) *hcl.Diagnostic {
	_, d := checkValueCost(m, v, what, rng)
	return d
}

// checkProperties is checkValue for a resource's properties, which the
// plan keeps: they count against MaxPlannedBytes too.
func CheckProperties(m *Meter, v cty.Value, what string, rng hcl.Range) *hcl.Diagnostic {
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
func LargestProperty(r *Resource, props map[string]cty.Value) hcl.Range {
	rng, most := r.DeclRange, int64(-1)
	for _, name := range SortedKeys(props) {
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

func checkValueCost(m *Meter, v cty.Value, what string, rng hcl.Range) (int64, *hcl.Diagnostic) {
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

package config

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"
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
func StoppedDiag(ctx context.Context, rng *hcl.Range) *hcl.Diagnostic {
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

// HasPlanBudget reports whether ctx carries a budget of WithPlanBudget.
func HasPlanBudget(ctx context.Context) bool {
	_, ok := ctx.Value(budgetKey{}).(time.Duration)
	return ok
}

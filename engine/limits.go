package engine

import "time"

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
// Markdown change sets (MarkdownOptions.MaxBytes).
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

	// MaxCount (plan.go) bounds the count or for_each expansion of one
	// resource: 10,000.

	// MaxResourcesPerInstance bounds the resources of one stack instance
	// across all its modules: resource blocks times their module
	// instances when the template is loaded, and resource instances
	// (after count and for_each) while it is planned, counted before each
	// expansion is made. The same as MaxCount, so one resource may use the
	// whole allowance; CloudFormation allows 500 resources per stack.
	MaxResourcesPerInstance = 10000

	// MaxFunctionElements bounds the collections a function builds
	// (range, setproduct, concat, flatten, formatlist, split, jsondecode,
	// ...): 100,000 elements, checked from the arguments before the
	// result is built. setproduct(range(1024), range(1024), range(1024))
	// would otherwise ask for 25 GB.
	MaxFunctionElements = 100000

	// MaxFunctionSetElements bounds the sets functions build (toset,
	// setunion, setproduct of sets) and the lists distinct works on:
	// distinct compares every pair of elements, and go-cty's sets hash
	// with CRC-32, for which colliding elements are easy to make, so
	// their cost can grow with the square of their size. 10,000 elements
	// keep that within a few seconds.
	MaxFunctionSetElements = 10000

	// MaxFunctionStringBytes bounds the strings a function builds (join,
	// format, formatlist, replace, indent, jsonencode, strrev, ...): 1 MiB,
	// checked from the arguments before the string is built. Templates
	// can still hold longer literal text.
	MaxFunctionStringBytes = 1 << 20

	// MaxBuiltBytes bounds what evaluating one instance (or one expression
	// of the definitions) may build: the results of functions, the strings
	// templates put together, the elements for expressions iterate over,
	// and the properties of its resources (change sets copy them), each
	// counted at its size in bytes (at least elementCost per value). 256
	// MiB per instance: 10,000 resources with 10 KiB of properties each
	// use 100 MiB.
	MaxBuiltBytes = 256 << 20

	// DefaultPlanBudget is the time Engine.PlanContext gives planning one
	// instance when its context carries no budget of its own (see
	// WithPlanBudget): the backstop for callers that set none. Planning an
	// instance takes milliseconds; a plan that runs 30 s is a hostile one.
	DefaultPlanBudget = 30 * time.Second
)

// elementCost is what MaxBuiltBytes counts for each value of a collection
// (and each scalar): the size of a cty.Value in a slice.
const elementCost = 32

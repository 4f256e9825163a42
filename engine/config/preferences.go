package config

import (
	"github.com/hashicorp/hcl/v2"
)

// OperationPreferences are the RFS operation_preferences, defaults filled.
type OperationPreferences struct {
	RegionConcurrency          RegionConcurrency
	RegionOrder                []string
	FailureToleranceCount      int
	FailureTolerancePercentage int // -1 when unset
	MaxConcurrentCount         int
	MaxConcurrentPercentage    int // -1 when unset
	FailureToleranceMode       FailureToleranceMode
}

// RegionConcurrency is how an operation's regions run (the RFS seed's
// RegionConcurrencyType).
type RegionConcurrency string

// Region concurrency types.
const (
	Sequential RegionConcurrency = "SEQUENTIAL" // one region after another
	Parallel   RegionConcurrency = "PARALLEL"   // every region at once
)

func (c RegionConcurrency) String() string { return string(c) }

// Valid reports whether c is one of the seed's values.
func (c RegionConcurrency) Valid() bool {
	switch c {
	case Sequential, Parallel:
		return true
	}
	return false
}

// FailureToleranceMode is how failures bound concurrency (the RFS seed's
// FailureToleranceMode).
type FailureToleranceMode string

// Failure tolerance modes.
const (
	// StrictFailureTolerance lowers concurrency as failures grow, so that
	// failures never exceed the tolerance by more than one.
	StrictFailureTolerance FailureToleranceMode = "STRICT_FAILURE_TOLERANCE"
	// SoftFailureTolerance keeps concurrency whatever fails.
	SoftFailureTolerance FailureToleranceMode = "SOFT_FAILURE_TOLERANCE"
)

func (m FailureToleranceMode) String() string { return string(m) }

// Valid reports whether m is one of the seed's values.
func (m FailureToleranceMode) Valid() bool {
	switch m {
	case StrictFailureTolerance, SoftFailureTolerance:
		return true
	}
	return false
}

// DefaultPreferences are the operation preferences of a stack set that
// sets none, and of operations without a stack set (a deleted one): one
// region at a time, one instance at a time, no failure tolerated, STRICT.
// The one place they are written.
func DefaultPreferences() OperationPreferences {
	return OperationPreferences{
		RegionConcurrency: Sequential, MaxConcurrentCount: 1,
		FailureTolerancePercentage: -1, MaxConcurrentPercentage: -1,
		FailureToleranceMode: StrictFailureTolerance,
	}
}

// Strict reports whether failures lower concurrency (STRICT mode).
func (p OperationPreferences) Strict() bool { return p.FailureToleranceMode != SoftFailureTolerance }

// Limits resolves tolerance and max concurrency for a region with n
// instances (percentages are floored; a max concurrency of 0 becomes 1).
func (p OperationPreferences) Limits(n int) (tolerance, maxConcurrent int) {
	tolerance = p.FailureToleranceCount
	if p.FailureTolerancePercentage >= 0 {
		tolerance = p.FailureTolerancePercentage * n / 100
	}
	maxConcurrent = p.MaxConcurrentCount
	if p.MaxConcurrentPercentage >= 0 {
		maxConcurrent = p.MaxConcurrentPercentage * n / 100
	}
	if maxConcurrent < 1 {
		maxConcurrent = 1
	}
	return tolerance, maxConcurrent
}

var preferencesSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "region_concurrency_type"}, {Name: "region_order"},
		{Name: "failure_tolerance_count"}, {Name: "failure_tolerance_percentage"},
		{Name: "max_concurrent_count"}, {Name: "max_concurrent_percentage"},
		{Name: "failure_tolerance_mode"},
	},
}

func (ss *StackSet) loadPreferences(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(preferencesSchema)
	a := content.Attributes
	p := &ss.Preferences
	var concurrency, mode string
	diags = append(diags, stringAttr(a["region_concurrency_type"], &concurrency)...)
	diags = append(diags, stringListAttr(a["region_order"], &p.RegionOrder)...)
	diags = append(diags, stringAttr(a["failure_tolerance_mode"], &mode)...)
	if a["region_concurrency_type"] != nil {
		p.RegionConcurrency = RegionConcurrency(concurrency)
	}
	if a["failure_tolerance_mode"] != nil {
		p.FailureToleranceMode = FailureToleranceMode(mode)
	}
	exactlyOne := func(count, pct string, dstCount, dstPct *int) {
		if a[count] != nil && a[pct] != nil {
			diags = diags.Append(Errorf(a[pct].NameRange, "Conflicting operation preferences",
				"Stack set %q sets both %s and %s; set at most one of them.", ss.Name, count, pct))
			return
		}
		diags = append(diags, intAttr(a[count], dstCount)...)
		if a[pct] != nil {
			diags = append(diags, intAttr(a[pct], dstPct)...)
			if *dstPct > 100 {
				diags = diags.Append(Errorf(a[pct].Expr.Range(), "Invalid "+pct, "Stack set %q: %s is %d; it must be between 0 and 100.", ss.Name, pct, *dstPct))
			}
		}
	}
	exactlyOne("failure_tolerance_count", "failure_tolerance_percentage", &p.FailureToleranceCount, &p.FailureTolerancePercentage)
	exactlyOne("max_concurrent_count", "max_concurrent_percentage", &p.MaxConcurrentCount, &p.MaxConcurrentPercentage)
	if a["max_concurrent_count"] != nil && p.MaxConcurrentCount < 1 {
		diags = diags.Append(Errorf(a["max_concurrent_count"].Expr.Range(), "Invalid max_concurrent_count", "Stack set %q: max_concurrent_count must be at least 1.", ss.Name))
	}
	if a["max_concurrent_percentage"] != nil && p.MaxConcurrentPercentage == 0 {
		diags = diags.Append(Errorf(a["max_concurrent_percentage"].Expr.Range(), "Invalid max_concurrent_percentage",
			"Stack set %q: max_concurrent_percentage is %d; the seed requires a positive integer (1 to 100). To run one instance at a time per region, set max_concurrent_count = 1.", ss.Name, p.MaxConcurrentPercentage))
	}
	if !p.RegionConcurrency.Valid() {
		diags = diags.Append(Errorf(a["region_concurrency_type"].Expr.Range(), "Invalid region_concurrency_type",
			"Stack set %q: region_concurrency_type is %q; it must be \"SEQUENTIAL\" or \"PARALLEL\".", ss.Name, p.RegionConcurrency))
	}
	if !p.FailureToleranceMode.Valid() {
		diags = diags.Append(Errorf(a["failure_tolerance_mode"].Expr.Range(), "Invalid failure_tolerance_mode",
			"Stack set %q: failure_tolerance_mode is %q; it must be \"STRICT_FAILURE_TOLERANCE\" or \"SOFT_FAILURE_TOLERANCE\".", ss.Name, p.FailureToleranceMode))
	}
	if ro := a["region_order"]; ro != nil {
		if p.RegionConcurrency != Sequential {
			diags = diags.Append(Errorf(ro.NameRange, "region_order needs SEQUENTIAL",
				"Stack set %q: region_order is only allowed with region_concurrency_type = \"SEQUENTIAL\".", ss.Name))
		} else if !sameSet(p.RegionOrder, ss.Regions) {
			diags = diags.Append(Errorf(ro.Expr.Range(), "Invalid region_order",
				"Stack set %q: region_order %v must list exactly the regions of deployment_targets %v, each once.", ss.Name, p.RegionOrder, ss.Regions))
		}
	}
	// STRICT mode: concurrency may exceed tolerance by at most one (seed rule),
	// checked when both are counts; percentages are checked per region at run time.
	if p.FailureToleranceMode == StrictFailureTolerance && p.MaxConcurrentPercentage < 0 && p.FailureTolerancePercentage < 0 &&
		p.MaxConcurrentCount > p.FailureToleranceCount+1 {
		rng := b.DefRange
		if a["max_concurrent_count"] != nil {
			rng = a["max_concurrent_count"].Expr.Range()
		}
		diags = diags.Append(Errorf(rng, "max_concurrent_count too large for STRICT_FAILURE_TOLERANCE",
			"Stack set %q: max_concurrent_count is %d but failure_tolerance_count is %d; in STRICT_FAILURE_TOLERANCE mode max concurrency may be at most failure tolerance + 1 (%d). Lower it or use SOFT_FAILURE_TOLERANCE.",
			ss.Name, p.MaxConcurrentCount, p.FailureToleranceCount, p.FailureToleranceCount+1))
	}
	return diags
}

// checkStrictPercentages applies the STRICT bound (max concurrency at most
// tolerance + 1) per region once the number of instances per region is
// known, which percentages need.
func (ss *StackSet) checkStrictPercentages(b *hcl.Block) hcl.Diagnostics {
	p := ss.Preferences
	if p.FailureToleranceMode != StrictFailureTolerance || p.MaxConcurrentPercentage < 0 && p.FailureTolerancePercentage < 0 {
		return nil
	}
	// The base is every instance of the region, suspended accounts
	// included (docs/design.md §5; the reconciler counts the same way).
	n := len(ss.Accounts)
	tol, maxc := p.Limits(n)
	if maxc <= tol+1 {
		return nil
	}
	rng := ss.DeclRange
	if b != nil {
		rng = b.DefRange
	}
	return hcl.Diagnostics{Errorf(rng, "Max concurrency too large for STRICT_FAILURE_TOLERANCE",
		"Stack set %q: with %d instances per region, max concurrency resolves to %d and failure tolerance to %d; in STRICT_FAILURE_TOLERANCE mode max concurrency may be at most failure tolerance + 1 (%d). Lower it or use SOFT_FAILURE_TOLERANCE.",
		ss.Name, n, maxc, tol, tol+1)}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		if m[x] != 1 {
			return false
		}
		m[x]--
	}
	return true
}

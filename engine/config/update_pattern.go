package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// UpdatePattern is a resource's update_pattern block (docs/design.md §6, Heat's
// OS::Heat::RollingUpdatePattern and CanaryUpdatePattern on a
// ResourceGroup): when a count or for_each resource changes, its members
// are updated or replaced in batches instead of one after another.
//
// Batches are formed over the changing members in index (count) or key
// (for_each) order, with Rollout.Batches' rules: BatchSize members per
// batch (canary: multiplied by GrowthFactor after each batch), and never
// so many that fewer than MinInService existing members stay untouched;
// new members (a larger count) do not count against MinInService; a
// MinInService at or above the group's number of members is a diagnostic
// when the instance is planned (see CheckMinInService). The
// members of a batch are applied concurrently; the next batch starts after
// every member of this one succeeded and Pause passed. A failed member
// stops the group after its batch: later batches are not applied, and the
// instance fails (a stack set's rollout then decides on rollback).
//
// The pattern paces changes to a group that exists; a group created from
// nothing is created as without a pattern. Resources that depend on the
// group wait for all of it, as for any resource.
type UpdatePattern struct {
	Pattern      string // PatternRolling | PatternCanary
	BatchSize    int
	GrowthFactor int // canary only; 1 for rolling
	MinInService int
	Pause        time.Duration
	DeclRange    hcl.Range
	// MinInServiceRange is where min_in_service is set (DeclRange when it
	// is not).
	MinInServiceRange hcl.Range
}

var updatePatternSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "pattern"}, {Name: "batch_size"}, {Name: "growth_factor"}, {Name: "min_in_service"}, {Name: "pause"},
	},
}

// loadUpdatePattern reads the update_pattern block of resource addr.
func loadUpdatePattern(addr string, b *hcl.Block) (*UpdatePattern, hcl.Diagnostics) {
	content, diags := b.Body.Content(updatePatternSchema)
	a := content.Attributes
	u := &UpdatePattern{Pattern: PatternRolling, BatchSize: DefaultBatchSize, GrowthFactor: 1, DeclRange: b.DefRange}
	diags = append(diags, stringAttr(a["pattern"], &u.Pattern)...)
	diags = append(diags, intAttr(a["batch_size"], &u.BatchSize)...)
	diags = append(diags, intAttr(a["min_in_service"], &u.MinInService)...)
	u.MinInServiceRange = u.DeclRange
	if m := a["min_in_service"]; m != nil {
		u.MinInServiceRange = m.Expr.Range()
	}
	if diags.HasErrors() {
		return u, diags
	}
	switch u.Pattern {
	case PatternRolling:
		if g := a["growth_factor"]; g != nil {
			diags = diags.Append(Errorf(g.NameRange, "growth_factor needs the canary pattern",
				"%s: growth_factor only applies to pattern = \"canary\"; a rolling update uses batch_size for every batch.", addr))
		}
	case PatternCanary:
		u.GrowthFactor = DefaultGrowthFactor
		if g := a["growth_factor"]; g != nil {
			diags = append(diags, intAttr(g, &u.GrowthFactor)...)
			if !diags.HasErrors() && u.GrowthFactor < 2 {
				diags = diags.Append(Errorf(g.Expr.Range(), "Invalid growth_factor",
					"%s: growth_factor is %d; a canary update must grow its batches, so it must be at least 2.", addr, u.GrowthFactor))
			}
		}
	default:
		diags = diags.Append(Errorf(a["pattern"].Expr.Range(), "Invalid update pattern",
			"%s: pattern is %q; it must be \"rolling\" or \"canary\".", addr, u.Pattern))
	}
	if u.BatchSize < 1 {
		diags = diags.Append(Errorf(a["batch_size"].Expr.Range(), "Invalid batch_size",
			"%s: batch_size is %d; it must be at least 1.", addr, u.BatchSize))
	}
	if p := a["pause"]; p != nil {
		var s string
		if d := stringAttr(p, &s); d.HasErrors() {
			diags = append(diags, d...)
		} else {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil || d < 0:
				diags = diags.Append(Errorf(p.Expr.Range(), "Invalid pause",
					"%s: pause is %q; it must be a duration like \"30s\" or \"5m\".", addr, s))
			case d > MaxRolloutDuration:
				diags = diags.Append(Errorf(p.Expr.Range(), "Invalid pause",
					"%s: pause is %q; it may be at most 24h.", addr, s))
			default:
				u.Pause = d
			}
		}
	}
	return u, diags
}

// Batches splits the changing members of a group into batches (the
// indexes of each batch's members); see Rollout.Batches (inService: the
// member exists; untouched: members that do not change).
func (u *UpdatePattern) Batches(inService []bool, untouched int) [][]int {
	r := Rollout{Pattern: u.Pattern, BatchSize: u.BatchSize, GrowthFactor: u.GrowthFactor, MinInService: u.MinInService}
	return r.Batches(inService, untouched)
}

// CheckMinInService is the diagnostic for a min_in_service that resource
// addr's group of members (its count or for_each size after the change)
// can never meet, as Rollout.CheckMinInService: an update must be able to
// take one member at a time, so min_in_service must be below the number
// of members. A group created from nothing is held to it too (the next
// change of the group could not go). Nil for an empty group.
func (u *UpdatePattern) CheckMinInService(addr string, members int) *hcl.Diagnostic {
	if members == 0 || u.MinInService < members {
		return nil
	}
	return Errorf(u.MinInServiceRange, "min_in_service cannot be met",
		"%s: update_pattern min_in_service is %d, but the group has %s; an update must take at least one member out of service at a time, so min_in_service must be at most %d.",
		addr, u.MinInService, plural(members, "member"), members-1)
}

// String describes the pattern for logs and errors.
func (u *UpdatePattern) String() string {
	s := fmt.Sprintf("%s, batch_size %d", u.Pattern, u.BatchSize)
	if u.Pattern == PatternCanary {
		s += fmt.Sprintf(", growth_factor %d", u.GrowthFactor)
	}
	if u.MinInService > 0 {
		s += fmt.Sprintf(", min_in_service %d", u.MinInService)
	}
	if u.Pause > 0 {
		s += ", pause " + u.Pause.String()
	}
	return s
}

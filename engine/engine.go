package engine

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/clock"
)

// The Engine and its planning entry points: Plan, PlanContext and
// PlanDestroy (Apply is in apply.go).

// PlanDestroy plans the deletion of every recorded resource of an instance
// (its target was removed, or its stack set was deleted), dependents first.
// It needs no template.
func PlanDestroy(inst *Instance, recorded []ResourceState) *InstancePlan {
	p := &InstancePlan{Instance: inst, Outputs: map[string]cty.Value{}, recorded: map[string]*recordedResource{}, destroy: true}
	var removed []*recordedResource
	for _, r := range recorded {
		rr := &recordedResource{ResourceState: r}
		p.recorded[r.Address] = rr
		removed = append(removed, rr)
	}
	for _, rr := range orderRemovals(removed) {
		rp := &ResourcePlan{Address: rr.Address, Base: baseAddr(rr.Address), Type: rr.Type, Action: Delete, PhysicalID: rr.PhysicalID, Before: markAttrs(rr.inputs(), rr.Sensitive)}
		if rr.Status == StatusPendingDelete {
			rp.RequestID = rr.RequestID
		}
		rp.Change = removeChange(rp, rr.DeletionPolicy, priorTemplate(inst), stackSetTemplate(inst))
		p.Resources = append(p.Resources, rp)
	}
	return p
}

// DestroyPrevented diagnoses the recorded resources of an instance about
// to be destroyed (its target removed) that the stack set's template
// still protects with lifecycle.prevent_destroy: as Terraform refuses to
// destroy such a resource while its configuration says so, removing the
// target is refused until prevent_destroy is removed. Removing the
// resource block or the whole stack set lifts the protection with the
// configuration, as in Terraform.
func DestroyPrevented(ss *StackSet, t Target, recorded []ResourceState) hcl.Diagnostics {
	if ss == nil || ss.Template == nil {
		return nil
	}
	var diags hcl.Diagnostics
	for _, r := range recorded {
		res := templateResource(ss.Template, r.Address)
		if res == nil || !res.Lifecycle.PreventDestroy || r.DeletionPolicy == "Retain" {
			continue
		}
		diags = diags.Append(errorf(res.DeclRange, "Instance cannot be destroyed",
			"Removing target %s/%s from stack set %q would destroy %s, which has lifecycle.prevent_destroy set. Remove prevent_destroy first (the same commit may remove the target), or keep the target.", t.Region, t.Account, ss.Name, r.Address))
	}
	return diags
}

// templateResource is the resource block of t (or of a module it calls)
// that the recorded address addr ("module.m.TYPE.NAME[key]") comes from.
func templateResource(t *Template, addr string) *Resource {
	id, mods := splitModuleAddress(addr)
	if mods != nil {
		for _, name := range strings.Split(mods.LogicalIdHierarchy, "/") {
			mc := t.Modules[baseAddr(name)]
			if mc == nil {
				return nil
			}
			t = mc.Template
		}
	}
	return t.Resources[baseAddr(id)]
}

// Engine evaluates templates against providers.
type Engine struct {
	providers provider.Registry
	clock     clock.Clock     // times the pauses of update patterns
	log       *zerolog.Logger // see SetLogger
	// plugins are the resource types of Terraform/OpenTofu providers
	// templates required (plugins.go).
	plugins plugins
}

// New returns an engine using the given providers.
func New(reg provider.Registry) *Engine { return &Engine{providers: reg, clock: clock.Real} }

// SetClock replaces the real clock (tests use a fake one). Call it before
// the engine is used.
func (e *Engine) SetClock(c clock.Clock) { e.clock = c }

// Load loads definitions with this engine's providers (see Load). A
// panic while loading is a diagnostic (see contain).
func (e *Engine) Load(fsys fs.FS, dir string) (defs *Definitions, diags hcl.Diagnostics) {
	defer func() {
		if defs == nil {
			defs = &Definitions{Dir: dir}
		}
	}()
	defer e.contain(&diags, "loading the definitions", nil)
	return loadRedacted(loadDefinitions(fsys, dir, e.registry(), e, false))
}

// LoadUntrusted is Load for a ref that is not the deploy branch: its
// templates may use only the Terraform providers already locked (no
// download, no provider of the branch's choosing).
func (e *Engine) LoadUntrusted(fsys fs.FS, dir string) (defs *Definitions, diags hcl.Diagnostics) {
	defer func() {
		if defs == nil {
			defs = &Definitions{Dir: dir}
		}
	}()
	defer e.contain(&diags, "loading the definitions", nil)
	return loadRedacted(loadDefinitions(fsys, dir, e.registry(), e, true))
}

// Plan is PlanContext without a context of the caller's: it plans under
// DefaultPlanBudget.
func (e *Engine) Plan(inst *Instance, recorded []ResourceState) (*InstancePlan, hcl.Diagnostics) {
	return e.PlanContext(context.Background(), inst, recorded)
}

// PlanContext evaluates the instance's template and diffs it against the
// recorded resources. Evaluation errors are diagnostics; a plan with errors
// must not be applied.
//
// Planning stops with a diagnostic when ctx ends (PlanStopped tells which
// way): ctx is checked between resources, their count and for_each
// members, modules, for expressions and function calls. A ctx without a
// budget of WithPlanBudget gets DefaultPlanBudget, unless its deadline is
// sooner. A panic while planning is a diagnostic too (see contain).
func (e *Engine) PlanContext(ctx context.Context, inst *Instance, recorded []ResourceState) (plan *InstancePlan, diags hcl.Diagnostics) {
	if _, ok := ctx.Value(budgetKey{}).(time.Duration); !ok {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > DefaultPlanBudget {
			var cancel context.CancelFunc
			ctx, cancel = WithPlanBudget(ctx, DefaultPlanBudget)
			defer cancel()
		}
	}
	m := newMeter(ctx)
	defer func() {
		if diags.HasErrors() {
			plan = nil
		}
	}()
	defer func() { diags = planDiagnostics(inst, recorded, diags) }()
	defer func() {
		// Once ctx ended, whatever failed failed because it did.
		if ctx.Err() != nil && diags.HasErrors() {
			_, rng := m.where()
			diags = hcl.Diagnostics{stoppedDiag(ctx, rng)}
		}
	}()
	what := "planning"
	if inst != nil {
		what = fmt.Sprintf("planning stack set %q at %s/%s", inst.Name, inst.Target.Region, inst.Target.Account)
		if inst.StackSet != nil {
			what = fmt.Sprintf("planning stack set %q at %s/%s", inst.StackSet.Name, inst.Target.Region, inst.Target.Account)
		}
	}
	defer e.contain(&diags, what, m)
	w, diags := e.newWalker(inst, recorded)
	if diags.HasErrors() {
		return nil, diags
	}
	w.meter = m
	m.only = w.tmpl.funcs
	diags = append(diags, w.walk()...)
	if diags.HasErrors() {
		return nil, diags
	}
	if diags = append(diags, checkFileOwners(w.plan)...); diags.HasErrors() {
		return nil, diags
	}
	return w.plan, diags
}

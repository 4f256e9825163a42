package engine

import (
	"context"
	"fmt"
	"io/fs"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
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
func DestroyPrevented(ss *config.StackSet, t config.Target, recorded []ResourceState) hcl.Diagnostics {
	if ss == nil || ss.Template == nil {
		return nil
	}
	var diags hcl.Diagnostics
	for _, r := range recorded {
		res := templateResource(ss.Template, r.Address)
		if res == nil || !res.Lifecycle.PreventDestroy || changeset.Retains(r.DeletionPolicy) {
			continue
		}
		diags = diags.Append(config.Errorf(res.DeclRange, "Instance cannot be destroyed",
			"Removing target %s/%s from stack set %q would destroy %s, which has lifecycle.prevent_destroy set. Remove prevent_destroy first (the same commit may remove the target), or keep the target.", t.Region, t.Account, ss.Name, r.Address))
	}
	return diags
}

// templateResource is the resource block of t (or of a module it calls)
// that the recorded address addr ("module.m.TYPE.NAME[key]") comes from.
func templateResource(t *config.Template, addr string) *config.Resource {
	mods, id := moduleSteps(addr) // expand.go
	for _, name := range mods {
		mc := t.Modules[name[:keyStart(name)]]
		if mc == nil || mc.Template == nil {
			return nil
		}
		t = mc.Template
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
	// modules fetches remote module sources (SetModuleFetcher).
	modules config.ModuleFetcher
}

// New returns an engine using the given providers.
func New(reg provider.Registry) *Engine { return &Engine{providers: reg, clock: clock.Real} }

// SetClock replaces the real clock (tests use a fake one). Call it before
// the engine is used.
func (e *Engine) SetClock(c clock.Clock) { e.clock = c }

// Load loads definitions with this engine's providers (see Load). A
// panic while loading is a diagnostic (see contain).
func (e *Engine) Load(fsys fs.FS, dir string) (defs *config.Definitions, diags hcl.Diagnostics) {
	defer func() {
		if defs == nil {
			defs = &config.Definitions{Dir: dir}
		}
	}()
	defer e.contain(&diags, "loading the definitions", nil)
	return loadRedacted(config.LoadDefinitions(fsys, dir, e.registry(), e.loadPlugins(), false))
}

// LoadUntrusted is Load for a ref that is not the deploy branch: its
// templates may use only the Terraform providers already locked (no
// download, no provider of the branch's choosing).
func (e *Engine) LoadUntrusted(fsys fs.FS, dir string) (defs *config.Definitions, diags hcl.Diagnostics) {
	defer func() {
		if defs == nil {
			defs = &config.Definitions{Dir: dir}
		}
	}()
	defer e.contain(&diags, "loading the definitions", nil)
	return loadRedacted(config.LoadDefinitions(fsys, dir, e.registry(), e.loadPlugins(), true))
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
	if !config.HasPlanBudget(ctx) {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > config.DefaultPlanBudget {
			var cancel context.CancelFunc
			ctx, cancel = config.WithPlanBudget(ctx, config.DefaultPlanBudget)
			defer cancel()
		}
	}
	m := config.NewMeter(ctx)
	defer func() {
		if diags.HasErrors() {
			plan = nil
		}
	}()
	defer func() { diags = planDiagnostics(inst, recorded, diags) }()
	defer func() {
		// Once ctx ended, whatever failed failed because it did.
		if ctx.Err() != nil && diags.HasErrors() {
			_, rng := m.Where()
			diags = hcl.Diagnostics{config.StoppedDiag(ctx, rng)}
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
	m.Only = w.tmpl.Funcs
	m.Template, m.PlanTime = w.tmpl, e.clock.Now().UTC()
	w.plan.planTime = m.PlanTime // plantimestamp() when applied
	diags = append(diags, w.walk()...)
	if diags.HasErrors() {
		return nil, diags
	}
	if diags = append(diags, checkFileOwners(w.plan)...); diags.HasErrors() {
		return nil, diags
	}
	return w.plan, diags
}

// contain is deferred by the engine's entry points: a panic in loading or
// planning becomes a diagnostic of what was being done (no stack trace:
// the log has it), so that hostile definitions cannot take the daemon
// down. what names the work ("planning stack set web at eu-west-1/111");
// m, when set, tells what was being evaluated.
func (e *Engine) contain(diags *hcl.Diagnostics, what string, m *config.Meter) {
	p := recover()
	if p == nil {
		return
	}
	at, rng := m.Where()
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

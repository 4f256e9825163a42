package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/clock"
)

// Journal statuses of a recorded resource (the same strings the state
// package stores).
const (
	StatusApplied       = "APPLIED"
	StatusPendingCreate = "PENDING_CREATE"
	StatusPendingUpdate = "PENDING_UPDATE"
	StatusPendingDelete = "PENDING_DELETE"
)

// ResourceState is a recorded resource as handed to the engine. Inputs and
// Attributes are objects encoded with EncodeValue.
type ResourceState struct {
	Address    string
	Type       string
	PhysicalID string
	Inputs     json.RawMessage
	Attributes json.RawMessage
	Sensitive  []string
	DependsOn  []string
	Status     string
	RequestID  string
	// DeletionPolicy is "Retain" when the resource must be kept in the world
	// when it is removed from the template or the stack set is deleted.
	DeletionPolicy string
	// Metadata is the resource's metadata argument (JSON), if any.
	Metadata json.RawMessage
	// Deposed is the old object of a create_before_destroy replacement,
	// recorded from before the new one is created until the old one is
	// deleted; an apply that finds one deletes it.
	Deposed *Deposed
}

// Deposed is an object superseded by its create_before_destroy
// replacement, still to be deleted.
type Deposed struct {
	PhysicalID     string
	Inputs         json.RawMessage
	Attributes     json.RawMessage
	Sensitive      []string
	RequestID      string
	DeletionPolicy string
}

// Action is what applying a plan does to one resource.
type Action int

// Actions, in the order a reader expects them.
const (
	NoOp Action = iota
	Create
	Update
	Replace
	Delete
)

func (a Action) String() string {
	return [...]string{"NoOp", "Create", "Update", "Replace", "Delete"}[a]
}

// Instance is one stack set evaluated at one target.
type Instance struct {
	// StackSet is nil when destroying an instance of a stack set whose block
	// was removed; Name then names it.
	StackSet *StackSet
	Name     string
	// DeclaredTypes are the resource types the definitions declare, for a
	// destroy without StackSet (providers such as custom need a type's
	// default service token to delete).
	DeclaredTypes map[string]string
	// StackSetID is the recorded id; empty before the stack set exists, when
	// stack_set.id is known only after apply.
	StackSetID string
	Target     Target
	// Vars, when non-nil, replaces the instance's variables (by default the
	// stack set's, with its matching instance_override applied).
	Vars map[string]cty.Value
	// Untrusted plans a ref that is not the deploy branch: the sensitive
	// values recorded for its resources are unknown (sensitive_state.go).
	Untrusted bool
	// Reapply plans an update of every recorded resource, even those whose
	// properties are as recorded: the instance's last apply failed part
	// way, so the world may not match the record (a rollback of an
	// instance whose update failed re-applies the revision it ran).
	Reapply bool
	// Prior, when known, is the stack set as the instance last applied it
	// (its definitions at the instance's recorded revision): change sets
	// compare against its variables to name what caused a change
	// (changeset.go). Nil: causes are named from references alone.
	Prior *StackSet
	// Caller, for a destroy without StackSet, is the account calls are made
	// as (see CallerAccount); empty: the target account.
	Caller string
}

func (in *Instance) providerTarget() provider.Target {
	name := in.Name
	if in.StackSet != nil {
		name = in.StackSet.Name
	}
	types := in.DeclaredTypes
	if in.StackSet != nil {
		types = in.StackSet.ResourceTypes
	}
	return provider.Target{DeclaredTypes: types, StackSetName: name, StackSetID: in.StackSetID, Region: in.Target.Region, Account: in.Target.Account, Caller: in.caller()}
}

// ResourcePlan is the planned action for one resource instance.
type ResourcePlan struct {
	Address     string
	Base        string // "TYPE.NAME" without instance key
	Type        string
	Action      Action
	Replacement string
	PhysicalID  string
	RequestID   string // pending journal request id to resume, if any
	// deps are the full addresses ("TYPE.NAME", with module prefix) the
	// resource depends on; Module places it inside modules (nil at the top).
	deps   []string
	Module *changeset.ModuleInfo
	// metaOnly: only metadata or deletion policy change; no provider call.
	metaOnly bool
	metadata json.RawMessage
	Before   cty.Value
	After    cty.Value // may hold unknowns and marks
	Change   changeset.Change
	// CreateBeforeDestroy: a Replace creates the new object first and
	// deletes the old one after (lifecycle.create_before_destroy).
	CreateBeforeDestroy bool
	// DeposedCleanup: an earlier create_before_destroy replacement left
	// its old object to delete; the apply deletes it.
	DeposedCleanup bool
	// DeclRange is where the resource is declared (zero for a resource
	// only recorded: one removed from the template).
	DeclRange hcl.Range
}

// InstancePlan is the immutable plan of one stack instance.
type InstancePlan struct {
	Instance  *Instance
	Resources []*ResourcePlan // removals first (reverse dependency order), then template order
	Outputs   map[string]cty.Value
	recorded  map[string]*recordedResource
	destroy   bool
}

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

// HasChanges reports whether applying the plan would do anything.
func (p *InstancePlan) HasChanges() bool {
	for _, r := range p.Resources {
		if r.Action != NoOp || r.DeposedCleanup {
			return true
		}
	}
	return false
}

// Changes returns the ROS change records of every resource that changes.
func (p *InstancePlan) Changes() []changeset.Change {
	var out []changeset.Change
	for _, r := range p.Resources {
		if r.Action != NoOp {
			out = append(out, p.change(r))
		}
	}
	return out
}

// Counts returns how many resources are created, updated, replaced, deleted.
func (p *InstancePlan) Counts() (add, change, replace, remove int) {
	for _, r := range p.Resources {
		switch r.Action {
		case Create:
			add++
		case Update:
			change++
		case Replace:
			replace++
		case Delete:
			remove++
		}
	}
	return
}

// recordedResource is a recorded resource whose values are decoded only
// when needed: a no-op plan compares encoded inputs and never decodes them.
type recordedResource struct {
	ResourceState
	in, at     cty.Value
	inOK, atOK bool
}

func decodeObject(b []byte) cty.Value {
	v, err := DecodeValue(b)
	if err != nil || v == cty.NilVal || !v.Type().IsObjectType() {
		// Unreadable recorded values diff as changed, so the resource is
		// re-applied rather than trusted.
		return cty.EmptyObjectVal
	}
	return v
}

func (rr *recordedResource) inputs() cty.Value {
	if !rr.inOK {
		rr.in, rr.inOK = decodeObject(rr.Inputs), true
	}
	return rr.in
}

func (rr *recordedResource) attrs() cty.Value {
	if !rr.atOK {
		rr.at, rr.atOK = decodeObject(rr.Attributes), true
	}
	return rr.at
}

// Engine evaluates templates against providers.
type Engine struct {
	providers provider.Registry
	clock     clock.Clock     // times the pauses of update patterns
	log       *zerolog.Logger // see SetLogger
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
	return loadRedacted(Load(fsys, dir, e.providers))
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

type walker struct {
	e         *Engine
	inst      *Instance
	tmpl      *Template
	base      map[string]cty.Value // var, target, stack_set
	locals    map[string]cty.Value
	resources map[string]cty.Value // by "TYPE.NAME"
	// changing marks resources whose action is not NoOp.
	changing map[string]bool
	plan     *InstancePlan
	// apply hook: when set, called for each resource instance plan in
	// order; it returns the resource's real value.
	apply func(r *Resource, rp *ResourcePlan, props cty.Value) (cty.Value, *ResourceState, error)
	// pause waits between the batches of an update pattern (apply only).
	pause func(d time.Duration) error
	// wait completes a waiter member (apply only); see gate.
	wait func(m *member) error
	// note reports progress (apply only): the batches of update patterns.
	note Observer
	// groups holds the applied members of waiter resources (by "TYPE.NAME")
	// until they complete.
	groups map[string][]*member
	// waiters (shared) lists every applied waiter member, in apply order.
	waiters *[]*member

	// Modules: a module's walker evaluates the module's template with its
	// own variables, locals and resources, sharing the plan.
	prefix   string   // address prefix: "" or "module.a.module.b."
	modPath  []string // module names from the outermost
	modTypes []string // module sources from the outermost
	modules  map[string]cty.Value
	outputs  map[string]cty.Value // this walker's outputs
	desired  map[string]bool      // shared: every planned address
	planned  *[]*ResourcePlan     // shared: planned resources in order
	// meter (shared) measures the work against the limits and stops it
	// when the plan's context ends (limits.go).
	meter *meter

	// Attribution (changeset.go): prior holds this template's variables as
	// the instance last applied them (nil when unknown), priorLocals the
	// locals evaluated with them; extra is the count/each of the member
	// being diffed; changedAddrs (shared) the full addresses of members
	// whose action is not NoOp.
	prior        map[string]cty.Value
	priorLocals  map[string]cty.Value
	extra        map[string]cty.Value
	changedAddrs map[string]bool
}

func (e *Engine) newWalker(inst *Instance, recorded []ResourceState) (*walker, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	ss := inst.StackSet
	t := ss.Template
	vals := inst.Vars
	if vals == nil {
		vals = ss.VarsFor(inst.Target)
	}
	vars := map[string]cty.Value{}
	for name, decl := range t.Variables {
		v, ok := vals[name]
		if !ok {
			if decl.Default == cty.NilVal {
				diags = diags.Append(errorf(ss.DeclRange, "No value for required variable", "Stack set %q does not set variable %q.", ss.Name, name))
				continue
			}
			v = decl.Default
		}
		if decl.Sensitive {
			v = v.Mark(markSensitive)
		}
		vars[name] = v
	}
	id := cty.UnknownVal(cty.String)
	if inst.StackSetID != "" {
		id = cty.StringVal(inst.StackSetID)
	}
	w := &walker{
		e: e, inst: inst, tmpl: t,
		base: map[string]cty.Value{
			"var":       cty.ObjectVal(vars),
			"target":    cty.ObjectVal(map[string]cty.Value{"region": cty.StringVal(inst.Target.Region), "account": cty.StringVal(inst.Target.Account), "ou": cty.StringVal(ss.OU(inst.Target.Account))}),
			"stack_set": cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(ss.Name), "id": id}),
		},
		locals:    map[string]cty.Value{},
		resources: map[string]cty.Value{},
		changing:  map[string]bool{},
		modules:   map[string]cty.Value{},
		desired:   map[string]bool{},
		planned:   new([]*ResourcePlan),
		groups:    map[string][]*member{},
		waiters:   new([]*member),
		plan:      &InstancePlan{Instance: inst, Outputs: map[string]cty.Value{}, recorded: map[string]*recordedResource{}},
		meter:     newMeter(context.Background()),

		changedAddrs: map[string]bool{},
	}
	w.prior = priorVars(inst, t)
	w.outputs = w.plan.Outputs
	for _, r := range recorded {
		rr := &recordedResource{ResourceState: r}
		w.plan.recorded[r.Address] = rr
	}
	return w, diags
}

// walkNodes evaluates this walker's template: locals, resources, modules
// and outputs in dependency order.
func (w *walker) walkNodes() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, node := range w.tmpl.order {
		rng := w.nodeRange(node)
		if err := w.meter.stopped(); err != nil {
			return append(diags, stoppedDiag(w.meter.ctx, &rng))
		}
		w.meter.setAt(w.prefix+node+" ("+rng.String()+")", &rng)
		if d := w.gate(node); d.HasErrors() {
			return append(diags, d...)
		}
		switch {
		case strings.HasPrefix(node, "local."):
			l := w.tmpl.Locals[strings.TrimPrefix(node, "local.")]
			v, d := l.Expr.Value(w.ctx(node))
			diags = append(diags, d...)
			if d.HasErrors() {
				return diags
			}
			if d := checkValue(w.meter, v, w.prefix+node, l.Expr.Range()); d != nil {
				return diags.Append(d)
			}
			w.locals[l.Name] = v
		case strings.HasPrefix(node, "output."):
			o := w.tmpl.Outputs[strings.TrimPrefix(node, "output.")]
			v, d := o.Expr.Value(w.ctx(node))
			diags = append(diags, d...)
			if d.HasErrors() {
				return diags
			}
			if d := checkValue(w.meter, v, w.prefix+node, o.Expr.Range()); d != nil {
				return diags.Append(d)
			}
			if o.Sensitive {
				v = v.Mark(markSensitive)
			}
			w.outputs[o.Name] = v
		case strings.HasPrefix(node, "module."):
			d := w.module(w.tmpl.Modules[strings.TrimPrefix(node, "module.")])
			diags = append(diags, d...)
			if d.HasErrors() {
				return diags
			}
		default:
			r := w.tmpl.Resources[node]
			rps, d := w.resource(r)
			diags = append(diags, d...)
			if d.HasErrors() {
				return diags
			}
			for _, rp := range rps {
				w.desired[rp.Address] = true
			}
			*w.planned = append(*w.planned, rps...)
		}
	}
	return diags
}

// nodeRange is where a node of the template is declared.
func (w *walker) nodeRange(node string) hcl.Range {
	kind, name, _ := strings.Cut(node, ".")
	switch kind {
	case "local":
		return w.tmpl.Locals[name].DeclRange
	case "output":
		return w.tmpl.Outputs[name].DeclRange
	case "module":
		return w.tmpl.Modules[name].DeclRange
	}
	if r := w.tmpl.Resources[node]; r != nil {
		return r.DeclRange
	}
	return hcl.Range{}
}

// moduleInfo is the ROS ModuleInfo of this walker's resources (nil at the top).
func (w *walker) moduleInfo() *changeset.ModuleInfo {
	if len(w.modPath) == 0 {
		return nil
	}
	return &changeset.ModuleInfo{LogicalIdHierarchy: strings.Join(w.modPath, "/"), TypeHierarchy: typeHierarchy(w.modTypes)}
}

// module evaluates a module call: its inputs become the module template's
// variables, its resources are planned under "module.NAME.", and its
// outputs become module.NAME.OUTPUT.
func (w *walker) module(mc *ModuleCall) hcl.Diagnostics {
	var diags hcl.Diagnostics
	ctx := w.ctx("module." + mc.Name)
	vars := map[string]cty.Value{}
	for name, decl := range mc.Template.Variables {
		v := decl.Default
		if a, ok := mc.Inputs[name]; ok {
			val, d := a.Expr.Value(ctx)
			diags = append(diags, d...)
			if d.HasErrors() {
				return diags
			}
			conv, err := convert.Convert(val, decl.Type)
			if err != nil {
				return diags.Append(errorf(a.Expr.Range(), "Invalid value for module variable",
					"Module %q: variable %q must be %s: %s.", mc.Name, name, typeName(decl.Type), err))
			}
			if d := checkValue(w.meter, conv, fmt.Sprintf("module %q's variable %q", mc.Name, name), a.Expr.Range()); d != nil {
				return diags.Append(d)
			}
			v = conv
		}
		if decl.Sensitive {
			v = v.Mark(markSensitive)
		}
		vars[name] = v
	}
	child := &walker{
		e: w.e, inst: w.inst, tmpl: mc.Template, apply: w.apply, pause: w.pause, wait: w.wait, note: w.note,
		groups: map[string][]*member{}, waiters: w.waiters, meter: w.meter,
		base: map[string]cty.Value{
			"var": cty.ObjectVal(vars), "target": w.base["target"], "stack_set": w.base["stack_set"],
		},
		locals: map[string]cty.Value{}, resources: map[string]cty.Value{},
		changing: map[string]bool{}, modules: map[string]cty.Value{}, outputs: map[string]cty.Value{},
		plan: w.plan, desired: w.desired, planned: w.planned,
		prefix:   w.prefix + "module." + mc.Name + ".",
		modPath:  append(append([]string{}, w.modPath...), mc.Name),
		modTypes: append(append([]string{}, w.modTypes...), mc.Source),

		changedAddrs: w.changedAddrs,
	}
	child.prior = w.priorModuleVars(mc)
	diags = append(diags, child.walkNodes()...)
	if diags.HasErrors() {
		return diags
	}
	for _, c := range child.changing {
		if c {
			w.changing["module."+mc.Name] = true
		}
	}
	w.modules[mc.Name] = cty.ObjectVal(child.outputs)
	return diags
}

// walk evaluates every node in dependency order, planning each resource,
// then plans the removal of recorded resources no longer desired.
func (w *walker) walk() hcl.Diagnostics {
	diags := w.walkNodes()
	if diags.HasErrors() {
		return diags
	}
	desired, planned := w.desired, *w.planned
	// Removals: recorded resources no longer desired, dependents first.
	var removed []*recordedResource
	for addr, rr := range w.plan.recorded {
		if !desired[addr] {
			removed = append(removed, rr)
		}
	}
	for _, rr := range orderRemovals(removed) {
		if tr := w.tmpl.Resources[baseAddr(rr.Address)]; tr != nil && tr.Lifecycle.PreventDestroy {
			return diags.Append(errorf(tr.DeclRange, "Instance cannot be destroyed",
				"%s has lifecycle.prevent_destroy set, but this change would destroy it. Remove prevent_destroy first or keep the resource.", rr.Address))
		}
		rp := &ResourcePlan{Address: rr.Address, Base: baseAddr(rr.Address), Type: rr.Type, Action: Delete, PhysicalID: rr.PhysicalID, Before: markAttrs(rr.inputs(), rr.Sensitive)}
		if rr.Status == StatusPendingDelete {
			rp.RequestID = rr.RequestID
		}
		rp.Change = removeChange(rp, rr.DeletionPolicy, w.tmpl, priorTemplate(w.inst))
		w.plan.Resources = append(w.plan.Resources, rp)
	}
	w.plan.Resources = append(w.plan.Resources, planned...)
	return diags
}

// orderRemovals orders removed resources so that a resource is deleted
// before the resources it depends on.
func orderRemovals(removed []*recordedResource) []*recordedResource {
	byBase := map[string][]*recordedResource{}
	g := newGraph()
	for _, rr := range removed {
		b := baseAddr(rr.Address)
		byBase[b] = append(byBase[b], rr)
		g.add(b)
	}
	for _, rr := range removed {
		for _, d := range rr.DependsOn {
			if _, ok := byBase[d]; ok && d != baseAddr(rr.Address) {
				g.connect(baseAddr(rr.Address), d)
			}
		}
	}
	order, cycle := g.order()
	if cycle != nil { // recorded data is inconsistent; fall back to name order
		order = sortedKeys(byBase)
	}
	var out []*recordedResource
	for i := len(order) - 1; i >= 0; i-- {
		rs := byBase[order[i]]
		sort.Slice(rs, func(a, b int) bool { return rs[a].Address > rs[b].Address })
		out = append(out, rs...)
	}
	return out
}

func baseAddr(addr string) string {
	if i := strings.IndexByte(addr, '['); i >= 0 {
		return addr[:i]
	}
	return addr
}

// ctx builds the evaluation context of a node: the base roots plus the
// locals and resources the node references (found once, by analyze).
func (w *walker) ctx(node string) *hcl.EvalContext {
	vars := make(map[string]cty.Value, len(w.base)+4)
	for k, v := range w.base {
		vars[k] = v
	}
	locals := map[string]cty.Value{}
	byType := map[string]map[string]cty.Value{}
	modules := map[string]cty.Value{}
	for _, ref := range w.tmpl.refs[node] {
		if ref.root == "module" {
			if v, ok := w.modules[ref.name]; ok {
				modules[ref.name] = v
			}
			continue
		}
		if ref.root == "local" {
			if v, ok := w.locals[ref.name]; ok {
				locals[ref.name] = v
			}
			continue
		}
		if v, ok := w.resources[ref.root+"."+ref.name]; ok {
			if byType[ref.root] == nil {
				byType[ref.root] = map[string]cty.Value{}
			}
			byType[ref.root][ref.name] = v
		}
	}
	vars["local"] = cty.ObjectVal(locals)
	vars["module"] = cty.ObjectVal(modules)
	for typ, m := range byType {
		vars[typ] = cty.ObjectVal(m)
	}
	return &hcl.EvalContext{Variables: vars, Functions: w.meter.functions()}
}

// withExtra returns a child context holding count or each.
func withExtra(ctx *hcl.EvalContext, extra map[string]cty.Value) *hcl.EvalContext {
	if len(extra) == 0 {
		return ctx
	}
	child := ctx.NewChild()
	child.Variables = extra
	return child
}

type expansion struct {
	addr  string
	extra map[string]cty.Value // count / each
}

func (w *walker) expand(r *Resource) ([]expansion, hcl.Diagnostics) {
	switch {
	case r.Count != nil:
		v, diags := r.Count.Value(w.ctx(r.Addr()))
		if diags.HasErrors() {
			return nil, diags
		}
		if !v.IsWhollyKnown() {
			return nil, diags.Append(errorf(r.Count.Range(), "Invalid count argument", "The count of %s depends on values known only after apply; it must be known at plan time.", r.Addr()))
		}
		if v.IsMarked() {
			return nil, diags.Append(errorf(r.Count.Range(), "Invalid count argument", "The count of %s is derived from a sensitive value; count must not be sensitive.", r.Addr()))
		}
		num, err := convert.Convert(v, cty.Number)
		if err != nil || num.IsNull() {
			return nil, diags.Append(errorf(r.Count.Range(), "Invalid count argument", "The count of %s must be a whole number.", r.Addr()))
		}
		bf := num.AsBigFloat()
		if !bf.IsInt() || bf.Sign() < 0 || bf.Cmp(big.NewFloat(MaxCount)) > 0 {
			return nil, diags.Append(errorf(r.Count.Range(), "Invalid count argument",
				"The count of %s is %s; it must be a whole number from 0 to %d.", r.Addr(), bf.Text('g', -1), MaxCount))
		}
		n, _ := bf.Int64()
		if d := w.countResources(r, int(n), r.Count.Range()); d != nil {
			return nil, diags.Append(d)
		}
		out := make([]expansion, n)
		for i := range out {
			out[i] = expansion{addr: fmt.Sprintf("%s[%d]", r.Addr(), i), extra: map[string]cty.Value{"count": cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(i))})}}
		}
		return out, diags
	case r.ForEach != nil:
		v, diags := r.ForEach.Value(w.ctx(r.Addr()))
		if diags.HasErrors() {
			return nil, diags
		}
		bad := func(why string) ([]expansion, hcl.Diagnostics) {
			return nil, diags.Append(errorf(r.ForEach.Range(), "Invalid for_each argument", "The for_each of %s %s; it must be a map, or a set of strings, known at plan time and not sensitive.", r.Addr(), why))
		}
		if !v.IsWhollyKnown() {
			return bad("depends on values known only after apply")
		}
		sensitive := func() ([]expansion, hcl.Diagnostics) {
			return nil, diags.Append(errorf(r.ForEach.Range(), "Invalid for_each argument",
				"The for_each of %s uses a sensitive value. Sensitive values, or values derived from sensitive values, cannot be used as for_each arguments: the sensitive value could be exposed as a resource instance key.", r.Addr()))
		}
		if v.IsMarked() {
			return sensitive()
		}
		if v.IsNull() {
			return bad("is null")
		}
		ty := v.Type()
		if !ty.IsMapType() && !ty.IsObjectType() && v.ContainsMarked() {
			// The elements of a set or list become the keys. (Those of a
			// map are each.value, which may be sensitive.)
			return sensitive()
		}
		if v.CanIterateElements() && v.LengthInt() > MaxCount {
			return bad(fmt.Sprintf("has %d elements, more than the limit of %d", v.LengthInt(), MaxCount))
		}
		var keys []string
		vals := map[string]cty.Value{}
		switch {
		case ty.IsMapType() || ty.IsObjectType():
			for k, ev := range v.AsValueMap() {
				keys = append(keys, k)
				vals[k] = ev
			}
		case ty.IsSetType() || ty.IsListType() || ty.IsTupleType():
			if !ty.IsSetType() {
				if s, err := convert.Convert(v, cty.Set(cty.String)); err != nil || s.LengthInt() != v.LengthInt() {
					return bad("is a list with duplicate or non-string elements (use toset())")
				}
			}
			for it := v.ElementIterator(); it.Next(); {
				_, ev := it.Element()
				s, err := convert.Convert(ev, cty.String)
				if err != nil || s.IsNull() {
					return bad("holds a value that is not a string")
				}
				keys = append(keys, s.AsString())
				vals[s.AsString()] = s
			}
		default:
			return bad("is a " + ty.FriendlyName())
		}
		if d := w.countResources(r, len(keys), r.ForEach.Range()); d != nil {
			return nil, diags.Append(d)
		}
		sort.Strings(keys)
		out := make([]expansion, 0, len(keys))
		for _, k := range keys {
			out = append(out, expansion{addr: fmt.Sprintf("%s[%s]", r.Addr(), strconv.Quote(k)), extra: map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(k), "value": vals[k]})}})
		}
		return out, diags
	}
	if d := w.countResources(r, 1, r.DeclRange); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	return []expansion{{addr: r.Addr()}}, nil
}

// countResources counts n more resource instances of the instance (across
// its modules), before they are expanded: over MaxResourcesPerInstance it
// is a diagnostic at rng.
func (w *walker) countResources(r *Resource, n int, rng hcl.Range) *hcl.Diagnostic {
	if total := w.meter.resources + n; total > MaxResourcesPerInstance {
		return errorf(rng, "Too many resources",
			"%s%s adds %d resources, bringing the instance to %d; an instance may have at most %d resources across all its modules. Use fewer resources, smaller counts, or more stack sets.",
			w.prefix, r.Addr(), n, total, MaxResourcesPerInstance)
	}
	w.meter.resources += n
	return nil
}

// resource plans (and in apply mode applies) every instance of r and
// records its value for references.
func (w *walker) resource(r *Resource) ([]*ResourcePlan, hcl.Diagnostics) {
	exps, diags := w.expand(r)
	if diags.HasErrors() {
		return nil, diags
	}
	if r.UpdatePattern != nil {
		if d := r.UpdatePattern.CheckMinInService(r.Addr(), len(exps)); d != nil {
			return nil, diags.Append(d)
		}
	}
	p := w.e.providers[r.Type]
	schema := p.Schema()
	base := w.ctx(r.Addr())
	names := sortedKeys(schema.Properties)
	members := make([]*member, 0, len(exps))
	for _, ex := range exps {
		if err := w.meter.stopped(); err != nil {
			return nil, diags.Append(stoppedDiag(w.meter.ctx, r.DeclRange.Ptr()))
		}
		ctx := withExtra(base, ex.extra)
		props := make(map[string]cty.Value, len(schema.Properties))
		for _, name := range names {
			ps := schema.Properties[name]
			a := r.Properties[name]
			if a == nil {
				props[name] = cty.NullVal(ps.Type)
				continue
			}
			v, d := a.Expr.Value(ctx)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			conv, err := convert.Convert(v, ps.Type)
			if err != nil {
				diags = diags.Append(errorf(a.Expr.Range(), "Invalid value for property",
					"%s: property %q must be %s: %s.", ex.addr, name, typeName(ps.Type), err))
				continue
			}
			if ps.Required && conv.IsNull() {
				diags = diags.Append(errorf(a.Expr.Range(), "Missing value for property", "%s: property %q is required and must not be null.", ex.addr, name))
				continue
			}
			if ps.Sensitive {
				conv = conv.Mark(markSensitive)
			}
			props[name] = conv
		}
		if diags.HasErrors() {
			return nil, diags
		}
		obj := cty.ObjectVal(props)
		// Change sets copy the properties of every resource: they count.
		if d := checkProperties(w.meter, obj, "the properties of "+w.prefix+ex.addr, r.DeclRange); d != nil {
			d.Subject = largestProperty(r, props).Ptr()
			return nil, diags.Append(d)
		}
		if v, ok := p.(provider.Validator); ok {
			// Validators check the known parts (unknown values are skipped).
			clean, _ := obj.UnmarkDeep()
			if err := v.ValidateProperties(w.inst.providerTarget(), clean); err != nil {
				return nil, diags.Append(errorf(r.DeclRange, "Invalid resource properties", "%s: %s.", ex.addr, strings.TrimSuffix(err.Error(), ".")))
			}
		}
		var meta json.RawMessage
		if r.Metadata != nil {
			mv, d := r.Metadata.Value(ctx)
			diags = append(diags, d...)
			if d.HasErrors() {
				return nil, diags
			}
			if !mv.IsWhollyKnown() {
				return nil, diags.Append(errorf(r.Metadata.Range(), "Invalid metadata", "%s: metadata must be known at plan time; it cannot use values known only after apply.", ex.addr))
			}
			if d := checkValue(w.meter, mv, "the metadata of "+w.prefix+ex.addr, r.Metadata.Range()); d != nil {
				return nil, diags.Append(d)
			}
			mv, _ = mv.UnmarkDeep()
			meta, _ = EncodeValue(mv)
		}
		w.extra = ex.extra
		rp := w.diff(r, w.prefix+ex.addr, schema, obj, meta)
		if rr := w.plan.recorded[rp.Address]; rr != nil && rr.Deposed != nil {
			rp.DeposedCleanup = true
		}
		rp.CreateBeforeDestroy = rp.Action == Replace && r.Lifecycle.CreateBeforeDestroy
		if rp.Action == Replace || rp.Action == Delete {
			if r.Lifecycle.PreventDestroy {
				return nil, diags.Append(errorf(r.DeclRange, "Instance cannot be destroyed",
					"%s has lifecycle.prevent_destroy set, but this change would destroy it (%s). Remove prevent_destroy first.", ex.addr, changedNames(rp)))
			}
		}
		m := &member{addr: ex.addr, rp: rp, props: obj, val: cty.DynamicVal}
		if ex.extra["each"] != cty.NilVal {
			m.key = ex.extra["each"].GetAttr("key").AsString()
		}
		if w.tmpl.referenced[r.Addr()] {
			m.val = w.value(p, schema, rp, obj)
		}
		members = append(members, m)
	}
	if w.apply != nil {
		if err := w.applyMembers(r, members); err != nil {
			return nil, append(diags, err...)
		}
	}
	plans := make([]*ResourcePlan, len(members))
	for i, m := range members {
		plans[i] = m.rp
		if m.rp.Action != NoOp {
			w.changing[r.Addr()] = true
			w.changedAddrs[m.rp.Address] = true
		}
	}
	if _, ok := p.(provider.Waiter); ok && w.apply != nil {
		w.groups[r.Addr()] = members
		*w.waiters = append(*w.waiters, members...)
	}
	w.setValue(r, members)
	return plans, diags
}

// member is one instance of a resource (one of its count or for_each
// members, or the resource itself) while it is planned and applied.
type member struct {
	addr  string // address without the module prefix
	key   string // for_each key
	rp    *ResourcePlan
	props cty.Value
	// val is the member's value for references: planned, then applied.
	val cty.Value
	// rec is the record the apply left (waiters only).
	rec *ResourceState
	// waited: a waiter member has completed.
	waited bool
}

// gate completes, before node is evaluated, the waiter resources it needs
// complete (Template.needs), and updates their values with what the wait
// returned (a wait condition's data).
func (w *walker) gate(node string) hcl.Diagnostics {
	if w.wait == nil {
		return nil
	}
	for _, dep := range w.tmpl.needs[node] {
		ms := w.groups[dep]
		changed := false
		for _, m := range ms {
			if m.waited {
				continue
			}
			if err := w.wait(m); err != nil {
				return hcl.Diagnostics{causeDiag("Wait failed", err.Error(), err)}
			}
			changed = true
		}
		if changed {
			w.setValue(w.tmpl.Resources[dep], ms)
		}
	}
	return nil
}

// setValue records a resource's value for references.
func (w *walker) setValue(r *Resource, members []*member) {
	switch {
	case r.Count != nil:
		vals := make([]cty.Value, len(members))
		for i, m := range members {
			vals[i] = m.val
		}
		w.resources[r.Addr()] = cty.TupleVal(vals)
	case r.ForEach != nil:
		keyed := make(map[string]cty.Value, len(members))
		for _, m := range members {
			keyed[m.key] = m.val
		}
		w.resources[r.Addr()] = cty.ObjectVal(keyed)
	default:
		w.resources[r.Addr()] = members[0].val
	}
}

// applyMembers applies the members of r: one after another, or in the
// batches of r's update pattern when it has one and the group exists.
func (w *walker) applyMembers(r *Resource, members []*member) hcl.Diagnostics {
	one := func(m *member) error {
		val, rec, err := w.apply(r, m.rp, m.props)
		if err != nil {
			return err
		}
		m.val, m.rec = val, rec
		return nil
	}
	failed := func(m *member, err error) *hcl.Diagnostic {
		return causeDiag("Apply failed", fmt.Sprintf("%s: %s", m.addr, err), err)
	}
	batches := w.batches(r, members)
	if batches == nil {
		for _, m := range members {
			if err := one(m); err != nil {
				return hcl.Diagnostics{failed(m, err)}
			}
		}
		return nil
	}
	// NoOp members need no provider call, but their values come from apply.
	for _, m := range members {
		if m.rp.Action == NoOp {
			if err := one(m); err != nil {
				return hcl.Diagnostics{failed(m, err)}
			}
		}
	}
	for k, batch := range batches {
		if k > 0 && r.UpdatePattern.Pause > 0 {
			if err := w.pause(r.UpdatePattern.Pause); err != nil {
				return hcl.Diagnostics{failed(batch[0], err)}
			}
		}
		addrs := make([]string, len(batch))
		for i, m := range batch {
			addrs[i] = m.addr
		}
		w.note(Event{Address: w.prefix + r.Addr(), Type: r.Type, Action: Update, Phase: "batch",
			Detail: fmt.Sprintf("batch %d of %d (update_pattern %s): %s", k+1, len(batches), r.UpdatePattern, strings.Join(addrs, ", "))})
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, m := range batch {
			wg.Go(func() { errs[i] = one(m) })
		}
		wg.Wait()
		var diags hcl.Diagnostics
		for i, err := range errs {
			if err != nil {
				diags = diags.Append(failed(batch[i], err))
			}
		}
		if diags.HasErrors() {
			if k+1 < len(batches) {
				diags = diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Update pattern stopped",
					Detail: fmt.Sprintf("%s: batch %d of %d failed (update_pattern %s); the %d later batches were not applied.",
						r.Addr(), k+1, len(batches), r.UpdatePattern, len(batches)-k-1)})
			}
			return diags
		}
	}
	return nil
}

// batches groups the changing members of r into the batches of its update
// pattern, in member order; nil when they go one after another (no
// pattern, nothing changes, or the group is being created from nothing).
func (w *walker) batches(r *Resource, members []*member) [][]*member {
	if r.UpdatePattern == nil {
		return nil
	}
	var changing []*member
	var inService []bool
	untouched, existing := 0, 0
	for _, m := range members {
		if m.rp.Action == NoOp {
			untouched++
			existing++
			continue
		}
		exists := m.rp.Action != Create
		if exists {
			existing++
		}
		changing = append(changing, m)
		inService = append(inService, exists)
	}
	if len(changing) == 0 || existing == 0 {
		return nil
	}
	var out [][]*member
	for _, idx := range r.UpdatePattern.Batches(inService, untouched) {
		batch := make([]*member, len(idx))
		for i, k := range idx {
			batch[i] = changing[k]
		}
		out = append(out, batch)
	}
	return out
}

func changedNames(rp *ResourcePlan) string {
	var n []string
	for _, pc := range rp.Change.ResourceChange.PropertyChanges {
		n = append(n, pc.Name)
	}
	return strings.Join(n, ", ")
}

// value is the resource's value for references during planning.
func (w *walker) value(p provider.Provider, schema provider.Schema, rp *ResourcePlan, props cty.Value) cty.Value {
	attrs := map[string]cty.Value{}
	for k, v := range props.AsValueMap() {
		attrs[k] = v
	}
	if rp.Action == NoOp {
		rr := w.plan.recorded[rp.Address]
		for k, v := range w.recordedAttrs(rr).AsValueMap() {
			attrs[k] = v
		}
		return cty.ObjectVal(attrs)
	}
	if schema.OpenAttributes {
		return cty.DynamicVal
	}
	var planned map[string]cty.Value
	if ap, ok := p.(provider.AttributePlanner); ok {
		clean, marks := props.UnmarkDeep()
		planned = ap.PlanAttributes(w.inst.providerTarget(), clean)
		if len(marks) > 0 {
			for k, v := range planned {
				planned[k] = v.Mark(markSensitive)
			}
		}
	}
	for _, name := range schema.Attributes {
		if v, ok := planned[name]; ok {
			attrs[name] = v
		} else {
			attrs[name] = cty.DynamicVal
		}
	}
	return cty.ObjectVal(attrs)
}

// diff compares the evaluated properties with the recorded resource.
func (w *walker) diff(r *Resource, addr string, schema provider.Schema, after cty.Value, meta json.RawMessage) *ResourcePlan {
	rp := &ResourcePlan{Address: addr, Base: r.Addr(), Type: r.Type, After: after, Replacement: changeset.ReplacementFalse, Module: w.moduleInfo(), metadata: meta, DeclRange: r.DeclRange}
	for _, d := range r.deps {
		rp.deps = append(rp.deps, w.prefix+d)
	}
	rr := w.plan.recorded[addr]
	interrupted := rr != nil && rr.Type == r.Type &&
		(rr.Status == StatusPendingDelete || rr.Status == StatusPendingCreate && !unchanged(after, rr.Inputs))
	if interrupted {
		// A delete (of a replacement) a crash interrupted, or a create
		// interrupted and since reconfigured: finish deleting what it was
		// or may have made, then create anew.
		rp.Action = Replace
		rp.Replacement = changeset.ReplacementTrue
		rp.PhysicalID = rr.PhysicalID
		rp.Before = markAttrs(rr.inputs(), rr.Sensitive)
		rp.Change = w.addChange(r, rp, schema)
		return rp
	}
	if rr == nil || rr.Status == StatusPendingCreate || rr.Type != r.Type {
		rp.Action = Create
		if rr != nil && rr.Status == StatusPendingCreate {
			rp.RequestID = rr.RequestID
		}
		if rr != nil && rr.Type != r.Type {
			// The address now names a resource of another type: replace it.
			rp.Action = Replace
			rp.Replacement = changeset.ReplacementTrue
			rp.PhysicalID = rr.PhysicalID
			rp.Before = markAttrs(rr.inputs(), rr.Sensitive)
		}
		rp.Change = w.addChange(r, rp, schema)
		return rp
	}
	rp.PhysicalID = rr.PhysicalID
	policyChanged := policy(rr.DeletionPolicy) != policy(r.DeletionPolicy)
	metaChanged := !bytes.Equal(rr.Metadata, meta)
	if rr.Status == StatusApplied && !policyChanged && !metaChanged && len(r.Lifecycle.IgnoreChanges) == 0 && !w.inst.Reapply && unchanged(after, rr.Inputs) {
		// Fast path: the properties encode exactly as recorded.
		rp.Action = NoOp
		return rp
	}
	rp.Before = markAttrs(rr.inputs(), rr.Sensitive)
	ignored := map[string]bool{}
	for _, n := range r.Lifecycle.IgnoreChanges {
		ignored[n] = true
	}
	var changed []string
	strongest := changeset.ReplacementFalse
	for _, name := range sortedKeys(schema.Properties) {
		if ignored[name] {
			continue
		}
		nv := after.GetAttr(name)
		ov := cty.NullVal(schema.Properties[name].Type)
		if rr.inputs().Type().HasAttribute(name) {
			ov = rr.inputs().GetAttr(name)
			if conv, err := convert.Convert(ov, schema.Properties[name].Type); err == nil {
				ov = conv
			}
		}
		if valuesEqual(nv, ov) {
			continue
		}
		changed = append(changed, name)
		dynamic := !nv.IsWhollyKnown()
		switch schema.Properties[name].Recreation {
		case provider.Always:
			if !dynamic {
				strongest = changeset.ReplacementTrue
			} else if strongest != changeset.ReplacementTrue {
				strongest = changeset.ReplacementConditional
			}
		case provider.Conditionally:
			if strongest != changeset.ReplacementTrue {
				strongest = changeset.ReplacementConditional
			}
		}
	}
	switch {
	case rr.Status == StatusPendingUpdate && strongest != changeset.ReplacementTrue:
		// Repeat the update a crash interrupted (same RequestID); if the
		// properties now require recreation, it is a replacement instead.
		rp.Action = Update
		rp.RequestID = rr.RequestID
	case len(changed) == 0 && w.inst.Reapply:
		rp.Action = Update
	case len(changed) == 0 && (policyChanged || metaChanged):
		rp.Action = Update
		rp.metaOnly = true
	case len(changed) == 0:
		rp.Action = NoOp
	case strongest == changeset.ReplacementTrue:
		rp.Action = Replace
	default:
		rp.Action = Update
	}
	rp.Replacement = strongest
	if ignored := len(r.Lifecycle.IgnoreChanges) > 0; ignored && rp.Action != NoOp {
		// ignored properties keep their recorded values
		m := after.AsValueMap()
		for n := range m {
			if r.Lifecycle.isIgnored(n) && rr.inputs().Type().HasAttribute(n) {
				m[n] = rp.Before.GetAttr(n) // marked as recorded
			}
		}
		rp.After = cty.ObjectVal(m)
	}
	rp.Change = w.modifyChange(r, rp, schema, changed)
	rc := &rp.Change.ResourceChange
	if rr.Status == StatusPendingUpdate && len(changed) == 0 {
		// Nothing changed in the template, but an update a crash
		// interrupted is repeated: the seed's System change source.
		// Each property it sends is a target of its own (the seed's Name
		// is set for every Properties target).
		e := rp.Address
		rc.Scope = append(rc.Scope, "Properties")
		for _, name := range sortedKeys(schema.Properties) {
			if v := rp.After.GetAttr(name); v.IsNull() && !v.IsMarked() {
				continue
			}
			rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: changeset.SourceSystem, CausingEntity: &e, Evaluation: "Static",
				Target: changeset.ResourceTargetDefinition{Attribute: "Properties", Name: name, RequiresRecreation: schema.Properties[name].Recreation.String()}})
		}
	}
	if metaChanged {
		rc.Scope = append(rc.Scope, "Metadata")
		for _, c := range w.causes(r.Addr(), r.Metadata, func(cv cty.Value) (bool, bool) { return sameMetadata(cv, rr.Metadata) }) {
			rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: c.source, CausingEntity: c.entity, Evaluation: "Static",
				Target: changeset.ResourceTargetDefinition{Attribute: "Metadata", RequiresRecreation: provider.Never.String()}})
		}
		rc.PropertyChanges = append(rc.PropertyChanges, w.metadataChange(r, rr.Metadata, meta))
	}
	if policyChanged {
		rc.Scope = append(rc.Scope, "DeletionPolicy")
		rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: changeset.SourceDirectModification, Evaluation: "Static",
			Target: changeset.ResourceTargetDefinition{Attribute: "DeletionPolicy", RequiresRecreation: provider.Never.String()}})
		rc.PropertyChanges = append(rc.PropertyChanges, changeset.ResourcePropertyChange{Name: "DeletionPolicy", BeforeValue: policy(rr.DeletionPolicy), AfterValue: policy(r.DeletionPolicy)})
	}
	return rp
}

func (l Lifecycle) isIgnored(name string) bool {
	for _, n := range l.IgnoreChanges {
		if n == name {
			return true
		}
	}
	return false
}

// policy normalises a deletion policy ("" is the default, Delete).
func policy(p string) string {
	if p == "" {
		return "Delete"
	}
	return p
}

// unchanged reports whether the evaluated properties encode exactly as the
// recorded ones (the common case of a no-op plan, without decoding).
func unchanged(after cty.Value, recorded []byte) bool {
	if !after.IsWhollyKnown() {
		return false
	}
	clean, _ := after.UnmarkDeep()
	b, err := EncodeValue(clean)
	return err == nil && bytes.Equal(b, recorded)
}

// valuesEqual compares a planned value with a recorded one: unknown values
// are never equal; marks are ignored; values compare by their JSON.
func valuesEqual(a, b cty.Value) bool {
	if !a.IsWhollyKnown() {
		return false
	}
	a, _ = a.UnmarkDeep()
	b, _ = b.UnmarkDeep()
	if a.IsNull() || b.IsNull() {
		return a.IsNull() == b.IsNull()
	}
	if a.Type().Equals(b.Type()) {
		return a.RawEquals(b)
	}
	aj, err1 := plainJSON(a)
	bj, err2 := plainJSON(b)
	return err1 == nil && err2 == nil && string(aj) == string(bj)
}

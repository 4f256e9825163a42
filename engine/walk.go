package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/dag"
)

// The walker: it evaluates a template node by node in dependency order,
// descends into modules and plans the removals.

// walkMode is what a walk does with each resource: plan it, or plan and
// apply it.
type walkMode int

const (
	// modePlan plans: no provider changes anything, values known only
	// after apply are unknown.
	modePlan walkMode = iota
	// modeApply applies each resource as it is planned, through the
	// walker's apply, pause, wait and note hooks, so later resources see
	// real values.
	modeApply
)

func (m walkMode) String() string {
	switch m {
	case modePlan:
		return "plan"
	case modeApply:
		return "apply"
	}
	return fmt.Sprintf("walkMode(%d)", int(m))
}

type walker struct {
	e         *Engine
	inst      *Instance
	tmpl      *config.Template
	base      map[string]cty.Value // var, target, stack_set
	locals    map[string]cty.Value
	resources map[string]cty.Value // by "TYPE.NAME"
	// changing marks resources whose action is not NoOp.
	changing map[string]bool
	plan     *InstancePlan
	// mode says whether the walk plans or applies; the hooks below are
	// set in modeApply only.
	mode walkMode
	// apply is called for each resource instance plan in order; it
	// returns the resource's real value.
	apply func(r *config.Resource, rp *ResourcePlan, props cty.Value) (cty.Value, *ResourceState, error)
	// pause waits between the batches of an update pattern (apply only).
	pause func(d time.Duration) error
	// wait completes a waiter member (apply only); see gate.
	wait func(m *member) error
	// note reports progress (apply only): the batches of update patterns.
	note Observer
	// provision runs the create-time provisioners of a member just
	// created (apply only; provisioners.go).
	provision func(w *walker, r *config.Resource, m *member) error
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
	meter *config.Meter
	// rootW is the walker of the instance's template (nil for it): provider
	// blocks live there, and their evaluated configurations (providerCfgs,
	// root only) serve every module.
	rootW        *walker
	providerCfgs map[string]cty.Value
	// providerMap maps a module's provider keys ("NAME", "NAME.ALIAS") to
	// the root template's configurations that serve them: its call's
	// providers argument over the caller's map, the caller's default
	// configurations inherited (as in Terraform). Nil for the root.
	providerMap map[string]string
	// callDeps are the full base addresses of the resources this module's
	// call (and its callers' calls) depends on: each of its resources
	// does (expand.go).
	callDeps []string
	// providerCfg is the provider configuration of the resource being
	// diffed (ChangePlanner).
	providerCfg cty.Value

	// Attribution (attribution.go, changes.go): prior holds this template's variables as
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
				diags = diags.Append(config.Errorf(ss.DeclRange, "No value for required variable", "Stack set %q does not set variable %q.", ss.Name, name))
				continue
			}
			v = decl.Default
		}
		if decl.Sensitive || ss.SensitiveVar(name) {
			v = v.Mark(provider.SensitiveMark)
		}
		if decl.Ephemeral {
			v = v.Mark(config.EphemeralMark)
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
			"path":      config.PathValue(t, t), "terraform": config.TerraformValue(ss.Name),
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
		meter:     config.NewMeter(context.Background()),

		changedAddrs: map[string]bool{},
	}
	w.prior = priorVars(inst, t)
	w.outputs = w.plan.Outputs
	for _, r := range recorded {
		rr := &recordedResource{ResourceState: r}
		w.plan.recorded[r.Address] = rr
	}
	diags = append(diags, w.refactor()...) // moved and removed blocks (refactor.go)
	return w, diags
}

// walkNodes evaluates this walker's template: locals, resources, modules
// and outputs in dependency order.
//
// A plan goes on past a node that fails, as Terraform's validation does,
// so that one pass reports every independent error: the nodes that use
// the failed one, directly or not, are skipped (their errors would only
// repeat it), the others are evaluated. An apply stops at the first.
func (w *walker) walkNodes() hcl.Diagnostics {
	var diags hcl.Diagnostics
	failed := map[string]bool{}
	for _, node := range w.tmpl.Order {
		rng := w.nodeRange(node)
		if err := w.meter.Stopped(); err != nil {
			return append(diags, config.StoppedDiag(w.meter.Ctx, &rng))
		}
		if len(failed) > 0 && w.usesAny(node, failed) {
			failed[node] = true
			continue
		}
		w.meter.SetAt(w.prefix+node+" ("+rng.String()+")", &rng)
		if d := w.gate(node); d.HasErrors() {
			return append(diags, d...)
		}
		d := BoundDiagnostics(w.walkNode(node), config.MaxNodeDiagnostics, "this block")
		diags = append(diags, d...)
		if d.HasErrors() {
			if w.mode == modeApply {
				return diags
			}
			failed[node] = true
			if w.meter.FailedNodes++; w.meter.FailedNodes >= config.MaxPlanErrors {
				if w.meter.FailedNodes == config.MaxPlanErrors {
					diags = diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Too many errors",
						Detail: fmt.Sprintf("The plan of this instance stopped after %d blocks failed; fix these and plan again.", config.MaxPlanErrors), Subject: rng.Ptr()})
				}
				return diags
			}
		}
	}
	return diags
}

// usesAny reports whether node references or depends on a node of set.
func (w *walker) usesAny(node string, set map[string]bool) bool {
	for _, ref := range w.tmpl.Refs[node] {
		if set[ref.Root+"."+ref.Name] {
			return true
		}
	}
	if r := w.tmpl.Resources[node]; r != nil {
		for _, dep := range r.Deps {
			if set[dep] {
				return true
			}
		}
	}
	return false
}

// nodeValue evaluates the expression of node (a local or an output) within
// the plan's size budget.
func (w *walker) nodeValue(node string, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	v, diags := expr.Value(w.ctx(node))
	if diags.HasErrors() {
		return v, diags
	}
	if d := config.CheckValue(w.meter, v, w.prefix+node, expr.Range()); d != nil {
		return v, diags.Append(d)
	}
	return v, diags
}

// walkNode evaluates one node of the template.
func (w *walker) walkNode(node string) hcl.Diagnostics {
	switch {
	case strings.HasPrefix(node, "local."):
		l := w.tmpl.Locals[strings.TrimPrefix(node, "local.")]
		v, d := w.nodeValue(node, l.Expr)
		if d.HasErrors() {
			return d
		}
		w.locals[l.Name] = v
		return d
	case strings.HasPrefix(node, "output."):
		o := w.tmpl.Outputs[strings.TrimPrefix(node, "output.")]
		if d := config.OutputPreconditions(o, w.ctx(node)); d.HasErrors() {
			return d
		}
		v, d := w.nodeValue(node, o.Expr)
		if d.HasErrors() {
			return d
		}
		v, e := w.tmpl.EphemeralOutput(o, v, w.rootW == nil)
		if e != nil {
			return d.Append(e)
		}
		if o.Sensitive {
			v = v.Mark(provider.SensitiveMark)
		}
		w.outputs[o.Name] = v
		return d
	case strings.HasPrefix(node, "data."):
		return w.scopedData(node, w.readData(node))
	case strings.HasPrefix(node, "var."):
		return config.ValidateVariable(w.tmpl.Variables[strings.TrimPrefix(node, "var.")], w.ctx(node))
	case strings.HasPrefix(node, "check."):
		return config.CheckAsserts(w.tmpl.Checks[strings.TrimPrefix(node, "check.")], w.ctx(node))
	case strings.HasPrefix(node, "module."):
		return w.moduleCall(w.tmpl.Modules[strings.TrimPrefix(node, "module.")]) // expand.go
	default:
		rps, d := w.resource(w.tmpl.Resources[node])
		if d.HasErrors() {
			return d
		}
		for _, rp := range rps {
			w.desired[rp.Address] = true
		}
		*w.planned = append(*w.planned, rps...)
		return d
	}
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
	case "var":
		return w.tmpl.Variables[name].DeclRange
	case "check":
		return w.tmpl.Checks[name].DeclRange
	case "data":
		if r := w.tmpl.Data[node]; r != nil {
			return r.DeclRange
		}
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

// module evaluates one instance of a module call (ex: its name with its
// key, "NAME" or "NAME[0]", and its count or each): its inputs become the
// module template's variables, its resources are planned under
// "module.NAME[KEY].", and it returns its outputs' object.
func (w *walker) module(mc *config.ModuleCall, ex expansion) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	ctx := withExtra(w.ctx("module."+mc.Name), ex.extra)
	vars := map[string]cty.Value{}
	for name, decl := range mc.Template.Variables {
		v := decl.Default
		if a, ok := mc.Inputs[name]; ok {
			val, d := a.Expr.Value(ctx)
			diags = append(diags, d...)
			if d.HasErrors() {
				return cty.NilVal, diags
			}
			conv, err := decl.Convert(val)
			if err != nil {
				return cty.NilVal, diags.Append(config.Errorf(a.Expr.Range(), "Invalid value for module variable",
					"Module %q: variable %q must be %s: %s.", ex.addr, name, config.TypeName(decl.Type), err))
			}
			if d := w.tmpl.RefuseEphemeral(conv, a.Expr.Range(), "Module %q: variable %q is not declared as accepting ephemeral values (ephemeral = true).", ex.addr, name); d != nil && !decl.Ephemeral {
				return cty.NilVal, diags.Append(d)
			}
			if d := config.CheckValue(w.meter, conv, fmt.Sprintf("module %q's variable %q", ex.addr, name), a.Expr.Range()); d != nil {
				return cty.NilVal, diags.Append(d)
			}
			v = conv
		}
		if decl.Sensitive || decl.Ephemeral {
			v = v.Mark(provider.SensitiveMark)
		}
		if decl.Ephemeral {
			v = v.Mark(config.EphemeralMark)
		}
		vars[name] = v
	}
	child := &walker{
		e: w.e, inst: w.inst, tmpl: mc.Template, mode: w.mode, apply: w.apply, pause: w.pause, wait: w.wait, note: w.note, provision: w.provision,
		groups: map[string][]*member{}, waiters: w.waiters, meter: w.meter,
		base: map[string]cty.Value{
			"var": cty.ObjectVal(vars), "target": w.base["target"], "stack_set": w.base["stack_set"],
			"path": config.PathValue(w.root().tmpl, mc.Template), "terraform": w.base["terraform"],
		},
		locals: map[string]cty.Value{}, resources: map[string]cty.Value{},
		changing: map[string]bool{}, modules: map[string]cty.Value{}, outputs: map[string]cty.Value{},
		plan: w.plan, desired: w.desired, planned: w.planned, rootW: w.root(),
		prefix:   w.prefix + "module." + ex.addr + ".",
		modPath:  append(append([]string{}, w.modPath...), ex.addr),
		callDeps: w.moduleDeps(mc), // expand.go
		modTypes: append(append([]string{}, w.modTypes...), mc.Source),

		changedAddrs: w.changedAddrs,
	}
	child.prior = w.priorModuleVars(mc, ex.extra)
	var pdiags hcl.Diagnostics
	if child.providerMap, pdiags = w.childProviders(mc); pdiags.HasErrors() {
		return cty.NilVal, append(diags, pdiags...)
	}
	diags = append(diags, child.walkNodes()...)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	for _, c := range child.changing {
		if c {
			w.changing["module."+mc.Name] = true
		}
	}
	return cty.ObjectVal(child.outputs), diags
}

// walk evaluates every node in dependency order, planning each resource,
// then plans the removal of recorded resources no longer desired.
func (w *walker) walk() hcl.Diagnostics {
	diags := w.walkNodes()
	if diags.HasErrors() {
		return diags
	}
	desired, planned := w.desired, *w.planned
	if d := w.checkMovedAway(); d.HasErrors() { // refactor.go
		return append(diags, d...)
	}
	// Removals: recorded resources no longer desired, dependents first.
	var removed []*recordedResource
	for addr, rr := range w.plan.recorded {
		if !desired[addr] {
			removed = append(removed, rr)
		}
	}
	for _, rr := range orderRemovals(removed) {
		if tr := w.tmpl.Resources[baseAddr(rr.Address)]; tr != nil && tr.Lifecycle.PreventDestroy {
			return diags.Append(config.Errorf(tr.DeclRange, "Instance cannot be destroyed",
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
	g := dag.New()
	for _, rr := range removed {
		b := baseAddr(rr.Address)
		byBase[b] = append(byBase[b], rr)
		g.Add(b)
	}
	for _, rr := range removed {
		for _, d := range rr.DependsOn {
			if _, ok := byBase[d]; ok && d != baseAddr(rr.Address) {
				g.Connect(baseAddr(rr.Address), d)
			}
		}
	}
	order, cycle := g.Order()
	if cycle != nil { // recorded data is inconsistent; fall back to name order
		order = config.SortedKeys(byBase)
	}
	var out []*recordedResource
	for i := len(order) - 1; i >= 0; i-- {
		rs := byBase[order[i]]
		sort.Slice(rs, func(a, b int) bool { return rs[a].Address > rs[b].Address })
		out = append(out, rs...)
	}
	return out
}

// baseAddr is addr without its instance key; module instance keys stay
// (module.a[0].file.x[1] → module.a[0].file.x; expand.go).
func baseAddr(addr string) string {
	if strings.HasPrefix(addr, "module.") {
		return trimInstanceKey(addr)
	}
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
	for _, ref := range w.tmpl.Refs[node] {
		if ref.Root == "module" {
			if v, ok := w.modules[ref.Name]; ok {
				modules[ref.Name] = v
			}
			continue
		}
		if ref.Root == "local" {
			if v, ok := w.locals[ref.Name]; ok {
				locals[ref.Name] = v
			}
			continue
		}
		if v, ok := w.resources[ref.Root+"."+ref.Name]; ok {
			if byType[ref.Root] == nil {
				byType[ref.Root] = map[string]cty.Value{}
			}
			byType[ref.Root][ref.Name] = v
		}
	}
	vars["local"] = cty.ObjectVal(locals)
	vars["module"] = cty.ObjectVal(modules)
	for typ, m := range byType {
		if typ == "data" {
			// data.TYPE.NAME: one object per data source type.
			byDataType := map[string]map[string]cty.Value{}
			for tn, v := range m {
				dt, n, _ := strings.Cut(tn, ".")
				if byDataType[dt] == nil {
					byDataType[dt] = map[string]cty.Value{}
				}
				byDataType[dt][n] = v
			}
			types := map[string]cty.Value{}
			for dt, ns := range byDataType {
				types[dt] = cty.ObjectVal(ns)
			}
			vars["data"] = cty.ObjectVal(types)
			continue
		}
		vars[typ] = cty.ObjectVal(m)
	}
	return &hcl.EvalContext{Variables: vars, Functions: w.meter.Functions()}
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

// root is the walker of the instance's template.
func (w *walker) root() *walker {
	if w.rootW != nil {
		return w.rootW
	}
	return w
}

// lookupProvider is the provider of a resource type (nil if none).
func (w *walker) lookupProvider(typ string) provider.Provider {
	p, _ := w.e.lookup(typ)
	return p
}

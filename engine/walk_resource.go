package engine

import (
	"encoding/json"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Planning one resource: its members' properties, their diff and their
// values for references.

// resource plans (and in apply mode applies) every instance of r and
// records its value for references.
func (w *walker) resource(r *config.Resource) ([]*ResourcePlan, hcl.Diagnostics) {
	exps, diags := w.expand(r)
	if diags.HasErrors() {
		return nil, diags
	}
	if r.UpdatePattern != nil {
		if d := r.UpdatePattern.CheckMinInService(r.Addr(), len(exps)); d != nil {
			return nil, diags.Append(d)
		}
	}
	p, _ := w.e.lookup(r.Type)
	schema := p.Schema()
	if d := w.checkProvisioners(r); d.HasErrors() { // provisioners.go
		return nil, append(diags, d...)
	}
	pcfg, pdiags := w.providerConfig(r)
	if pdiags.HasErrors() {
		return nil, append(diags, pdiags...)
	}
	base := w.ctx(r.Addr())
	members := make([]*member, 0, len(exps))
	for _, ex := range exps {
		if err := w.meter.Stopped(); err != nil {
			return nil, diags.Append(config.StoppedDiag(w.meter.Ctx, r.DeclRange.Ptr()))
		}
		ctx := withExtra(base, ex.extra)
		if diags = append(diags, config.Preconditions(r.Lifecycle, ctx)...); diags.HasErrors() {
			return nil, diags
		}
		obj, d := evalProperties(schema, r.Properties, ctx, ex.addr)
		diags = append(diags, d...)
		if diags.HasErrors() {
			return nil, diags
		}
		if d := w.tmpl.EphemeralProperties(r.Properties, obj, r.DeclRange, w.prefix+ex.addr); d != nil {
			return nil, diags.Append(d)
		}
		// Change sets copy the properties of every resource: they count.
		if d := config.CheckProperties(w.meter, obj, "the properties of "+w.prefix+ex.addr, r.DeclRange); d != nil {
			d.Subject = config.LargestProperty(r, obj.AsValueMap()).Ptr()
			return nil, diags.Append(d)
		}
		if v, ok := p.(provider.Validator); ok {
			// Validators check the known parts (unknown values are skipped).
			clean, _ := obj.UnmarkDeep()
			if err := v.ValidateProperties(w.inst.providerTarget(), clean); err != nil {
				return nil, diags.Append(config.Errorf(r.DeclRange, "Invalid resource properties", "%s: %s.", ex.addr, strings.TrimSuffix(err.Error(), ".")))
			}
		}
		if cv, ok := p.(provider.ConfigValidator); ok && w.mode != modeApply && w.inst.validates() && (pcfg == cty.NilVal || pcfg.IsWhollyKnown()) {
			// The provider's own validators (Terraform providers).
			clean, _ := obj.UnmarkDeep()
			if err := cv.ValidateConfig(w.meter.Ctx, provider.Request{Target: w.inst.providerTarget(), LogicalID: w.prefix + ex.addr, Properties: clean, ProviderConfig: unmarked(pcfg)}); err != nil {
				return nil, diags.Extend(config.ConfigDiags(r.Properties, r.DeclRange, w.prefix+ex.addr, "Invalid resource configuration", err, obj))
			}
		}
		var meta json.RawMessage
		if r.Metadata != nil {
			mv, d := r.Metadata.Value(ctx)
			diags = append(diags, d...)
			if d.HasErrors() {
				return nil, diags
			}
			if d := w.tmpl.RefuseEphemeral(mv, r.Metadata.Range(), "%s: metadata cannot use ephemeral values; stackd records it.", ex.addr); d != nil {
				return nil, diags.Append(d)
			}
			if !mv.IsWhollyKnown() {
				return nil, diags.Append(config.Errorf(r.Metadata.Range(), "Invalid metadata", "%s: metadata must be known at plan time; it cannot use values known only after apply.", ex.addr))
			}
			if d := config.CheckValue(w.meter, mv, "the metadata of "+w.prefix+ex.addr, r.Metadata.Range()); d != nil {
				return nil, diags.Append(d)
			}
			mv, _ = mv.UnmarkDeep()
			meta, _ = config.EncodeValue(mv)
		}
		w.extra = ex.extra
		w.providerCfg = pcfg
		rp := w.diff(r, w.prefix+ex.addr, schema, obj, meta)
		if d := w.replaceTriggered(r, rp, ctx); d.HasErrors() { // refactor.go
			return nil, append(diags, d...)
		}
		// A tainted object is replaced (provisioners.go).
		w.taintedReplace(rp)
		w.noteMove(rp) // refactor.go
		rp.providerConfig = pcfg
		if rp.planErr != nil {
			return nil, diags.Extend(config.ConfigDiags(r.Properties, r.DeclRange, w.prefix+ex.addr, "Provider cannot plan the change", rp.planErr, obj))
		}
		if rr := w.plan.recorded[rp.Address]; rr != nil && rr.Deposed != nil {
			rp.DeposedCleanup = true
		}
		rp.CreateBeforeDestroy = rp.Action == Replace && r.Lifecycle.CreateBeforeDestroy
		if rp.Action == Replace || rp.Action == Delete {
			if r.Lifecycle.PreventDestroy {
				return nil, diags.Append(config.Errorf(r.DeclRange, "Instance cannot be destroyed",
					"%s has lifecycle.prevent_destroy set, but this change would destroy it (%s). Remove prevent_destroy first.", ex.addr, changedNames(rp)))
			}
		}
		m := &member{addr: ex.addr, rp: rp, props: obj, val: cty.DynamicVal, extra: ex.extra}
		if ex.extra["each"] != cty.NilVal {
			m.key = ex.extra["each"].GetAttr("key").AsString()
		}
		if w.tmpl.Referenced[r.Addr()] {
			m.val = w.value(p, schema, rp, obj)
		}
		members = append(members, m)
	}
	if w.mode == modeApply {
		if err := w.applyMembers(r, members); err != nil {
			return nil, append(diags, err...)
		}
	}
	if diags = append(diags, w.memberPostconditions(r, base, members, p, schema)...); diags.HasErrors() {
		return nil, diags
	}
	plans := make([]*ResourcePlan, len(members))
	for i, m := range members {
		plans[i] = m.rp
		if m.rp.Action != NoOp {
			w.changing[r.Addr()] = true
			w.changedAddrs[m.rp.Address] = true
		}
	}
	if _, ok := p.(provider.Waiter); ok && w.mode == modeApply {
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
	// extra is its count or each.
	extra map[string]cty.Value
}

// setValue records a resource's value for references.
func (w *walker) setValue(r *config.Resource, members []*member) {
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
	if rp.planned != nil {
		return rp.plannedValue(schema, attrs) // plan_create.go
	}
	var planned map[string]cty.Value
	if up, ok := p.(provider.UpdateAttributePlanner); ok && rp.Action == Update {
		planned = w.planUpdateAttributes(up, rp, props)
	} else if ap, ok := p.(provider.AttributePlanner); ok {
		clean, marks := props.UnmarkDeep()
		planned = ap.PlanAttributes(w.inst.providerTarget(), clean)
		if len(marks) > 0 {
			for k, v := range planned {
				planned[k] = v.Mark(provider.SensitiveMark)
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

// evalProperties evaluates the properties of schema set in props (null
// where unset), converted to their types, sensitive ones marked.
func evalProperties(schema provider.Schema, props map[string]*hcl.Attribute, ctx *hcl.EvalContext, what string) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	vals := make(map[string]cty.Value, len(schema.Properties))
	for _, name := range config.SortedKeys(schema.Properties) {
		ps := schema.Properties[name]
		a := props[name]
		if a == nil {
			vals[name] = cty.NullVal(ps.Type)
			if ps.Block != nil {
				// No block of this type: what the spec decodes from none
				// (an empty list, or null).
				vals[name], _ = hcldec.Decode(&config.BlockList{}, ps.Block, ctx)
			}
			continue
		}
		v, d := a.Expr.Value(ctx)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		conv, err := convert.Convert(v, ps.ConfigType())
		if err != nil {
			diags = diags.Append(config.Errorf(a.Expr.Range(), "Invalid value for property", "%s: property %q must be %s: %s.", what, name, config.TypeName(ps.Type), err))
			continue
		}
		if ps.Required && conv.IsNull() {
			diags = diags.Append(config.Errorf(a.Expr.Range(), "Missing value for property", "%s: property %q is required and must not be null.", what, name))
			continue
		}
		if ps.Sensitive {
			conv = conv.Mark(provider.SensitiveMark)
		}
		vals[name] = conv
	}
	return cty.ObjectVal(vals), diags
}

// memberPostconditions evaluates r's postconditions for each member, with
// self the planned value at plan (skipped while unknown), the applied one
// at apply.
func (w *walker) memberPostconditions(r *config.Resource, base *hcl.EvalContext, members []*member, p provider.Provider, schema provider.Schema) hcl.Diagnostics {
	if len(r.Lifecycle.Postconditions) == 0 {
		return nil
	}
	var diags hcl.Diagnostics
	for _, m := range members {
		self := m.val
		if w.mode == modePlan && !w.tmpl.Referenced[r.Addr()] {
			self = w.value(p, schema, m.rp, m.props)
		}
		diags = append(diags, config.Postconditions(r.Lifecycle, withExtra(base, m.extra), self)...)
	}
	return diags
}

// planUpdateAttributes asks up for the attributes of rp, an update in
// place of a recorded resource to properties props; sensitive properties
// make the planned attributes sensitive.
func (w *walker) planUpdateAttributes(up provider.UpdateAttributePlanner, rp *ResourcePlan, props cty.Value) map[string]cty.Value {
	rr := w.plan.recorded[rp.Address]
	recorded := map[string]cty.Value{}
	if attrs := w.recordedAttrs(rr); attrs.Type().IsObjectType() {
		for k, v := range attrs.AsValueMap() {
			recorded[k], _ = v.UnmarkDeep()
		}
	}
	oldProps := cty.NullVal(cty.DynamicPseudoType)
	if rp.Before != cty.NilVal {
		oldProps, _ = rp.Before.UnmarkDeep()
	}
	clean, marks := props.UnmarkDeep()
	planned := up.PlanUpdateAttributes(w.inst.providerTarget(), recorded, oldProps, clean)
	if len(marks) > 0 {
		for k, v := range planned {
			planned[k] = v.Mark(provider.SensitiveMark)
		}
	}
	return planned
}

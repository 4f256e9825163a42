package engine

import (
	"slices"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Planning a create with the provider, as Terraform does: a provider that
// plans its own changes (provider.ChangePlanner: Terraform providers'
// PlanResourceChange) is asked with a null prior state, and the values it
// plans stand where the configuration left the choice to it: the defaults
// of optional+computed properties ("0644") and what it fills in
// ("eu-west-1") are known at plan, as in Terraform's plan. A ref anyone
// can push makes no provider call (as for updates): those stay as
// configured and unknown.

// planCreate asks the provider of a create (rp.Action Create, no import)
// to plan it; rp.After becomes the planned object and rp.configured keeps
// the properties as configured, which are what the apply sends and
// records. An error is rp.planErr.
func (w *walker) planCreate(r *config.Resource, rp *ResourcePlan, schema provider.Schema) {
	cp, ok := w.lookupProvider(r.Type).(provider.ChangePlanner)
	if !ok || w.inst.Untrusted || rp.importID != "" || rp.planErr != nil {
		return
	}
	if pc := unmarked(w.providerCfg); pc != cty.NilVal && !pc.IsWhollyKnown() {
		return // the provider cannot be configured before apply
	}
	clean, _ := rp.After.UnmarkDeep()
	pc, err := cp.PlanChange(w.meter.Ctx, provider.Request{
		Target: w.inst.providerTarget(), LogicalID: rp.Address, RequestID: rp.RequestID,
		Properties: clean, ProviderConfig: unmarked(w.providerCfg),
	})
	if err != nil {
		rp.planErr = err
		return
	}
	if len(pc.Attributes) == 0 {
		return
	}
	planned := make(map[string]cty.Value, len(pc.Attributes))
	for name, v := range pc.Attributes {
		if slices.Contains(pc.Sensitive, name) {
			v = v.Mark(provider.SensitiveMark)
		}
		planned[name] = v
	}
	m := rp.After.AsValueMap()
	for name, ps := range schema.Properties {
		pv, ok := planned[name]
		if !ok {
			continue
		}
		if cur := m[name]; cur.IsMarked() || !cur.IsNull() || ps.Block != nil {
			continue // configured: the configuration's value
		}
		if conv, err := convert.Convert(pv, ps.Type); err == nil {
			if ps.Sensitive && !conv.IsMarked() {
				conv = conv.Mark(provider.SensitiveMark)
			}
			m[name] = conv
		}
	}
	rp.configured = rp.After
	rp.After = cty.ObjectVal(m)
	rp.planned = planned
}

// props is what the apply sends and records of rp: its properties as
// configured.
func (rp *ResourcePlan) props() cty.Value {
	if rp.configured != cty.NilVal {
		return rp.configured
	}
	return rp.After
}

// plannedValue is the value for references of a create the provider
// planned: its planned object (attrs, the properties, under it), unknown
// where the provider did not plan.
func (rp *ResourcePlan) plannedValue(schema provider.Schema, attrs map[string]cty.Value) cty.Value {
	for k, v := range rp.After.AsValueMap() {
		attrs[k] = v
	}
	for _, name := range schema.Attributes {
		if v, ok := rp.planned[name]; ok {
			attrs[name] = v
		} else if _, ok := attrs[name]; !ok {
			attrs[name] = cty.DynamicVal
		}
	}
	return cty.ObjectVal(attrs)
}

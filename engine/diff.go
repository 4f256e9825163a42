package engine

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// The diff of one resource member against its recorded state.

func changedNames(rp *ResourcePlan) string {
	var n []string
	for _, pc := range rp.Change.ResourceChange.PropertyChanges {
		n = append(n, pc.Name)
	}
	return strings.Join(n, ", ")
}

// diff compares the evaluated properties with the recorded resource.
func (w *walker) diff(r *config.Resource, addr string, schema provider.Schema, after cty.Value, meta json.RawMessage) *ResourcePlan {
	rp := &ResourcePlan{Address: addr, Base: r.Addr(), Type: r.Type, After: after, Replacement: changeset.ReplacementFalse, Module: w.moduleInfo(), metadata: meta, DeclRange: r.DeclRange}
	for _, d := range r.Deps {
		rp.deps = append(rp.deps, w.prefix+d)
	}
	rp.deps = append(rp.deps, w.callDeps...)            // its module call's depends_on
	rp.deps = append(rp.deps, w.dependsOnModules(r)...) // module calls in its depends_on (expand.go)
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
		if im, each, err := w.importFor(strings.TrimPrefix(addr, w.prefix)); err != nil {
			rp.planErr = err
		} else if im != nil && (rr == nil || rr.Status == StatusPendingCreate) {
			// An import block: the existing object is adopted (refactor.go).
			rp.importID, rp.planErr = w.importID(im, each)
		}
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
		w.planCreate(r, rp, schema) // plan_create.go
		rp.Change = w.addChange(r, rp, schema)
		w.planImport(r, rp, schema) // refactor.go
		return rp
	}
	rp.PhysicalID = rr.PhysicalID
	policyChanged := policy(rr.DeletionPolicy) != policy(r.DeletionPolicy)
	metaChanged := !bytes.Equal(rr.Metadata, meta)
	if rr.Status == StatusApplied && !policyChanged && !metaChanged && len(r.Lifecycle.IgnoreChanges) == 0 && !w.inst.Reapply && w.inst.Drifted[addr] == "" && unchanged(after, rr.Inputs) {
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
	for _, name := range config.SortedKeys(schema.Properties) {
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
	var replaces map[string]bool
	// planned: what the provider planned of the change (nil without a call).
	var planned map[string]cty.Value
	// mayReplace: no provider call tells which changes replace (below).
	mayReplace := false
	if cp, ok := w.lookupProvider(r.Type).(provider.ChangePlanner); ok && len(changed) > 0 && w.inst.Untrusted {
		// A ref anyone can push makes no provider call (it would
		// configure the provider as the branch says): a change may
		// replace the resource.
		mayReplace = true
		if strongest != changeset.ReplacementTrue {
			strongest = changeset.ReplacementConditional
		}
	} else if ok && len(changed) > 0 {
		// A Terraform provider says itself which changes replace.
		var err error
		if replaces, planned, err = w.planChange(cp, rp, rr, after); err != nil {
			rp.planErr = err
		}
		for _, name := range changed {
			if !replaces[name] {
				continue
			}
			if after.GetAttr(name).IsWhollyKnown() {
				strongest = changeset.ReplacementTrue
			} else if strongest != changeset.ReplacementTrue {
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
	case len(changed) == 0 && (w.inst.Reapply || w.inst.Drifted[addr] != ""):
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
			if r.Lifecycle.IsIgnored(n) && rr.inputs().Type().HasAttribute(n) {
				m[n] = rp.Before.GetAttr(n) // marked as recorded
			}
		}
		rp.After = cty.ObjectVal(m)
	}
	rp.Change = w.modifyChange(r, rp, schema, changed)
	w.plannedChange(r, rp, schema, planned) // changes.go
	rc := &rp.Change.ResourceChange
	for i, d := range rc.Details {
		switch {
		case replaces[d.Target.Name]:
			rc.Details[i].Target.RequiresRecreation = provider.Always.String()
		case mayReplace && d.Target.RequiresRecreation == provider.Never.String():
			rc.Details[i].Target.RequiresRecreation = provider.Conditionally.String()
		}
	}
	// The update a crash interrupted is repeated with its request id.
	rc.RepeatsInterruptedUpdate = rr.Status == StatusPendingUpdate && rp.Action == Update
	if rr.Status == StatusPendingUpdate && len(changed) == 0 {
		// Nothing changed in the template, but an update a crash
		// interrupted is repeated: the seed's System change source.
		// Each property it sends is a target of its own (the seed's Name
		// is set for every Properties target). None of them changed, so
		// none requires recreation whatever its schema says of a change:
		// sending it again as it is never replaces the resource.
		e := rp.Address
		rc.Scope = append(rc.Scope, "Properties")
		for _, name := range config.SortedKeys(schema.Properties) {
			if v := rp.After.GetAttr(name); v.IsNull() && !v.IsMarked() {
				continue
			}
			rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: changeset.SourceSystem, CausingEntity: &e, Evaluation: "Static",
				Target: changeset.ResourceTargetDefinition{Attribute: "Properties", Name: name, RequiresRecreation: provider.Never.String()}})
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
	// Replacement follows from the details, as the seed derives it (they
	// agree with strongest, which chose the action).
	rc.Replacement = changeset.ReplacementOf(rc.Details)
	rp.Replacement = rc.Replacement
	return rp
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
	b, err := config.EncodeValue(clean)
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

// planChange asks a provider that plans its own changes which of the
// changed properties of rp replace the resource, and what it plans the
// object to be.
func (w *walker) planChange(cp provider.ChangePlanner, rp *ResourcePlan, rr *recordedResource, after cty.Value) (map[string]bool, map[string]cty.Value, error) {
	clean, _ := after.UnmarkDeep()
	var attrs map[string]cty.Value
	if a := rr.attrs(); a.Type().IsObjectType() {
		attrs = a.AsValueMap()
	}
	pc, err := cp.PlanChange(w.meter.Ctx, provider.Request{
		Target: w.inst.providerTarget(), LogicalID: rp.Address, PhysicalID: rr.PhysicalID,
		Properties: clean, OldProperties: rr.inputs(), Attributes: attrs,
		Private: rr.Private, SchemaVersion: rr.SchemaVersion, Identity: rr.Identity, ProviderConfig: unmarked(w.providerCfg),
	})
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]bool, len(pc.RequiresReplace))
	for _, n := range pc.RequiresReplace {
		out[n] = true
	}
	return out, plannedAttrs(pc), nil
}

// unmarked is v without marks (cty.NilVal stays).
func unmarked(v cty.Value) cty.Value {
	if v == cty.NilVal {
		return v
	}
	u, _ := v.UnmarkDeep()
	return u
}

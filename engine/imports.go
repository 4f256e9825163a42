package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Import blocks per instance: an import to one address, or one with
// for_each that imports to as many as its for_each has elements.

// importFor is the import block that imports to addr (this walker's
// address, without its module prefix) and, for an import with for_each,
// the each it was expanded with (cty.NilVal otherwise). An import whose
// for_each cannot be evaluated is returned with the error.
func (w *walker) importFor(addr string) (*config.Import, cty.Value, error) {
	if len(w.tmpl.Imports) == 0 {
		return nil, cty.NilVal, nil
	}
	if im := w.tmpl.Imports[addr]; im != nil && im.ForEach == nil {
		return im, cty.NilVal, nil
	}
	base := baseAddr(addr)
	for _, slot := range config.SortedKeys(w.tmpl.Imports) {
		im := w.tmpl.Imports[slot]
		if im.ForEach == nil || im.Resource != base {
			continue
		}
		each, err := w.importEach(im, addr)
		if err != nil || each != cty.NilVal {
			return im, each, err
		}
	}
	return nil, cty.NilVal, nil
}

// importCtx is the context import blocks are evaluated in: variables,
// target, stack set and locals.
func (w *walker) importCtx() *hcl.EvalContext {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: w.meter.Functions()}
	for k, v := range w.base {
		ctx.Variables[k] = v
	}
	ctx.Variables["local"] = cty.ObjectVal(w.locals)
	return ctx
}

// importEach expands im's for_each and returns the each whose instance
// key makes addr (cty.NilVal when none does).
func (w *walker) importEach(im *config.Import, addr string) (cty.Value, error) {
	ctx := w.importCtx()
	v, diags := im.ForEach.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	if v.IsMarked() || v.ContainsMarked() {
		return cty.NilVal, fmt.Errorf("import for_each (%s) uses a sensitive value: the keys would be exposed in addresses", im.DeclRange)
	}
	if v.IsNull() || !v.IsWhollyKnown() || !v.CanIterateElements() {
		return cty.NilVal, fmt.Errorf("import for_each (%s) must be a known map, set or list", im.DeclRange)
	}
	if v.LengthInt() > config.MaxCount {
		return cty.NilVal, fmt.Errorf("import for_each (%s) has %d elements, more than the limit of %d", im.DeclRange, v.LengthInt(), config.MaxCount)
	}
	ty := v.Type()
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		if ty.IsSetType() {
			k = ev
		}
		each := cty.ObjectVal(map[string]cty.Value{"key": k, "value": ev})
		child := ctx.NewChild()
		child.Variables = map[string]cty.Value{"each": each}
		kv, diags := im.Key.Value(child)
		if diags.HasErrors() {
			return cty.NilVal, diags
		}
		key, err := config.InstanceKey(kv)
		if err != nil {
			return cty.NilVal, fmt.Errorf("import to (%s): the instance key %s", im.DeclRange, err)
		}
		if im.Resource+key == addr {
			return each, nil
		}
	}
	return cty.NilVal, nil
}

// importID evaluates an import block's id for this instance, with each
// for an import with for_each.
func (w *walker) importID(im *config.Import, each cty.Value) (string, error) {
	ctx := w.importCtx()
	if each != cty.NilVal {
		ctx = ctx.NewChild()
		ctx.Variables = map[string]cty.Value{"each": each}
	}
	v, diags := im.ID.Value(ctx)
	if diags.HasErrors() {
		return "", diags
	}
	v, _ = v.Unmark()
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String || v.AsString() == "" {
		return "", fmt.Errorf("import to = %s: the id must be a known, non-empty string", strings.TrimSuffix(im.To, "[each]"))
	}
	return v.AsString(), nil
}

// importPlanner is a provider that plans an import block's change as
// Terraform does: import the object, then plan bringing it to the
// configuration (tfplugin's resource types).
type importPlanner interface {
	PlanImport(ctx context.Context, req provider.Request) (cty.Value, provider.PlannedChange, error)
}

// planImport completes the plan of an import (rp.importID set, after its
// change): with a provider that plans imports, an object that differs in
// a property the provider replaces on change plans a replacement after
// the import, named in the change (Import, Replacement True, a detail per
// such property); a ref anyone can push makes no provider call, and the
// import may replace (Replacement Conditional).
func (w *walker) planImport(r *config.Resource, rp *ResourcePlan) {
	ip, ok := w.lookupProvider(r.Type).(importPlanner)
	if !ok || rp.importID == "" || rp.planErr != nil {
		return
	}
	rc := &rp.Change.ResourceChange
	if w.inst.Untrusted {
		rc.Replacement = changeset.ReplacementConditional
		return
	}
	if pc := unmarked(w.providerCfg); pc != cty.NilVal && !pc.IsWhollyKnown() {
		rc.Replacement = changeset.ReplacementConditional
		return
	}
	clean, _ := rp.After.UnmarkDeep()
	found, pc, err := ip.PlanImport(w.meter.Ctx, provider.Request{
		Target: w.inst.providerTarget(), LogicalID: rp.Address, ImportID: rp.importID,
		Properties: clean, ProviderConfig: unmarked(w.providerCfg),
	})
	if err != nil {
		rp.planErr = err
		return
	}
	if len(pc.RequiresReplace) == 0 {
		return
	}
	rp.Action, rp.Replacement = Replace, changeset.ReplacementTrue
	if found != cty.NilVal && found.Type().IsObjectType() {
		rp.Before = found
	}
	rc.Replacement = changeset.ReplacementTrue
	rc.Scope = []string{"Properties"}
	for _, name := range pc.RequiresReplace {
		eval := "Static"
		if v := rp.After; v.Type().IsObjectType() && v.Type().HasAttribute(name) && !v.GetAttr(name).IsWhollyKnown() {
			eval = "Dynamic"
		}
		rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: changeset.SourceDirectModification, Evaluation: eval,
			Target: changeset.ResourceTargetDefinition{Attribute: "Properties", Name: name, RequiresRecreation: provider.Always.String()}})
		if found != cty.NilVal && found.Type().IsObjectType() && found.Type().HasAttribute(name) {
			for i := range rc.PropertyChanges {
				if rc.PropertyChanges[i].Name == name {
					rc.PropertyChanges[i].BeforeValue = jsonValue(found.GetAttr(name))
				}
			}
		}
	}
}

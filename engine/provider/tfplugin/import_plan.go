package tfplugin

import (
	"context"
	"slices"
	"sort"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// An import block's plan, as Terraform makes it: the object is imported
// (ImportResourceState and ReadResource: nothing changes in the world)
// and the change from it to the configuration planned; a change of a
// replacement-forcing attribute plans a replacement after the import.

// PlanImport imports the object of req.ImportID and plans bringing it to
// req.Properties: the properties of the object found (its configurable
// attributes) and the planned change (RequiresReplace names the
// properties whose difference replaces it).
func (rt *resourceType) PlanImport(ctx context.Context, req provider.Request) (cty.Value, provider.PlannedChange, error) {
	cfg, err := rt.config(req.Properties)
	if err != nil {
		return cty.NilVal, provider.PlannedChange{}, err
	}
	lease, err := rt.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return cty.NilVal, provider.PlannedChange{}, err
	}
	defer lease.Release()
	prior, private, identity, err := rt.importObject(ctx, lease, req.ImportID, cty.NilVal)
	if err != nil {
		return cty.NilVal, provider.PlannedChange{}, err
	}
	plan, err := lease.PlanResourceChange(ctx, PlanRequest{TypeName: rt.typ, Prior: prior, Proposed: proposedNew(rt.schema.Block, prior, cfg), Config: cfg,
		PriorPrivate: private, PriorIdentity: identity})
	if err != nil {
		return cty.NilVal, provider.PlannedChange{}, err
	}
	out := provider.PlannedChange{Attributes: map[string]cty.Value{}}
	if plan.Planned.Type().IsObjectType() && !plan.Planned.IsNull() {
		out.Attributes = plan.Planned.AsValueMap()
	}
	for name := range out.Attributes {
		if rt.schema.Block.IsSensitive(cty.GetAttrPath(name)) {
			out.Sensitive = append(out.Sensitive, name)
		}
	}
	sort.Strings(out.Sensitive)
	for _, p := range plan.RequiresReplace {
		if step, ok := firstAttr(p); ok && !slices.Contains(out.RequiresReplace, step) {
			out.RequiresReplace = append(out.RequiresReplace, step)
		}
	}
	sort.Strings(out.RequiresReplace)
	return foundProperties(req.Properties, prior), out, nil
}

func firstAttr(p cty.Path) (string, bool) {
	if len(p) == 0 {
		return "", false
	}
	step, ok := p[0].(cty.GetAttrStep)
	return step.Name, ok
}

// replaceImported replaces an imported object whose planned change
// requires it: the object is destroyed, then created as configured
// (what Terraform's apply of "imported, must be replaced" does).
func (rt *resourceType) replaceImported(ctx context.Context, lease Client, req provider.Request, cfg, prior cty.Value, private []byte) (provider.Result, error) {
	null := cty.NullVal(rt.ty())
	if _, err := lease.ApplyResourceChange(ctx, ApplyRequest{TypeName: rt.typ, Prior: prior, Planned: null, Config: null, PlannedPrivate: private}); err != nil {
		return provider.Result{}, err
	}
	return rt.bringTo(ctx, lease, req, cfg, null, nil, cty.NilVal)
}

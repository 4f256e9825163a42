package engine

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// The change-set entries of a resource plan (see engine/changeset).

func (w *walker) addChange(r *config.Resource, rp *ResourcePlan, schema provider.Schema) changeset.Change {
	rc := changeset.ResourceChange{
		Action: changeset.Add, LogicalResourceId: strings.TrimPrefix(rp.Address, w.prefix), ResourceType: rp.Type, ModuleInfo: rp.Module,
	}
	if rp.importID != "" {
		rc.Action, rc.PhysicalResourceId = changeset.Import, rp.importID
	}
	if rp.Action == Replace {
		rc.Action = changeset.Modify
		rc.PhysicalResourceId = rp.PhysicalID
		rc.Replacement = changeset.ReplacementTrue
		rc.Scope = []string{"Properties"}
	}
	rc.ResourceDriftStatus = w.inst.Drifted[rp.Address]
	for _, name := range config.SortedKeys(schema.Properties) {
		nv := rp.After.GetAttr(name)
		if nv.IsNull() && !nv.IsMarked() {
			continue
		}
		var before any
		if rp.Before != cty.NilVal && rp.Before.Type().HasAttribute(name) {
			before = jsonValue(rp.Before.GetAttr(name))
		}
		rc.PropertyChanges = append(rc.PropertyChanges, changeset.ResourcePropertyChange{Name: name, BeforeValue: before, AfterValue: jsonValue(nv)})
	}
	return changeset.Change{Type: "Resource", ResourceChange: rc}
}

func (w *walker) modifyChange(r *config.Resource, rp *ResourcePlan, schema provider.Schema, changed []string) changeset.Change {
	rc := changeset.ResourceChange{
		Action: changeset.Modify, LogicalResourceId: strings.TrimPrefix(rp.Address, w.prefix), PhysicalResourceId: rp.PhysicalID,
		ResourceType: rp.Type, Replacement: rp.Replacement, ModuleInfo: rp.Module,
	}
	if len(changed) > 0 {
		rc.Scope = []string{"Properties"}
	}
	rc.ResourceDriftStatus = w.inst.Drifted[rp.Address]
	plugin := w.e.typeOwner(r.Type) != ""
	for _, name := range changed {
		nv := rp.After.GetAttr(name)
		ov := rp.Before.GetAttr(name)
		if plugin {
			// Nested attributes and blocks of a Terraform provider's
			// schema change leaf by leaf: "tag.0.value".
			flattenChange(name, ov, nv, &rc.PropertyChanges)
		} else {
			rc.PropertyChanges = append(rc.PropertyChanges, changeset.ResourcePropertyChange{Name: name, BeforeValue: jsonValue(ov), AfterValue: jsonValue(nv)})
		}
		eval := "Static"
		if !nv.IsWhollyKnown() {
			eval = "Dynamic"
		}
		target := changeset.ResourceTargetDefinition{Attribute: "Properties", Name: name, RequiresRecreation: schema.Properties[name].Recreation.String()}
		var expr hcl.Expression
		if a := r.Properties[name]; a != nil {
			expr = a.Expr
		}
		if rc.ResourceDriftStatus != "" {
			// The value found in the world goes back to the configured one.
			rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: changeset.SourceDrift, Evaluation: eval, Target: target})
			continue
		}
		for _, c := range w.causes(r.Addr(), expr, func(cv cty.Value) (bool, bool) { return sameProperty(cv, ov, schema.Properties[name].Type) }) {
			rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: c.source, CausingEntity: c.entity, Evaluation: eval, Target: target})
		}
	}
	return changeset.Change{Type: "Resource", ResourceChange: rc}
}

// removeChange is the Remove of a recorded resource; the module types of
// its ModuleInfo come from the first of tmpls (the template now, then the
// one last applied) that still has its modules.
func removeChange(rp *ResourcePlan, deletionPolicy string, tmpls ...*config.Template) changeset.Change {
	id, mi := splitModuleAddress(rp.Address)
	if mi != nil {
		mi.TypeHierarchy = moduleTypes(strings.Split(mi.LogicalIdHierarchy, "/"), tmpls...)
	}
	rc := changeset.ResourceChange{Action: changeset.Remove, LogicalResourceId: id, PhysicalResourceId: rp.PhysicalID, ResourceType: rp.Type, ModuleInfo: mi}
	if changeset.Retains(deletionPolicy) {
		rc.DeletionPolicy = changeset.DeletionRetain
	}
	return changeset.Change{Type: "Resource", ResourceChange: rc}
}

// moduleTypes is the TypeHierarchy of the modules named (outermost first),
// resolved in the first template of tmpls that declares them all; "" when
// none does.
func moduleTypes(names []string, tmpls ...*config.Template) string {
next:
	for _, t := range tmpls {
		var sources []string
		for _, n := range names {
			if t == nil || t.Modules[n] == nil {
				continue next
			}
			sources = append(sources, t.Modules[n].Source)
			t = t.Modules[n].Template
		}
		return typeHierarchy(sources)
	}
	return ""
}

// typeHierarchy joins the types of nested modules, outermost first, with
// "/" as the seed does. A module's type is its source as written, cleaned,
// with its path segments joined by "::" after "MODULE::" (as ROS names
// MODULE::ROS::Parent::Example): "./modules/monitoring" is
// "MODULE::modules::monitoring". A type holds no "/", so the hierarchy
// splits into exactly one type per module level; "%" and ":" inside a
// segment are escaped (%25, %3A) so that the segments split back too.
func typeHierarchy(sources []string) string {
	types := make([]string, len(sources))
	esc := strings.NewReplacer("%", "%25", ":", "%3A")
	for i, src := range sources {
		segs := strings.Split(path.Clean(src), "/")
		for k, s := range segs {
			segs[k] = esc.Replace(s)
		}
		types[i] = "MODULE::" + strings.Join(segs, "::")
	}
	return strings.Join(types, "/")
}

// splitModuleAddress splits "module.a.module.b.file.x" into the logical id
// inside its module ("file.x") and the module hierarchy ("a/b").
// A module instance is named with its key ("a[0]/b").
func splitModuleAddress(addr string) (string, *changeset.ModuleInfo) {
	if !strings.HasPrefix(addr, "module.") {
		return addr, nil
	}
	mods, rest := moduleSteps(addr) // expand.go
	if len(mods) == 0 {
		return addr, nil
	}
	return rest, &changeset.ModuleInfo{LogicalIdHierarchy: strings.Join(mods, "/")}
}

// flattenChange adds the changes from ov to nv under the dotted name path:
// objects by attribute, lists and tuples by index, maps by key, down to
// the values that differ; sets, and values unknown, sensitive or null on
// one side, change whole.
func flattenChange(path string, ov, nv cty.Value, out *[]changeset.ResourcePropertyChange) {
	leaf := func(v cty.Value) bool {
		return v == cty.NilVal || v.IsNull() || !v.IsKnown() || v.IsMarked() || v.Type().IsPrimitiveType() || v.Type().IsSetType()
	}
	if leaf(ov) || leaf(nv) || !sameKind(ov.Type(), nv.Type()) {
		if !valuesEqual(ov, nv) {
			*out = append(*out, changeset.ResourcePropertyChange{Name: path, BeforeValue: jsonValue(ov), AfterValue: jsonValue(nv)})
		}
		return
	}
	elem := func(v cty.Value, key cty.Value) cty.Value {
		if v.HasIndex(key).True() {
			return v.Index(key)
		}
		return cty.NullVal(cty.DynamicPseudoType)
	}
	switch t := nv.Type(); {
	case t.IsObjectType():
		names := map[string]bool{}
		for n := range ov.Type().AttributeTypes() {
			names[n] = true
		}
		for n := range t.AttributeTypes() {
			names[n] = true
		}
		for _, n := range config.SortedKeys(names) {
			a, b := cty.NullVal(cty.DynamicPseudoType), cty.NullVal(cty.DynamicPseudoType)
			if ov.Type().HasAttribute(n) {
				a = ov.GetAttr(n)
			}
			if t.HasAttribute(n) {
				b = nv.GetAttr(n)
			}
			flattenChange(path+"."+n, a, b, out)
		}
	case t.IsListType() || t.IsTupleType():
		for i := range max(ov.LengthInt(), nv.LengthInt()) {
			k := cty.NumberIntVal(int64(i))
			flattenChange(fmt.Sprintf("%s.%d", path, i), elem(ov, k), elem(nv, k), out)
		}
	case t.IsMapType():
		keys := map[string]bool{}
		for k := range ov.AsValueMap() {
			keys[k] = true
		}
		for k := range nv.AsValueMap() {
			keys[k] = true
		}
		for _, k := range config.SortedKeys(keys) {
			flattenChange(path+"."+k, elem(ov, cty.StringVal(k)), elem(nv, cty.StringVal(k)), out)
		}
	default:
		if !valuesEqual(ov, nv) {
			*out = append(*out, changeset.ResourcePropertyChange{Name: path, BeforeValue: jsonValue(ov), AfterValue: jsonValue(nv)})
		}
	}
}

// sameKind reports whether two types are both objects, both lists or
// tuples, or both maps.
func sameKind(a, b cty.Type) bool {
	switch {
	case a.IsObjectType():
		return b.IsObjectType()
	case a.IsListType() || a.IsTupleType():
		return b.IsListType() || b.IsTupleType()
	case a.IsMapType():
		return b.IsMapType()
	}
	return false
}

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
	if rp.importID != "" {
		return // planned by planImport (refactor.go)
	}
	w.planNew(r, rp, schema)
}

// planNew asks the provider to plan rp as a new object (a null prior
// state): a create, or the object that replaces an imported one.
func (w *walker) planNew(r *config.Resource, rp *ResourcePlan, schema provider.Schema) {
	cp, ok := w.lookupProvider(r.Type).(provider.ChangePlanner)
	if !ok || w.inst.Untrusted || rp.planErr != nil {
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
	planned := plannedAttrs(pc)
	m := withPlanned(rp.After, schema, planned)
	rp.configured = rp.After
	rp.After = cty.ObjectVal(m)
	rp.planned = planned
}

// plannedChange makes the planned object of an update or a replacement
// the provider planned (planned, nil when it was not asked) what
// Terraform's plan shows: for an update, the provider's planned values
// where the configuration leaves the choice to it and the attributes
// only it sets (an id that stays); for a replacement, the new object as
// the provider plans a create. rp.configured keeps what the apply sends.
func (w *walker) plannedChange(r *config.Resource, rp *ResourcePlan, schema provider.Schema, planned map[string]cty.Value) {
	switch {
	case planned == nil || rp.planErr != nil:
	case rp.Action == Replace:
		w.planNew(r, rp, schema)
	case rp.Action == Update && !rp.metaOnly:
		rp.configured = rp.After
		rp.After = cty.ObjectVal(withPlanned(rp.After, schema, planned))
		rp.planned = planned
	}
}

// plannedAttrs are the attributes a provider planned, its sensitive ones
// marked.
func plannedAttrs(pc provider.PlannedChange) map[string]cty.Value {
	planned := make(map[string]cty.Value, len(pc.Attributes))
	for name, v := range pc.Attributes {
		if slices.Contains(pc.Sensitive, name) {
			v = v.Mark(provider.SensitiveMark)
		}
		planned[name] = v
	}
	return planned
}

// withPlanned is the planned object of a resource whose configured
// properties are after: the provider's planned values stand where the
// configuration left the choice to it (null properties), and the
// attributes only the provider sets (computed-only: p6's region) are as
// it planned them, known or not, as in Terraform's plan.
func withPlanned(after cty.Value, schema provider.Schema, planned map[string]cty.Value) map[string]cty.Value {
	m := after.AsValueMap()
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
	for _, name := range schema.Attributes {
		if _, isProp := schema.Properties[name]; isProp {
			continue
		}
		if pv, ok := planned[name]; ok {
			m[name] = pv
		}
	}
	return m
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

// importUpdate completes the change of an import whose planned object
// differs from the imported one (found, its properties) in properties
// the provider changes in place: Terraform's import+update. The change
// stays an Import (rp.Action Create: the apply imports, then brings the
// object to the configuration), with the changed properties in its scope
// and their imported values as the values before.
func (w *walker) importUpdate(rp *ResourcePlan, schema provider.Schema, found cty.Value) {
	var changed []string
	configured := rp.props()
	for _, name := range config.SortedKeys(schema.Properties) {
		if !found.Type().HasAttribute(name) || !rp.After.Type().HasAttribute(name) {
			continue
		}
		if cv := configured.GetAttr(name); cv.IsNull() && !cv.IsMarked() {
			continue // not configured: the provider's to choose (found has it null)
		}
		ov, nv := found.GetAttr(name), rp.After.GetAttr(name)
		if conv, err := convert.Convert(ov, schema.Properties[name].Type); err == nil {
			ov = conv
		}
		if !valuesEqual(nv, ov) {
			changed = append(changed, name)
		}
	}
	if len(changed) == 0 {
		return
	}
	rp.Before = found
	rc := &rp.Change.ResourceChange
	rc.Scope = []string{"Properties"}
	for _, name := range changed {
		eval := "Static"
		if !rp.After.GetAttr(name).IsWhollyKnown() {
			eval = "Dynamic"
		}
		rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: changeset.SourceDirectModification, Evaluation: eval,
			Target: changeset.ResourceTargetDefinition{Attribute: "Properties", Name: name, RequiresRecreation: provider.Never.String()}})
		for i := range rc.PropertyChanges {
			if rc.PropertyChanges[i].Name == name {
				rc.PropertyChanges[i].BeforeValue = jsonValue(found.GetAttr(name))
			}
		}
	}
}

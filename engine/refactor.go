package engine

// The blocks of a template that act on an instance's recorded resources
// rather than describe one: moved and removed blocks (refactoring),
// import blocks (with for_each, and the change an import implies) and
// lifecycle.replace_triggered_by.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Refactoring: moved and removed blocks applied to an instance's recorded
// resources before it is planned, as Terraform applies them to its prior
// state.
//
// A moved record is planned at its new address (no destroy, no create),
// and its plan carries MovedFrom; the apply records it at the new address
// before it removes the old one, so a crash between the two leaves two
// records of one object (the same type and physical id), which the next
// plan takes for the move it was and finishes. Like Terraform, a move
// whose destination already holds another object is not made: a warning
// says so, and the object stays where it was.
//
// Beside the moved blocks, Terraform's implicit moves: a resource that
// gains count takes its recorded object as [0], one that loses count
// takes [0] as itself.

// moveStmt is a moved block with its module's prefix on both addresses.
type moveStmt struct {
	from, to config.Endpoint
	decl     hcl.Range
}

// removedStmt is a removed block with its module's prefix.
type removedStmt struct {
	from    config.Endpoint
	destroy bool
}

// prefixed is ep under the module path prefix.
func prefixed(ep config.Endpoint, prefix string) config.Endpoint {
	ep.Module = prefix + ep.Module
	return ep
}

// refactoring collects the moved and removed blocks of t and its modules,
// and its resources by full address.
func refactoring(t *config.Template, prefix string, moves *[]moveStmt, removed *[]removedStmt, resources map[string]*config.Resource) {
	for _, m := range t.Moved {
		*moves = append(*moves, moveStmt{from: prefixed(m.From, prefix), to: prefixed(m.To, prefix), decl: m.DeclRange})
	}
	for _, r := range t.Removed {
		*removed = append(*removed, removedStmt{from: prefixed(r.From, prefix), destroy: r.Destroy})
	}
	for addr, r := range t.Resources {
		resources[prefix+addr] = r
	}
	for _, name := range config.SortedKeys(t.Modules) {
		if mc := t.Modules[name]; mc.Template != nil {
			refactoring(mc.Template, prefix+"module."+name+".", moves, removed, resources)
		}
	}
}

// move is where addr goes by m, if m concerns it.
func (m moveStmt) move(addr string) (string, bool) {
	switch {
	case m.from.IsModule():
		if strings.HasPrefix(addr, m.from.Module) {
			return m.to.Module + addr[len(m.from.Module):], true
		}
	case m.from.Key == "" && m.to.Key == "":
		base := m.from.Module + m.from.Resource
		if addr == base || strings.HasPrefix(addr, base+"[") {
			return m.to.Module + m.to.Resource + addr[len(base):], true
		}
	default:
		if addr == m.from.String() {
			return m.to.String(), true
		}
	}
	return "", false
}

// destination follows the moved blocks from addr, through chains of
// them; then, for an address no block moves, the implicit moves of count.
func destination(addr string, moves []moveStmt, resources map[string]*config.Resource, recorded map[string]*recordedResource) string {
	cur := addr
	for range len(moves) + 1 { // chains are acyclic (config checks them); bounded all the same
		moved := false
		for _, m := range moves {
			if next, ok := m.move(cur); ok {
				cur, moved = next, true
				break
			}
		}
		if !moved {
			break
		}
	}
	if cur != addr {
		return cur
	}
	base, key := baseAddr(addr), strings.TrimPrefix(addr, baseAddr(addr))
	r := resources[configAddr(base)] // resources are keyed by their blocks' addresses
	switch {
	case r == nil:
	case key == "" && r.Count != nil && recorded[base+"[0]"] == nil:
		return base + "[0]"
	case key == "[0]" && r.Count == nil && r.ForEach == nil && recorded[base] == nil:
		return base
	}
	return addr
}

// refactor applies the template's moved and removed blocks to the
// recorded resources of w's plan (the root walker's): what moved is keyed
// by its new address with MovedFrom set; what a removed block with
// destroy = false names is retained when it is removed. It returns
// warnings for moves it could not make.
func (w *walker) refactor() hcl.Diagnostics {
	var moves []moveStmt
	var removed []removedStmt
	resources := map[string]*config.Resource{}
	refactoring(w.tmpl, "", &moves, &removed, resources)
	rec := w.plan.recorded
	var diags hcl.Diagnostics
	if len(moves) > 0 || len(resources) > 0 {
		addrs := config.SortedKeys(rec)
		dest := make(map[string]string, len(addrs))
		for _, a := range addrs {
			if d := destination(a, moves, resources, rec); d != a {
				dest[a] = d
			}
		}
		next := make(map[string]*recordedResource, len(rec))
		for _, a := range addrs {
			if _, moving := dest[a]; !moving {
				next[a] = rec[a]
			}
		}
		var blocked []string
		for _, a := range addrs {
			d, moving := dest[a]
			if !moving {
				continue
			}
			rr := rec[a]
			if occ := next[d]; occ != nil {
				if occ.MovedFrom == "" && occ.Type == rr.Type && occ.PhysicalID != "" && occ.PhysicalID == rr.PhysicalID {
					// An apply recorded the move and was interrupted before
					// it removed the old record: finish the move.
					occ.MovedFrom = a
					continue
				}
				blocked = append(blocked, fmt.Sprintf("%s could not move to %s", a, d))
				next[a] = rr
				continue
			}
			moved := *rr
			moved.MovedFrom, moved.Address = a, d
			if rr.MovedFrom != "" {
				moved.MovedFrom = rr.MovedFrom
			}
			next[d] = &moved
		}
		if len(blocked) > 0 {
			diags = diags.Append(&hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Unresolved resource instance address changes",
				Detail: fmt.Sprintf("stackd tried to adjust resource instance addresses in the recorded state based on change information recorded in the configuration, but some adjustments did not succeed due to existing objects already at the intended addresses: %s. stackd has planned to destroy these objects if they are no longer configured.", strings.Join(blocked, "; "))})
		}
		w.plan.recorded = next
	}
	for _, rm := range removed {
		if rm.destroy {
			continue
		}
		for _, rr := range w.plan.recorded {
			if removedMatches(rm.from, rr.Address) {
				rr.DeletionPolicy = string(changeset.DeletionRetain)
			}
		}
	}
	return diags
}

// checkMovedAway refuses a move from an instance the configuration still
// has (Terraform's "Moved object still exists"): known only once the
// resources are expanded.
func (w *walker) checkMovedAway() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, addr := range config.SortedKeys(w.plan.recorded) {
		rr := w.plan.recorded[addr]
		if rr.MovedFrom == "" || !w.desired[rr.MovedFrom] {
			continue
		}
		var rng hcl.Range
		if r := w.resourceAt(baseAddr(rr.MovedFrom)); r != nil {
			rng = r.DeclRange
		}
		diags = diags.Append(config.Errorf(rng, "Moved object still exists",
			"A moved block moves %s to %s, but the configuration still declares %s. Change the configuration so that the object is declared only as %s.", rr.MovedFrom, addr, rr.MovedFrom, addr))
	}
	return diags
}

// resourceAt is the resource block of a full base address, through modules.
func (w *walker) resourceAt(base string) *config.Resource {
	return templateResource(w.tmpl, base) // engine.go
}

// removedMatches reports whether a removed block's from names addr.
func removedMatches(from config.Endpoint, addr string) bool {
	if from.IsModule() {
		// Every instance of a call with count or for_each, too.
		return strings.HasPrefix(addr, from.Module) || strings.HasPrefix(addr, strings.TrimSuffix(from.Module, ".")+"[")
	}
	base := from.Module + from.Resource
	return addr == base || strings.HasPrefix(addr, base+"[")
}

// movedChange is the change of a resource that moved and changes nothing
// else: a Modify of no property, naming where it moved from.
func movedChange(rp *ResourcePlan, prefix string) changeset.Change {
	return changeset.Change{Type: "Resource", ResourceChange: changeset.ResourceChange{
		Action: changeset.Modify, LogicalResourceId: strings.TrimPrefix(rp.Address, prefix), PhysicalResourceId: rp.PhysicalID,
		ResourceType: rp.Type, Replacement: changeset.ReplacementFalse, ModuleInfo: rp.Module,
	}}
}

// noteMove marks rp as moved when its record moved: every change of it
// names the address it moved from (full, with its module path).
func (w *walker) noteMove(rp *ResourcePlan) {
	rr := w.plan.recorded[rp.Address]
	if rr == nil || rr.MovedFrom == "" {
		return
	}
	rp.MovedFrom = rr.MovedFrom
	if rp.Action == NoOp {
		rp.Change = movedChange(rp, w.prefix)
	}
	rp.Change.ResourceChange.MovedFrom = rr.MovedFrom
}

// settleMove records a moved resource at its new address, then forgets
// the old one (in that order: see above).
func settleMove(ctx context.Context, j Journal, rr *recordedResource) error {
	if rr == nil || rr.MovedFrom == "" {
		return nil
	}
	rec := rr.ResourceState
	rec.MovedFrom = ""
	if err := j.Save(ctx, rec); err != nil {
		return fmt.Errorf("%s: record the move from %s: %w", rr.Address, rr.MovedFrom, err)
	}
	if err := j.Remove(ctx, rr.MovedFrom); err != nil {
		return fmt.Errorf("%s: forget %s after the move: %w", rr.Address, rr.MovedFrom, err)
	}
	rr.MovedFrom = ""
	return nil
}

// sortedMoves is the moves of a plan, for tests and renderers: "FROM -> TO".
func (p *InstancePlan) sortedMoves() []string {
	var out []string
	for _, rp := range p.Resources {
		if rp.MovedFrom != "" {
			out = append(out, rp.MovedFrom+" -> "+rp.Address)
		}
	}
	sort.Strings(out)
	return out
}

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
// change) as Terraform plans one: the provider plans the change from the
// imported object (its prior state) to the configuration. The planned
// object is rp.After (the configured properties are rp.configured, what
// the apply sends); an object that differs in properties the provider
// changes in place plans an update after the import (Import with those
// properties' changes from the imported values), one that differs in a
// property the provider replaces on change a replacement (Import,
// Replacement True, a detail per such property, the new object planned
// as a create). A ref anyone can push makes no provider call, and the
// import may replace (Replacement Conditional).
func (w *walker) planImport(r *config.Resource, rp *ResourcePlan, schema provider.Schema) {
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
	hasFound := found != cty.NilVal && found.Type().IsObjectType() && !found.IsNull()
	if len(pc.RequiresReplace) == 0 {
		if len(pc.Attributes) > 0 {
			planned := plannedAttrs(pc)
			rp.configured = rp.After
			rp.After = cty.ObjectVal(withPlanned(rp.After, schema, planned))
			rp.planned = planned
		}
		if hasFound {
			w.importUpdate(rp, schema, found)
		}
		return
	}
	rp.Action, rp.Replacement = Replace, changeset.ReplacementTrue
	if hasFound {
		rp.Before = found
	}
	w.planNew(r, rp, schema)
	rc.Replacement = changeset.ReplacementTrue
	rc.Scope = []string{"Properties"}
	for _, name := range pc.RequiresReplace {
		eval := "Static"
		if v := rp.After; v.Type().IsObjectType() && v.Type().HasAttribute(name) && !v.GetAttr(name).IsWhollyKnown() {
			eval = "Dynamic"
		}
		rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: changeset.SourceDirectModification, Evaluation: eval,
			Target: changeset.ResourceTargetDefinition{Attribute: "Properties", Name: name, RequiresRecreation: provider.Always.String()}})
		if hasFound && found.Type().HasAttribute(name) {
			for i := range rc.PropertyChanges {
				if rc.PropertyChanges[i].Name == name {
					rc.PropertyChanges[i].BeforeValue = jsonValue(found.GetAttr(name))
				}
			}
		}
	}
}

// replaceTriggered makes rp, a NoOp or an Update, a replacement when an
// entry of r's lifecycle.replace_triggered_by fired, as Terraform decides
// it: the resource instance it names (any instance, without a key) is
// planned for an update or a replacement, and, when it names an
// attribute, a replacement or an update that changes that attribute (or
// leaves it unknown). ctx holds the member's count or each.
func (w *walker) replaceTriggered(r *config.Resource, rp *ResourcePlan, ctx *hcl.EvalContext) hcl.Diagnostics {
	rr := w.plan.recorded[rp.Address]
	if len(r.Lifecycle.ReplaceTriggeredBy) == 0 || rr == nil || (rp.Action != NoOp && rp.Action != Update) {
		return nil
	}
	var causes []string
	for _, tg := range r.Lifecycle.ReplaceTriggeredBy {
		want := ""
		if tg.Key != nil {
			v, diags := tg.Key.Value(ctx)
			if diags.HasErrors() {
				return diags
			}
			key, err := config.InstanceKey(v)
			if err != nil {
				return hcl.Diagnostics{config.Errorf(tg.Range, "Invalid replace_triggered_by expression", "%s: the instance key must be a known whole number or string (%s).", rp.Address, err)}
			}
			want = w.prefix + tg.Resource + key
		}
		for _, p := range *w.planned {
			if baseAddr(p.Address) != w.prefix+tg.Resource || want != "" && p.Address != want {
				continue
			}
			if triggerFired(p, tg.Attr) {
				cause := strings.TrimPrefix(p.Address, w.prefix)
				if len(tg.Attr) > 0 {
					cause += "." + strings.Join(tg.Attr, ".")
				}
				if !slices.Contains(causes, cause) {
					causes = append(causes, cause)
				}
			}
		}
	}
	if len(causes) == 0 {
		return nil
	}
	if rp.Action == NoOp {
		rp.Before = markAttrs(rr.inputs(), rr.Sensitive)
		rp.Change = changeset.Change{Type: "Resource", ResourceChange: changeset.ResourceChange{
			Action: changeset.Modify, LogicalResourceId: strings.TrimPrefix(rp.Address, w.prefix), PhysicalResourceId: rp.PhysicalID,
			ResourceType: rp.Type, ModuleInfo: rp.Module,
		}}
	}
	rp.Action, rp.metaOnly = Replace, false
	rc := &rp.Change.ResourceChange
	if !slices.Contains(rc.Scope, "Properties") {
		rc.Scope = append(rc.Scope, "Properties")
	}
	for _, c := range causes {
		source := changeset.SourceResourceReference
		if strings.Count(c, ".") > 1 && !strings.HasSuffix(c, "]") {
			source = changeset.SourceResourceAttribute
		}
		entity := c
		rc.Details = append(rc.Details, changeset.ResourceChangeDetail{ChangeSource: source, CausingEntity: &entity, Evaluation: "Static",
			Target: changeset.ResourceTargetDefinition{Attribute: "Properties", Name: "replace_triggered_by", RequiresRecreation: provider.Always.String()}})
	}
	rc.Replacement = changeset.ReplacementOf(rc.Details)
	rp.Replacement = rc.Replacement
	return nil
}

// triggerFired reports whether the plan p of a resource named in
// replace_triggered_by (with the attribute path attr) triggers a
// replacement.
func triggerFired(p *ResourcePlan, attr []string) bool {
	switch p.Action {
	case Replace:
		return true
	case Update:
	default:
		return false
	}
	if len(attr) == 0 {
		return true
	}
	before, after := p.Before, p.After
	for _, name := range attr {
		if before == cty.NilVal || after == cty.NilVal || !after.IsKnown() || after.IsNull() {
			return after == cty.NilVal || !after.IsKnown()
		}
		if !after.Type().IsObjectType() || !after.Type().HasAttribute(name) {
			return false // an attribute the update does not plan: as recorded
		}
		after = after.GetAttr(name)
		if before.IsKnown() && !before.IsNull() && before.Type().IsObjectType() && before.Type().HasAttribute(name) {
			before = before.GetAttr(name)
		} else {
			before = cty.NullVal(after.Type())
		}
	}
	return !valuesEqual(after, before)
}

package engine

import (
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

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

package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/tfstate"
)

// Adopting a Terraform workspace (stackd import-state): the objects of a
// Terraform or OpenTofu state become an instance's resource records, as
// stackd would have recorded them had it created the objects from the
// template, so that the next plan compares the template with the objects
// as Terraform's would.
//
// A record's properties (Inputs) are what the template configures, with
// the values the state holds for them; what the template leaves unset is
// the provider's to choose (null), as for an import block
// (tfplugin.foundProperties). Its attributes are the state's: the whole
// object for a Terraform provider, the attributes the provider declares
// for a built-in one.

// Adopt plans inst as though nothing were recorded, to learn the resource
// instances its template declares, and makes the records of objs (a
// state's objects for this instance). An object whose address the
// template does not declare, whose type differs, whose provider is another
// or that cannot be decoded is an error diagnostic naming it; the records
// are returned only when there is none. A tainted object is recorded
// tainted: the next apply replaces it, as Terraform's would. plan is inst planned against the
// records: what the first plan after the import will show.
func (e *Engine) Adopt(ctx context.Context, inst *Instance, objs []tfstate.Object) (recs []ResourceState, plan *InstancePlan, diags hcl.Diagnostics) {
	fresh, diags := e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	byAddr := make(map[string]*ResourcePlan, len(fresh.Resources))
	for _, rp := range fresh.Resources {
		byAddr[rp.Address] = rp
	}
	where := hcl.Range{}
	name := inst.Name
	if ss := inst.StackSet; ss != nil {
		where, name = ss.DeclRange, ss.Name
	}
	var missing []string
	for _, o := range objs {
		rp := byAddr[o.Address]
		if rp == nil {
			missing = append(missing, o.Address)
			continue
		}
		rec, err := e.adoptOne(inst, rp, o)
		if err != nil {
			diags = diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Object cannot be imported",
				Detail:  fmt.Sprintf("%s (stack set %q, target %s/%s): %v.", o.Address, name, inst.Target.Region, inst.Target.Account, err),
				Subject: rp.DeclRange.Ptr()})
			continue
		}
		recs = append(recs, rec)
	}
	if len(missing) > 0 {
		diags = diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Resources not in the template",
			Detail: fmt.Sprintf("The state holds %d resource instance(s) that the template of stack set %q does not declare at target %s/%s: %s. "+
				"stackd would destroy them on its next apply. Declare them in the template (a moved block says where one went), or remove them from the state first (terraform state rm ADDRESS).",
				len(missing), name, inst.Target.Region, inst.Target.Account, strings.Join(missing, ", ")),
			Subject: where.Ptr()})
	}
	if diags.HasErrors() {
		return nil, nil, diags
	}
	plan, pdiags := e.PlanContext(ctx, inst, recs)
	return recs, plan, append(diags, pdiags...)
}

// adoptOne is the record of object o, planned by the template as rp.
func (e *Engine) adoptOne(inst *Instance, rp *ResourcePlan, o tfstate.Object) (ResourceState, error) {
	if rp.Type != o.Type {
		return ResourceState{}, fmt.Errorf("the state holds a %s, the template declares a %s at that address", o.Type, rp.Type)
	}
	p, err := e.provider(rp.Type)
	if err != nil {
		return ResourceState{}, err
	}
	origin := e.origin(rp.Type)
	if parts := strings.Split(origin, "|"); len(parts) == 3 && !sameProvider(parts[1], o.ProviderSource) {
		return ResourceState{}, fmt.Errorf("the state's provider is %s, the template's %s", o.ProviderSource, parts[1])
	}
	schema := p.Schema()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(o.Attributes, &raw); err != nil {
		return ResourceState{}, fmt.Errorf("its attributes are not a JSON object")
	}
	plugin := e.typeOwner(rp.Type) != ""
	decode := func(name string, ty cty.Type) (cty.Value, error) {
		b, ok := raw[name]
		if !ok {
			return cty.NullVal(ty), nil
		}
		if ty == cty.DynamicPseudoType && !wrappedDynamic(b) {
			v, err := config.DecodeValue(b)
			if v == cty.NilVal && err == nil {
				v = cty.NullVal(cty.DynamicPseudoType)
			}
			return v, err
		}
		return ctyjson.Unmarshal(b, ty)
	}
	configured, sensitive := unmarkObject(rp.props())
	props := map[string]cty.Value{}
	if configured.Type().IsObjectType() && !configured.IsNull() {
		for name, aty := range configured.Type().AttributeTypes() {
			cv := configured.GetAttr(name)
			if cv.IsKnown() && cv.IsNull() {
				props[name] = cv // not configured: the provider's to choose
				continue
			}
			pty := cty.DynamicPseudoType
			if sp, ok := schema.Properties[name]; ok {
				pty = sp.Type
			}
			sv, err := decode(name, pty)
			if err != nil {
				return ResourceState{}, fmt.Errorf("its attribute %q does not decode as %s (%s)", name, pty.FriendlyName(), safeErr(err))
			}
			if conv, err := convert.Convert(sv, aty); err == nil {
				sv = conv
			}
			props[name] = sv
		}
	}
	inputs, err := config.EncodeValue(cty.ObjectVal(props))
	if err != nil {
		return ResourceState{}, fmt.Errorf("its properties: %s", safeErr(err))
	}
	attrs := map[string]cty.Value{}
	for name := range raw {
		if !plugin && !slices.Contains(schema.Attributes, name) {
			continue // a built-in provider records its declared attributes
		}
		ty := cty.DynamicPseudoType
		if sp, ok := schema.Properties[name]; ok {
			ty = sp.Type
		}
		v, err := decode(name, ty)
		if err != nil {
			return ResourceState{}, fmt.Errorf("its attribute %q does not decode (%s)", name, safeErr(err))
		}
		attrs[name] = v
	}
	encAttrs, err := config.EncodeValue(cty.ObjectVal(attrs))
	if err != nil {
		return ResourceState{}, fmt.Errorf("its attributes: %s", safeErr(err))
	}
	rec := ResourceState{
		Address: rp.Address, Type: rp.Type, Inputs: inputs, Attributes: encAttrs, Status: StatusApplied,
		DependsOn: slices.Clone(rp.deps), Metadata: rp.metadata, Provider: origin,
		Private: o.Private, SchemaVersion: o.SchemaVersion, Identity: o.Identity,
		// A tainted object is replaced by the next apply, as Terraform's.
		Tainted: o.Tainted,
	}
	if id, ok := attrs["id"]; ok && id.Type() == cty.String && id.IsKnown() && !id.IsNull() {
		rec.PhysicalID = id.AsString()
	}
	for _, d := range o.Dependencies {
		if !slices.Contains(rec.DependsOn, d) {
			rec.DependsOn = append(rec.DependsOn, d)
		}
	}
	for _, s := range append(sensitive, o.Sensitive...) {
		if !slices.Contains(rec.Sensitive, s) {
			rec.Sensitive = append(rec.Sensitive, s)
		}
	}
	sort.Strings(rec.Sensitive)
	if ss := inst.StackSet; ss != nil {
		if tr := templateResource(ss.Template, rp.Address); tr != nil {
			rec.DeletionPolicy = tr.DeletionPolicy
		}
	}
	if rp.providerConfig != cty.NilVal {
		if rec.ProviderConfig, err = encodeProviderConfig(rp.providerConfig); err != nil {
			return ResourceState{}, fmt.Errorf("provider configuration: %w", err)
		}
	}
	return rec, nil
}

// wrappedDynamic reports whether b is how a state writes a value of
// dynamic type: {"value": ..., "type": ...}.
func wrappedDynamic(b []byte) bool {
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' || json.Unmarshal(b, &m) != nil || len(m) != 2 {
		return false
	}
	_, v := m["value"]
	_, t := m["type"]
	return v && t
}

// sameProvider reports whether two provider sources name the same
// provider: Terraform's and OpenTofu's registries serve the same
// namespace/type.
func sameProvider(a, b string) bool {
	tail := func(s string) string {
		parts := strings.Split(strings.ToLower(s), "/")
		if len(parts) > 2 {
			parts = parts[len(parts)-2:]
		}
		return strings.Join(parts, "/")
	}
	return tail(a) == tail(b)
}

// safeErr is a decoding error's message without the value it may quote.
func safeErr(err error) string {
	var pe cty.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("at %s: %s", provider.FormatPath(pe.Path), pe.Error())
	}
	return "the value does not match its type"
}

package tfplugin

// One resource type of a provider plugin as a stackd provider: create,
// update, delete, read, plan, validate and import through the plugin
// protocol.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/provider"
)

// resourceType is one resource type of a provider, as a stackd provider.
type resourceType struct {
	p       *pluginProvider
	typ     string
	schema  *Schema
	pschema provider.Schema
}

var (
	_ provider.Provider                = (*resourceType)(nil)
	_ provider.ChangePlanner           = (*resourceType)(nil)
	_ provider.DriftReader             = (*resourceType)(nil)
	_ provider.Importer                = (*resourceType)(nil)
	_ provider.Adopter                 = (*resourceType)(nil)
	_ provider.ConfigValidator         = (*resourceType)(nil)
	_ provider.ProviderConfigValidator = (*resourceType)(nil)
)

func (rt *resourceType) Schema() provider.Schema { return rt.pschema }

// Readable: every resource of a Terraform provider has ReadResource.
func (rt *resourceType) Readable(cty.Value) bool { return true }

func (rt *resourceType) ty() cty.Type { return rt.schema.Block.ImpliedType() }

// config is the resource's configuration object: the properties set,
// null computed attributes.
func (rt *resourceType) config(props cty.Value) (cty.Value, error) {
	return fullObject(rt.schema.Block, props, rt.ty())
}

// prior is the recorded state: the recorded attributes (the whole state
// object the provider last returned), upgraded by the provider
// (UpgradeResourceState) when it was recorded with an older schema
// version.
func (rt *resourceType) prior(ctx context.Context, c Client, req provider.Request) (cty.Value, error) {
	if len(req.Attributes) == 0 {
		return cty.NullVal(rt.ty()), nil
	}
	if req.SchemaVersion < rt.schema.Version {
		obj, _ := cty.ObjectVal(req.Attributes).UnmarkDeep()
		raw, err := ctyjson.Marshal(obj, obj.Type())
		if err != nil {
			return cty.NilVal, err
		}
		up, err := c.UpgradeResourceState(ctx, rt.typ, req.SchemaVersion, raw)
		if err != nil {
			return cty.NilVal, fmt.Errorf("upgrade the recorded state from schema version %d to %d: %w", req.SchemaVersion, rt.schema.Version, err)
		}
		return up.Upgraded, nil
	}
	return fullObject(rt.schema.Block, cty.ObjectVal(req.Attributes), rt.ty())
}

func (rt *resourceType) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	return rt.change(ctx, req, false)
}

func (rt *resourceType) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	return rt.change(ctx, req, true)
}

// change plans and applies the configuration of req over the recorded
// state (update) or nothing (create).
func (rt *resourceType) change(ctx context.Context, req provider.Request, update bool) (provider.Result, error) {
	cfg, err := rt.config(req.Properties)
	if err != nil {
		return provider.Result{}, err
	}
	lease, err := rt.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return provider.Result{}, err
	}
	defer lease.Release()
	prior, private, identity := cty.NullVal(rt.ty()), []byte(nil), cty.NilVal
	switch {
	case update:
		if prior, err = rt.prior(ctx, lease, req); err != nil {
			return provider.Result{}, err
		}
		private, identity = req.Private, rt.identityOf(req.Identity)
	case req.ImportID != "":
		// An import block: the existing object is the prior state, then
		// brought to the configuration like an update.
		if prior, private, identity, err = rt.importObject(ctx, lease, req.ImportID, cty.NilVal); err != nil {
			return provider.Result{}, err
		}
	}
	return rt.bringTo(ctx, lease, req, cfg, prior, private, identity)
}

// bringTo plans and applies the change from prior (null for a create;
// identity its resource identity, cty.NilVal when none) to cfg.
func (rt *resourceType) bringTo(ctx context.Context, lease Client, req provider.Request, cfg, prior cty.Value, private []byte, identity cty.Value) (provider.Result, error) {
	var plan *PlanResponse
	if prior.IsNull() && req.ImportID == "" {
		// A create the engine planned with this configuration: applied
		// as the provider planned it then (plancache.go).
		if k, ok := createKey(lease, rt.typ, cfg, rt.ty()); ok {
			plan, _ = rt.p.planned.get(k, rt.p.now(), true)
		}
	}
	if plan == nil {
		var err error
		plan, err = lease.PlanResourceChange(ctx, PlanRequest{TypeName: rt.typ, Prior: prior, Proposed: proposedNew(rt.schema.Block, prior, cfg), Config: cfg,
			PriorPrivate: private, PriorIdentity: identity})
		if err != nil {
			return provider.Result{}, err
		}
	}
	if !prior.IsNull() && req.ImportID != "" && len(plan.RequiresReplace) > 0 {
		return rt.replaceImported(ctx, lease, req, cfg, prior, private) // import_plan.go
	}
	if !prior.IsNull() && plan.Planned.RawEquals(prior) {
		// Nothing to change (an imported object as configured).
		return rt.result(prior, plan.PlannedPrivate, either(plan.PlannedIdentity, identity), req.RequestID), nil
	}
	if prior.IsNull() && req.Prepared != nil {
		// A create whose object's id the provider planned: journaled
		// first, so that a crash during the apply adopts the object.
		if adopt := rt.adoptionOf(plan); adopt != nil {
			if err := req.Prepared(adopt); err != nil {
				return provider.Result{}, err
			}
		}
	}
	applied, err := lease.ApplyResourceChange(ctx, ApplyRequest{TypeName: rt.typ, Prior: prior, Planned: plan.Planned, Config: cfg,
		PlannedPrivate: plan.PlannedPrivate, PlannedIdentity: plan.PlannedIdentity})
	if err != nil {
		return provider.Result{}, err
	}
	return rt.result(applied.New, applied.Private, either(applied.NewIdentity, plan.PlannedIdentity), req.RequestID), nil
}

// either is v, or else w when v is cty.NilVal or null.
func either(v, w cty.Value) cty.Value {
	if v == cty.NilVal || v.IsNull() {
		return w
	}
	return v
}

// identityOf is a recorded resource identity (JSON) as a value of the
// type's identity schema; cty.NilVal when none was recorded, the type has
// no identity, or the record is of another identity schema.
func (rt *resourceType) identityOf(b []byte) cty.Value {
	is := rt.p.schema.Identities[rt.typ]
	if len(b) == 0 || is == nil {
		return cty.NilVal
	}
	v, err := ctyjson.Unmarshal(b, is.ImpliedType())
	if err != nil {
		return cty.NilVal
	}
	return v
}

// identityJSON is an identity as recorded: JSON, nil when there is none.
func (rt *resourceType) identityJSON(v cty.Value) []byte {
	is := rt.p.schema.Identities[rt.typ]
	if is == nil || v == cty.NilVal || v.IsNull() || !v.IsWhollyKnown() {
		return nil
	}
	b, err := ctyjson.Marshal(v, is.ImpliedType())
	if err != nil {
		return nil
	}
	return b
}

func (rt *resourceType) Delete(ctx context.Context, req provider.Request) error {
	if len(req.Attributes) == 0 {
		return nil // nothing was recorded of it
	}
	lease, err := rt.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return err
	}
	defer lease.Release()
	prior, err := rt.prior(ctx, lease, req)
	if err != nil {
		return err
	}
	null := cty.NullVal(rt.ty())
	planned := null
	private := req.Private
	if rt.p.schema.PlanDestroy {
		plan, err := lease.PlanResourceChange(ctx, PlanRequest{TypeName: rt.typ, Prior: prior, Proposed: null, Config: null, PriorPrivate: req.Private,
			PriorIdentity: rt.identityOf(req.Identity)})
		if err != nil {
			return err
		}
		planned, private = plan.Planned, plan.PlannedPrivate
	}
	// An error diagnostic comes back as the error (the client's).
	_, err = lease.ApplyResourceChange(ctx, ApplyRequest{TypeName: rt.typ, Prior: prior, Planned: planned, Config: null, PlannedPrivate: private})
	return err
}

// ValidateConfig is ValidateResourceConfig: the provider's validators, on
// the executable's unconfigured validating process.
func (rt *resourceType) ValidateConfig(ctx context.Context, req provider.Request) error {
	cfg, err := rt.config(req.Properties)
	if err != nil {
		return err
	}
	return rt.p.validated(ctx, rt.typ, cfg, rt.ty(), func(c Client) error {
		_, err := c.ValidateResourceConfig(ctx, rt.typ, cfg)
		return err
	})
}

// adoption is what a create journals to find its object again if a crash
// interrupts it: the resource identity the provider planned (JSON of the
// type's identity schema), or else the id it planned.
type adoption struct {
	Identity json.RawMessage `json:"identity,omitempty"`
	ID       string          `json:"id,omitempty"`
}

// adoptionOf is the adoption of a create's plan, nil when the provider
// planned neither a wholly known identity nor an id: most providers learn
// the id of an object only when they create it.
func (rt *resourceType) adoptionOf(plan *PlanResponse) []byte {
	a := adoption{Identity: rt.identityJSON(plan.PlannedIdentity)}
	if planned := plan.Planned; knownObject(planned) && planned.Type().HasAttribute("id") {
		if id := planned.GetAttr("id"); !id.IsNull() && id.IsKnown() && id.Type().Equals(cty.String) {
			a.ID = id.AsString()
		}
	}
	if a.Identity == nil && a.ID == "" {
		return nil
	}
	b, _ := json.Marshal(a)
	return b
}

// knownObject reports whether v is a known, non-null object.
func knownObject(v cty.Value) bool {
	return v != cty.NilVal && v.IsKnown() && !v.IsNull() && v.Type().IsObjectType()
}

// Adopt finds the object a create a crash interrupted made from its
// journaled adoption: ImportResourceState of its id and ReadResource, then
// it is brought to the configuration like an import block's object. An
// object the provider does not find is not there: found is false, and so
// it is when the import fails (some providers' importers fail on an id
// they do not find): the create is repeated, as it would be without an
// adoption, and the log says why.
func (rt *resourceType) Adopt(ctx context.Context, req provider.Request, adopt []byte) (provider.Result, bool, error) {
	var a adoption
	if err := json.Unmarshal(adopt, &a); err != nil {
		return provider.Result{}, false, nil // not ours to read: create anew
	}
	identity := rt.identityOf(a.Identity)
	if identity == cty.NilVal && a.ID == "" {
		return provider.Result{}, false, nil // nothing it can find it by: create anew
	}
	cfg, err := rt.config(req.Properties)
	if err != nil {
		return provider.Result{}, false, err
	}
	lease, err := rt.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return provider.Result{}, false, err
	}
	defer lease.Release()
	prior, private, imported, err := rt.importObject(ctx, lease, a.ID, identity)
	if err != nil {
		if ctx.Err() != nil {
			return provider.Result{}, false, err
		}
		if !errors.Is(err, errNoObject) {
			rt.p.r.Log.Warn().Str("resource", req.LogicalID).Err(err).Msg("cannot import what the interrupted create made; creating anew")
		}
		return provider.Result{}, false, nil
	}
	req.Prepared = nil
	res, err := rt.bringTo(ctx, lease, req, cfg, prior, private, imported)
	return res, err == nil, err
}

// CanImport: resource types of Terraform providers import with
// ImportResourceState (a provider that cannot says so when asked).
func (rt *resourceType) CanImport() bool { return true }

// errNoObject: the object to import does not exist.
var errNoObject = errors.New("no such object")

// importObject imports the object of identity (when not cty.NilVal) or
// id and reads it.
func (rt *resourceType) importObject(ctx context.Context, c Client, id string, identity cty.Value) (cty.Value, []byte, cty.Value, error) {
	var im *ImportResponse
	var err error
	if identity != cty.NilVal {
		im, err = c.ImportResourceStateByIdentity(ctx, rt.typ, identity)
		id = "by identity"
	} else {
		im, err = c.ImportResourceState(ctx, rt.typ, id)
	}
	if err != nil {
		return cty.NilVal, nil, cty.NilVal, fmt.Errorf("import %s %q: %w", rt.typ, id, err)
	}
	for _, o := range im.Imported {
		if o.TypeName != rt.typ {
			continue
		}
		read, err := c.ReadResource(ctx, ReadRequest{TypeName: rt.typ, Current: o.State, Private: o.Private, CurrentIdentity: o.Identity})
		if err != nil {
			return cty.NilVal, nil, cty.NilVal, fmt.Errorf("import %s %q: read: %w", rt.typ, id, err)
		}
		if read.New.IsNull() {
			return cty.NilVal, nil, cty.NilVal, fmt.Errorf("import %s %q: %w", rt.typ, id, errNoObject)
		}
		return read.New, read.Private, either(read.NewIdentity, o.Identity), nil
	}
	return cty.NilVal, nil, cty.NilVal, fmt.Errorf("import %s %q: the provider returned no object of that type", rt.typ, id)
}

// Read is ReadResource: the object as it is now, provider.ErrNotFound
// when it is gone.
func (rt *resourceType) Read(ctx context.Context, req provider.Request) (provider.Result, error) {
	if len(req.Attributes) == 0 {
		return provider.Result{}, provider.ErrNotFound
	}
	lease, err := rt.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return provider.Result{}, err
	}
	defer lease.Release()
	prior, err := rt.prior(ctx, lease, req)
	if err != nil {
		return provider.Result{}, err
	}
	current := rt.identityOf(req.Identity)
	read, err := lease.ReadResource(ctx, ReadRequest{TypeName: rt.typ, Current: prior, Private: req.Private, CurrentIdentity: current})
	if err != nil {
		return provider.Result{}, err
	}
	if read.New.IsNull() {
		return provider.Result{}, provider.ErrNotFound
	}
	res := rt.result(read.New, read.Private, either(read.NewIdentity, current), req.RequestID)
	if req.SchemaVersion < rt.schema.Version && prior.Type().IsObjectType() {
		res.Upgraded = prior.AsValueMap()
	}
	// The properties found: the configurable attributes of the state,
	// where the applied properties set them.
	res.Properties = foundProperties(req.Properties, read.New)
	return res, nil
}

// PlanChange asks the provider to plan the update of req.OldProperties to
// req.Properties (a create when req.Attributes is empty): which changed
// properties replace the resource, and the attributes as planned.
func (rt *resourceType) PlanChange(ctx context.Context, req provider.Request) (provider.PlannedChange, error) {
	cfg, err := rt.config(req.Properties)
	if err != nil {
		return provider.PlannedChange{}, err
	}
	lease, err := rt.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return provider.PlannedChange{}, err
	}
	defer lease.Release()
	// No recorded attributes: a create, planned as Terraform plans one,
	// with a null prior state.
	prior, err := rt.prior(ctx, lease, req)
	if err != nil {
		return provider.PlannedChange{}, err
	}
	// A create planned before with this configuration: the provider's
	// plan from then (plancache.go).
	k, keep := createKey(lease, rt.typ, cfg, rt.ty())
	keep = keep && prior.IsNull() && req.ImportID == "" && len(req.Private) == 0
	var plan *PlanResponse
	if keep {
		plan, _ = rt.p.planned.get(k, rt.p.now(), false)
	}
	if plan != nil {
		lease.notUsed() // no call: the process served nothing
	} else {
		plan, err = lease.PlanResourceChange(ctx, PlanRequest{TypeName: rt.typ, Prior: prior, Proposed: proposedNew(rt.schema.Block, prior, cfg), Config: cfg,
			PriorPrivate: req.Private, PriorIdentity: rt.identityOf(req.Identity)})
		if err != nil {
			return provider.PlannedChange{}, err
		}
		if keep {
			rt.p.planned.put(k, plan, rt.p.now()) // for the Create that applies it
		}
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
		if len(p) == 0 {
			continue
		}
		if step, ok := p[0].(cty.GetAttrStep); ok && !slices.Contains(out.RequiresReplace, step.Name) {
			out.RequiresReplace = append(out.RequiresReplace, step.Name)
		}
	}
	sort.Strings(out.RequiresReplace)
	return out, nil
}

// result is what the engine records of a new state: every attribute of it
// (the whole state, so that the next call has the prior state whole), the
// sensitive ones named.
func (rt *resourceType) result(state cty.Value, private []byte, identity cty.Value, requestID string) provider.Result {
	res := provider.Result{Attributes: map[string]cty.Value{}, Private: private, SchemaVersion: rt.schema.Version, Identity: rt.identityJSON(identity)}
	if state.IsNull() || !state.Type().IsObjectType() {
		return res
	}
	for name, v := range state.AsValueMap() {
		res.Attributes[name] = v
		if rt.schema.Block.IsSensitive(cty.GetAttrPath(name)) {
			res.SensitiveAttributes = append(res.SensitiveAttributes, name)
		}
	}
	sort.Strings(res.SensitiveAttributes)
	res.PhysicalID = requestID
	if id, ok := res.Attributes["id"]; ok && id.Type() == cty.String && id.IsKnown() && !id.IsNull() {
		res.PhysicalID = id.AsString()
	}
	return res
}

// foundProperties is the applied properties with the values the state now
// holds for them.
func foundProperties(applied, state cty.Value) cty.Value {
	if applied == cty.NilVal || applied.IsNull() || !applied.Type().IsObjectType() || !state.Type().IsObjectType() {
		return cty.NilVal
	}
	m := applied.AsValueMap()
	for name, was := range m {
		if !state.Type().HasAttribute(name) {
			continue
		}
		is := state.GetAttr(name)
		if was.IsNull() {
			continue // not configured: the provider's to choose
		}
		if conv, err := convert.Convert(is, was.Type()); err == nil {
			m[name] = conv
		}
	}
	return cty.ObjectVal(m)
}

// ValidateProviderConfig is ValidateProviderConfig of the resource type's
// provider: its validators of the provider block.
func (rt *resourceType) ValidateProviderConfig(ctx context.Context, cfg cty.Value) error {
	full, err := fullObject(rt.p.schema.Provider.Block, cfg, rt.p.schema.Provider.Block.ImpliedType())
	if err != nil {
		return err
	}
	hash, err := ConfigHash(full)
	if err != nil {
		return err
	}
	if _, ok := rt.p.validConfigs.Load(hash); ok {
		return nil // every instance configured alike asks: once is enough
	}
	c, err := rt.p.r.validator(ctx, rt.p)
	if err != nil {
		return err
	}
	defer c.Release()
	if _, err := c.ValidateProviderConfig(ctx, full); err != nil {
		return err
	}
	rt.p.validConfigs.Store(hash, true)
	return nil
}

package tfplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/tfplugin/install"
)

// The bridge between the engine and provider plugins: a Resolver installs
// the providers templates require (install), reads each one's schema once,
// and hands the engine one provider.Provider per resource type. Calls go
// to a process of the Pool keyed by (executable, configuration): every
// instance whose provider block evaluates alike shares one process.

var _ engine.PluginResolver = (*Resolver)(nil)

// Resolver is the engine's PluginResolver for Terraform/OpenTofu providers.
type Resolver struct {
	// Installer finds and installs providers (plugin dirs, registry,
	// cache).
	Installer *install.Installer
	// LockFile is the .terraform.lock.hcl-compatible file versions and
	// hashes are locked in ("" : none).
	LockFile string
	// Pool runs the provider processes.
	Pool *Pool
	// Log receives the providers' log lines at debug level.
	Log zerolog.Logger
	// MTLS: see Options.MTLS.
	MTLS bool

	mu      sync.Mutex
	lock    *install.LockFile
	schemas map[string]*ProviderSchema // by executable
	offline *install.Installer         // Installer without the registry
	// installed are the packages installed, by requirement.
	installed map[string]install.Package
}

// offlineInstaller is Installer with the registry disabled (made once).
func (r *Resolver) offlineInstaller() *install.Installer {
	if r.offline == nil {
		i := r.Installer
		r.offline = &install.Installer{
			PluginDirs: i.PluginDirs, CacheDir: i.CacheDir, HTTP: i.HTTP, UserAgent: i.UserAgent,
			DisableRegistry: true, Services: i.Services, TrustedKeys: i.TrustedKeys, TrustRegistryKeys: i.TrustRegistryKeys,
			Platform: i.Platform, Limits: i.Limits, Log: i.Log,
		}
	}
	return r.offline
}

// Resolve installs each required provider, reads its schema and returns
// its resource types.
func (r *Resolver) Resolve(ctx context.Context, reqs []engine.ProviderRequirement) (*engine.ResolvedProviders, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.schemas == nil {
		r.schemas = map[string]*ProviderSchema{}
	}
	if r.lock == nil {
		lf, err := install.NewLockFile(), error(nil)
		if r.LockFile != "" {
			if lf, err = install.LoadLockFile(r.LockFile); err != nil {
				return nil, err
			}
		}
		r.lock = lf
	}
	before := string(r.lock.Bytes())
	out := &engine.ResolvedProviders{
		Resources: provider.Registry{}, Configs: map[string]provider.Schema{}, DataSources: map[string]provider.DataSource{},
		TypeProvider: map[string]string{}, Origin: map[string]engine.ProviderRequirement{},
	}
	for _, req := range reqs {
		addr, err := install.ParseAddress(req.Source)
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", req.LocalName, err)
		}
		var cons install.Constraints
		if req.Version != "" {
			if cons, err = install.ParseConstraints(req.Version); err != nil {
				return nil, fmt.Errorf("provider %s: version %q: %w", req.LocalName, req.Version, err)
			}
		}
		key := fmt.Sprintf("%s|%s|%s|%v", req.LocalName, addr, req.Version, req.LockedOnly)
		pkg, installed := r.installed[key]
		inst := r.Installer
		if installed {
			// Installed and verified once per process: every pass loads
			// its revision, and hashing a big provider again each time
			// would cost the push latency.
			inst = nil
		} else if req.LockedOnly {
			// A ref anyone can push: only what the lock file holds, never
			// a download.
			if _, locked := r.lock.Provider(addr); !locked {
				return nil, fmt.Errorf("provider %s (%s) is not locked: a branch other than the deploy branch may only use providers the deploy branch already installed", req.LocalName, addr)
			}
			inst = r.offlineInstaller()
		}
		if inst != nil {
			if pkg, err = inst.Install(ctx, install.Requirement{Source: addr, Constraints: cons}, r.lock); err != nil {
				return nil, fmt.Errorf("provider %s (%s): %w", req.LocalName, addr, err)
			}
			if r.installed == nil {
				r.installed = map[string]install.Package{}
			}
			r.installed[key] = pkg
		}
		ps, err := r.schema(ctx, req.LocalName, pkg)
		if err != nil {
			return nil, err
		}
		pp := &pluginProvider{r: r, name: req.LocalName, pkg: pkg, schema: ps}
		out.Configs[req.LocalName] = blockSchema(ps.Provider.Block, false)
		origin := engine.ProviderRequirement{LocalName: req.LocalName, Source: addr.String(), Version: pkg.Version.String()}
		for typ, s := range ps.ResourceTypes {
			out.Resources[typ] = &resourceType{p: pp, typ: typ, schema: s, pschema: blockSchema(s.Block, true)}
			out.TypeProvider[typ] = req.LocalName
			out.Origin[typ] = origin
		}
		for typ, s := range ps.DataSources {
			out.DataSources[typ] = &dataSource{p: pp, typ: typ, schema: s, pschema: blockSchema(s.Block, true)}
			out.TypeProvider["data."+typ] = req.LocalName
		}
	}
	if r.LockFile != "" && string(r.lock.Bytes()) != before {
		if err := os.MkdirAll(filepath.Dir(r.LockFile), 0o700); err != nil {
			return nil, err
		}
		if err := install.WriteLockFile(r.LockFile, r.lock); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// schema reads a provider's schema once per executable.
func (r *Resolver) schema(ctx context.Context, name string, pkg install.Package) (*ProviderSchema, error) {
	if s, ok := r.schemas[pkg.Executable]; ok {
		return s, nil
	}
	c, err := Start(ctx, Options{Path: pkg.Executable, Name: name, Logger: &r.Log, MTLS: r.MTLS})
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", name, err)
	}
	defer c.Close()
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, fmt.Errorf("provider %s: schema: %w", name, err)
	}
	r.schemas[pkg.Executable] = s
	return s, nil
}

// pluginProvider is one installed provider.
type pluginProvider struct {
	r      *Resolver
	name   string
	pkg    install.Package
	schema *ProviderSchema
}

// client is a lease on a process of the provider configured with cfg (the
// provider block as the engine evaluated it).
func (pp *pluginProvider) client(ctx context.Context, cfg cty.Value) (*Lease, error) {
	ty := pp.schema.Provider.Block.ImpliedType()
	full, err := fullObject(pp.schema.Provider.Block, cfg, ty)
	if err != nil {
		return nil, fmt.Errorf("provider %s configuration: %w", pp.name, err)
	}
	// The provider's log lines are redacted of its configuration's
	// sensitive values (credentials, tokens).
	var secrets []cty.Value
	for _, p := range pp.schema.Provider.Block.SensitivePaths(full) {
		if v, err := p.Apply(full); err == nil {
			secrets = append(secrets, v)
		}
	}
	return pp.r.Pool.Acquire(ctx, Options{Path: pp.pkg.Executable, Name: pp.name, Logger: &pp.r.Log, MTLS: pp.r.MTLS, Redactor: engine.NewRedactor(secrets...)}, full)
}

// resourceType is one resource type of a provider, as a stackd provider.
type resourceType struct {
	p       *pluginProvider
	typ     string
	schema  *Schema
	pschema provider.Schema
}

var (
	_ provider.Provider        = (*resourceType)(nil)
	_ provider.ChangePlanner   = (*resourceType)(nil)
	_ provider.DriftReader     = (*resourceType)(nil)
	_ provider.Importer        = (*resourceType)(nil)
	_ provider.ConfigValidator = (*resourceType)(nil)
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
	prior, private := cty.NullVal(rt.ty()), []byte(nil)
	switch {
	case update:
		if prior, err = rt.prior(ctx, lease, req); err != nil {
			return provider.Result{}, err
		}
		private = req.Private
	case req.ImportID != "":
		// An import block: the existing object is the prior state, then
		// brought to the configuration like an update.
		if prior, private, err = rt.importObject(ctx, lease, req.ImportID); err != nil {
			return provider.Result{}, err
		}
	}
	plan, err := lease.PlanResourceChange(ctx, PlanRequest{TypeName: rt.typ, Prior: prior, Proposed: proposedNew(rt.schema.Block, prior, cfg), Config: cfg, PriorPrivate: private})
	if err != nil {
		return provider.Result{}, err
	}
	if plan.Diagnostics.HasErrors() {
		return provider.Result{}, plan.Diagnostics.Err()
	}
	if !prior.IsNull() && plan.Planned.RawEquals(prior) {
		// Nothing to change (an imported object as configured).
		return rt.result(prior, plan.PlannedPrivate, req.RequestID), nil
	}
	applied, err := lease.ApplyResourceChange(ctx, ApplyRequest{TypeName: rt.typ, Prior: prior, Planned: plan.Planned, Config: cfg, PlannedPrivate: plan.PlannedPrivate})
	if err != nil {
		return provider.Result{}, err
	}
	if applied.Diagnostics.HasErrors() {
		return provider.Result{}, applied.Diagnostics.Err()
	}
	return rt.result(applied.New, applied.Private, req.RequestID), nil
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
		plan, err := lease.PlanResourceChange(ctx, PlanRequest{TypeName: rt.typ, Prior: prior, Proposed: null, Config: null, PriorPrivate: req.Private})
		if err != nil {
			return err
		}
		if plan.Diagnostics.HasErrors() {
			return plan.Diagnostics.Err()
		}
		planned, private = plan.Planned, plan.PlannedPrivate
	}
	applied, err := lease.ApplyResourceChange(ctx, ApplyRequest{TypeName: rt.typ, Prior: prior, Planned: planned, Config: null, PlannedPrivate: private})
	if err != nil {
		return err
	}
	return applied.Diagnostics.Err()
}

// ValidateConfig is ValidateResourceConfig: the provider's validators.
func (rt *resourceType) ValidateConfig(ctx context.Context, req provider.Request) error {
	cfg, err := rt.config(req.Properties)
	if err != nil {
		return err
	}
	lease, err := rt.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return err
	}
	defer lease.Release()
	diags, err := lease.ValidateResourceConfig(ctx, rt.typ, cfg)
	if err != nil {
		return err
	}
	return diags.Err()
}

// CanImport: resource types of Terraform providers import with
// ImportResourceState (a provider that cannot says so when asked).
func (rt *resourceType) CanImport() bool { return true }

// importObject imports the object of id and reads it.
func (rt *resourceType) importObject(ctx context.Context, c Client, id string) (cty.Value, []byte, error) {
	im, err := c.ImportResourceState(ctx, rt.typ, id)
	if err != nil {
		return cty.NilVal, nil, fmt.Errorf("import %s %q: %w", rt.typ, id, err)
	}
	for _, o := range im.Imported {
		if o.TypeName != rt.typ {
			continue
		}
		read, err := c.ReadResource(ctx, ReadRequest{TypeName: rt.typ, Current: o.State, Private: o.Private})
		if err != nil {
			return cty.NilVal, nil, fmt.Errorf("import %s %q: read: %w", rt.typ, id, err)
		}
		if read.Diagnostics.HasErrors() {
			return cty.NilVal, nil, read.Diagnostics.Err()
		}
		if read.New.IsNull() {
			return cty.NilVal, nil, fmt.Errorf("import %s %q: no such object", rt.typ, id)
		}
		return read.New, read.Private, nil
	}
	return cty.NilVal, nil, fmt.Errorf("import %s %q: the provider returned no object of that type", rt.typ, id)
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
	read, err := lease.ReadResource(ctx, ReadRequest{TypeName: rt.typ, Current: prior, Private: req.Private})
	if err != nil {
		return provider.Result{}, err
	}
	if read.Diagnostics.HasErrors() {
		return provider.Result{}, read.Diagnostics.Err()
	}
	if read.New.IsNull() {
		return provider.Result{}, provider.ErrNotFound
	}
	res := rt.result(read.New, read.Private, req.RequestID)
	if req.SchemaVersion < rt.schema.Version && prior.Type().IsObjectType() {
		res.Upgraded = prior.AsValueMap()
	}
	// The properties found: the configurable attributes of the state,
	// where the applied properties set them.
	res.Properties = foundProperties(req.Properties, read.New)
	return res, nil
}

// PlanChange asks the provider to plan the update of req.OldProperties to
// req.Properties: which changed properties replace the resource.
func (rt *resourceType) PlanChange(ctx context.Context, req provider.Request) (provider.PlannedChange, error) {
	cfg, err := rt.config(req.Properties)
	if err != nil {
		return provider.PlannedChange{}, err
	}
	if len(req.Attributes) == 0 {
		return provider.PlannedChange{}, nil
	}
	lease, err := rt.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return provider.PlannedChange{}, err
	}
	defer lease.Release()
	prior, err := rt.prior(ctx, lease, req)
	if err != nil {
		return provider.PlannedChange{}, err
	}
	plan, err := lease.PlanResourceChange(ctx, PlanRequest{TypeName: rt.typ, Prior: prior, Proposed: proposedNew(rt.schema.Block, prior, cfg), Config: cfg, PriorPrivate: req.Private})
	if err != nil {
		return provider.PlannedChange{}, err
	}
	if plan.Diagnostics.HasErrors() {
		return provider.PlannedChange{}, plan.Diagnostics.Err()
	}
	out := provider.PlannedChange{Attributes: map[string]cty.Value{}}
	if plan.Planned.Type().IsObjectType() && !plan.Planned.IsNull() {
		out.Attributes = plan.Planned.AsValueMap()
	}
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
func (rt *resourceType) result(state cty.Value, private []byte, requestID string) provider.Result {
	res := provider.Result{Attributes: map[string]cty.Value{}, Private: private, SchemaVersion: rt.schema.Version}
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

// blockSchema is a Terraform block schema as a stackd provider schema:
// every attribute that can be set is a property (required, sensitive as
// declared), every nested block type a property decoded by its spec;
// with resource set, the computed attributes are attributes.
func blockSchema(b *Block, resource bool) provider.Schema {
	s := provider.Schema{Properties: map[string]provider.Property{}}
	for name, a := range b.Attributes {
		if a.Required || a.Optional {
			s.Properties[name] = provider.Property{Type: a.ImpliedType(), Required: a.Required, Sensitive: a.Sensitive, Recreation: provider.Never}
		}
		if resource && a.Computed {
			s.Attributes = append(s.Attributes, name)
		}
	}
	for name, nb := range b.BlockTypes {
		spec := blockSpec(name, nb)
		s.Properties[name] = provider.Property{Type: hcldec.ImpliedType(spec), Block: spec, Recreation: provider.Never}
	}
	sort.Strings(s.Attributes)
	return s
}

// blockSpec decodes the blocks of one nested block type, as Terraform's
// configschema does.
func blockSpec(name string, nb *NestedBlock) hcldec.Spec {
	nested := objectSpec(&nb.Block)
	switch nb.Nesting {
	case NestingSingle, NestingGroup:
		return &hcldec.BlockSpec{TypeName: name, Nested: nested, Required: nb.MinItems > 0}
	case NestingSet:
		return &hcldec.BlockSetSpec{TypeName: name, Nested: nested, MinItems: int(nb.MinItems), MaxItems: int(nb.MaxItems)}
	case NestingMap:
		if nb.Block.ImpliedType().HasDynamicTypes() {
			return &hcldec.BlockObjectSpec{TypeName: name, Nested: nested, LabelNames: []string{"key"}}
		}
		return &hcldec.BlockMapSpec{TypeName: name, Nested: nested, LabelNames: []string{"key"}}
	default:
		if nb.Block.ImpliedType().HasDynamicTypes() {
			return &hcldec.BlockTupleSpec{TypeName: name, Nested: nested, MinItems: int(nb.MinItems), MaxItems: int(nb.MaxItems)}
		}
		return &hcldec.BlockListSpec{TypeName: name, Nested: nested, MinItems: int(nb.MinItems), MaxItems: int(nb.MaxItems)}
	}
}

// objectSpec decodes one block's body.
func objectSpec(b *Block) hcldec.ObjectSpec {
	spec := hcldec.ObjectSpec{}
	for name, a := range b.Attributes {
		if !a.Required && !a.Optional {
			continue // computed only: never in configuration
		}
		spec[name] = &hcldec.AttrSpec{Name: name, Type: a.ImpliedType(), Required: a.Required}
	}
	for name, nb := range b.BlockTypes {
		spec[name] = blockSpec(name, nb)
	}
	return spec
}

// fullObject is v (an object of some of b's attributes and block types)
// as a value of type ty: every attribute and block type present, null or
// empty where v has none.
func fullObject(b *Block, v cty.Value, ty cty.Type) (cty.Value, error) {
	if v == cty.NilVal {
		v = cty.EmptyObjectVal
	}
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return cty.NullVal(ty), nil
	}
	if !v.Type().IsObjectType() {
		return cty.NilVal, errors.New("not an object")
	}
	m := map[string]cty.Value{}
	for name, at := range ty.AttributeTypes() {
		if v.Type().HasAttribute(name) {
			m[name] = v.GetAttr(name)
			continue
		}
		m[name] = cty.NullVal(at)
		if nb, ok := b.BlockTypes[name]; ok {
			switch nb.Nesting {
			case NestingList:
				if at.IsListType() {
					m[name] = cty.ListValEmpty(at.ElementType())
				}
			case NestingSet:
				m[name] = cty.SetValEmpty(at.ElementType())
			case NestingMap:
				if at.IsMapType() {
					m[name] = cty.MapValEmpty(at.ElementType())
				}
			}
		}
	}
	return convert.Convert(cty.ObjectVal(m), ty)
}

// proposedNew is the configuration merged with the prior state, as
// Terraform proposes it to PlanResourceChange: configured values as
// configured, a computed attribute left unset keeps its prior value (null
// on a create), nested blocks merged element by element where they are
// lists or single blocks.
func proposedNew(b *Block, prior, config cty.Value) cty.Value {
	if config.IsNull() || !config.IsKnown() {
		return config
	}
	m := map[string]cty.Value{}
	for name, a := range b.Attributes {
		cv := config.GetAttr(name)
		pv := cty.NullVal(cv.Type())
		if !prior.IsNull() && prior.IsKnown() {
			pv = prior.GetAttr(name)
		}
		switch {
		case a.Computed && cv.IsNull():
			// The prior value; null on a create (the provider plans it,
			// unknown when only the apply tells).
			m[name] = pv
		default:
			m[name] = cv
		}
	}
	for name, nb := range b.BlockTypes {
		cv := config.GetAttr(name)
		var pv cty.Value
		if !prior.IsNull() && prior.IsKnown() {
			pv = prior.GetAttr(name)
		} else {
			pv = cty.NullVal(cv.Type())
		}
		switch nb.Nesting {
		case NestingSingle, NestingGroup:
			m[name] = proposedNew(&nb.Block, pv, cv)
		case NestingList:
			if !cv.IsKnown() || cv.IsNull() || !cv.Type().IsListType() || cv.LengthInt() == 0 {
				m[name] = cv
				continue
			}
			elems := make([]cty.Value, 0, cv.LengthInt())
			for i, ce := range cv.AsValueSlice() {
				pe := cty.NullVal(ce.Type())
				if !pv.IsNull() && pv.IsKnown() && pv.LengthInt() > i {
					pe = pv.Index(cty.NumberIntVal(int64(i)))
				}
				elems = append(elems, proposedNew(&nb.Block, pe, ce))
			}
			m[name] = cty.ListVal(elems)
		default:
			m[name] = cv
		}
	}
	return cty.ObjectVal(m)
}

// dataSource is one data source of a provider.
type dataSource struct {
	p       *pluginProvider
	typ     string
	schema  *Schema
	pschema provider.Schema
}

var _ provider.DataSource = (*dataSource)(nil)

func (ds *dataSource) Schema() provider.Schema { return ds.pschema }

// ReadData is ReadDataSource.
func (ds *dataSource) ReadData(ctx context.Context, req provider.Request) (map[string]cty.Value, error) {
	cfg, err := fullObject(ds.schema.Block, req.Properties, ds.schema.Block.ImpliedType())
	if err != nil {
		return nil, err
	}
	lease, err := ds.p.client(ctx, req.ProviderConfig)
	if err != nil {
		return nil, err
	}
	defer lease.Release()
	read, err := lease.ReadDataSource(ctx, ds.typ, cfg)
	if err != nil {
		return nil, err
	}
	if read.Diagnostics.HasErrors() {
		return nil, read.Diagnostics.Err()
	}
	if read.State.IsNull() || !read.State.Type().IsObjectType() {
		return map[string]cty.Value{}, nil
	}
	out := read.State.AsValueMap()
	for name, v := range out {
		if ds.schema.Block.IsSensitive(cty.GetAttrPath(name)) {
			out[name] = v.Mark("sensitive")
		}
	}
	return out, nil
}

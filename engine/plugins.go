package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/provider"
)

// Terraform and OpenTofu providers (DESIGN §7b). A template declares the
// providers it uses in terraform { required_providers { … } }, configures
// them per target with provider blocks, and uses their resource types like
// the built-in ones. The engine knows no plugin protocol: a PluginResolver
// (engine/provider/tfplugin's) installs the providers and hands back their
// resource types as providers, which join the engine's registry.

// PluginResolver finds the providers a template requires.
type PluginResolver interface {
	// Resolve installs or finds each required provider and returns its
	// resource types and its configuration schema. An error names what
	// could not be resolved; it becomes a diagnostic on the
	// required_providers block.
	Resolve(ctx context.Context, reqs []ProviderRequirement) (*ResolvedProviders, error)
}

// ProviderRequirement is one entry of required_providers.
type ProviderRequirement struct {
	// LocalName is the entry's name ("aws"), Source its source address
	// ("hashicorp/aws"), Version its version constraints ("~> 5.0").
	LocalName, Source, Version string
	// LockedOnly is set for a ref that is not the deploy branch: only a
	// provider the lock file already holds may be used, from the cache
	// or a plugin dir — a branch anyone can push never makes stackd
	// download and run a provider of its choosing.
	LockedOnly bool
}

// ResolvedProviders are the resource types of required providers.
type ResolvedProviders struct {
	// Resources are the resource types, by type name ("aws_s3_bucket").
	Resources provider.Registry
	// DataSources are the data sources, by type name
	// ("aws_caller_identity"); TypeProvider names their providers too,
	// under "data." + type.
	DataSources map[string]provider.DataSource
	// Configs are the schemas of the provider blocks, by local name.
	Configs map[string]provider.Schema
	// TypeProvider is the local name of each resource type's provider.
	TypeProvider map[string]string
	// Origin is, per resource type, the exact provider it comes from
	// (Source the full address, Version the exact version), recorded with
	// each resource so that it can be resolved again to delete it.
	Origin map[string]ProviderRequirement
}

// originString is how a resource records its provider.
func originString(r ProviderRequirement) string {
	return r.LocalName + "|" + r.Source + "|" + r.Version
}

// parseOrigin reads originString.
func parseOrigin(s string) (ProviderRequirement, bool) {
	parts := strings.Split(s, "|")
	if len(parts) != 3 {
		return ProviderRequirement{}, false
	}
	return ProviderRequirement{LocalName: parts[0], Source: parts[1], Version: "= " + parts[2]}, true
}

// ProviderBlock is a provider block of a template: the configuration of
// one provider (or of one alias of it), evaluated per target.
type ProviderBlock struct {
	Name, Alias string
	Properties  map[string]*hcl.Attribute
	DeclRange   hcl.Range
}

// Key is "NAME" or "NAME.ALIAS", as resources name it.
func (p *ProviderBlock) Key() string {
	if p.Alias == "" {
		return p.Name
	}
	return p.Name + "." + p.Alias
}

// plugins is the registry of plugin resource types the engine has seen,
// added to as templates require providers.
type plugins struct {
	mu       sync.RWMutex
	resolver PluginResolver
	types    provider.Registry
	configs  map[string]provider.Schema
	owner    map[string]string // resource type → provider local name
	origin   map[string]string // resource type → originString
	data     map[string]provider.DataSource
}

// SetPluginResolver lets templates require Terraform/OpenTofu providers.
// Call it before the engine is used.
func (e *Engine) SetPluginResolver(r PluginResolver) {
	e.plugins.mu.Lock()
	defer e.plugins.mu.Unlock()
	e.plugins.resolver = r
}

// lookup returns the provider of a resource type: a built-in one or a
// plugin's.
func (e *Engine) lookup(typ string) (provider.Provider, bool) {
	if p, ok := e.providers[typ]; ok {
		return p, true
	}
	e.plugins.mu.RLock()
	defer e.plugins.mu.RUnlock()
	p, ok := e.plugins.types[typ]
	return p, ok
}

// registry is the built-in providers and every plugin type seen so far.
func (e *Engine) registry() provider.Registry {
	e.plugins.mu.RLock()
	defer e.plugins.mu.RUnlock()
	if len(e.plugins.types) == 0 {
		return e.providers
	}
	reg := maps.Clone(e.providers)
	maps.Copy(reg, e.plugins.types)
	return reg
}

// providerConfigSchema is the schema of local provider name's blocks.
func (e *Engine) providerConfigSchema(name string) (provider.Schema, bool) {
	e.plugins.mu.RLock()
	defer e.plugins.mu.RUnlock()
	s, ok := e.plugins.configs[name]
	return s, ok
}

// typeOwner is the local name of the provider of a plugin resource type
// ("" for built-ins).
func (e *Engine) typeOwner(typ string) string {
	if _, builtin := e.providers[typ]; builtin {
		return "" // no lock on the hot path of the built-in types
	}
	e.plugins.mu.RLock()
	defer e.plugins.mu.RUnlock()
	return e.plugins.owner[typ]
}

// resolvePlugins resolves required providers and adds their types to the
// registry; reg is the registry to validate templates against from now on.
func (e *Engine) resolvePlugins(reqs []ProviderRequirement, rng hcl.Range, untrusted bool) (provider.Registry, hcl.Diagnostics) {
	if untrusted {
		reqs = slices.Clone(reqs)
		for i := range reqs {
			reqs[i].LockedOnly = true
		}
	}
	e.plugins.mu.RLock()
	r := e.plugins.resolver
	e.plugins.mu.RUnlock()
	if r == nil {
		return nil, hcl.Diagnostics{errorf(rng, "Terraform providers are not enabled",
			"This template requires providers (%s), but this stackd has no plugin directory or registry to take them from; give --plugin-dir or --plugin-cache-dir.", requirementNames(reqs))}
	}
	res, err := r.Resolve(context.Background(), reqs)
	if err != nil {
		return nil, hcl.Diagnostics{errorf(rng, "Cannot install the required providers", "%s.", strings.TrimSuffix(err.Error(), "."))}
	}
	e.plugins.mu.Lock()
	if e.plugins.types == nil {
		e.plugins.types, e.plugins.configs, e.plugins.owner, e.plugins.origin = provider.Registry{}, map[string]provider.Schema{}, map[string]string{}, map[string]string{}
	}
	for typ, p := range res.Resources {
		if _, builtin := e.providers[typ]; builtin {
			continue // a built-in type keeps its name
		}
		e.plugins.types[typ] = p
		e.plugins.owner[typ] = res.TypeProvider[typ]
		if o, ok := res.Origin[typ]; ok {
			e.plugins.origin[typ] = originString(o)
		}
	}
	maps.Copy(e.plugins.configs, res.Configs)
	if e.plugins.data == nil {
		e.plugins.data = map[string]provider.DataSource{}
	}
	for typ, ds := range res.DataSources {
		e.plugins.data[typ] = ds
		e.plugins.owner["data."+typ] = res.TypeProvider["data."+typ]
	}
	e.plugins.mu.Unlock()
	return e.registry(), nil
}

func requirementNames(reqs []ProviderRequirement) string {
	names := make([]string, len(reqs))
	for i, r := range reqs {
		names[i] = r.LocalName + " (" + r.Source + ")"
	}
	return strings.Join(names, ", ")
}

var terraformSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "required_providers"}}}

// requiredProviders reads the terraform blocks of a template.
func requiredProviders(blocks []*hcl.Block) ([]ProviderRequirement, hcl.Diagnostics) {
	var reqs []ProviderRequirement
	var diags hcl.Diagnostics
	seen := map[string]bool{}
	for _, b := range blocks {
		content, d := b.Body.Content(terraformSchema)
		diags = append(diags, d...)
		for _, rp := range content.Blocks {
			attrs, d := rp.Body.JustAttributes()
			diags = append(diags, d...)
			for _, name := range sortedKeys(attrs) {
				a := attrs[name]
				if seen[name] {
					diags = diags.Append(errorf(a.NameRange, "Duplicate required provider", "Provider %q is required twice.", name))
					continue
				}
				seen[name] = true
				v, d := a.Expr.Value(nil)
				diags = append(diags, d...)
				if d.HasErrors() {
					continue
				}
				req := ProviderRequirement{LocalName: name}
				if v.Type().IsObjectType() || v.Type().IsMapType() {
					for k, fv := range v.AsValueMap() {
						if fv.IsNull() || fv.Type() != cty.String {
							continue
						}
						switch k {
						case "source":
							req.Source = fv.AsString()
						case "version":
							req.Version = fv.AsString()
						}
					}
				}
				if req.Source == "" {
					diags = diags.Append(errorf(a.Expr.Range(), "Missing provider source",
						"required_providers entry %q needs a source, such as { source = \"hashicorp/%s\", version = \"~> 1.0\" }.", name, name))
					continue
				}
				reqs = append(reqs, req)
			}
		}
	}
	sort.Slice(reqs, func(a, b int) bool { return reqs[a].LocalName < reqs[b].LocalName })
	return reqs, diags
}

// addProvider records a provider block, its properties decoded against the
// provider's configuration schema.
func (t *Template) addProvider(e *Engine, b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	schema, ok := e.providerConfigSchema(name)
	if !ok {
		return hcl.Diagnostics{errorf(b.LabelRanges[0], "Provider not required",
			"provider %q is configured, but no required_providers entry declares it; add it to terraform { required_providers { %s = { source = \"…\" } } }.", name, name)}
	}
	bs, blocks := bodySchema(schema, "alias")
	content, diags := b.Body.Content(bs)
	pb := &ProviderBlock{Name: name, DeclRange: b.DefRange}
	if a := content.Attributes["alias"]; a != nil {
		diags = append(diags, stringAttr(a, &pb.Alias)...)
	}
	diags = append(diags, checkBlocks(content, blocks)...)
	pb.Properties = properties(schema, content, blocks)
	if t.Providers == nil {
		t.Providers = map[string]*ProviderBlock{}
	}
	if prev, ok := t.Providers[pb.Key()]; ok {
		return diags.Append(duplicate("provider", pb.Key(), prev.DeclRange, b.DefRange))
	}
	t.Providers[pb.Key()] = pb
	return diags
}

// bodySchema is the HCL schema of a body holding a provider schema's
// properties (nested block types as blocks) and the extra attributes; the
// block types are returned by name.
func bodySchema(schema provider.Schema, extra ...string) (*hcl.BodySchema, map[string]provider.Property) {
	bs := &hcl.BodySchema{}
	blocks := map[string]provider.Property{}
	for _, n := range extra {
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: n})
	}
	for _, n := range sortedKeys(schema.Properties) {
		p := schema.Properties[n]
		if p.Block != nil {
			bs.Blocks = append(bs.Blocks, hcl.BlockHeaderSchema{Type: n})
			blocks[n] = p
			continue
		}
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: n, Required: p.Required})
	}
	return bs, blocks
}

// checkBlocks validates the nested blocks of content statically (their
// arguments and blocks, at any depth) against their specs.
func checkBlocks(content *hcl.BodyContent, blocks map[string]provider.Property) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, b := range content.Blocks {
		p, ok := blocks[b.Type]
		if !ok {
			continue
		}
		diags = append(diags, checkBlockBody(b.Body, nestedSpec(p.Block))...)
	}
	return diags
}

// checkBlockBody validates one block body against the object spec of its
// type, recursing into its nested blocks.
func checkBlockBody(body hcl.Body, spec hcldec.Spec) hcl.Diagnostics {
	if spec == nil {
		return nil
	}
	content, diags := body.Content(hcldec.ImpliedSchema(spec))
	if obj, ok := spec.(hcldec.ObjectSpec); ok {
		for _, b := range content.Blocks {
			if inner, ok := obj[b.Type]; ok {
				diags = append(diags, checkBlockBody(b.Body, nestedSpec(inner))...)
			}
		}
	}
	return diags
}

// nestedSpec is the spec of one block of a block spec.
func nestedSpec(spec hcldec.Spec) hcldec.Spec {
	switch s := spec.(type) {
	case *hcldec.BlockSpec:
		return s.Nested
	case *hcldec.BlockListSpec:
		return s.Nested
	case *hcldec.BlockSetSpec:
		return s.Nested
	case *hcldec.BlockMapSpec:
		return s.Nested
	case *hcldec.BlockTupleSpec:
		return s.Nested
	case *hcldec.BlockObjectSpec:
		return s.Nested
	}
	return nil
}

// properties are the attributes of content that are properties of schema,
// and its nested blocks as one expression per block type (blocksExpr).
func properties(schema provider.Schema, content *hcl.BodyContent, blocks map[string]provider.Property) map[string]*hcl.Attribute {
	out := map[string]*hcl.Attribute{}
	for n, a := range content.Attributes {
		if _, ok := schema.Properties[n]; ok {
			out[n] = a
		}
	}
	byType := map[string][]*hcl.Block{}
	for _, b := range content.Blocks {
		if _, ok := blocks[b.Type]; ok {
			byType[b.Type] = append(byType[b.Type], b)
		}
	}
	for n, bl := range byType {
		out[n] = &hcl.Attribute{Name: n, Expr: &blocksExpr{spec: blocks[n].Block, blocks: bl}, Range: bl[0].DefRange, NameRange: bl[0].TypeRange}
	}
	return out
}

// blocksExpr is the nested blocks of one type in a resource or provider
// body as an expression: its value is the blocks decoded with the block
// type's spec, its variables those the blocks reference.
type blocksExpr struct {
	spec   hcldec.Spec
	blocks []*hcl.Block
}

func (x *blocksExpr) body() hcl.Body {
	// The blocks of one type, as a body holding only them.
	return &blockList{blocks: x.blocks}
}

func (x *blocksExpr) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	return hcldec.Decode(x.body(), x.spec, ctx)
}

func (x *blocksExpr) Variables() []hcl.Traversal { return hcldec.Variables(x.body(), x.spec) }

func (x *blocksExpr) Range() hcl.Range { return x.blocks[0].DefRange }

func (x *blocksExpr) StartRange() hcl.Range { return x.blocks[0].TypeRange }

// blockList is an hcl.Body of some blocks: what hcldec's block specs
// decode.
type blockList struct{ blocks []*hcl.Block }

func (b *blockList) Content(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	c, _, d := b.PartialContent(schema)
	return c, d
}

func (b *blockList) PartialContent(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Body, hcl.Diagnostics) {
	c := &hcl.BodyContent{Attributes: hcl.Attributes{}}
	for _, bl := range b.blocks {
		for _, s := range schema.Blocks {
			if s.Type == bl.Type {
				c.Blocks = append(c.Blocks, bl)
			}
		}
	}
	if len(b.blocks) > 0 {
		c.MissingItemRange = b.blocks[0].DefRange
	}
	return c, b, nil
}

func (b *blockList) JustAttributes() (hcl.Attributes, hcl.Diagnostics) { return hcl.Attributes{}, nil }

func (b *blockList) MissingItemRange() hcl.Range {
	if len(b.blocks) > 0 {
		return b.blocks[0].DefRange
	}
	return hcl.Range{}
}

// providerRef reads a resource's provider meta-argument: NAME or
// NAME.ALIAS.
func providerRef(a *hcl.Attribute) (string, hcl.Diagnostics) {
	tr, diags := hcl.AbsTraversalForExpr(a.Expr)
	if diags.HasErrors() || len(tr) < 1 || len(tr) > 2 {
		return "", hcl.Diagnostics{errorf(a.Expr.Range(), "Invalid provider reference", "provider takes a provider name or NAME.ALIAS, without quotes (provider = aws.west).")}
	}
	key := tr.RootName()
	if len(tr) == 2 {
		step, ok := tr[1].(hcl.TraverseAttr)
		if !ok {
			return "", hcl.Diagnostics{errorf(a.Expr.Range(), "Invalid provider reference", "provider takes NAME or NAME.ALIAS.")}
		}
		key += "." + step.Name
	}
	return key, nil
}

// providerConfig evaluates the provider block a plugin resource uses for
// this instance (cached per walk). A resource without a provider block
// gets its provider's empty configuration.
func (w *walker) providerConfig(r *Resource) (cty.Value, hcl.Diagnostics) {
	return w.providerConfigFor(r.Type, r.Provider)
}

// providerConfigFor is providerConfig of a type ("data.TYPE" for a data
// source) and a provider meta-argument.
func (w *walker) providerConfigFor(typ, ref string) (cty.Value, hcl.Diagnostics) {
	owner := w.e.typeOwner(typ)
	if owner == "" {
		return cty.NilVal, nil // a built-in type
	}
	key := ref
	if key == "" {
		key = owner
	}
	if v, ok := w.root().providerCfgs[key]; ok {
		return v, nil
	}
	name, _, _ := strings.Cut(key, ".")
	schema, _ := w.e.providerConfigSchema(name)
	pb := w.root().tmpl.Providers[key]
	if pb == nil && strings.Contains(key, ".") {
		return cty.NilVal, hcl.Diagnostics{errorf(w.nodeRange(typ), "Provider configuration not present",
			"provider = %s names a provider block with alias %q, which the template does not have; add provider %q { alias = %q … }.", key, strings.TrimPrefix(key, name+"."), name, strings.TrimPrefix(key, name+"."))}
	}
	props := map[string]*hcl.Attribute{}
	if pb != nil {
		props = pb.Properties
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: w.meter.functions()}
	maps.Copy(ctx.Variables, w.root().base)
	ctx.Variables["local"] = cty.ObjectVal(w.root().locals)
	v, diags := evalProperties(schema, props, ctx, "provider "+key)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	if w.root().providerCfgs == nil {
		w.root().providerCfgs = map[string]cty.Value{}
	}
	w.root().providerCfgs[key] = v
	return v, nil
}

// evalProperties evaluates the properties of schema set in props (null
// where unset), converted to their types, sensitive ones marked.
func evalProperties(schema provider.Schema, props map[string]*hcl.Attribute, ctx *hcl.EvalContext, what string) (cty.Value, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	vals := make(map[string]cty.Value, len(schema.Properties))
	for _, name := range sortedKeys(schema.Properties) {
		ps := schema.Properties[name]
		a := props[name]
		if a == nil {
			vals[name] = cty.NullVal(ps.Type)
			if ps.Block != nil {
				// No block of this type: what the spec decodes from none
				// (an empty list, or null).
				vals[name], _ = hcldec.Decode(&blockList{}, ps.Block, ctx)
			}
			continue
		}
		v, d := a.Expr.Value(ctx)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		conv, err := convert.Convert(v, ps.Type)
		if err != nil {
			diags = diags.Append(errorf(a.Expr.Range(), "Invalid value for property", "%s: property %q must be %s: %s.", what, name, typeName(ps.Type), err))
			continue
		}
		if ps.Required && conv.IsNull() {
			diags = diags.Append(errorf(a.Expr.Range(), "Missing value for property", "%s: property %q is required and must not be null.", what, name))
			continue
		}
		if ps.Sensitive {
			conv = conv.Mark(markSensitive)
		}
		vals[name] = conv
	}
	return cty.ObjectVal(vals), diags
}

// encodeProviderConfig is what a resource records of its provider's
// configuration, so that it can be deleted when its template is gone.
func encodeProviderConfig(v cty.Value) (json.RawMessage, error) {
	if v == cty.NilVal {
		return nil, nil
	}
	clean, _ := v.UnmarkDeep()
	if !clean.IsWhollyKnown() {
		return nil, fmt.Errorf("the provider configuration is not known until apply; configure providers from variables and the target only")
	}
	return EncodeValue(clean)
}

// origin is the recorded provider of a plugin resource type.
func (e *Engine) origin(typ string) string {
	if _, builtin := e.providers[typ]; builtin {
		return ""
	}
	e.plugins.mu.RLock()
	defer e.plugins.mu.RUnlock()
	return e.plugins.origin[typ]
}

// recordedProvider is the provider of a recorded resource: its type's, or,
// for a plugin type no template loaded since the start, the provider it
// recorded, resolved again.
func (e *Engine) recordedProvider(rr *ResourceState) (provider.Provider, error) {
	if p, ok := e.lookup(rr.Type); ok {
		return p, nil
	}
	if req, ok := parseOrigin(rr.Provider); ok {
		if _, diags := e.resolvePlugins([]ProviderRequirement{req}, hcl.Range{}, false); diags.HasErrors() {
			return nil, fmt.Errorf("resolve provider %s of %s: %s", req.Source, rr.Address, diags.Error())
		}
		if p, ok := e.lookup(rr.Type); ok {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no provider for resource type %q", rr.Type)
}

// pluginRequest adds what a Terraform provider needs of the recorded
// resource to req: the whole prior state, private bytes, schema version
// and provider configuration.
func pluginRequest(req provider.Request, rr *ResourceState, cfg cty.Value) provider.Request {
	if a := decodeObject(rr.Attributes); a.Type().IsObjectType() && a.LengthInt() > 0 {
		req.Attributes = a.AsValueMap()
	}
	req.Private, req.SchemaVersion = rr.Private, rr.SchemaVersion
	req.ProviderConfig = cfg
	if cfg == cty.NilVal && len(rr.ProviderConfig) > 0 {
		if v, err := DecodeValue(rr.ProviderConfig); err == nil {
			req.ProviderConfig = v
		}
	}
	return req
}

// dataSource is the data source of a type.
func (e *Engine) dataSource(typ string) (provider.DataSource, bool) {
	e.plugins.mu.RLock()
	defer e.plugins.mu.RUnlock()
	ds, ok := e.plugins.data[typ]
	return ds, ok
}

// addData records a data block: a data source of a required provider,
// read at plan and apply time; its attributes are data.TYPE.NAME.ATTR.
func (t *Template) addData(e *Engine, b *hcl.Block) hcl.Diagnostics {
	typ, name := b.Labels[0], b.Labels[1]
	addr := "data." + typ + "." + name
	if prev, ok := t.Data[addr]; ok {
		return hcl.Diagnostics{duplicate("data", addr, prev.DeclRange, b.DefRange)}
	}
	var ds provider.DataSource
	ok := false
	if e != nil {
		ds, ok = e.dataSource(typ)
	}
	if !ok {
		return hcl.Diagnostics{errorf(b.LabelRanges[0], "Unknown data source", "There is no data source %q in the providers this template requires.", typ)}
	}
	schema := ds.Schema()
	bs, blocks := bodySchema(schema, "provider", "depends_on")
	content, diags := b.Body.Content(bs)
	r := &Resource{Type: typ, Name: name, DeclRange: b.DefRange, refs: map[string][]string{}}
	diags = append(diags, checkBlocks(content, blocks)...)
	r.Properties = properties(schema, content, blocks)
	if a := content.Attributes["provider"]; a != nil {
		key, pdiags := providerRef(a)
		diags = append(diags, pdiags...)
		r.Provider = key
	}
	if a := content.Attributes["depends_on"]; a != nil {
		deps, ddiags := dependsOn(a.Expr, e.registry())
		diags = append(diags, ddiags...)
		r.DependsOn = deps
	}
	if t.Data == nil {
		t.Data = map[string]*Resource{}
	}
	t.Data[addr] = r
	return diags
}

// readData evaluates a data block for this instance and reads it: its
// value is the data source's attributes, unknown while its configuration
// is (a plan before what it refers to exists).
func (w *walker) readData(node string) hcl.Diagnostics {
	r := w.tmpl.Data[node]
	ds, _ := w.e.dataSource(r.Type)
	schema := ds.Schema()
	cfg, diags := w.providerConfigFor("data."+r.Type, r.Provider)
	if diags.HasErrors() {
		return diags
	}
	props, d := evalProperties(schema, r.Properties, w.ctx(node), node)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return diags
	}
	if w.inst.Untrusted {
		// A ref anyone can push reads nothing through providers: a data
		// source could read the daemon's files or a cloud's secrets
		// into its change set.
		w.resources[node] = cty.DynamicVal
		return diags
	}
	if !props.IsWhollyKnown() || cfg != cty.NilVal && !cfg.IsWhollyKnown() || w.mode != modeApply && w.dependsOnChange(node) {
		// Read during the apply, once what it reads exists: as Terraform
		// defers a data source that depends on a resource with changes.
		w.resources[node] = cty.DynamicVal
		return diags
	}
	clean, marks := props.UnmarkDeep()
	attrs, err := ds.ReadData(w.meter.ctx, provider.Request{Target: w.inst.providerTarget(), LogicalID: w.prefix + node, Properties: clean, ProviderConfig: unmarked(cfg)})
	if err != nil {
		return diags.Append(errorf(r.DeclRange, "Cannot read data source", "%s: %s.", w.prefix+node, strings.TrimSuffix(err.Error(), ".")))
	}
	v := cty.ObjectVal(attrs)
	if len(marks) > 0 {
		v = v.WithMarks(marks)
	}
	w.resources[node] = v
	return diags
}

// dependsOnChange reports whether node refers to (or depends on) a
// resource this plan changes.
func (w *walker) dependsOnChange(node string) bool {
	for _, ref := range w.tmpl.refs[node] {
		if ref.root != "local" && ref.root != "module" && w.changing[ref.root+"."+ref.name] {
			return true
		}
	}
	if r := w.tmpl.Data[node]; r != nil {
		for _, d := range r.DependsOn {
			if w.changing[d] {
				return true
			}
		}
	}
	return false
}

// Import is an import block: the existing object of ID becomes the
// resource at To when it has none recorded (Terraform's import blocks).
type Import struct {
	To        string
	ID        hcl.Expression
	DeclRange hcl.Range
}

var importSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "to", Required: true}, {Name: "id", Required: true}}}

// addImport records an import block; what it imports to is checked once
// the template's resources are known (checkImports).
func (t *Template) addImport(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(importSchema)
	if diags.HasErrors() {
		return diags
	}
	tr, d := hcl.AbsTraversalForExpr(content.Attributes["to"].Expr)
	if d.HasErrors() || len(tr) < 2 {
		return diags.Append(errorf(content.Attributes["to"].Expr.Range(), "Invalid import address", "to takes a resource address without quotes: to = aws_s3_bucket.logs (or aws_s3_bucket.logs[0])."))
	}
	to := tr.RootName()
	for _, step := range tr[1:] {
		switch s := step.(type) {
		case hcl.TraverseAttr:
			to += "." + s.Name
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String {
				to += fmt.Sprintf("[%q]", s.Key.AsString())
			} else {
				to += "[" + s.Key.AsBigFloat().String() + "]"
			}
		}
	}
	if t.Imports == nil {
		t.Imports = map[string]*Import{}
	}
	if prev, ok := t.Imports[to]; ok {
		return diags.Append(duplicate("import", to, prev.DeclRange, b.DefRange))
	}
	t.Imports[to] = &Import{To: to, ID: content.Attributes["id"].Expr, DeclRange: b.DefRange}
	return diags
}

// checkImports reports import blocks whose resource is not declared or
// cannot import.
func (t *Template) checkImports(e *Engine) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, to := range sortedKeys(t.Imports) {
		im := t.Imports[to]
		base := to
		if i := strings.IndexByte(base, '['); i > 0 {
			base = base[:i]
		}
		r, ok := t.Resources[base]
		if !ok {
			diags = diags.Append(errorf(im.DeclRange, "Import of an undeclared resource", "import to = %s: the template declares no resource %s.", to, base))
			continue
		}
		var p provider.Provider
		if e != nil {
			p, _ = e.lookup(r.Type)
		}
		if im, ok := p.(provider.Importer); !ok || !im.CanImport() {
			diags = diags.Append(errorf(t.Imports[to].DeclRange, "Resource type cannot import", "%s resources cannot adopt existing objects; only Terraform providers' resource types can.", r.Type))
		}
		for _, tr := range im.ID.Variables() {
			if root := tr.RootName(); root != "var" && root != "target" && root != "stack_set" && root != "local" {
				diags = diags.Append(errorf(tr.SourceRange(), "Invalid import id", "An import id may use var, local, target and stack_set only: it must be known when the instance is planned."))
			}
		}
	}
	return diags
}

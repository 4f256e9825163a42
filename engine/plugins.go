package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/tfbuiltin"
)

// Terraform and OpenTofu providers (docs/design.md §7b). A template declares the
// providers it uses in terraform { required_providers { … } }, configures
// them per target with provider blocks, and uses their resource types like
// the built-in ones. The engine knows no plugin protocol: a provider.PluginResolver
// (engine/provider/tfplugin's) installs the providers and hands back their
// resource types as providers, which join the engine's registry.

// StopProviderCalls tells the plugin providers to stop their calls in
// flight and waits for them to say so or ctx: on shutdown, when the calls
// may no longer finish. A provider process is shared by every instance
// configured alike, so it is never for one instance or operation.
func (e *Engine) StopProviderCalls(ctx context.Context) {
	e.plugins.mu.RLock()
	r := e.plugins.resolver
	e.plugins.mu.RUnlock()
	if s, ok := r.(provider.CallStopper); ok {
		s.StopCalls(ctx)
	}
}

// originString is how a resource records its provider.
func originString(r provider.ProviderRequirement) string {
	return r.LocalName + "|" + r.Source + "|" + r.Version
}

// parseOrigin reads originString.
func parseOrigin(s string) (provider.ProviderRequirement, bool) {
	parts := strings.Split(s, "|")
	if len(parts) != 3 {
		return provider.ProviderRequirement{}, false
	}
	return provider.ProviderRequirement{LocalName: parts[0], Source: parts[1], Version: "= " + parts[2]}, true
}

// plugins is the registry of plugin resource types the engine has seen,
// added to as templates require providers.
type plugins struct {
	mu       sync.RWMutex
	resolver provider.PluginResolver
	types    provider.Registry
	configs  map[string]provider.Schema
	owner    map[string]string // resource type → provider local name
	origin   map[string]string // resource type → originString
	data     map[string]provider.DataSource
}

// SetPluginResolver lets templates require Terraform/OpenTofu providers.
// Call it before the engine is used.
func (e *Engine) SetPluginResolver(r provider.PluginResolver) {
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
	if p, ok := builtinTypes[typ]; ok {
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
	reg := maps.Clone(builtinTypes)
	maps.Copy(reg, e.providers)
	maps.Copy(reg, e.plugins.types)
	return reg
}

// builtinTypes and builtinData are Terraform's built-in provider
// (terraform_data, terraform_remote_state): every engine has them, by
// their type names alone, whatever registry it was given and whether or
// not a template lists terraform.io/builtin/terraform in
// required_providers.
var (
	builtinTypes = tfbuiltin.Resources()
	builtinData  = tfbuiltin.DataSources()
)

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
func (e *Engine) resolvePlugins(reqs []provider.ProviderRequirement, rng hcl.Range, untrusted bool) (provider.Registry, hcl.Diagnostics) {
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
		return nil, hcl.Diagnostics{config.Errorf(rng, "Terraform providers are not enabled",
			"This template requires providers (%s), but this stackd has no plugin directory or registry to take them from; give --plugin-dir or --plugin-cache-dir.", config.RequirementNames(reqs))}
	}
	res, err := r.Resolve(context.Background(), reqs)
	if err != nil {
		return nil, hcl.Diagnostics{config.Errorf(rng, "Cannot install the required providers", "%s.", strings.TrimSuffix(err.Error(), "."))}
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
		if _, diags := e.resolvePlugins([]provider.ProviderRequirement{req}, hcl.Range{}, false); diags.HasErrors() {
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
	req.Private, req.SchemaVersion, req.Identity = rr.Private, rr.SchemaVersion, rr.Identity
	req.ProviderConfig = cfg
	if cfg == cty.NilVal && len(rr.ProviderConfig) > 0 {
		if v, err := config.DecodeValue(rr.ProviderConfig); err == nil {
			req.ProviderConfig = v
		}
	}
	return req
}

// dataSource is the data source of a type.
func (e *Engine) dataSource(typ string) (provider.DataSource, bool) {
	if ds, ok := builtinData[typ]; ok {
		return ds, true
	}
	e.plugins.mu.RLock()
	defer e.plugins.mu.RUnlock()
	ds, ok := e.plugins.data[typ]
	return ds, ok
}

// loadPlugins is e as loading sees it (nil for a nil engine: no plugins).
func (e *Engine) loadPlugins() config.Plugins {
	if e == nil {
		return nil
	}
	return enginePlugins{e}
}

// enginePlugins gives loading the engine's plugin resolution.
type enginePlugins struct{ e *Engine }

var _ config.Plugins = enginePlugins{}

func (p enginePlugins) ResolvePlugins(reqs []provider.ProviderRequirement, rng hcl.Range, untrusted bool) (provider.Registry, hcl.Diagnostics) {
	return p.e.resolvePlugins(reqs, rng, untrusted)
}
func (p enginePlugins) TypeOwner(typ string) string { return p.e.typeOwner(typ) }
func (p enginePlugins) ProviderConfigSchema(name string) (provider.Schema, bool) {
	return p.e.providerConfigSchema(name)
}
func (p enginePlugins) DataSource(typ string) (provider.DataSource, bool) { return p.e.dataSource(typ) }
func (p enginePlugins) Registry() provider.Registry                       { return p.e.registry() }
func (p enginePlugins) Lookup(typ string) (provider.Provider, bool)       { return p.e.lookup(typ) }

var _ config.FunctionPlugins = enginePlugins{}

// ProviderFunctions gives loading the provider-defined functions of a
// required provider (config.FunctionPlugins), through the plugin
// resolver.
func (p enginePlugins) ProviderFunctions(req provider.ProviderRequirement, untrusted bool) (map[string]function.Function, error) {
	p.e.plugins.mu.RLock()
	r := p.e.plugins.resolver
	p.e.plugins.mu.RUnlock()
	fr, ok := r.(provider.FunctionResolver)
	if !ok {
		return nil, errors.New("this stackd's provider plugins serve no functions")
	}
	req.LockedOnly = req.LockedOnly || untrusted
	return fr.Functions(context.Background(), req)
}

// ModuleFetcher is the fetcher of remote module sources loading uses.
func (p enginePlugins) ModuleFetcher() config.ModuleFetcher { return p.e.modules }

// SetModuleFetcher lets templates call modules by Git and registry
// sources, fetched through f. Call it before the engine is used.
func (e *Engine) SetModuleFetcher(f config.ModuleFetcher) { e.modules = f }

package tfplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/tfplugin/install"
)

// The bridge between the engine and provider plugins: a Resolver installs
// the providers templates require (install), reads each one's schema once,
// and hands the engine one provider.Provider per resource type. Calls go
// to a process of the Pool keyed by (executable, configuration): every
// instance whose provider block evaluates alike shares one process.

var _ provider.PluginResolver = (*Resolver)(nil)

// Resolver is the engine's provider.PluginResolver for Terraform/OpenTofu providers.
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
	// GOGC: see Options.GOGC.
	GOGC int

	mu      sync.Mutex
	lock    *install.LockFile
	schemas map[string]*ProviderSchema // by executable
	offline *install.Installer         // Installer without the registry
	// installed are the packages installed, and providers the providers
	// made of them, by requirement.
	installed map[string]install.Package
	providers map[string]*pluginProvider

	// closed: Close was called.
	closed atomic.Bool
}

// validator is a lease on the executable's unconfigured process, which
// validates configurations: ValidateResourceConfig and
// ValidateProviderConfig need no configured provider, so a plan does not
// start a configured process per target just to validate. The Pool starts
// it again when it exited, retires it as any other (MaxUses) and ends it
// when idle.
func (r *Resolver) validator(ctx context.Context, pp *pluginProvider) (*Lease, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	l, err := r.Pool.Acquire(ctx, Options{Path: pp.pkg.Executable, Name: pp.name, Logger: &r.Log, MTLS: r.MTLS, GOGC: r.GOGC}, cty.NilVal)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", pp.name, err)
	}
	return l, nil
}

// StopCalls sends StopProvider to every provider process with calls in
// flight (provider.CallStopper): on shutdown, once they may no longer
// finish.
func (r *Resolver) StopCalls(ctx context.Context) { r.Pool.StopCalls(ctx) }

var _ provider.CallStopper = (*Resolver)(nil)

// Close makes the Resolver refuse to validate; the processes are the
// Pool's to end.
func (r *Resolver) Close() error {
	r.closed.Store(true)
	return nil
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
func (r *Resolver) Resolve(ctx context.Context, reqs []provider.ProviderRequirement) (*provider.ResolvedProviders, error) {
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
	out := &provider.ResolvedProviders{
		Resources: provider.Registry{}, Configs: map[string]provider.Schema{}, DataSources: map[string]provider.DataSource{},
		TypeProvider: map[string]string{}, Origin: map[string]provider.ProviderRequirement{},
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
		key := resolveKey(req, addr) // functions_bridge.go
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
		pp, ok := r.providers[key]
		if !ok {
			ps, err := r.schema(ctx, req.LocalName, pkg)
			if err != nil {
				return nil, err
			}
			pp = newPluginProvider(r, req.LocalName, pkg, ps)
			if r.providers == nil {
				r.providers = map[string]*pluginProvider{}
			}
			r.providers[key] = pp
		}
		out.Configs[req.LocalName] = pp.config
		origin := provider.ProviderRequirement{LocalName: req.LocalName, Source: addr.String(), Version: pkg.Version.String()}
		for typ, rt := range pp.resources {
			out.Resources[typ] = rt
			out.TypeProvider[typ] = req.LocalName
			out.Origin[typ] = origin
		}
		for typ, ds := range pp.dataSources {
			out.DataSources[typ] = ds
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
	c, err := Start(ctx, Options{Path: pkg.Executable, Name: name, Logger: &r.Log, MTLS: r.MTLS, GOGC: r.GOGC})
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
	// config, resources and dataSources are what the engine gets of it,
	// converted from schema once (a big provider has over a thousand
	// types, and every load of a template asks).
	config      provider.Schema
	resources   map[string]*resourceType
	dataSources map[string]*dataSource
	// validConfigs are the hashes of configurations the provider's
	// validators accepted.
	validConfigs sync.Map
	// validResources are the resource and data configurations they
	// accepted (validated).
	validResources validCache
	// funcs are its provider-defined functions (functions_bridge.go).
	funcs funcTable
	// planned are its plans of creates, kept for their apply
	// (plancache.go).
	planned planCache
	// recent are the provider configurations it was last asked for.
	recent recentConfigs
}

func newPluginProvider(r *Resolver, name string, pkg install.Package, ps *ProviderSchema) *pluginProvider {
	pp := &pluginProvider{r: r, name: name, pkg: pkg, schema: ps, config: blockSchema(ps.Provider.Block, false),
		resources: make(map[string]*resourceType, len(ps.ResourceTypes)), dataSources: make(map[string]*dataSource, len(ps.DataSources))}
	for typ, s := range ps.ResourceTypes {
		pp.resources[typ] = &resourceType{p: pp, typ: typ, schema: s, pschema: blockSchema(s.Block, true)}
	}
	for typ, s := range ps.DataSources {
		pp.dataSources[typ] = &dataSource{p: pp, typ: typ, schema: s, pschema: blockSchema(s.Block, true)}
	}
	return pp
}

// client is a lease on a process of the provider configured with cfg (the
// provider block as the engine evaluated it).
func (pp *pluginProvider) client(ctx context.Context, cfg cty.Value) (*Lease, error) {
	pc, err := pp.configured(cfg)
	if err != nil {
		return nil, err
	}
	return pp.r.Pool.acquire(ctx, Options{Path: pp.pkg.Executable, Name: pp.name, Logger: &pp.r.Log, MTLS: pp.r.MTLS, GOGC: pp.r.GOGC, Redactor: pc.redactor}, pc.full, pc.hash)
}

// providerConfig is a provider block as its process is configured and
// pooled: the whole configuration object, its ConfigHash, and the
// redactor of its sensitive values (credentials, tokens) for the
// provider's log lines.
type providerConfig struct {
	cfg, full cty.Value
	hash      string
	redactor  provider.Redactor
}

// maxRecentConfigs is how many provider configurations a pluginProvider
// remembers (recentConfigs): every resource call asks for a process, and
// most ask with one of a few configurations.
const maxRecentConfigs = 8

// recentConfigs are the provider configurations a pluginProvider was
// asked for last, most recent first.
type recentConfigs struct {
	mu   sync.Mutex
	list []*providerConfig
}

// configured is cfg as the provider's process is configured with it
// (providerConfig), remembered for the next calls with an equal cfg:
// hashing a configuration (JSON and SHA-256) and finding its sensitive
// values cost more than the rest of a kept plan's lookup.
func (pp *pluginProvider) configured(cfg cty.Value) (*providerConfig, error) {
	rc := &pp.recent
	rc.mu.Lock()
	for i, pc := range rc.list {
		if pc.cfg.RawEquals(cfg) {
			copy(rc.list[1:i+1], rc.list[:i])
			rc.list[0] = pc
			rc.mu.Unlock()
			return pc, nil
		}
	}
	rc.mu.Unlock()
	ty := pp.schema.Provider.Block.ImpliedType()
	full, err := fullObject(pp.schema.Provider.Block, cfg, ty)
	if err != nil {
		return nil, fmt.Errorf("provider %s configuration: %w", pp.name, err)
	}
	hash, err := ConfigHash(full)
	if err != nil {
		return nil, err
	}
	var secrets []cty.Value
	for _, p := range pp.schema.Provider.Block.SensitivePaths(full) {
		if v, err := p.Apply(full); err == nil {
			secrets = append(secrets, v)
		}
	}
	pc := &providerConfig{cfg: cfg, full: full, hash: hash, redactor: provider.NewSecrets(secrets...)}
	rc.mu.Lock()
	rc.list = append([]*providerConfig{pc}, rc.list[:min(len(rc.list), maxRecentConfigs-1)]...)
	rc.mu.Unlock()
	return pc, nil
}

package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/engine/provider/tfplugin/install"
	"github.com/stackd/stackd/internal/version"
)

// pluginFlags configure Terraform/OpenTofu providers (docs/design.md §7b).
type pluginFlags struct {
	dirs              []string
	cacheDir          string
	lockFile          string
	registryCA        string
	signingKeys       []string
	trustRegistryKeys bool
	noRegistry        bool
	maxProcesses      int
	mtls              bool
	gogc              int
	recycleAfter      int
}

func (p *pluginFlags) add(f *pflag.FlagSet) {
	f.StringArrayVar(&p.dirs, "plugin-dir", nil, "directory of Terraform/OpenTofu providers in the filesystem-mirror layout HOST/NAMESPACE/TYPE/VERSION/OS_ARCH/ (as `terraform providers mirror` writes it); repeatable, searched in order")
	f.StringVar(&p.cacheDir, "plugin-cache-dir", "", "where providers downloaded from a registry are unpacked and kept (default: <parent of --state-dir>/plugins)")
	f.StringVar(&p.lockFile, "plugin-lock-file", "", "the .terraform.lock.hcl-compatible file provider versions and hashes are locked in (default: <parent of --state-dir>/.terraform.lock.hcl); a provider whose hash is not locked there is refused")
	f.StringVar(&p.registryCA, "plugin-registry-ca-file", "", "PEM CA certificates trusted (besides the system's) for provider registries")
	f.StringArrayVar(&p.signingKeys, "plugin-signing-key-file", nil, "ASCII-armored OpenPGP public key whose signature of a registry's SHA256SUMS is required; repeatable")
	f.BoolVar(&p.trustRegistryKeys, "plugin-trust-registry-keys", false, "require SHA256SUMS to be signed by a key the registry names (as Terraform does for community providers)")
	f.BoolVar(&p.noRegistry, "plugin-no-registry", false, "install providers from --plugin-dir and the cache only, never from a registry")
	f.BoolVar(&p.mtls, "plugin-mtls", false, "mutual TLS on the connection to each provider process, as Terraform does (off: the Unix socket is in a private 0700 directory; TLS costs about a third of each call's CPU)")
	f.IntVar(&p.gogc, "plugin-gogc", 0, "GOGC of each provider process unless the environment sets GOGC")
	f.IntVar(&p.recycleAfter, "plugin-recycle-after", tfplugin.DefaultMaxUses, "replace a provider process after it served this many resource operations (each a few calls); 0: never. Providers built on terraform-plugin-framework keep ~35 KB of every call until they stop")
	f.IntVar(&p.maxProcesses, "plugin-max-processes", tfplugin.DefaultMaxProcesses, "provider processes running at once (one per provider version and evaluated provider configuration); at the cap, an idle one is stopped to make room once idle as long as it took to start")
}

// resolver wires the engine to provider plugins; the pool is closed with
// the app.
func (p *pluginFlags) resolver(stateDir string, log zerolog.Logger) (*tfplugin.Resolver, *tfplugin.Pool, error) {
	parent := filepath.Dir(filepath.Clean(stateDir))
	cache := p.cacheDir
	if cache == "" {
		cache = filepath.Join(parent, "plugins")
	}
	lock := p.lockFile
	if lock == "" {
		lock = filepath.Join(parent, ".terraform.lock.hcl")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if p.registryCA != "" {
		pool, err := readCertPool("--plugin-registry-ca-file", p.registryCA)
		if err != nil {
			return nil, nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var keys []string
	for _, f := range p.signingKeys {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("--plugin-signing-key-file: %w", err)
		}
		keys = append(keys, string(b))
	}
	if p.recycleAfter < 0 || p.gogc < 0 {
		return nil, nil, fmt.Errorf("--plugin-recycle-after (%d) and --plugin-gogc (%d) must not be negative; 0 means never replace / Go's default", p.recycleAfter, p.gogc)
	}
	pool, err := tfplugin.NewPool(tfplugin.PoolOptions{MaxProcesses: p.maxProcesses, MaxUses: p.recycleAfter})
	if err != nil {
		return nil, nil, err
	}
	plog := log.With().Str("component", "provider").Logger()
	return &tfplugin.Resolver{
		Installer: &install.Installer{
			PluginDirs: p.dirs, CacheDir: cache, HTTP: &http.Client{Transport: tr},
			UserAgent: version.UserAgent("stackd"), DisableRegistry: p.noRegistry,
			TrustedKeys: keys, TrustRegistryKeys: p.trustRegistryKeys, Log: plog,
		},
		LockFile: lock, Pool: pool, Log: plog, MTLS: p.mtls, GOGC: p.gogc,
	}, pool, nil
}

var _ provider.PluginResolver = (*tfplugin.Resolver)(nil)

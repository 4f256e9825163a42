package main

// Remote module sources (docs/design.md §2): the fetcher the engine loads them
// through (Git via gitsource, the registry protocol and archives via
// internal/modregistry), its flags, and `stackd modules lock`, which pins
// them in the definitions' .stackd-modules.lock.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/internal/modregistry"
	"github.com/stackd/stackd/internal/secrets"
	"github.com/stackd/stackd/internal/version"
)

// moduleFlags configure the fetching of remote module sources.
type moduleFlags struct {
	cacheDir      string
	registryHosts []string
	registryCA    string
	timeout       time.Duration
}

func (m *moduleFlags) add(f *pflag.FlagSet) {
	f.StringVar(&m.cacheDir, "module-cache-dir", "", "where remote module sources (Git, registry, archives) are cached, shared by every stack set (default: <parent of --state-dir>/modules)")
	f.StringArrayVar(&m.registryHosts, "module-registry-host", nil, "HOST=URL: look for the module registry HOST at URL (its /.well-known/terraform.json) instead of https://HOST, e.g. a mirror; plain http only on loopback; repeatable")
	f.StringVar(&m.registryCA, "module-registry-ca-file", "", "PEM CA certificates trusted (besides the system's) for module registries and archives")
	f.DurationVar(&m.timeout, "module-fetch-timeout", time.Minute, "bound on each request or fetch of a remote module source")
}

// fetcher is the module fetcher the flags describe. Git credentials (auth)
// go only to the definitions repository's host (repo, when a URL).
func (m *moduleFlags) fetcher(stateDir, repo string, auth gitsource.Auth) (*moduleFetcher, error) {
	cache := m.cacheDir
	if cache == "" {
		cache = filepath.Join(filepath.Dir(filepath.Clean(stateDir)), "modules")
	}
	authHost := ""
	if u, err := url.Parse(repo); err == nil && strings.Contains(repo, "://") {
		authHost = u.Host
	}
	gm, err := gitsource.NewModules(gitsource.ModulesOptions{CacheDir: filepath.Join(cache, "git"), FetchTimeout: m.timeout, Auth: auth, AuthHost: authHost})
	if err != nil {
		return nil, fmt.Errorf("--module-cache-dir: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if m.registryCA != "" {
		pool, err := readCertPool("--module-registry-ca-file", m.registryCA)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hosts := map[string]*url.URL{}
	for _, h := range m.registryHosts {
		name, raw, ok := strings.Cut(h, "=")
		u, err := url.Parse(raw)
		if !ok || name == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("--module-registry-host %q: give HOST=URL, like registry.terraform.io=https://mirror.example.com", h)
		}
		hosts[strings.ToLower(name)] = u
	}
	reg := &modregistry.Client{HTTP: &http.Client{Transport: tr, Timeout: m.timeout}, Hosts: hosts, UserAgent: version.UserAgent("stackd"),
		CacheDir: filepath.Join(cache, "registry"), Timeout: m.timeout}
	return &moduleFetcher{git: gm, reg: reg}, nil
}

// moduleFetcher fetches module packages for the engine.
type moduleFetcher struct {
	git *gitsource.Modules
	reg *modregistry.Client
}

var _ config.ModuleFetcher = (*moduleFetcher)(nil)

func (f *moduleFetcher) FetchModule(ctx context.Context, req config.ModuleRequest) (fs.FS, config.ModulePin, error) {
	src, pin := req.Source, req.Pin
	if src.Kind != config.ModuleRegistry {
		src.Subdir = "" // the loader applies a source's own subdirectory
		return f.fetchPackage(ctx, src, pin, req.Untrusted)
	}
	if pin.IsZero() {
		if req.Untrusted {
			return nil, pin, errors.New("not pinned")
		}
		p := modregistry.Package{Host: src.Registry.Host.String(), Namespace: src.Registry.Namespace, Name: src.Registry.Name, System: src.Registry.TargetSystem}
		ver, loc, err := f.reg.Resolve(ctx, p, req.Constraints)
		if err != nil {
			return nil, pin, err
		}
		pin.Version, pin.Location = ver, loc
	}
	at, err := config.ParseModuleSource(pin.Location)
	if err != nil || at.Kind == config.ModuleRegistry || at.Kind == config.ModuleLocal {
		return nil, pin, fmt.Errorf("the registry puts version %s at %q, which is not a Git or archive address stackd fetches (%v)", pin.Version, pin.Location, err)
	}
	files, got, err := f.fetchPackage(ctx, at, pin, req.Untrusted)
	if err != nil {
		return nil, got, err
	}
	got.Version, got.Location = pin.Version, pin.Location
	return files, got, nil
}

// fetchPackage fetches a Git or archive package at pin (zero: resolve),
// at its subdirectory (a registry location's).
func (f *moduleFetcher) fetchPackage(ctx context.Context, src config.ModuleSource, pin config.ModulePin, untrusted bool) (fs.FS, config.ModulePin, error) {
	var files fs.FS
	var got config.ModulePin
	switch src.Kind {
	case config.ModuleGit:
		tree, commit, err := f.git.Fetch(ctx, src.URL, src.Ref, pin.Commit, untrusted)
		if err != nil {
			return nil, got, err
		}
		files, got.Commit = tree, commit
	case config.ModuleArchive:
		tree, sum, err := f.reg.Archive(ctx, src.URL, src.ArchiveType, pin.SHA256, untrusted)
		if err != nil {
			return nil, got, err
		}
		files, got.SHA256 = tree, sum
	default:
		return nil, got, fmt.Errorf("%s sources are not fetched", src.Kind)
	}
	if src.Subdir != "" && src.Subdir != "." {
		// A registry location's own subdirectory ("//*" included); a
		// module source's is applied by the loader.
		sub, err := modregistry.Sub(files, src.Subdir)
		if err != nil {
			return nil, got, err
		}
		files = sub
	}
	return files, got, nil
}

// moduleLocker is the fetcher of stackd modules lock: it resolves what
// the lock does not pin (everything with --upgrade) and collects the pins.
type moduleLocker struct {
	config.ModuleFetcher
	upgrade bool
	mu      sync.Mutex
	pins    config.ModuleLock
}

func (l *moduleLocker) Upgrade() bool { return l.upgrade }
func (l *moduleLocker) Locked(pkg string, pin config.ModulePin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pins[pkg] = pin
}

func newModulesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "modules",
		Short: "Pin the remote module sources (Git, registry) of the definitions' templates",
	}
	cmd.AddCommand(newModulesLockCommand())
	return cmd
}

func newModulesLockCommand() *cobra.Command {
	var (
		upgrade  bool
		mods     moduleFlags
		git      gitAuthFlags
		plugins  pluginFlags
		stateDir string
		repo     string
	)
	cmd := &cobra.Command{
		Use:   "lock [DIR]",
		Short: "Resolve the remote module sources of the templates in DIR (default: the working directory) and pin them in DIR/" + config.ModuleLockFileName,
		Long: `Resolves every Git and registry module source the templates of the definitions in DIR
call and not yet pinned (a tag or branch to its commit, a registry version
constraint to a version and its package's commit or digest), fetches them
into the module cache, and writes the pins to DIR/` + config.ModuleLockFileName + `.
Commit that file: the daemon plans every revision against exactly the
module code it pins, and never resolves a source by itself. --upgrade
resolves every source again, as terraform init -upgrade does.`,
		Example: `  stackd modules lock
  stackd modules lock --upgrade ./defs`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"."}
			}
			dir := args[0]
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				return fmt.Errorf("%s: not a directory of definitions", dir)
			}
			auth, err := git.auth()
			if err != nil {
				return err
			}
			mf, err := mods.fetcher(stateDir, repo, auth)
			if err != nil {
				return err
			}
			locker := &moduleLocker{ModuleFetcher: mf, upgrade: upgrade, pins: config.ModuleLock{}}
			cp, _, err := newCustom(nil, "http://127.0.0.1:7070", "")
			if err != nil {
				return err
			}
			wp, err := newWaitCondition(nil, "http://127.0.0.1:7070", "")
			if err != nil {
				return err
			}
			eng := engine.New(providers(os.TempDir(), false, cp, wp))
			resolver, pool, err := plugins.resolver(stateDir, zerolog.Nop())
			if err != nil {
				return err
			}
			defer pool.Close()
			defer resolver.Close()
			eng.SetPluginResolver(resolver)
			eng.SetModuleFetcher(locker)
			defs, diags := eng.Load(secrets.New(os.DirFS(dir)), ".")
			if diags.HasErrors() {
				_ = engine.WriteDiagnostics(cmd.ErrOrStderr(), defs, diags, colorOK(cmd.ErrOrStderr()))
				return fmt.Errorf("%s: the definitions have errors; nothing was locked", dir)
			}
			lockPath := filepath.Join(dir, config.ModuleLockFileName)
			out := locker.pins.Format()
			if old, err := os.ReadFile(lockPath); err == nil && bytes.Equal(old, out) {
				fmt.Fprintf(cmd.OutOrStdout(), "%s is up to date (%d module packages).\n", lockPath, len(locker.pins))
				return nil
			}
			if len(locker.pins) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No template calls a remote module source: nothing to lock.")
				return nil
			}
			if err := os.WriteFile(lockPath, out, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Pinned %d module packages in %s; commit it.\n", len(locker.pins), lockPath)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&upgrade, "upgrade", false, "resolve every source again (newest version meeting each constraint, a tag's or branch's current commit)")
	f.StringVar(&stateDir, "state-dir", ".stackd/state", "the daemon's state directory: the module and provider caches default to its parent")
	f.StringVar(&repo, "repo", "", "the definitions repository's URL: Git credentials are sent to its host only")
	mods.add(f)
	git.add(f)
	plugins.add(f)
	return cmd
}

package config

// Loading the module calls whose source is remote (module_source.go): the
// package is fetched through the ModuleFetcher the loader's Plugins
// offers, at the pin the module lock holds (module_source_lock.go), and
// mounted where Terraform installs it, ROOT/.terraform/modules/KEY (KEY the
// module call's path, "net" or "app.net"), so that path.module, file
// functions and local sources inside the package read as Terraform's do.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// ModuleFetcher fetches the packages of remote module sources. The loader
// finds it through its Plugins (an optional method ModuleFetcher()); the
// implementation lives outside engine (Git in gitsource, the registry
// protocol in internal/modregistry) and cmd/stackd wires it.
type ModuleFetcher interface {
	// FetchModule returns the file tree of the package req names at
	// req.Pin and the pin it holds. A zero Pin asks to resolve the source
	// (a ModuleLocker is asked to, never a plan). With req.Untrusted only
	// what a trusted fetch already brought is returned: no network.
	// Errors are sentences for a diagnostic, never holding credentials.
	FetchModule(ctx context.Context, req ModuleRequest) (fs.FS, ModulePin, error)
}

// ModuleLocker is the ModuleFetcher of `stackd modules lock`: the loader
// asks it to resolve the sources the lock does not pin (all of them with
// Upgrade) and tells it every pin the templates use.
type ModuleLocker interface {
	ModuleFetcher
	Upgrade() bool
	Locked(pkg string, pin ModulePin)
}

// ModuleRequest is one package to fetch.
type ModuleRequest struct {
	Source ModuleSource
	// Constraints is a registry source's version argument.
	Constraints string
	Pin         ModulePin
	Untrusted   bool
}

// Limits of a remote module package, checked on the whole package when it
// is fetched (before any of it is read as a template), beside those every
// template file meets.
const (
	// MaxModulePackageFiles bounds the files of one package.
	MaxModulePackageFiles = 10000
	// MaxModulePackageFileSize bounds one file of a package: 16 MiB.
	MaxModulePackageFileSize = 16 << 20
	// MaxModulePackageBytes bounds all the files of a package: 64 MiB.
	MaxModulePackageBytes = 64 << 20
)

// moduleFetchTimeout bounds one FetchModule call of loading.
const moduleFetchTimeout = 2 * time.Minute

// moduleLoader is what one loader knows of remote modules.
type moduleLoader struct {
	// defsDir is the definitions directory, where the module lock is.
	defsDir string
	// calls is the module call path being loaded ("app", "net").
	calls []string
	lock  ModuleLock
	// lockRead: lock and lockDiags hold the lock file as read.
	lockRead  bool
	lockDiags hcl.Diagnostics
	// packages are the mounted packages' roots, and what is mounted there.
	packages map[string]string
}

// moduleFetcherOf is the fetcher e offers, if any.
func moduleFetcherOf(e Plugins) ModuleFetcher {
	if m, ok := e.(interface{ ModuleFetcher() ModuleFetcher }); ok {
		return m.ModuleFetcher()
	}
	return nil
}

// loadCall loads the template of module call name in dir.
func (ld *loader) loadCall(name, dir string, rng *hcl.Range) (*Template, hcl.Diagnostics) {
	ld.modules.calls = append(ld.modules.calls, name)
	defer func() { ld.modules.calls = ld.modules.calls[:len(ld.modules.calls)-1] }()
	return ld.load(dir, rng)
}

// moduleDir is the directory of module call name's template: a local
// source's, relative to t, or where a remote one's package is mounted.
func (ld *loader) moduleDir(t *Template, name string, src, ver *hcl.Attribute, source string) (string, hcl.Diagnostics) {
	rng := src.Expr.Range()
	if !isRemoteModuleSource(source) {
		if ver != nil {
			return "", hcl.Diagnostics{Errorf(ver.NameRange, "Invalid module version", "Module %q: version applies to module registry sources only; %q is a local path.", name, source)}
		}
		if source == "" || path.IsAbs(source) {
			return "", hcl.Diagnostics{Errorf(rng, "Invalid module source", "Module %q: source %q must be a directory relative to the template, like \"./modules/monitoring\".", name, source)}
		}
		dir := path.Clean(path.Join(t.Dir, source))
		if dir == ".." || strings.HasPrefix(dir, "../") {
			return "", hcl.Diagnostics{Errorf(rng, "Invalid module source", "Module %q: source %q leaves the repository.", name, source)}
		}
		for root := range ld.modules.packages {
			if within(root, t.Dir) && !within(root, dir) {
				return "", hcl.Diagnostics{Errorf(rng, "Invalid module source", "Module %q: source %q leaves the module package it is in (%s).", name, source, ld.modules.packages[root])}
			}
		}
		return dir, nil
	}
	ms, err := ParseModuleSource(source)
	if err != nil {
		return "", hcl.Diagnostics{Errorf(rng, "Invalid module source", "Module %q: %s.", name, strings.TrimSuffix(err.Error(), "."))}
	}
	var constraints string
	if ver != nil {
		if diags := stringAttr(ver, &constraints); diags.HasErrors() {
			return "", diags
		}
		if ms.Kind != ModuleRegistry {
			return "", hcl.Diagnostics{Errorf(ver.NameRange, "Invalid module version", "Module %q: version applies to module registry sources only; %s is a %s source (pin it with ?ref= in the address).", name, source, ms.Kind)}
		}
	}
	f := moduleFetcherOf(ld.e)
	if f == nil {
		return "", hcl.Diagnostics{Errorf(rng, "Remote module sources are not enabled", "Module %q: source %q is remote, and this loader fetches none (stackd wires a fetcher for the daemon and its commands).", name, source)}
	}
	diags := ld.readModuleLock(rng)
	if diags.HasErrors() {
		return "", diags
	}
	locker, locking := f.(ModuleLocker)
	pin, pinned := ld.modules.lock[ms.Package]
	lockName := path.Join(ld.modules.defsDir, ModuleLockFileName)
	if locking && locker.Upgrade() {
		pin, pinned = ModulePin{}, false
	}
	if pinned && ms.Kind == ModuleRegistry {
		ok, err := pin.satisfies(constraints)
		if err != nil {
			return "", diags.Append(Errorf(ver.Expr.Range(), "Invalid module version", "Module %q: %s.", name, err))
		}
		if !ok && locking {
			pin, pinned = ModulePin{}, false
		} else if !ok {
			return "", diags.Append(Errorf(rng, "Module version not locked",
				"Module %q: %s pins %s at version %s, which does not meet version = %q. Run \"stackd modules lock --upgrade\" and commit %s.", name, lockName, ms.Package, pin.Version, constraints, lockName))
		}
	}
	if !pinned && !locking {
		what := "Run \"stackd modules lock\" and commit " + lockName + " (as Terraform users run terraform init)."
		if ld.untrusted {
			what = "A branch other than the deploy branch may only use module sources the deploy branch's lock pins; pin it there first."
		}
		return "", diags.Append(Errorf(rng, "Module source not pinned",
			"Module %q: source %q is not pinned in %s, so stackd cannot know which revision of it this commit means. %s", name, source, lockName, what))
	}
	ctx, cancel := context.WithTimeout(context.Background(), moduleFetchTimeout)
	defer cancel()
	fsys, got, err := f.FetchModule(ctx, ModuleRequest{Source: ms, Constraints: constraints, Pin: pin, Untrusted: ld.untrusted})
	if err != nil {
		summary := "Cannot fetch module"
		if ld.untrusted {
			summary = "Module not fetched for an untrusted branch"
		}
		return "", diags.Append(Errorf(rng, summary, "Module %q (%s): %s.", name, source, strings.TrimSuffix(err.Error(), ".")))
	}
	if pinned && got.ID() != pin.ID() {
		return "", diags.Append(Errorf(rng, "Module does not match its pin", "Module %q (%s): fetched %s, but %s pins %s.", name, source, got.ID(), lockName, pin.ID()))
	}
	if err := checkModulePackage(fsys, got.ID()); err != nil {
		return "", diags.Append(Errorf(rng, "Module package refused", "Module %q (%s): %s.", name, source, err))
	}
	if locking {
		got.Constraints = constraints
		locker.Locked(ms.Package, got)
	}
	if ms.Subdir != "" {
		if fi, err := fs.Stat(fsys, ms.Subdir); err != nil || !fi.IsDir() {
			return "", diags.Append(Errorf(rng, "Invalid module source", "Module %q: the package %s has no directory %q.", name, ms.Package, ms.Subdir))
		}
	}
	root := path.Join(ld.stack[0], ".terraform", "modules", strings.Join(append(slicesClone(ld.modules.calls), name), "."))
	mfs, ok := ld.fsys.(*mountFS)
	if !ok {
		mfs = &mountFS{base: ld.fsys, mounts: map[string]fs.FS{}}
		ld.fsys = mfs
	}
	if ld.modules.packages == nil {
		ld.modules.packages = map[string]string{}
	}
	if prev, ok := ld.modules.packages[root]; ok && prev != ms.Package+" "+got.ID() {
		return "", diags.Append(Errorf(rng, "Module installed twice", "Module %q (%s) would be installed at %s, where %s is.", name, source, root, prev))
	}
	ld.modules.packages[root] = ms.Package + " " + got.ID()
	mfs.mounts[root] = fsys
	return path.Join(root, ms.Subdir), diags
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// readModuleLock reads the definitions' module lock once.
func (ld *loader) readModuleLock(rng hcl.Range) hcl.Diagnostics {
	m := &ld.modules
	if m.lockRead {
		return m.lockDiags
	}
	m.lockRead = true
	name := path.Join(m.defsDir, ModuleLockFileName)
	if _, err := fs.Stat(ld.fsys, name); errors.Is(err, fs.ErrNotExist) {
		m.lock = ModuleLock{}
		return nil
	}
	src, d := readBounded(ld.fsys, name, MaxTemplateFileSize, &rng)
	if d != nil {
		m.lockDiags = hcl.Diagnostics{d}
		return m.lockDiags
	}
	m.lock, m.lockDiags = ParseModuleLock(src, name)
	return m.lockDiags
}

// checked remembers the packages (by content address) checkModulePackage
// accepted, so a package is walked once per process, not once per load.
var checked = struct {
	sync.Mutex
	ids map[string]bool
}{ids: map[string]bool{}}

// checkModulePackage walks a fetched package before any of it is read,
// refusing too many files, a file or a total too large, and a symbolic
// link leaving the package.
func checkModulePackage(fsys fs.FS, id string) error {
	checked.Lock()
	ok := checked.ids[id]
	checked.Unlock()
	if ok {
		return nil
	}
	files, total := 0, int64(0)
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %s", name, trimFSError(err))
		}
		if d.IsDir() {
			return nil
		}
		if files++; files > MaxModulePackageFiles {
			return fmt.Errorf("it holds more than %d files", MaxModulePackageFiles)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := fs.ReadLink(fsys, name)
			if err != nil {
				return fmt.Errorf("symbolic link %s: %s", name, trimFSError(err))
			}
			if t := path.Join(path.Dir(name), target); path.IsAbs(target) || t == ".." || strings.HasPrefix(t, "../") {
				return fmt.Errorf("symbolic link %s points outside the package (%s)", name, target)
			}
		}
		fi, err := fs.Stat(fsys, name)
		if err != nil {
			return fmt.Errorf("%s: %s", name, trimFSError(err))
		}
		if fi.Size() > MaxModulePackageFileSize {
			return fmt.Errorf("%s is %d bytes; a file of a module package may be at most %d bytes", name, fi.Size(), MaxModulePackageFileSize)
		}
		if total += fi.Size(); total > MaxModulePackageBytes {
			return fmt.Errorf("its files hold more than %d bytes", MaxModulePackageBytes)
		}
		return nil
	})
	if err != nil {
		return err
	}
	checked.Lock()
	if len(checked.ids) > 4096 {
		clear(checked.ids)
	}
	checked.ids[id] = true
	checked.Unlock()
	return nil
}

package main

// --shared-targets-root: the built-in file provider writes under
// --targets-root on the local disk of the process that runs the stack set.
// On a shared state (--state-url) that is whichever replica owns it now,
// and another replica taking it over would not find the files: a revision
// with file resources is rejected there (a diagnostic at each file
// resource) unless --targets-root is declared shared by every replica.

import (
	"errors"

	"github.com/spf13/pflag"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
)

// errLocalFiles is why a file resource is refused on a shared state.
var errLocalFiles = errors.New("the file provider writes under --targets-root on the local disk of the replica that owns the stack set, and this state is shared by replicas (--state-url): another replica taking the stack set over would not find the files. " +
	"Mount one shared file system at the same --targets-root on every replica and declare it with --shared-targets-root, or manage the files with another provider")

func (r *replicaFlags) addShared(f *pflag.FlagSet) {
	f.BoolVar(&r.sharedTargetsRoot, "shared-targets-root", false,
		"with --state-url: --targets-root is one file system shared by every replica (mounted at the same path), so file resources may be used; without it a revision with file resources is rejected")
}

// localFiles refuses the file provider's resources in reg on a shared
// state whose --targets-root is not declared shared.
func (c *repoConfig) localFiles(reg provider.Registry) provider.Registry {
	if !c.stateKey.url.set() || c.replica.sharedTargetsRoot {
		return reg
	}
	if fp, ok := reg["file"].(*file.Provider); ok {
		reg["file"] = unsharedFiles{fp}
	}
	return reg
}

// unsharedFiles is the file provider whose every resource fails
// validation (errLocalFiles): the revision is rejected as a whole when it
// is planned, before anything is written. Deleting files already
// recorded still works.
type unsharedFiles struct{ *file.Provider }

// ValidateProperties refuses every file resource.
func (unsharedFiles) ValidateProperties(provider.Target, cty.Value) error { return errLocalFiles }

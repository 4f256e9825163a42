// Package inproc is a stackd daemon opened in this process on a local
// repository, as the programs that drive one end to end — stackd bench
// (internal/bench) and stackd demo (internal/demo) — get it from
// cmd/stackd, which owns the wiring: those programs describe what they
// want in Options, and cmd/stackd hands them an Open that wires it exactly
// as `stackd run` would.
//
// Unlike the other internal packages it is not a leaf: it names the parts
// a daemon is made of (reconciler, gitsource, state, api, tfplugin). It
// imports no Git or database library itself.
package inproc

import (
	"context"
	"io"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// Options describe the daemon to open. What they leave out is wired as
// `stackd run` defaults it, except that the command provider is allowed
// and custom resources are told the external URL http://127.0.0.1:7070
// (no API is served).
type Options struct {
	// Repo is the definitions repository, a local path; Branch its deploy
	// branch and StatusBranch the branch status commits go to.
	Repo, Branch, StatusBranch string
	// StateDir is the Badger state directory, TargetsRoot the root of the
	// file resources; StateURL, if set, a PostgreSQL database instead of
	// StateDir (--state-url).
	StateDir, TargetsRoot, StateURL string
	// LogLevel and LogFormat are stackd's --log-level and --log-format.
	LogLevel, LogFormat string
	Plugins             Plugins
}

// Plugins configure the Terraform providers (stackd's --plugin-* flags).
type Plugins struct {
	// Dirs hold providers in the filesystem-mirror layout.
	Dirs []string
	// NoRegistry: install from Dirs and the cache only.
	NoRegistry bool
	// MaxProcesses, GOGC, RecycleAfter: as --plugin-max-processes (0:
	// the default), --plugin-gogc, --plugin-recycle-after.
	MaxProcesses, GOGC, RecycleAfter int
}

// Daemon is an opened stackd: its parts, and Close, which stops the
// provider processes and closes the state.
type Daemon struct {
	Reconciler *reconciler.Reconciler
	Source     *gitsource.Source
	Store      *state.Store
	Metrics    *api.Metrics
	// Plugins runs the Terraform providers' processes.
	Plugins *tfplugin.Pool
	Close   func() error
}

// Open opens a daemon; its log lines go to logOut.
type Open func(ctx context.Context, o Options, logOut io.Writer) (*Daemon, error)

// Resolve makes the resolver of Terraform providers a daemon whose state is
// in stateDir would use (its cache and lock file beside stateDir), and the
// pool of their processes; the caller closes both.
type Resolve func(p Plugins, stateDir string) (*tfplugin.Resolver, *tfplugin.Pool, error)

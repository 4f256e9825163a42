package main

// The wiring given to the programs that drive a stackd in this process
// (internal/bench, internal/demo): the same as run's.

import (
	"context"
	"io"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/internal/inproc"
)

// inprocExternalURL is what custom resources are told in-process: no API
// is served there.
const inprocExternalURL = "http://127.0.0.1:7070"

// openInproc opens a stackd on o (inproc.Open).
func openInproc(ctx context.Context, o inproc.Options, logOut io.Writer) (*inproc.Daemon, error) {
	c := repoConfig{
		repo: o.Repo, branch: o.Branch, statusBranch: o.StatusBranch, path: ".",
		stateDir: o.StateDir, targetsRoot: o.TargetsRoot,
		allowCommand: true, logLevel: o.LogLevel, logFormat: o.LogFormat, externalURL: inprocExternalURL,
		plugins: inprocPlugins(o.Plugins),
	}
	c.stateKey.url.url = o.StateURL
	// One process and its own targets root, never replicas: file
	// resources stay allowed on a database (sharedroot.go).
	c.replica.sharedTargetsRoot = true
	a, err := c.open(ctx, logOut)
	if err != nil {
		return nil, err
	}
	return &inproc.Daemon{Reconciler: a.rec, Source: a.source, Store: a.store, Metrics: a.metrics, Plugins: a.plugins, Close: a.Close}, nil
}

// resolveInproc makes a provider resolver and pool (inproc.Resolve).
func resolveInproc(p inproc.Plugins, stateDir string) (*tfplugin.Resolver, *tfplugin.Pool, error) {
	pf := inprocPlugins(p)
	return pf.resolver(stateDir, zerolog.Nop())
}

func inprocPlugins(p inproc.Plugins) pluginFlags {
	return pluginFlags{dirs: p.Dirs, noRegistry: p.NoRegistry, maxProcesses: p.MaxProcesses, gogc: p.GOGC, recycleAfter: p.RecycleAfter}
}

var (
	_ inproc.Open    = openInproc
	_ inproc.Resolve = resolveInproc
)

// Command stackd is the GitOps daemon for stack sets: flag parsing and
// wiring only; the work happens in gitsource, engine, reconciler and state.
//
// One file per command: root.go, run.go, apply.go, plan.go, validate.go,
// status.go, state.go (the state subcommands), rollout.go (promote and
// abort, through api.Client), demo.go and bench.go (their flags; the
// programs are internal/demo and internal/bench).
// Shared wiring: app.go (flags and the opened app of repository-bound
// commands), providers.go, serveapi.go (serving the HTTP API),
// statesafety.go, flagfiles.go, print.go and inproc.go (the app as
// internal/inproc hands it to the demo and the bench).
package main

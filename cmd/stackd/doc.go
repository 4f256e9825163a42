// Command stackd is the GitOps daemon for stack sets: flag parsing and
// wiring only; the work happens in gitsource, engine, reconciler and state.
//
// One file per command: root.go, run.go, apply.go, plan.go, validate.go,
// status.go, state.go (the state subcommands), rollout.go (promote and
// abort, through api.Client), demo.go, bench.go and bench_branch.go.
// Shared wiring: app.go (flags and the opened app of repository-bound
// commands), providers.go, serveapi.go (serving the HTTP API),
// statesafety.go, flagfiles.go, print.go and commit.go.
package main

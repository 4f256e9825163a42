// Package reconciler is stackd's control loop. For each new commit of the
// deploy branch it loads the definitions (engine), plans every stack
// instance that must change, and — only when the whole commit validates and
// plans — runs one operation per changed stack set: CreateStackInstances,
// UpdateStackInstances, DeployStackSet, DeleteStackInstances or
// DeleteStackSet, scheduled by the RFS operation preferences (region order,
// per-region max concurrency, failure tolerance, STRICT/SOFT). After each
// operation, and after each rejected commit, it writes a status commit.
//
// Invariants:
//   - A commit that does not validate or plan applies nothing.
//   - An operation is keyed by (stack set id, commit): re-seeing a commit
//     never repeats a finished operation; an unfinished one is resumed.
//   - Status documents never hold sensitive values.
//   - Nothing is deployed from an empty state while the status branch shows
//     deployed stack sets (a lost or damaged state: EmptyStateError), unless
//     Options.AdoptEmptyState; and no operation starts while Options.Space
//     reports too little free disk space (safety.go).
//
// reconciler imports engine and state, and talks to Git only through the
// small interfaces it defines (Source); it must not import gitsource.
package reconciler

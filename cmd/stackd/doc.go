// Command stackd is the GitOps daemon for stack sets: flag parsing and
// wiring only; the work happens in gitsource, engine, reconciler and state.
package main

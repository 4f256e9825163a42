// Package dag is a small directed graph of node names for dependency
// order: the template analysis of engine/config rejects cycles with it, and
// the engine orders removals by it. It imports nothing of ours.
package dag

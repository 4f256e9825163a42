// Package tfstate reads the state files Terraform (0.12 to 1.11) and
// OpenTofu write — state format version 4 — for stackd import-state: the
// managed resource instances of a workspace, each with its address (module
// path and instance key included), provider, schema version, attributes,
// sensitive attribute paths, private data, identity and dependencies.
//
// # Invariants
//
//   - Parse never panics and never quotes a state's values in an error: a
//     state holds secrets. Errors say where (resource address, byte offset)
//     and what is wrong, and what would be right.
//   - Nothing is dropped silently: what stackd cannot take over as it is
//     (another format version, an OpenTofu-encrypted state, a deposed
//     object, a duplicated address) is an error, never skipped. Data
//     resources are not objects of the workspace (Terraform reads them
//     again on every plan) and are not returned.
//   - Addresses are written as stackd writes them
//     ("module.a[\"k\"].TYPE.NAME[0]"), which is Terraform's own syntax.
//
// # Imports
//
// tfstate is a leaf: it imports no stackd package (the conversion into
// stackd's resource records is the engine's, engine.Engine.Adopt).
package tfstate

// Package engine is stackd's evaluator and diff: it evaluates a template
// loaded by engine/config for one deployment target, orders resources in a
// dependency graph, computes change sets against recorded resource state,
// applies one stack instance through the providers of engine/provider, and
// checks instances for drift. Loading and validating definitions is
// engine/config's (Engine.Load adds this engine's provider plugins to it).
//
// Invariants:
//   - The engine works on an fs.FS of definitions and on recorded resource
//     values handed to it; it keeps no state of its own between calls.
//   - Every provider action is journaled through the Journal before it starts
//     and settled after it ends; a pending action is resumed with the same
//     RequestID, so a restart never creates a resource twice.
//   - Values derived from sensitive variables or attributes carry a cty mark
//     and are rendered as "<sensitive>" in change sets and outputs.
//
// The change sets it computes are the types of engine/changeset, which
// also renders them; changeset must not import engine.
//
// engine must not import gitsource, state or reconciler: it knows no Git and
// no Badger.
package engine

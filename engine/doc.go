// Package engine is stackd's language and diff: it loads definitions
// (stack_set blocks) and templates (variable, locals, resource, output) with
// hcl/v2 and go-cty, validates them with file:line:column diagnostics,
// evaluates a template for one deployment target, orders resources in a
// dependency graph, computes change sets against recorded resource state, and
// applies one stack instance through the providers of engine/provider.
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

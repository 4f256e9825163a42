// Package config is stackd's language: it loads definitions (stack_set,
// organization, resource_type blocks, vars files and instance overrides)
// and templates (variable, locals, resource, data, module, provider,
// import, output) with hcl/v2 and go-cty into typed configuration, with
// file:line:column diagnostics. It decodes what the engine and the
// reconciler act on — operation preferences, rollout and update_pattern
// blocks, drift blocks — and analyses each template's references into a
// dependency order. It holds the functions templates call and the limits
// that keep untrusted definitions from exhausting the daemon: the nesting
// pre-lexer that runs before hcl parses a file, the meter that bounds what
// evaluation builds, and the guards wrapped around expressions.
//
// Invariants:
//   - Loading never panics on bad input and never evaluates anything
//     against the world: every problem is a diagnostic naming the file
//     and line.
//   - Values given to sensitive variables are kept only to be redacted
//     (StackSet.Redactor); they never appear in diagnostics.
//
// config imports no package of engine above it: of ours only
// engine/provider (the schemas of resource types, Secrets),
// engine/changeset (the JSON diagnostic and the rollout plan) and
// internal packages. The engine asks nothing of it but exported names;
// what loading needs of the engine (provider plugins) it asks through
// Plugins.
package config

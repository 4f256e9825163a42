// Package tfplugin drives Terraform and OpenTofu provider plugins directly
// over their gRPC plugin protocol, versions 5 and 6, with no terraform
// binary: Start runs a provider executable, completes HashiCorp's go-plugin
// handshake (Terraform's magic cookie, protocol 5 or 6 over gRPC, automatic
// mutual TLS) and returns a Client with one interface over both protocols,
// in cty terms.
//
// Schemas are converted to a small model (Block, Attribute, NestedBlock,
// Object) whose ImpliedType is the type values are encoded against, and
// which says which paths are sensitive (Block.IsSensitive,
// Block.SensitivePaths). Values travel as MessagePack (go-cty's msgpack
// package); a provider that answers JSON is decoded too. Provider
// diagnostics become Diagnostics (severity, summary, detail, attribute
// path); a call with an error diagnostic returns a *DiagnosticsError.
//
// Invariants:
//
//   - Every call honours its ctx. A provider process that exits (a crash,
//     a kill) makes in-flight and later calls fail with an *ExitError
//     (wrapping ErrProviderExited): a failure of the provider that may be
//     retried, never diagnostics about what the call sent; nothing panics,
//     and the Client can still be closed. A new process needs a new
//     Client: Pool starts one on next use.
//   - Calls on one Client may run concurrently; the schema is fetched once
//     per Client.
//   - Close ends the process (go-plugin's graceful shutdown, then a kill)
//     and waits until it is reaped: no process outlives its Client. Each
//     process makes its Unix socket in a temporary directory of its own
//     (PLUGIN_UNIX_SOCKET_DIR), removed on Close, so a crashed provider
//     leaves no socket behind. On Linux no provider process outlives
//     stackd either, even a stackd killed with SIGKILL: the kernel kills
//     it (a parent-death signal; see pdeathsig_linux.go for why the thread
//     that starts it is held until it is reaped).
//   - PlanResourceChange reports no RequiresReplace for a create (Prior
//     null): terraform-plugin-sdk lists its ForceNew attributes even then,
//     and Terraform ignores them too.
//   - The provider's log lines and stderr go to the zerolog logger of
//     Options at debug level, through Options.Redactor. Values sent or
//     received are never logged, and errors name types and attributes,
//     never values.
//   - Values given to a Client may carry marks (they are dropped before
//     encoding); values it returns carry none.
//
// Pool shares provider processes between callers: one process per
// (executable, configuration hash), started and configured on first use,
// evicted when idle, capped in number, restarted after a crash.
//
// The gRPC stubs are generated into internal/tfplugin5 and
// internal/tfplugin6 from the .proto files HashiCorp publishes in
// terraform-plugin-go (see their doc.go for the go:generate line and the
// tool versions). Test providers built from Go source are in testdata.
//
// This package imports engine/provider (for its Redactor) and
// internal/clock of ours, and knows nothing of Git, Badger, the engine or
// the reconciler.
package tfplugin

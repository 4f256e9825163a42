// Package provider defines the small interface every resource provider of
// stackd implements (file, command, custom, wait_condition), and the
// vocabulary the engine uses to plan with them: per-property Recreation
// (Never, Conditionally, Always), Requests carrying a RequestID that is
// stable across retries and restarts, and Results with attributes.
//
// It also holds what the engine shares with engine/provider/tfplugin, so
// that the plugin client needs no engine package above it: the
// PluginResolver contract (ProviderRequirement, ResolvedProviders,
// CallStopper) and Secrets, the Redactor of known sensitive values.
//
// Providers live in sub-packages. This package imports only engine/changeset
// of ours (for the placeholder Secrets writes); the engine imports it, never
// the other way round.
package provider

// Package provider defines the small interface every resource provider of
// stackd implements (file, command, custom, wait_condition), and the
// vocabulary the engine uses to plan with them: per-property Recreation
// (Never, Conditionally, Always), Requests carrying a RequestID that is
// stable across retries and restarts, and Results with attributes.
//
// Providers live in sub-packages. This package imports nothing of ours; the
// engine imports it, never the other way round.
package provider

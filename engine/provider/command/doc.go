// Package command is the built-in "command" provider: shell commands that
// create, update, delete and optionally read a resource the engine cannot
// see otherwise.
//
// Each command runs in <Shell> in its own process group, in the instance
// root <targets root>/<account>/<region>/ or the jailed working_dir below
// it, with the daemon's environment plus STACKD_STACK_SET,
// STACKD_STACK_SET_ID, STACKD_REGION, STACKD_ACCOUNT, STACKD_LOGICAL_ID,
// STACKD_REQUEST_ID, STACKD_PHYSICAL_ID (Update, Delete, Read) and the
// resource's environment map. The command text is never an argument of
// the process (anyone on the machine can read those, and the text may
// hold sensitive values): the shell gets it in STACKD_SCRIPT and runs
// `<Shell> -c '…; eval "$__stackd_script"'`, removing STACKD_SCRIPT from
// the environment first. When the call's context ends, the whole
// process group is killed and the call returns the context's error.
//
// A JSON object printed on stdout becomes attributes (its "id" the physical
// id; otherwise the RequestID is). Attribute "stdout" holds the trimmed
// output, capped at 64 KiB. A non-zero exit is an *ExitError carrying the
// exit code and the last lines of stderr, with the sensitive values the
// call's context knows (provider.WithRedactor) replaced before the lines
// are cut; for the read command it also matches provider.ErrNotFound. (The
// engine treats the attributes of a command given a sensitive value as
// sensitive: they are computed from it.)
//
// Create cannot deduplicate what a script does: scripts that must not run
// twice use STACKD_REQUEST_ID, which is stable across retries.
//
// With Options.Enabled false (--allow-command=false) every call fails with
// ErrDisabled.
//
// This package imports engine/provider, engine/provider/file (for the path
// jail) and the standard library; it must not log command output, which may
// hold secrets.
package command

// Package procdeath makes the processes stackd starts die with it, even
// when stackd is killed with SIGKILL (Linux's parent-death signal), so
// that a restarted stackd never runs a call beside the orphan of the same
// call, and no provider process is left running for ever.
package procdeath

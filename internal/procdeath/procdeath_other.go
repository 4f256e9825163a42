//go:build !linux

package procdeath

import "os/exec"

// Set does nothing here: only Linux has a parent-death
// signal (see procdeath_linux.go). A provider of a stackd killed with
// SIGKILL keeps running until it is ended by hand.
func Set(*exec.Cmd) {}

// LockThread does nothing here: with no parent-death signal, the
// thread that starts a provider does not matter. unlock is nil.
func LockThread() (unlock func()) { return nil }

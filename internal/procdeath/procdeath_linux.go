//go:build linux

package procdeath

import (
	"os/exec"
	"runtime"
	"syscall"
)

// A process stackd starts (a provider, a command) must not outlive
// stackd. A stackd ended by SIGKILL (kill -9, the OOM killer) runs no
// Close, and its providers, waiting for a client that never comes back, would be reparented to PID 1 and run for
// ever, tens to hundreds of MB each. On Linux the kernel ends them: a
// provider is started with a parent-death signal (PR_SET_PDEATHSIG,
// through exec.Cmd's SysProcAttr.Pdeathsig).
//
// The signal is SIGKILL, not SIGTERM: a provider whose stackd is gone has
// nobody to answer and nothing worth finishing (the engine's journal
// adopts what an interrupted create made), and go-plugin servers need not
// heed a polite signal.
//
// The kernel sends it when the *thread* that forked the provider exits,
// not the process (go.dev/issue/27505). The Go runtime ends a thread only
// when a goroutine locked to it (runtime.LockOSThread) returns without
// unlocking; it never reaps idle threads. Nothing in stackd or what it
// imports does that today, but one such goroutine anywhere (a library
// that enters a network namespace, say), run on the thread that had
// forked a provider, would kill that provider for no reason. So the
// goroutine that starts a provider locks its thread first
// (LockThread) and holds it, parked, until the process is reaped: no
// other goroutine runs on that thread, let alone exits on it, while the
// provider lives. That costs one parked thread per running provider (a
// Pool caps them); each goes back to the runtime when its process ends.
//
// Two gaps remain, both documented rather than closed:
//
//   - stackd dying between the fork and the child's prctl. Go's own child
//     code covers it: after the prctl it compares its parent's pid with
//     the one read before the fork and, if they differ, sends itself the
//     signal before it executes the provider (forkAndExecInChild1 in
//     package syscall). The provider, a third-party binary, could not
//     check anything itself.
//   - The kernel clears the parent-death signal when the child executes a
//     set-user-ID or set-group-ID program or one with file capabilities;
//     provider executables are plain binaries. Processes a provider starts
//     itself are its own to end.

// Set makes the kernel SIGKILL cmd's process when the
// thread that starts it exits (see above).
func Set(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// LockThread locks the calling goroutine to its thread before it
// starts a provider process. The goroutine must call unlock, and return,
// only once that process has been reaped (or was never started).
func LockThread() (unlock func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

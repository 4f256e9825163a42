//go:build unix

package tfplugin

import (
	"errors"
	"syscall"
)

// pidRunning reports whether a process pid exists (one of another user's
// counts).
func pidRunning(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

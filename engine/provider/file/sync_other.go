//go:build !linux

package file

import (
	"os"
	"syscall"
)

// syncFS flushes every filesystem (sync(2)): there is no syncfs(2) here.
func syncFS(*os.File) error {
	syscall.Sync()
	return nil
}

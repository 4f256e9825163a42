//go:build unix

package state

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Locked reports whether a process holds the state in dir open (Badger's
// directory lock): a running daemon, which the CLI then asks instead. A
// directory that cannot be opened is not locked.
func Locked(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true
	}
	if err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	}
	return false
}

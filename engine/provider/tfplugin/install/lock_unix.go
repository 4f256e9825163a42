//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package install

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// tryLock takes an exclusive flock on f without waiting; false when
// another process (or file description) holds it. The kernel releases it
// when the holder dies, which is how a killed installer's stage is told
// from a live one.
func tryLock(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// abandoned reports whether the stage dir has no live owner: its lock can
// be taken (its owner died), or it has no lock file at all.
func abandoned(dir string, _ time.Time) bool {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR, 0)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	defer f.Close() // releases the lock taken below
	ok, _ := tryLock(f)
	return ok
}

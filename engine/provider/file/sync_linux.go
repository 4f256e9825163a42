package file

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the filesystem d is on (syncfs(2)).
func syncFS(d *os.File) error {
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", d.Name(), err)
	}
	return nil
}

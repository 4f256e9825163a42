//go:build unix

package state

import "golang.org/x/sys/unix"

// freeSpace returns the bytes an unprivileged user may still write on the
// file system holding path (statfs f_bavail × f_bsize; root may have a
// reserve beyond it, which stackd leaves alone).
func freeSpace(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

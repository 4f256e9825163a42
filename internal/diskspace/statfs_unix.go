//go:build unix

package diskspace

import "golang.org/x/sys/unix"

// statfs returns the bytes an unprivileged user may still write on the
// file system holding dir.
func statfs(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

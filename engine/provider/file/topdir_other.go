//go:build !linux

package file

// markTopDir does nothing: only Linux's ext2/3/4 have FS_TOPDIR_FL.
func markTopDir(string) {}

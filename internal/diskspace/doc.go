// Package diskspace checks the free space of the file systems stackd
// writes to (the state directory and the targets root) against a
// threshold: the reconciler asks it before an operation starts (it
// satisfies reconciler.SpaceGate), /readyz reports not ready while a
// directory is below it, and its Prometheus collector exports
// stackd_free_space_bytes{path}, stackd_min_free_space_bytes and
// stackd_low_disk.
//
// Free space is what an unprivileged user may still write (statfs
// f_bavail × f_bsize), read afresh on every call (a statfs costs about
// 2 µs). A directory that does not exist yet is measured at its nearest
// existing parent; one whose file system cannot be read is reported (as an
// error in the log, no sample in the metrics) but blocks nothing.
//
// diskspace imports no other stackd package.
package diskspace

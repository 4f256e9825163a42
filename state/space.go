package state

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
)

// MinFreeSpace is the free space (64 MiB) below which the store refuses
// writes and Open refuses to open (ErrNoSpace). Badger writes through
// memory maps of files it sizes up front but that stay sparse (memtables,
// value-log files, the tables a flush or compaction builds); when the disk
// is full, such a write is no error Badger could return but a SIGBUS that
// kills the process (measured: a 20 MB tmpfs filled up kills a Badger
// writer this way on its first write). With the store's options (8 MiB
// memtables, two of them; 64 MiB value-log files, used only for values
// over 1 MiB; level-0 compactions over five small tables) what Badger may
// still write after a refused write - the memtable being flushed, a
// compaction under way - stays well below 64 MiB. The reconciler's own
// threshold (stackd --min-free-space) is set higher, so operations stop
// long before this floor is reached; this is the last line of defence.
const MinFreeSpace = 64 << 20

// spaceRecheck is how long a reading above the floor is trusted (10 ms):
// statfs costs ~1.8 µs, 14% of a PutResource (13 µs) if made on every
// write, while going from 64 MiB free to none within 10 ms takes 6 GB/s.
// A reading below the floor is never reused, so writes resume as soon as
// space is back.
const spaceRecheck = 10 * time.Millisecond

// spaceCache holds the latest free-space reading of the state directory.
type spaceCache struct {
	ttl time.Duration // spaceRecheck; tests set 0
	at  atomic.Int64  // Unix ns of the reading above the floor; 0: none
}

// checkSpace returns ErrNoSpace (wrapped) when the state's file system has
// less than the store's floor free. A file system whose free space cannot
// be read is not refused.
func (s *Store) checkSpace() error {
	if s.free == nil {
		return nil
	}
	now := time.Now().UnixNano()
	if at := s.space.at.Load(); at != 0 && now-at < int64(s.space.ttl) {
		return nil
	}
	err := spaceFor(s.dir, s.free, s.minFree)
	if err == nil {
		s.space.at.Store(now)
	} else {
		s.space.at.Store(0)
	}
	return err
}

func spaceFor(dir string, free func(string) (uint64, error), min uint64) error {
	n, err := free(dir)
	if err != nil || n >= min {
		return nil
	}
	return fmt.Errorf("%w: %s free on the file system of %s, the state needs at least %s (free some space)",
		ErrNoSpace, humanize.IBytes(n), dir, humanize.IBytes(min))
}

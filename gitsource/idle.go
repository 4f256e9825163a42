package gitsource

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/storage/filesystem"
)

// A Source left unused for IdleTrimAfter drops what go-git keeps in memory for a
// repository of long history and returns the freed pages to the system.
//
// go-git keeps every pack's index in memory once any object was looked up (a fetch's
// negotiation looks up every remote ref), and with it an offset→hash map it builds for
// delta bases: on a remote of 20,000 commits (60,000 objects) 9 MB of live heap that
// stays for the life of the handle, and that the garbage collector's pacing triples in
// resident memory. The index is read back from the .idx file on the next lookup (a few
// milliseconds for 60,000 objects), so dropping it between bursts of Git work costs
// little and keeps a daemon on a long history near one on a short one.
const IdleTrimAfter = 5 * time.Second

// idleTrim schedules the trim. Guarded by mu, except uses (guarded by s.sem).
type idleTrim struct {
	mu    sync.Mutex
	timer *time.Timer
	after time.Duration
	// uses counts releases of s.sem; a trim runs only if none happened since it was
	// scheduled.
	uses uint64
	// trimmed: the handle's indexes were dropped and nothing was read since.
	trimmed atomic.Bool
	// onTrim, when set (tests), is called after each trim that dropped something.
	onTrim func()
}

// noteUse records a use of the repository handle and schedules a trim IdleTrimAfter
// from now. Callers hold s.sem.
func (s *Source) noteUse() {
	s.idle.uses++
	s.idle.trimmed.Store(false)
	uses := s.idle.uses
	s.idle.mu.Lock()
	defer s.idle.mu.Unlock()
	after := s.idle.after
	if after == 0 {
		after = IdleTrimAfter
	}
	if s.idle.timer != nil {
		s.idle.timer.Stop()
	}
	s.idle.timer = time.AfterFunc(after, func() { s.trimIfIdle(uses) })
}

// Trimmed says whether the Source is idle and trimmed: go-git's in-memory indexes were
// dropped after IdleTrimAfter without use, and nothing used the repository since.
func (s *Source) Trimmed() bool { return s.idle.trimmed.Load() }

// trimIfIdle drops go-git's in-memory pack indexes if the handle was not used since use
// number uses and nobody holds it now; see IdleTrimAfter.
func (s *Source) trimIfIdle(uses uint64) {
	select {
	case s.sem <- struct{}{}:
	default:
		return // in use: its release schedules the next trim
	}
	defer func() { <-s.sem }()
	if s.idle.uses != uses || s.idle.trimmed.Load() || s.straggler != nil || s.repo == nil {
		return
	}
	st, ok := s.repo.Storer.(*filesystem.Storage)
	if !ok {
		return
	}
	st.Reindex()
	s.idle.trimmed.Store(true)
	// What the burst of Git work freed is garbage until the next collection and then
	// held by the runtime for minutes: collect and return it now, once per idle period.
	debug.FreeOSMemory()
	s.idle.mu.Lock()
	onTrim := s.idle.onTrim
	s.idle.mu.Unlock()
	if onTrim != nil {
		onTrim()
	}
}

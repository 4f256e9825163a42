package gitsource

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

const (
	// DefaultWatchInterval is the fallback tick when Watch is given no interval.
	DefaultWatchInterval = time.Minute
	// watchQuiet is how long the repository must stay quiet after an event before Watch
	// signals: git writes refs through lock files and renames, several events a change.
	watchQuiet = 100 * time.Millisecond
	// watchMaxDelay bounds the debounce under a continuous stream of events.
	watchMaxDelay = 500 * time.Millisecond
)

// Watch returns a channel that receives a signal whenever the repository may have
// changed; the consumer then calls Fetch and looks at Head/Branches. Signals coalesce (the
// channel is buffered 1 and never blocks the watcher). The channel closes once ctx ends,
// and so do the goroutine and file watches behind it. File watches are in place when
// Watch returns, so any change made after that is signalled.
//
// A URL source signals every interval. A local source also watches the Git directory
// with fsnotify (refs/heads and every directory below it, for branch names with slashes,
// and packed-refs) and signals ~100 ms after a burst of changes, so a commit or a new
// branch is seen well within a second; changes to the status branch ref alone are
// ignored when it is not the deploy branch. The interval tick remains as a fallback (and
// is all there is if fsnotify cannot be set up; the reason is logged to the zerolog
// logger in ctx). interval <= 0 means DefaultWatchInterval.
func (s *Source) Watch(ctx context.Context, interval time.Duration) <-chan struct{} {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	out := make(chan struct{}, 1)
	w := &watcher{out: out, interval: interval}
	if s.local {
		w.gitDir, w.commonDir = s.gitDir, s.commonDir
		w.heads = filepath.Join(s.commonDir, "refs", "heads")
		if s.opts.StatusBranch != s.opts.Branch {
			w.ignore = filepath.Join(w.heads, filepath.FromSlash(s.opts.StatusBranch))
		}
	}
	// Set the file watches up before returning: a change made after Watch returns must
	// not be missed.
	var fsw *fsnotify.Watcher
	if w.gitDir != "" {
		var err error
		if fsw, err = w.setup(); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("git_dir", w.gitDir).
				Msg("cannot watch repository, polling on the interval only")
		}
	}
	go w.run(ctx, fsw)
	return out
}

type watcher struct {
	out      chan<- struct{}
	interval time.Duration

	gitDir, commonDir string // empty for a URL source
	heads             string // commonDir/refs/heads
	ignore            string // the status branch's loose ref, or ""
}

func (w *watcher) signal() {
	select {
	case w.out <- struct{}{}:
	default: // a signal is already pending
	}
}

// run delivers signals until ctx ends; fsw (nil: ticks only) is closed on the way out.
func (w *watcher) run(ctx context.Context, fsw *fsnotify.Watcher) {
	defer close(w.out)
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()

	var events <-chan fsnotify.Event
	var errs <-chan error
	if fsw != nil {
		defer fsw.Close()
		events, errs = fsw.Events, fsw.Errors
	}

	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	var first time.Time // first event of the pending burst; zero if none pending
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			w.signal()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if !w.relevant(fsw, ev) {
				continue
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			debounce.Reset(min(watchQuiet, max(0, first.Add(watchMaxDelay).Sub(now))))
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Most likely a queue overflow: events were lost, so assume a change.
			zerolog.Ctx(ctx).Debug().Err(err).Msg("repository watch error")
			w.signal()
		case <-debounce.C:
			first = time.Time{}
			w.signal()
		}
	}
}

// setup creates the fsnotify watcher on the Git directories and refs/heads, recursively.
func (w *watcher) setup() (*fsnotify.Watcher, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	dirs := []string{w.gitDir}
	if w.commonDir != w.gitDir {
		dirs = append(dirs, w.commonDir)
	}
	for _, d := range dirs {
		if err := fsw.Add(d); err != nil {
			fsw.Close()
			return nil, err
		}
	}
	if err := addTree(fsw, w.heads); err != nil {
		fsw.Close()
		return nil, err
	}
	return fsw, nil
}

// addTree watches dir and every directory below it.
func addTree(fsw *fsnotify.Watcher, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && os.IsNotExist(err) {
				return nil // removed while walking
			}
			return err
		}
		if d.IsDir() {
			return fsw.Add(p)
		}
		return nil
	})
}

// relevant filters events down to ones that can change what a branch points at, and
// starts watching directories created under refs/heads (new "feature/..." branches).
func (w *watcher) relevant(fsw *fsnotify.Watcher, ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	name := ev.Name
	dir := filepath.Dir(name)
	if dir == w.gitDir || dir == w.commonDir {
		return filepath.Base(name) == "packed-refs"
	}
	if name != w.heads && !strings.HasPrefix(name, w.heads+string(filepath.Separator)) {
		return false
	}
	if strings.HasSuffix(name, ".lock") {
		return false // the rename that follows is the change
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(name); err == nil && fi.IsDir() {
			// A branch may have been written inside before the watch existed: signal.
			_ = addTree(fsw, name)
			return true
		}
	}
	return name != w.ignore
}

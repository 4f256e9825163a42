package file

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// groupSync serves Sync calls with as few flushes as possible (group
// commit): a caller waits for a flush that starts after it called, and
// every caller waiting when a flush starts is served by it. One goroutine
// runs the flushes while there are callers and exits when there are none.
type groupSync struct {
	flush func() error

	mu      sync.Mutex
	running bool
	waiting []chan error
}

func newGroupSync(flush func() error) *groupSync {
	return &groupSync{flush: flush}
}

// Sync returns once a flush that started after the call has ended, with
// its error; or ctx's error if ctx ends first (the flush goes on).
func (g *groupSync) Sync(ctx context.Context) error {
	done := make(chan error, 1)
	g.mu.Lock()
	g.waiting = append(g.waiting, done)
	if !g.running {
		g.running = true
		go g.run()
	}
	g.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *groupSync) run() {
	for {
		g.mu.Lock()
		batch := g.waiting
		g.waiting = nil
		if len(batch) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		err := g.flush()
		for _, done := range batch {
			done <- err
		}
	}
}

// flush makes what was written under the targets root durable: syncfs(2)
// of its filesystem on Linux (one call writes back every dirty file and
// directory and commits the filesystem's journal), sync(2) elsewhere. A
// root not created yet holds nothing to flush.
func (p *Provider) flush() error {
	// O_NONBLOCK: a named pipe in the root's place must not block the open.
	d, err := os.OpenFile(p.opts.Root, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	err = syncFS(d)
	// The directories kept open for writes not in progress are closed:
	// their instances are done (see dirCache).
	p.dirs.closeIdle()
	return err
}

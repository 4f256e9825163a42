package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/stackd/stackd/engine/provider"
)

// maxOpenDirs bounds the directories a dirCache keeps open while unused:
// 256, as many as the instances applied at once (reconciler.MaxInFlight),
// far below any file descriptor limit.
const maxOpenDirs = 256

// dirCache keeps the directories files are written in open between the
// writes of an instance: the first file of a directory opens the instance
// root and the directory (creating them if needed) and sweeps what a crash
// left there; the next files of that directory reuse the open directory,
// which saves six of the dozen system calls a small file costs. A
// directory is kept until the next flush (Provider.Sync) after its last
// use, so a handle lives about as long as one instance's apply; a delete
// in an instance forgets its directories (it may remove them), and a write
// that finds its cached directory gone opens it again.
type dirCache struct {
	mu sync.Mutex
	m  map[dirKey]*dirHandle
}

type dirKey struct {
	account, region string
	dir             string // "" or a slash path ending in "/"
}

type dirHandle struct {
	d       *os.Root
	instDir string
	refs    int
	stale   bool // forgotten while in use: closed at its last release
}

// open returns the open directory dir ("" or a slash path ending in "/")
// of target's instance root, opening it (see dirCache) when it is not
// open; release ends the use.
func (c *dirCache) open(p *Provider, target provider.Target, dir string) (h *dirHandle, release func(), err error) {
	k := dirKey{target.Account, target.Region, dir}
	c.mu.Lock()
	if h := c.m[k]; h != nil {
		h.refs++
		c.mu.Unlock()
		return h, func() { c.release(k, h) }, nil
	}
	c.mu.Unlock()
	h, err = openDir(p, target, dir)
	if err != nil {
		return nil, nil, err
	}
	h.refs = 1
	c.mu.Lock()
	if c.m == nil {
		c.m = map[dirKey]*dirHandle{}
	}
	if old := c.m[k]; old != nil {
		// Opened meanwhile by another write: use that one.
		old.refs++
		c.mu.Unlock()
		_ = h.d.Close()
		return old, func() { c.release(k, old) }, nil
	}
	c.m[k] = h
	c.mu.Unlock()
	return h, func() { c.release(k, h) }, nil
}

func (c *dirCache) release(k dirKey, h *dirHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.refs--
	if h.refs > 0 {
		return
	}
	if h.stale || len(c.m) > maxOpenDirs {
		if c.m[k] == h {
			delete(c.m, k)
		}
		_ = h.d.Close()
	}
}

// forget drops h (when it is still the cached one) so that the next write
// opens the directory again.
func (c *dirCache) forget(k dirKey, h *dirHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[k] == h {
		delete(c.m, k)
		h.stale = true
	}
}

// forgetTarget drops the directories of target's instance root.
func (c *dirCache) forgetTarget(target provider.Target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, h := range c.m {
		if k.account == target.Account && k.region == target.Region {
			delete(c.m, k)
			if h.refs == 0 {
				_ = h.d.Close()
			} else {
				h.stale = true
			}
		}
	}
}

// closeIdle closes the directories not in use (after a flush).
func (c *dirCache) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, h := range c.m {
		if h.refs == 0 {
			delete(c.m, k)
			_ = h.d.Close()
		}
	}
}

// openDir opens the directory dir of target's instance root, creating
// both if needed, and sweeps the temporary files a crash left in it (when
// it existed).
func openDir(p *Provider, target provider.Target, dir string) (*dirHandle, error) {
	root, instDir, err := p.roots.Instance(target)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		p.temps.sweep(root, instDir, dir)
		return &dirHandle{d: root, instDir: instDir}, nil
	}
	defer root.Close()
	d, err := openRootDir(root, dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A directory made now holds no leftovers: nothing to sweep.
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create directory %q: %w", dir, err)
		}
		d, err = openRootDir(root, dir)
	case err == nil:
		p.temps.sweep(root, instDir, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("open directory %q: %w", dir, err)
	}
	return &dirHandle{d: d, instDir: instDir}, nil
}

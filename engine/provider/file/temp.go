package file

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
)

// tmpPrefix starts the name of every temporary file writeAtomic creates. The
// full name is tmpPrefix and 16 random hex digits (newTmpName): unique per
// write, so two writes never share (and remove) one temporary file, and
// recognisable for the sweep that removes those a crash left behind.
const tmpPrefix = ".stackd-tmp-"

// newTmpName is the name of a new temporary file.
func newTmpName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return tmpPrefix + hex.EncodeToString(b[:])
}

// isTmpName reports whether name has the exact form tmpName produces.
func isTmpName(name string) bool {
	hexPart, ok := strings.CutPrefix(name, tmpPrefix)
	if !ok || len(hexPart) != 16 {
		return false
	}
	for _, c := range hexPart {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// temps keeps track of temporary files so that those left behind by a write
// a crash interrupted are removed, and those of writes in progress never
// are.
//
// A write interrupted by a kill leaves <dir>/.stackd-tmp-<hex>. The next
// write of the same file replaces it, but the file may never be written
// again (its resource was deleted or moved). So the first time a process
// touches a directory of an instance (Create, Update, Read or Delete of any
// file in it), it sweeps the directory: every temporary file there that no
// write of this process is using is a leftover and is removed. Once per
// directory per process is enough, because within a process a failed write
// removes its own temporary file; only a crash leaves one behind.
type temps struct {
	mu sync.Mutex
	// inflight counts the writes using each temporary file, keyed by
	// instance root on disk and slash path below it.
	inflight map[string]int
	// swept holds the directories already swept, keyed the same way.
	swept map[string]bool
}

func newTemps() *temps {
	return &temps{inflight: map[string]int{}, swept: map[string]bool{}}
}

func tempKey(instDir, rel string) string { return instDir + "\x00" + rel }

// begin marks the temporary file rel of the instance root at instDir as in
// use; the returned function ends that.
func (t *temps) begin(instDir, rel string) (end func()) {
	k := tempKey(instDir, rel)
	t.mu.Lock()
	t.inflight[k]++
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		if t.inflight[k]--; t.inflight[k] <= 0 {
			delete(t.inflight, k)
		}
		t.mu.Unlock()
	}
}

// removeStale removes the temporary file rel (a slash path below root)
// unless a write is using it. The check and the removal happen under the
// lock that begin takes, so a write that starts meanwhile keeps its file.
func (t *temps) removeStale(root *os.Root, instDir, rel string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inflight[tempKey(instDir, rel)] > 0 {
		return nil
	}
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil // not one of ours
	}
	if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// sweep removes the leftover temporary files of dir ("" or a slash path
// ending in "/", below root), the first time it is called for that
// directory. It is best effort: a directory that cannot be listed is left
// as it is (the operation at hand reports what is wrong with it).
func (t *temps) sweep(root *os.Root, instDir, dir string) {
	k := tempKey(instDir, dir)
	t.mu.Lock()
	done := t.swept[k]
	t.mu.Unlock()
	if done {
		return
	}
	d, err := root.Open(dir + ".")
	if err != nil {
		return // missing: nothing to sweep yet
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Type().IsRegular() && isTmpName(e.Name()) {
			if err := t.removeStale(root, instDir, dir+e.Name()); err != nil {
				return // try again next time
			}
		}
	}
	t.mu.Lock()
	t.swept[k] = true
	t.mu.Unlock()
}

// dirOf is the directory part of a clean relative file path: "" for a
// file at the instance root, else a slash path ending in "/".
func dirOf(name string) string {
	dir, _ := path.Split(path.Clean(name))
	return dir
}

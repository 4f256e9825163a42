package gitsource

import (
	"io/fs"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/storage/filesystem"
)

// packIndexesLoaded says whether go-git holds the pack indexes of s's handle in memory
// (its ObjectStorage.index, unexported: read by reflection).
func packIndexesLoaded(t *testing.T, s *Source) bool {
	t.Helper()
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	st, ok := s.repo.Storer.(*filesystem.Storage)
	if !ok {
		t.Fatalf("storer is %T, want *filesystem.Storage", s.repo.Storer)
	}
	idx := reflect.ValueOf(st).Elem().FieldByName("ObjectStorage").FieldByName("index")
	if !idx.IsValid() {
		t.Fatal("go-git's ObjectStorage has no field index any more: update this test and idle.go")
	}
	return !idx.IsNil() && idx.Len() > 0
}

func TestIdleSourceDropsPackIndexes(t *testing.T) {
	bare, _, head := newRemote(t, map[string]string{"stacksets/web.hcl": "a = 1\n"})
	s := openT(t, Options{Repo: "file://" + bare, CacheDir: filepath.Join(t.TempDir(), "cache")})
	trimmed := make(chan struct{}, 16)
	s.idle.mu.Lock()
	s.idle.after = time.Hour // no trim while the test looks
	s.idle.onTrim = func() { trimmed <- struct{}{} }
	s.idle.mu.Unlock()
	ctx := testCtx(t)

	read := func() {
		t.Helper()
		tree, err := s.Tree(ctx, head)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fs.ReadFile(tree, "stacksets/web.hcl")
		if err != nil || string(b) != "a = 1\n" {
			t.Fatalf("ReadFile = %q, %v", b, err)
		}
	}
	read()
	if !packIndexesLoaded(t, s) {
		t.Fatal("after a read go-git holds no pack index: the test no longer shows anything")
	}

	s.idle.mu.Lock()
	s.idle.after = time.Millisecond
	s.idle.mu.Unlock()
	read()
	select {
	case <-trimmed:
	case <-ctx.Done():
		t.Fatal("an idle Source was never trimmed")
	}
	if packIndexesLoaded(t, s) {
		t.Fatal("an idle Source still holds go-git's pack indexes")
	}
	if !s.Trimmed() {
		t.Fatal("Trimmed() = false after a trim with no use since")
	}
	// The indexes come back from disk on the next read.
	s.idle.mu.Lock()
	s.idle.after = time.Hour
	s.idle.mu.Unlock()
	read()
	if !packIndexesLoaded(t, s) {
		t.Fatal("a read after the trim did not load the pack index again")
	}
	if s.Trimmed() {
		t.Fatal("Trimmed() = true after a read")
	}
}

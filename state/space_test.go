package state

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWritesRefusedWhenDiskNearlyFull: below the floor, Open and every
// write are refused with ErrNoSpace and the state is unchanged; reads go
// on; once space is back, writes succeed again.
func TestWritesRefusedWhenDiskNearlyFull(t *testing.T) {
	var free atomic.Uint64
	free.Store(1 << 40)
	c := defaultConfig()
	c.free = func(string) (uint64, error) { return free.Load(), nil }
	c.spaceRecheck = 0 // every write reads the (fake) file system
	dir := filepath.Join(t.TempDir(), "state")

	free.Store(MinFreeSpace - 1)
	if _, err := open(dir, c); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("open below the floor: got %v, want ErrNoSpace", err)
	}

	free.Store(MinFreeSpace)
	s, err := open(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	populate(t, s)
	before := dump(t, s)

	free.Store(MinFreeSpace - 1)
	web, err := s.StackSetByName("web")
	if err != nil {
		t.Fatalf("read below the floor: %v", err)
	}
	for name, write := range map[string]func() error{
		"SetMeta":        func() error { return s.SetMeta("x", []byte("y")) },
		"CreateStackSet": func() error { _, err := s.CreateStackSet("db", t0); return err },
		"DeleteStackSet": func() error { return s.DeleteStackSet(web.ID) },
	} {
		if err := write(); !errors.Is(err, ErrNoSpace) {
			t.Errorf("%s below the floor: got %v, want ErrNoSpace", name, err)
		}
	}
	if diff := cmp.Diff(before, dump(t, s)); diff != "" {
		t.Errorf("refused writes changed the state (-before +after):\n%s", diff)
	}

	free.Store(MinFreeSpace + 1)
	if err := s.SetMeta("x", []byte("y")); err != nil {
		t.Errorf("write once space is back: %v", err)
	}
}

// freeSpace reads a real file system.
func TestFreeSpace(t *testing.T) {
	c := defaultConfig()
	if c.free == nil {
		t.Skip("no statfs here")
	}
	n, err := c.free(t.TempDir())
	if err != nil || n == 0 {
		t.Errorf("freeSpace(TempDir) = %d, %v; want some bytes", n, err)
	}
}

// Below the floor, Close does not flush the memtable into a new table (a
// SIGBUS on a full disk): it syncs the log, which the next Open replays.
func TestCloseWhenDiskNearlyFull(t *testing.T) {
	var free atomic.Uint64
	free.Store(1 << 40)
	c := defaultConfig()
	c.free = func(string) (uint64, error) { return free.Load(), nil }
	c.spaceRecheck = 0
	dir := filepath.Join(t.TempDir(), "state")
	s, err := open(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	tables := len(glob(t, dir, "*.sst"))
	free.Store(0)
	if err := s.Close(); !errors.Is(err, ErrNoSpace) {
		t.Errorf("Close on a full disk: got %v, want ErrNoSpace", err)
	}
	if got := len(glob(t, dir, "*.sst")); got != tables {
		t.Errorf("Close on a full disk wrote %d table files", got-tables)
	}
	// What the exiting process would leave behind, reopened.
	copyDir := copyStateDir(t, dir)
	if err := s.db.Close(); err != nil { // the test process goes on: close for real
		t.Fatal(err)
	}
	r := openAt(t, copyDir)
	if v, err := r.Meta("k"); err != nil || string(v) != "v" {
		t.Errorf("Meta(k) after an unflushed close = %q, %v; want v", v, err)
	}
}

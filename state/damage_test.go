package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// closedState returns the directory of a populated, closed store that has
// at least one table file.
func closedState(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	populate(t, s)
	if err := s.Close(); err != nil { // flushes the memtable into a table
		t.Fatal(err)
	}
	if len(glob(t, dir, "*.sst")) == 0 {
		t.Fatalf("no table file in %s after Close", dir)
	}
	return dir
}

// copyStateDir copies the files of an open state's directory (its LOCK
// left out) to a new directory: what a killed process leaves behind.
func copyStateDir(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "copy")
	if err := os.MkdirAll(out, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range glob(t, dir, "*") {
		if filepath.Base(p) == "LOCK" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, filepath.Base(p)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func glob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// listing is a directory's file names and sizes.
func listing(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = info.Size()
	}
	return out
}

// TestOpenDamagedState: a damaged directory is ErrDamaged saying what is
// wrong — never a panic, never an empty state — and Open changes nothing
// in it.
func TestOpenDamagedState(t *testing.T) {
	rewrite := func(t *testing.T, path string, f func([]byte) []byte) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	eachTable := func(t *testing.T, dir string, f func(path string)) {
		for _, p := range glob(t, dir, "*.sst") {
			f(p)
		}
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"MANIFEST deleted", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "MANIFEST"))
		}, "MANIFEST file is missing"},
		{"MANIFEST empty", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "MANIFEST"), func([]byte) []byte { return nil })
		}, "MANIFEST cannot be read"},
		{"MANIFEST truncated after its header", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "MANIFEST"), func(b []byte) []byte { return b[:10] })
		}, "MANIFEST lists none"},
		{"tables zeroed", func(t *testing.T, dir string) {
			eachTable(t, dir, func(p string) { rewrite(t, p, func(b []byte) []byte { return make([]byte, len(b)) }) })
		}, "is unreadable"},
		{"tables truncated", func(t *testing.T, dir string) {
			eachTable(t, dir, func(p string) { rewrite(t, p, func(b []byte) []byte { return b[:100] }) })
		}, "is unreadable"},
		{"tables emptied", func(t *testing.T, dir string) {
			eachTable(t, dir, func(p string) { rewrite(t, p, func([]byte) []byte { return nil }) })
		}, "is unreadable"},
		{"a byte flipped in a table", func(t *testing.T, dir string) {
			eachTable(t, dir, func(p string) {
				rewrite(t, p, func(b []byte) []byte { b[20] ^= 0xff; return b })
			})
		}, "is unreadable"},
		{"tables deleted", func(t *testing.T, dir string) {
			eachTable(t, dir, func(p string) { os.Remove(p) })
		}, "is missing"},
		{"KEYREGISTRY emptied", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "KEYREGISTRY"), func([]byte) []byte { return nil })
		}, "KEYREGISTRY file is truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := closedState(t)
			tc.damage(t, dir)
			before := listing(t, dir)
			s, err := Open(dir)
			if err == nil {
				s.Close()
				t.Fatalf("Open of a damaged state succeeded")
			}
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: got %v, want ErrDamaged mentioning %q", err, tc.want)
			}
			if diff := cmp.Diff(before, listing(t, dir)); diff != "" {
				t.Errorf("a refused Open changed the directory (-before +after):\n%s", diff)
			}
		})
	}
}

// Files Badger may remove itself — a table a crash left unrecorded next to
// recorded ones, an empty value-log file — are no damage.
func TestOpenAfterCrashLeftovers(t *testing.T) {
	dir := closedState(t)
	tables := glob(t, dir, "*.sst")
	b, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	// A table written but not yet recorded in the MANIFEST.
	if err := os.WriteFile(filepath.Join(dir, "000099.sst"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, dir)
	if _, err := s.StackSetByName("web"); err != nil {
		t.Errorf("state after a crash leftover: %v", err)
	}
}

// A directory whose every file is gone opens as an empty state: only the
// status branch can tell that from a fresh start (the reconciler checks).
func TestOpenEmptiedDirectory(t *testing.T) {
	dir := closedState(t)
	for _, p := range glob(t, dir, "*") {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	s := openAt(t, dir)
	sets, err := s.ListStackSets()
	if err != nil || len(sets) != 0 {
		t.Errorf("ListStackSets = %v, %v; want none", sets, err)
	}
}

// A process killed during its state's first flush leaves a table the
// MANIFEST does not list yet, next to the write-ahead log that still holds
// its data: no damage, and nothing is lost.
func TestOpenAfterCrashDuringFirstFlush(t *testing.T) {
	table := glob(t, closedState(t), "*.sst")[0]
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	// The directory as a kill would leave it: copied while open.
	crashed := copyStateDir(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(glob(t, crashed, "*.mem")) == 0 {
		t.Fatal("no write-ahead log in the crashed copy")
	}
	b, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, "000001.sst"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := openAt(t, crashed)
	if v, err := r.Meta("k"); err != nil || string(v) != "v" {
		t.Errorf("Meta(k) after the crash = %q, %v; want v", v, err)
	}
}

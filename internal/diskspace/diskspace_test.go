package diskspace

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// fakeFS is a file system whose free space the test sets, per directory;
// it records the paths measured.
type fakeFS struct {
	mu       sync.Mutex
	free     map[string]uint64
	measured []string
}

func (f *fakeFS) Free(path string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.measured = append(f.measured, path)
	n, ok := f.free[path]
	if !ok {
		return 0, errors.New("no such file system")
	}
	return n, nil
}

func (f *fakeFS) set(path string, n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.free[path] = n
}

func TestCheckSpace(t *testing.T) {
	state, targets := t.TempDir(), t.TempDir()
	fs := &fakeFS{free: map[string]uint64{state: 1 << 30, targets: 1 << 30}}
	var logs bytes.Buffer
	c := New(Options{Min: 100 << 20, Dirs: []Dir{{"state", state}, {"targets", targets}}, Log: zerolog.New(&logs), Free: fs.Free})

	if err := c.CheckSpace(); err != nil {
		t.Fatalf("1 GiB free: %v", err)
	}
	if ok, why := c.Ready(); !ok {
		t.Errorf("Ready = false (%s), want true", why)
	}

	fs.set(targets, 10<<20)
	err := c.CheckSpace()
	var low *LowError
	if !errors.As(err, &low) || low.Dir.Name != "targets" || low.Free != 10<<20 {
		t.Fatalf("10 MiB free on targets: got %v, want a LowError for targets", err)
	}
	if got, want := err.Error(), "free space for the targets ("+targets+") is 10 MiB, below the minimum of 100 MiB"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	ok, why := c.Ready()
	if ok || !strings.Contains(why, "targets") || !strings.Contains(why, "no operation starts") {
		t.Errorf("Ready = %v, %q; want false naming the targets", ok, why)
	}
	if n := strings.Count(logs.String(), "low disk space"); n != 1 {
		t.Errorf("%d warnings for one fall below the minimum, want 1:\n%s", n, logs.String())
	}

	fs.set(targets, 100<<20)
	if err := c.CheckSpace(); err != nil {
		t.Errorf("exactly the minimum free: %v", err)
	}
	if !strings.Contains(logs.String(), "disk space back above the minimum") {
		t.Errorf("no note when space came back:\n%s", logs.String())
	}

	// Min 0: nothing is refused.
	off := New(Options{Dirs: []Dir{{"state", state}}, Free: fs.Free})
	fs.set(state, 0)
	if err := off.CheckSpace(); err != nil {
		t.Errorf("threshold 0: %v", err)
	}
}

// A directory that does not exist yet is measured at its nearest parent.
func TestMissingDirMeasuredAtParent(t *testing.T) {
	root := t.TempDir()
	fs := &fakeFS{free: map[string]uint64{root: 1}}
	c := New(Options{Min: 2, Dirs: []Dir{{"targets", filepath.Join(root, "a", "b")}}, Free: fs.Free})
	if err := c.CheckSpace(); err == nil {
		t.Error("1 byte free at the parent: no error")
	}
	if got := fs.measured[len(fs.measured)-1]; got != root {
		t.Errorf("measured %s, want the existing parent %s", got, root)
	}
}

// A file system that cannot be measured blocks nothing.
func TestUnmeasurable(t *testing.T) {
	fs := &fakeFS{free: map[string]uint64{}}
	c := New(Options{Min: 1 << 30, Dirs: []Dir{{"state", t.TempDir()}}, Free: fs.Free, Log: zerolog.Nop()})
	if err := c.CheckSpace(); err != nil {
		t.Errorf("unmeasurable: %v", err)
	}
}

func TestCollector(t *testing.T) {
	state := t.TempDir()
	fs := &fakeFS{free: map[string]uint64{state: 5 << 20}}
	c := New(Options{Min: 100 << 20, Dirs: []Dir{{"state", state}, {"targets", state}}, Free: fs.Free})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collector())
	for _, tc := range []struct {
		name  string
		value float64
		n     int
	}{
		{"stackd_low_disk", 1, 1},
		{"stackd_min_free_space_bytes", 100 << 20, 1},
		{"stackd_free_space_bytes", 5 << 20, 1}, // one path, named twice
	} {
		v, n := gauge(t, reg, tc.name)
		if v != tc.value || n != tc.n {
			t.Errorf("%s = %v (%d series), want %v (%d)", tc.name, v, n, tc.value, tc.n)
		}
	}
	fs.set(state, 200<<20)
	if v, _ := gauge(t, reg, "stackd_low_disk"); v != 0 {
		t.Errorf("stackd_low_disk = %v with space back, want 0", v)
	}
}

// gauge gathers reg and returns the sum of the samples of gauge name and
// their number.
func gauge(t *testing.T, reg *prometheus.Registry, name string) (float64, int) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, n := 0.0, 0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue()
			n++
		}
	}
	return sum, n
}

// The real statfs measures something.
func TestStatfs(t *testing.T) {
	n, err := statfs(t.TempDir())
	if err != nil || n == 0 {
		t.Errorf("statfs(TempDir) = %d, %v", n, err)
	}
}

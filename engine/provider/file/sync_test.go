package file

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// TestGroupSyncSharesFlushes: callers waiting while a flush runs are all
// served by the one flush after it, and nobody is served by a flush that
// started before they called.
func TestGroupSyncSharesFlushes(t *testing.T) {
	started := make(chan int, 10)
	release := make(chan error)
	flushes := 0
	g := newGroupSync(func() error {
		flushes++
		started <- flushes
		return <-release
	})

	first := make(chan error, 1)
	go func() { first <- g.Sync(context.Background()) }()
	if n := <-started; n != 1 {
		t.Fatalf("flush %d started, want 1", n)
	}
	// While flush 1 runs, five callers arrive: flush 1 may not serve them
	// (their writes may have come after it began).
	const waiting = 5
	var wg sync.WaitGroup
	errs := make(chan error, waiting)
	for range waiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- g.Sync(context.Background())
		}()
	}
	for g.queued() < waiting {
		runtime.Gosched()
		// Wait until all five are queued behind flush 1: each appends
		// itself before blocking. (No sleep: queued takes the lock.)
		select {
		case err := <-first:
			t.Fatalf("first Sync returned %v before its flush ended", err)
		default:
		}
	}
	release <- nil
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := <-started; n != 2 {
		t.Fatalf("flush %d started, want 2", n)
	}
	boom := errors.New("flush failed")
	release <- boom
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, boom) {
			t.Errorf("a caller served by flush 2 got %v, want its error", err)
		}
	}
	if flushes != 2 {
		t.Errorf("%d flushes for 6 callers, want 2", flushes)
	}
}

// TestGroupSyncContext: a caller whose context ends stops waiting.
func TestGroupSyncContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	g := newGroupSync(func() error { <-release; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync with an ended context: %v", err)
	}
}

// TestProviderSync: a real flush of a real targets root, and none needed
// for a root not created yet.
func TestProviderSync(t *testing.T) {
	root := filepath.Join(t.TempDir(), "targets")
	p := New(Options{Root: root})
	target := provider.Target{Region: "eu", Account: "111"}
	if err := p.Sync(context.Background(), target); err != nil {
		t.Fatalf("Sync before anything was written: %v", err)
	}
	props := cty.ObjectVal(map[string]cty.Value{"path": cty.StringVal("a/b.txt"), "content": cty.StringVal("hello"), "mode": cty.NullVal(cty.String)})
	if _, err := p.Create(context.Background(), provider.Request{Target: target, Properties: props}); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(context.Background(), target); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(root, "111", "eu", "a", "b.txt"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("file after Sync: %q, %v", got, err)
	}
}

// TestCreatesWith: a chmod is skipped only when the umask takes no bit of
// the mode away (TestMode checks the modes files get both ways).
func TestCreatesWith(t *testing.T) {
	umask, ok := processUmask()
	if !ok {
		t.Skip("the umask cannot be read here")
	}
	for _, mode := range []fs.FileMode{0o600, 0o644, 0o666, 0o755, 0o777} {
		if got, want := createsWith(mode), mode&umask == 0; got != want {
			t.Errorf("createsWith(%o) with umask %o = %v, want %v", mode, umask, got, want)
		}
	}
}

// queued is how many callers wait for the next flush.
func (g *groupSync) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

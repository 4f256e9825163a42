package reconciler_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// gate is a SpaceGate whose answer the test sets.
type gate struct{ low atomic.Pointer[error] }

func (g *gate) CheckSpace() error {
	if p := g.low.Load(); p != nil {
		return *p
	}
	return nil
}

// second wires another reconciler to the harness's repository, over a state
// of its own.
func second(t *testing.T, h *harness, opts reconciler.Options) (*reconciler.Reconciler, *state.Store) {
	t.Helper()
	src, err := gitsource.Open(t.Context(), gitsource.Options{Repo: h.repo})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opts.Source, opts.Store, opts.Engine, opts.Log = src, st, engine.New(provider.Registry{"ctl": h.ctl}), zerolog.Nop()
	rec, err := reconciler.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return rec, st
}

// TestLostStateRefused: a state that is empty while the status branch shows
// deployed stack sets deploys nothing until adopted; a new state next to a
// repository without status deploys.
func TestLostStateRefused(t *testing.T) {
	c := newCtl()
	h, _ := newHarness(t, c, map[string]string{
		"web.hcl": stackSetHCL("web", "v1", []string{"eu"}, accountIDs(2), ""),
		"db.hcl":  stackSetHCL("db", "v1", []string{"eu"}, accountIDs(1), ""),
	})
	if err := h.rec.CheckState(t.Context()); err != nil {
		t.Fatalf("CheckState of a new state, no status branch yet: %v", err)
	}
	if _, err := h.rec.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	calls := len(c.eventsOf("web")) + len(c.eventsOf("db"))

	lost, _ := second(t, h, reconciler.Options{})
	for name, err := range map[string]error{
		"CheckState": lost.CheckState(t.Context()),
		"Reconcile":  func() error { _, err := lost.Reconcile(t.Context()); return err }(),
	} {
		var empty *reconciler.EmptyStateError
		if !errors.As(err, &empty) {
			t.Fatalf("%s on a lost state: got %v, want an EmptyStateError", name, err)
		}
		if !slices.Equal(empty.StackSets, []string{"db", "web"}) || empty.StatusBranch != "stackd/status" || len(empty.Commit) != 40 {
			t.Errorf("%s: %+v, want stack sets db and web on stackd/status", name, empty)
		}
		if msg := err.Error(); !strings.Contains(msg, "shows 2 stack sets deployed (db, web)") || !strings.Contains(msg, "restored from a backup") {
			t.Errorf("%s: message %q", name, msg)
		}
	}
	if got := len(c.eventsOf("web")) + len(c.eventsOf("db")); got != calls {
		t.Errorf("the refused pass made %d provider calls", got-calls)
	}

	adopted, st := second(t, h, reconciler.Options{AdoptEmptyState: true})
	res, err := adopted.Reconcile(t.Context())
	if err != nil || len(res.Operations) != 2 {
		t.Fatalf("Reconcile with AdoptEmptyState: %v, %+v; want two operations", err, res)
	}
	if sets, _ := st.ListStackSets(); len(sets) != 2 {
		t.Errorf("adopted state holds %d stack sets, want 2", len(sets))
	}
}

// TestSpaceGate: while the gate reports no room, a pass starts no
// operation and fails saying why; the same revision deploys once it has
// room. A pass with nothing to do is not refused.
func TestSpaceGate(t *testing.T) {
	c := newCtl()
	h, _ := newHarness(t, c, map[string]string{"web.hcl": stackSetHCL("web", "v1", []string{"eu"}, accountIDs(2), "")})
	g := &gate{}
	low := errors.New("free space for the state directory is 1 MiB, below the minimum of 256 MiB")
	g.low.Store(&low)
	rec, st := second(t, h, reconciler.Options{Space: g})
	if _, err := rec.Reconcile(t.Context()); !errors.Is(err, low) || !strings.Contains(err.Error(), "no operation started") {
		t.Fatalf("Reconcile with no room: got %v, want the gate's error", err)
	}
	if sets, _ := st.ListStackSets(); len(sets) != 0 || len(c.eventsOf("web")) != 0 {
		t.Fatalf("a pass with no room started something: %d stack sets, %d calls", len(sets), len(c.eventsOf("web")))
	}
	g.low.Store(nil)
	res, err := rec.Reconcile(t.Context())
	if err != nil || len(res.Operations) != 1 || res.Operations[0].Status != state.OperationSucceeded {
		t.Fatalf("Reconcile with room: %v, %+v", err, res)
	}
	g.low.Store(&low)
	if res, err := rec.Reconcile(t.Context()); err != nil || !res.UpToDate {
		t.Errorf("an up-to-date pass with no room: %v, %+v; want up to date, no error", err, res)
	}
}

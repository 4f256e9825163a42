package reconciler_test

import (
	"context"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

var _ reconciler.FaultReporter = (*gitsource.Source)(nil)

// faultMetrics records GitFault calls.
type faultMetrics struct {
	mu     sync.Mutex
	faults map[string]int
}

func (m *faultMetrics) OperationFinished(string, string)       {}
func (m *faultMetrics) InstanceDuration(string, time.Duration) {}
func (m *faultMetrics) ReconcileDone(time.Duration, error)     {}
func (m *faultMetrics) FetchDone(time.Duration, error)         {}
func (m *faultMetrics) QueueLength(int)                        {}
func (m *faultMetrics) PhaseTime(string, time.Duration)        {}
func (m *faultMetrics) Drift(string, int)                      {}
func (m *faultMetrics) GitFault(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults[kind]++
}

func (m *faultMetrics) counts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.faults)
}

// A deploy branch rewritten under the reconciler (here a local branch reset
// to a sibling of its head, as a force-push does to a remote) is followed
// and counted as a force_push Git fault; a fast-forward is not.
func TestForcePushIsCounted(t *testing.T) {
	c := newCtl()
	t.Cleanup(c.openAll)
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	runGit(t, dir, "init", "-q", repo)
	files := map[string]string{"templates/ctl/main.hcl": ctlTemplate}
	set := func(tag string) map[string]string {
		files["s.hcl"] = stackSetHCL("web", tag, []string{"r1"}, []string{accountID(1)}, "")
		return files
	}
	rev1 := commitFiles(t, repo, set("v1"), "v1")
	src, err := gitsource.Open(t.Context(), gitsource.Options{Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := &faultMetrics{faults: map[string]int{}}
	rec, err := reconciler.New(reconciler.Options{
		Source: src, Store: st, Engine: engine.New(provider.Registry{"ctl": c}), Log: zerolog.Nop(), Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	reconcile := func(want string) {
		t.Helper()
		res, err := rec.Reconcile(context.Background())
		if err != nil || res.Revision != want {
			t.Fatalf("Reconcile: %+v, %v; want revision %s", res, err, want)
		}
	}
	reconcile(rev1)
	rev2 := commitFiles(t, repo, set("v2"), "v2")
	reconcile(rev2)
	if diff := cmp.Diff(map[string]int{}, m.counts()); diff != "" {
		t.Errorf("Git faults after a fast-forward (-want +got):\n%s", diff)
	}

	runGit(t, repo, "reset", "-q", "--hard", rev1)
	rev3 := commitFiles(t, repo, set("v3"), "v3 instead of v2")
	reconcile(rev3)
	if diff := cmp.Diff(map[string]int{"force_push": 1}, m.counts()); diff != "" {
		t.Errorf("Git faults after the rewrite (-want +got):\n%s", diff)
	}
	c.mu.Lock()
	got := c.world["web/r1/"+accountID(1)]
	c.mu.Unlock()
	if got != "v3" {
		t.Errorf("deployed tag %q after the rewrite, want v3", got)
	}
}

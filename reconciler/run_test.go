package reconciler_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// passMetrics records the reconcile passes by result.
type passMetrics struct {
	faultMetrics
	mu     sync.Mutex
	failed int
	ok     int
}

func (m *passMetrics) ReconcileDone(_ time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.failed++
	} else {
		m.ok++
	}
}

func (m *passMetrics) counts() (ok, failed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ok, m.failed
}

// A remote that comes back is used at the next trigger (a poll tick, a
// webhook), not when the retry backoff says: the backoff's clock never
// moves here. Failed fetches count as failed reconciles (the alert on
// stackd_reconciles_total{result="error"} fires during the outage).
func TestReturningRemoteUsedAtOnce(t *testing.T) {
	c := newCtl()
	dir := t.TempDir()
	remote, work := filepath.Join(dir, "remote.git"), filepath.Join(dir, "work")
	runGit(t, dir, "init", "-q", "--bare", "-b", "main", remote)
	runGit(t, dir, "init", "-q", "-b", "main", work)
	set := func(tag string) map[string]string {
		return map[string]string{
			"templates/ctl/main.hcl": ctlTemplate,
			"web.hcl":                stackSetHCL("web", tag, []string{"eu"}, accountIDs(2), ""),
		}
	}
	push := func(tag string) string {
		rev := commitFiles(t, work, set(tag), tag)
		runGit(t, work, "push", "-q", remote, "main")
		return rev
	}
	rev1 := push("v1")
	src, err := gitsource.Open(t.Context(), gitsource.Options{Repo: "file://" + remote, CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := &passMetrics{faultMetrics: faultMetrics{faults: map[string]int{}}}
	clock := newFakeClock(false) // the backoff's: it never fires here
	rec, err := reconciler.New(reconciler.Options{
		Source: src, Store: st, Engine: engine.New(provider.Registry{"ctl": c}), Log: zerolog.Nop(), Metrics: m, Clock: clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{repo: remote, store: st, ctl: c, rec: rec}
	d := runDriver(t, h)
	defer d.stop(t)
	eventually(t, "v1 deployed", opStatusIs(st, "web", rev1, state.OperationSucceeded))

	// The outage: the remote is gone; a trigger makes a pass that fails.
	away := filepath.Join(dir, "away.git")
	if err := os.Rename(remote, away); err != nil {
		t.Fatal(err)
	}
	_, failedBefore := m.counts()
	d.submit()
	eventually(t, "a failed pass counted during the outage", func() (bool, string) {
		_, failed := m.counts()
		return failed > failedBefore, fmt.Sprintf("%d failed passes", failed)
	})
	// A trigger during the outage tries again at once (and fails again).
	_, failedOnce := m.counts()
	d.submit()
	eventually(t, "a triggered retry during the outage", func() (bool, string) {
		_, failed := m.counts()
		return failed > failedOnce, fmt.Sprintf("%d failed passes", failed)
	})
	if h := rec.Health(); h.Err == "" {
		t.Errorf("health during the outage has no error: %+v", h)
	}

	// The remote is back with a new commit: the next trigger deploys it,
	// although the backoff (1 s and more, on the fake clock) never ended.
	if err := os.Rename(away, remote); err != nil {
		t.Fatal(err)
	}
	rev2 := push("v2")
	d.submit()
	eventually(t, "v2 deployed at the first trigger after the remote returned", opStatusIs(st, "web", rev2, state.OperationSucceeded))
	if h := rec.Health(); h.Err != "" {
		t.Errorf("health after the remote returned: %+v", h)
	}
}

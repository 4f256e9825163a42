package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// busyBranchTargets and busyBranchWork make the pull-request branch of the
// push-latency-busy scenario expensive to plan: 200 instances whose
// template hashes busyBranchWork thousand strings each (about 0.15 s per instance
// on the machine the figures in docs/performance.md come from).
const (
	busyBranchRegions, busyBranchAccounts = 20, 10
	busyBranchWork                        = 5 // thousands of hashes per instance
)

// BusyBranchDefs is the expensive branch: a stack set of 200 instances
// whose plan is honest but slow. version makes each push a new head.
func BusyBranchDefs(version string) map[string]string {
	files := fleetDefs(busyBranchRegions, busyBranchAccounts, 1, false, version)
	files["template/main.hcl"] += fmt.Sprintf(`
locals {
  digest = sha256(join(",", flatten([for i in range(1000) : [for j in range(%d) : sha256("${target.account}-${target.region}-${i}-${j}")]])))
}

resource "file" "digest" {
  path    = "fleet/digest"
  content = local.digest
}
`, busyBranchWork)
	return files
}

// storeBranch points branch at a new commit holding exactly files (on top
// of the branch's previous head, if any), without touching the work tree.
func (f *fleet) storeBranch(branch string, files map[string]string) error {
	b := make(map[string][]byte, len(files))
	for name, content := range files {
		b[name] = []byte(content)
	}
	_, err := f.repo.CommitTree(branch, b, "bench: "+branch)
	return err
}

// pushLatencyBusy is pushLatency while a pull-request branch that takes
// tens of seconds to plan is pushed before each commit to the deploy
// branch, so that branch planning runs the whole time. It also reports how
// long one plan of that branch takes.
func (f *fleet) pushLatencyBusy(ctx context.Context, n int, res *Result) error {
	if err := f.storeBranch("busy", BusyBranchDefs("busy-0")); err != nil {
		return err
	}
	start := time.Now()
	plan, err := f.d.Reconciler.Plan(ctx, "busy")
	if err != nil {
		return err
	}
	if len(plan.Diagnostics) > 0 {
		return fmt.Errorf("the busy branch does not plan: %v", plan.Diagnostics)
	}
	res.PlanSeconds = time.Since(start).Seconds()
	i := 0
	lat, err := f.measurePushes(ctx, n, func() error {
		i++
		return f.storeBranch("busy", BusyBranchDefs(fmt.Sprintf("busy-%d", i)))
	})
	if err != nil {
		return err
	}
	res.MedianSeconds, res.MinSeconds, res.MaxSeconds = lat[len(lat)/2], lat[0], lat[len(lat)-1]
	return nil
}

// measurePushes runs the daemon loop on the fleet's repository and
// measures, for n commits to the deploy branch, the time from the commit
// being written to its operation starting (the "operation started" log
// line). before, if set, runs before each commit. The latencies are
// returned sorted.
func (f *fleet) measurePushes(ctx context.Context, n int, before func() error) ([]float64, error) {
	if err := f.reconcile(ctx); err != nil {
		return nil, err
	}
	f.close()
	f.d = nil
	started := make(chan time.Time, 16)
	opts := f.opts
	opts.LogLevel = "info"
	d, err := f.open(ctx, opts, &lineWatcher{match: []byte(`"operation started"`), ch: started})
	if err != nil {
		return nil, err
	}
	f.d = d
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { d.Reconciler.Run(runCtx, d.Source.Watch(runCtx, time.Hour), time.Second) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	var lat []float64
	for i := 0; i < n; i++ {
		if before != nil {
			if err := before(); err != nil {
				return nil, err
			}
		}
		files := fleetDefs(1, 1, 1, false, fmt.Sprintf("push-%d", i))
		t0 := time.Now()
		if err := f.commit(files); err != nil {
			return nil, err
		}
		select {
		case t1 := <-started:
			lat = append(lat, t1.Sub(t0).Seconds())
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("commit %d: no operation started within 30s", i)
		}
		// Let the operation finish before the next commit.
		if err := waitIdle(ctx, d); err != nil {
			return nil, err
		}
	}
	sort.Float64s(lat)
	return lat, nil
}

package reconciler

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// Region scheduling: the RFS operation preferences' sliding window —
// regions in order (SEQUENTIAL or PARALLEL), at most max-concurrent
// instances of a region at a time, STRICT or SOFT concurrency, and
// cancellation once the failure tolerance is exceeded (docs/design.md §5).

// schedule runs the works by the RFS operation preferences (runRegions),
// or by the stack set's rollout (runRollout); inside a region at most
// max-concurrent instances at a time; more failures than the tolerance
// cancel what has not started.
func (o *opRun) schedule(ctx context.Context) {
	prefs := config.DefaultPreferences()
	if o.j.desired != nil {
		prefs = o.j.desired.Preferences
		if o.j.desired.Rollout != nil {
			o.runRollout(ctx, prefs)
			return
		}
	}
	var run []*work
	for _, w := range o.j.works {
		if w.action == actionSkip {
			// Suspended accounts are recorded, never scheduled: they take
			// no slot of concurrency, but count in the region's base of
			// percentages like every instance of the operation
			// (regionBase).
			o.settle(w, state.InstanceSkippedSuspendedAccount, "the account is suspended in the organization", nil)
			continue
		}
		run = append(run, w)
	}
	o.runRegions(ctx, prefs, run)
}

// runRegions runs works by the operation preferences: regions in
// region_order (regionsInOrder; without one, SEQUENTIAL regions go in an
// order random per operation), one after another (SEQUENTIAL) or all at
// once (PARALLEL); a region whose failures exceed the tolerance cancels
// every later region (SEQUENTIAL) or only itself (PARALLEL). Every
// operation kind goes through it: creates, updates and deletes, with or
// without a rollout.
func (o *opRun) runRegions(ctx context.Context, prefs config.OperationPreferences, works []*work) {
	regions, byRegion := regionsInOrder(prefs, works)
	if prefs.RegionConcurrency != config.Parallel && len(prefs.RegionOrder) == 0 && len(regions) > 1 {
		// The seed: without region_order, SEQUENTIAL regions go in random
		// order. Seeded by the operation id, so a resumed operation keeps it.
		h := fnv.New64a()
		h.Write([]byte(o.op.ID))
		rnd := rand.New(rand.NewPCG(h.Sum64(), 0))
		rnd.Shuffle(len(regions), func(a, b int) { regions[a], regions[b] = regions[b], regions[a] })
		o.log.Info().Strs("region_order", regions).Msg("regions in random order (no region_order set)")
	}
	stopped := forEachRegion(regions, prefs.RegionConcurrency == config.Parallel, func(region string) bool {
		return o.runRegion(ctx, prefs, byRegion[region])
	})
	if stopped < 0 || ctx.Err() != nil || o.r.stop.Stopped() {
		return // done, or interrupted: the operation resumes on restart
	}
	for _, rest := range regions[stopped+1:] {
		o.cancel(byRegion[rest], "failure tolerance exceeded in region "+regions[stopped])
	}
}

// forEachRegion is the one loop over an operation's regions: all at once
// (parallel: fn's answer only ends its own region), or one after another
// in the order given, stopping at the first for which fn reports false.
// It returns the index of the region a sequential loop stopped at, or -1.
func forEachRegion(regions []string, parallel bool, fn func(region string) bool) int {
	if parallel {
		var wg sync.WaitGroup
		for _, region := range regions {
			wg.Go(func() { fn(region) })
		}
		wg.Wait()
		return -1
	}
	for i, region := range regions {
		if !fn(region) {
			return i
		}
	}
	return -1
}

// regionsInOrder groups works by region, the regions in region_order when
// one is set: every operation kind follows it, deletes included (DESIGN
// §5). Regions region_order does not list (a region removed from the
// targets, whose instances are being deleted) come after, sorted. Without
// region_order the regions keep the order of the works.
func regionsInOrder(prefs config.OperationPreferences, works []*work) ([]string, map[string][]*work) {
	var regions []string
	byRegion := map[string][]*work{}
	for _, w := range works {
		if _, ok := byRegion[w.target.Region]; !ok {
			regions = append(regions, w.target.Region)
		}
		byRegion[w.target.Region] = append(byRegion[w.target.Region], w)
	}
	if len(prefs.RegionOrder) > 0 {
		rank := func(r string) int {
			if i := slices.Index(prefs.RegionOrder, r); i >= 0 {
				return i
			}
			return len(prefs.RegionOrder)
		}
		sort.SliceStable(regions, func(a, b int) bool {
			ra, rb := rank(regions[a]), rank(regions[b])
			if ra != rb {
				return ra < rb
			}
			return ra == len(prefs.RegionOrder) && regions[a] < regions[b]
		})
	}
	return regions, byRegion
}

// regionBase is the number of the operation's instances in a region: the
// base of its failure tolerance and max concurrency percentages, the same
// for the scheduler and the operation's final status. It counts every
// instance of the operation, on a resumed operation those it finished
// before, and the stack set's suspended accounts in the region (the seed:
// a percentage of all the stack instances of the region): whether this
// operation records them SKIPPED_SUSPENDED_ACCOUNT or an earlier one
// already did (they are then no work of this one), every operation and
// every region counts them alike.
func (o *opRun) regionBase(region string) int {
	o.baseOnce.Do(func() {
		o.base = map[string]int{}
		targets := unionTargets(o.prior, o.j.works)
		if ss := o.j.desired; ss != nil {
			for _, t := range ss.Targets() {
				if ss.SuspendedAccounts[t.Account] {
					targets[t] = true
				}
			}
		}
		for t := range targets {
			o.base[t.Region]++
		}
	})
	return o.base[region]
}

// runRegion runs one region's works; it reports false when the failure
// tolerance was exceeded (or the context ended).
func (o *opRun) runRegion(ctx context.Context, prefs config.OperationPreferences, works []*work) bool {
	if len(works) == 0 {
		return true
	}
	tolerance, maxConc := prefs.Limits(o.regionBase(works[0].target.Region))
	_, ok := o.runRegionWith(ctx, works, tolerance, maxConc, prefs.Strict(), 0)
	return ok
}

// runRegionWith runs works of one region with the region's limits, counting
// failed failures the region had before (a rollout runs a region's
// instances batch by batch); it returns the region's failures and false
// when the tolerance was exceeded (or the context ended).
func (o *opRun) runRegionWith(ctx context.Context, works []*work, tolerance, maxConc int, strict bool, failed int) (int, bool) {
	done := make(chan bool)
	running, failures := 0, failed
	wait := func() {
		if !<-done {
			failures++
		}
		running--
	}
	limit := func() int {
		if !strict {
			return maxConc
		}
		// STRICT: never run more than could fail without exceeding the
		// tolerance by more than one.
		return max(1, min(maxConc, tolerance+1-failures))
	}
	// drain takes every result already reported, so that a failure that
	// has happened is counted before the next instance starts.
	drain := func() {
		for running > 0 {
			select {
			case ok := <-done:
				if !ok {
					failures++
				}
				running--
			default:
				return
			}
		}
	}
	i := 0
	for ; i < len(works); i++ {
		for running > 0 && running >= limit() {
			wait()
		}
		drain()
		if failures > tolerance || ctx.Err() != nil || o.r.stop.Stopped() || o.aborted() {
			break
		}
		running++
		w := works[i]
		o.r.inflight <- struct{}{}
		go func() {
			ok := o.execute(ctx, w)
			<-o.r.inflight // release before reporting, so no region waits on another
			done <- ok
		}()
	}
	for running > 0 {
		wait()
	}
	if i < len(works) {
		reason := "failure tolerance exceeded"
		switch {
		case ctx.Err() != nil || o.r.stop.Stopped():
			reason = "operation interrupted"
		case failures <= tolerance && o.aborted():
			reason = o.ro.abortedBy()
		}
		o.cancel(works[i:], reason)
	}
	return failures, failures <= tolerance && ctx.Err() == nil && !o.r.stop.Stopped()
}

// aborted reports whether the operation's rollout was aborted: no instance
// starts after that (those in flight finish).
func (o *opRun) aborted() bool {
	return o.ro != nil && o.ro.isAborted()
}

// cancel marks works that never started CANCEL_COMPLETE (not when the
// daemon is merely stopping: the operation resumes on restart).
func (o *opRun) cancel(works []*work, reason string) {
	if reason == "operation interrupted" {
		return
	}
	for _, w := range works {
		o.settle(w, state.InstanceCancelComplete, reason, nil)
	}
}

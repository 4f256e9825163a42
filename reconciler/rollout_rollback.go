package reconciler

// Rolling back a failed rollout: each instance the operation changed goes
// back to the revision it ran before, newest batch first, each batch
// paced and gated (docs/design.md §6).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// fail stops the rollout: what has not started is cancelled, and with
// on_failure = "rollback" what the operation changed is rolled back.
func (rr *rolloutRun) fail(ctx context.Context, bf *batchFailure) {
	o := rr.o
	prog := o.op.Rollout
	prog.FailedBatch = bf.batch
	o.log.Error().Int("batch", bf.batch).Bool("aborted", bf.aborted).Str("reason", bf.reason).Msg("rollout stopped")
	o.event("", "", "", eventRolloutStopped, bf.reason)
	var rest []*work
	o.mu.Lock()
	prior := map[config.Target]state.InstanceResult{}
	for _, pr := range rr.prior {
		prior[config.Target{Region: pr.Region, Account: pr.Account}] = pr
	}
	for _, w := range o.j.works {
		if _, ok := o.results[w.target]; !ok {
			rest = append(rest, w)
		}
	}
	o.mu.Unlock()
	cancelReason := "rollout stopped: " + bf.reason
	for _, w := range rest {
		if pr, ok := prior[w.target]; ok {
			// Settled by the interrupted run (a resumed rollback): keep it.
			rr.restore(w, pr)
			continue
		}
		if rr.inFlightAtRestart(w.target) {
			if rr.spec.OnFailure == config.OnFailureRollback {
				continue // changed, maybe part way: the rollback returns it
			}
			o.settle(w, state.InstanceOperationFailed, "interrupted by a restart while it deployed, and "+bf.reason+" before it resumed: its resources may be partly applied; the next operation applies it again", nil)
			continue
		}
		o.settle(w, state.InstanceCancelComplete, cancelReason, nil)
	}
	rr.reason = bf.reason
	switch {
	case rr.spec.OnFailure == config.OnFailureRollback:
		o.op.Reason = bf.reason
		if prog.Phase != state.RolloutRollingBack || prog.RollbackBatch == 0 {
			prog.RollbackBatch = max(prog.Batch, 1)
		}
		prog.Phase = state.RolloutRollingBack
		rr.persist()
		rr.rollingBack.Store(true)
		o.log.Warn().Int("from_batch", prog.RollbackBatch).Msg("rollout rolling back")
		restored, revs, where, err := rr.rollback(ctx)
		// A resumed rollback counts what the interrupted run restored too,
		// as the operation's counts (and its status commit) do.
		if n := Counts(&state.Operation{Results: rr.results()}).RolledBack; n > restored {
			restored = n
		}
		if revs == "" {
			revs = revName(prog.PreviousRevision)
		}
		switch {
		case errors.Is(err, errInterrupted):
			rr.interrupted = true
			return
		case err != nil:
			rr.outcome = state.OperationRollbackFailed
			rr.reason += "; rollback failed: " + err.Error()
		case where != "":
			rr.outcome = state.OperationRollbackFailed
			rr.reason += fmt.Sprintf("; rollback failed: %s (%s rolled back before it, to %s)", where, plural(restored, "instance"), revs)
		default:
			rr.outcome = state.OperationRolledBack
			rr.reason += fmt.Sprintf("; rolled back %s to %s", plural(restored, "instance"), revs)
		}
	case bf.aborted:
		rr.outcome = state.OperationStopped
	default:
		rr.outcome = state.OperationFailed
		rr.reason += "; stopped (on_failure = \"stop\")"
	}
	prog.Phase = state.RolloutDone
}

// restore puts back the instance status an interrupted run recorded.
func (rr *rolloutRun) restore(w *work, pr state.InstanceResult) {
	st := rr.o.st()
	in, err := st.Instance(rr.o.j.recorded.ID, w.target.Region, w.target.Account)
	if err != nil {
		return
	}
	in.Status, in.StatusReason, in.Updated = pr.Status, pr.Reason, rr.o.r.opts.Now()
	if err := st.PutInstance(in); err != nil {
		rr.o.log.Error().Err(err).Msg("cannot record instance status")
	}
}

// inFlightAtRestart reports whether the instance at t was deploying when
// the operation was interrupted and has not run since (its record is still
// OPERATION_IN_PROGRESS: markWaiting keeps it).
func (rr *rolloutRun) inFlightAtRestart(t config.Target) bool {
	if !rr.o.resumed {
		return false
	}
	in, err := rr.o.r.opts.Store.Instance(rr.o.j.recorded.ID, t.Region, t.Account)
	return err == nil && in.Status == state.InstanceOperationInProgress
}

// revName names a previous revision for reasons and logs.
func revName(rev string) string {
	if rev == "" {
		return "nothing (created by the operation)"
	}
	return short(rev)
}

// rollbackItem is one instance a rollback returns to its previous
// revision.
type rollbackItem struct {
	target config.Target
	// prev is the revision it ran before the operation; "" when the
	// operation created it (a rollback deletes it).
	prev  string
	batch int
	// reapply: its forward apply failed part way, so the previous
	// revision is applied again even where the record already shows it
	// (engine.Instance.Reapply).
	reapply bool
}

// rollbackItems are the instances of batch k the rollback has yet to
// return: those the operation touched (they ran, or are recorded at its
// revision or in progress) that are not back at their previous revision
// and serving there. The record decides, so that a resumed rollback
// neither misses an instance nor rolls one back twice.
func (rr *rolloutRun) rollbackItems(k int) ([]rollbackItem, error) {
	o := rr.o
	st := o.st()
	var items []rollbackItem
	for _, m := range o.op.Rollout.Plan[k-1].Members {
		t := config.Target{Region: m.Region, Account: m.Account}
		in, err := st.Instance(o.j.recorded.ID, t.Region, t.Account)
		exists := err == nil
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			return nil, err
		}
		res, ran := rr.resultOf(t)
		touched := ran && (res.Status == state.InstanceOperationComplete || res.Status == state.InstanceOperationFailed) ||
			exists && (in.Status == state.InstanceOperationInProgress || in.Revision == o.op.Revision)
		switch {
		case !touched:
		case m.PreviousRevision == "":
			if exists {
				items = append(items, rollbackItem{target: t, batch: k})
			}
		case !exists || in.Revision != m.PreviousRevision || !in.InService():
			applyFailed := ran && res.Status == state.InstanceOperationFailed && exists && in.Revision != o.op.Revision
			items = append(items, rollbackItem{target: t, prev: m.PreviousRevision, batch: k, reapply: applyFailed})
		}
	}
	return items, nil
}

// rollback returns every instance the operation changed to the revision it
// ran before (a created one is deleted), batch by batch from the newest to
// the first, as the Heat seed asks ("rollback is a reverse update"): each
// rollback batch with the operation preferences' concurrency, then the
// rollout's pause and a gate (records at the previous revision, health
// checks) before the batch before it. It stops at the first batch that
// cannot be restored or fails its gate — where says which, and the
// batches before it keep serving the new revision — and returns how many
// instances it restored and to which revisions.
func (rr *rolloutRun) rollback(ctx context.Context) (restored int, revs, where string, err error) {
	o := rr.o
	prog := o.op.Rollout
	seen := map[string]bool{}
	var names []string
	// Instances out of service go first, whatever their batch (a member
	// of an earlier batch whose health check failed later): restoring
	// them takes nothing more out of service, and the batches after them
	// have that much more room under min_in_service. So two passes over
	// the batches: the first restores (and gates) only those, batch by
	// batch; the second the rest.
	now, _, err := rr.instancesNow()
	if err != nil {
		return 0, "", "", err
	}
	for _, outOnly := range []bool{true, false} {
		for k := prog.RollbackBatch; k >= 1; k-- {
			items, err := rr.rollbackItems(k)
			if err != nil {
				return restored, revs, "", err
			}
			if outOnly {
				items = slices.DeleteFunc(items, func(it rollbackItem) bool {
					in, ok := now[it.target]
					return !ok || in.InService()
				})
			}
			for _, it := range items {
				if !seen[it.prev] {
					seen[it.prev] = true
					names = append(names, revName(it.prev))
				}
			}
			revs = strings.Join(names, ", ")
			if len(items) == 0 {
				continue
			}
			if !outOnly {
				prog.RollbackBatch = k
				rr.persist()
			}
			o.log.Warn().Int("batch", k).Int("instances", len(items)).Bool("out_of_service", outOnly).Msg("rolling back batch")
			ok, failed := rr.rollbackBatch(ctx, items)
			restored += ok
			if ctx.Err() != nil || o.r.stop.Stopped() {
				return restored, revs, "", errInterrupted
			}
			if failed != "" {
				return restored, revs, fmt.Sprintf("the rollback of batch %d of %d failed: %s", k, prog.Batches, failed), nil
			}
			if bad, err := rr.rollbackGate(ctx, k, items); err != nil {
				return restored, revs, "", err
			} else if bad != "" {
				return restored, revs, fmt.Sprintf("the rollback of batch %d of %d failed its gate: %s", k, prog.Batches, bad), nil
			}
		}
	}
	if revs == "" {
		revs = "their previous revisions"
	}
	return restored, revs, "", nil
}

// rollbackGate gates a rolled-back batch as a batch of the rollout: the
// pause, then every restored instance recorded complete at its previous
// revision and healthy there. It returns what failed ("" when it passed);
// the instances of a batch that passes serve again.
func (rr *rolloutRun) rollbackGate(ctx context.Context, k int, items []rollbackItem) (string, error) {
	o := rr.o
	if rr.spec.Pause > 0 {
		o.log.Info().Int("batch", k).Str("pause", rr.spec.Pause.String()).Msg("rollback pausing")
		if err := rr.sleep(ctx, rr.spec.Pause); err != nil {
			return "", err
		}
	}
	st := o.st()
	byRev := map[string][]config.Target{}
	outputs := map[config.Target][]byte{}
	var restored []config.Target
	for _, it := range items {
		if it.prev == "" {
			continue // deleted
		}
		in, err := st.Instance(o.j.recorded.ID, it.target.Region, it.target.Account)
		switch {
		case err != nil:
			return fmt.Sprintf("%s/%s: %v", it.target.Region, it.target.Account, err), nil
		case in.Revision != it.prev || in.Status != state.InstanceOperationComplete:
			return fmt.Sprintf("%s/%s is recorded %s at revision %s, not %s at %s", it.target.Region, it.target.Account, in.Status, short(in.Revision), state.InstanceOperationComplete, short(it.prev)), nil
		}
		byRev[it.prev] = append(byRev[it.prev], it.target)
		outputs[it.target] = in.Outputs
		restored = append(restored, it.target)
	}
	if rr.spec.HealthCheck != nil {
		var bad []string
		for rev, ts := range byRev {
			prev, err := rr.previous(ctx, rev)
			if err != nil {
				return err.Error(), nil
			}
			errs, err := rr.probeAll(ctx, prev, ts, outputs)
			if err != nil {
				return "", err
			}
			for i, err := range errs {
				if err != nil {
					t := ts[i]
					what := fmt.Sprintf("health check failed after the rollback to %s: %v", short(rev), err)
					bad = append(bad, fmt.Sprintf("%s/%s: %s", t.Region, t.Account, what))
					o.event(t.Region, t.Account, "", eventHealthCheckFailed, err.Error())
					rr.gateFailed(t, what)
				}
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			msg := bad[0]
			if len(bad) > 1 {
				msg += fmt.Sprintf(" (and %s more)", plural(len(bad)-1, "instance"))
			}
			return o.redact(msg), nil
		}
	}
	rr.serve(restored)
	return "", nil
}

// previous loads the stack set at revision rev (cached: loaded once, when
// the rollout starts if it can be).
func (rr *rolloutRun) previous(ctx context.Context, rev string) (*config.StackSet, error) {
	rr.mu.Lock()
	ss, ok := rr.prevs[rev]
	rr.mu.Unlock()
	if ok {
		return ss, nil
	}
	o := rr.o
	fsys, err := o.r.opts.Source.Tree(ctx, rev)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", short(rev), err)
	}
	defs, diags := o.r.opts.Engine.Load(fsys, o.r.opts.Path)
	if diags.HasErrors() {
		return nil, fmt.Errorf("revision %s does not load: %s", short(rev), diags.Errs()[0])
	}
	ss = defs.StackSet(o.j.name)
	if ss == nil {
		return nil, fmt.Errorf("revision %s has no stack set %q", short(rev), o.j.name)
	}
	rr.mu.Lock()
	rr.prevs[rev] = ss
	rr.mu.Unlock()
	return ss, nil
}

// rollbackBatch rolls back one batch's instances: regions in reverse
// order (all at once when PARALLEL), each with its max concurrency. It
// returns how many were restored and the first failure ("" when none).
func (rr *rolloutRun) rollbackBatch(ctx context.Context, items []rollbackItem) (restored int, failed string) {
	var regions []string
	byRegion := map[string][]rollbackItem{}
	for _, it := range items {
		if _, ok := byRegion[it.target.Region]; !ok {
			regions = append(regions, it.target.Region)
		}
		byRegion[it.target.Region] = append(byRegion[it.target.Region], it)
	}
	slices.Reverse(regions)
	// min_in_service holds in a rollback too (the Heat seed: a rollback
	// respects the update pattern): at most serving - min_in_service
	// instances that serve are taken out at once, across regions; at least
	// one, or a rollback could never end. Those out of service already
	// take no room.
	var room chan struct{}
	now, serving, err := rr.instancesNow()
	if err != nil {
		return 0, err.Error()
	}
	if rr.spec.MinInService > 0 {
		room = make(chan struct{}, max(serving-rr.spec.MinInService, 1))
	}
	var mu sync.Mutex
	var failures []string
	region := func(region string) {
		_, maxConc := rr.prefs.Limits(rr.o.regionBase(region))
		sem := make(chan struct{}, maxConc)
		var wg sync.WaitGroup
		for _, it := range byRegion[region] {
			if ctx.Err() != nil || rr.o.r.stop.Stopped() {
				break
			}
			sem <- struct{}{}
			takes := room != nil && now[it.target].InService()
			if takes {
				room <- struct{}{}
			}
			rr.o.r.inflight <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := rr.rollbackOne(ctx, it)
				<-rr.o.r.inflight
				if takes {
					<-room
				}
				<-sem
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					restored++
				case !rr.o.r.stopping(ctx):
					failures = append(failures, fmt.Sprintf("%s/%s: %v", it.target.Region, it.target.Account, err))
				}
			}()
		}
		wg.Wait()
	}
	forEachRegion(regions, rr.prefs.RegionConcurrency == config.Parallel, func(r string) bool {
		region(r)
		return true
	})
	if len(failures) == 0 {
		return restored, ""
	}
	sort.Strings(failures)
	failed = failures[0]
	if len(failures) > 1 {
		failed += fmt.Sprintf(" (and %s more)", plural(len(failures)-1, "instance"))
	}
	return restored, failed
}

// rollbackOne re-deploys its previous revision to one instance (or deletes
// an instance the operation created).
func (rr *rolloutRun) rollbackOne(ctx context.Context, it rollbackItem) error {
	o := rr.o
	st := o.st()
	ssID := o.j.recorded.ID
	t := it.target
	log := o.log.With().Str("region", t.Region).Str("account", t.Account).Int("batch", it.batch).Logger()
	var prev *config.StackSet
	redactPrev := func(s string) string { return s }
	failWith := func(err error) error {
		reason := redactPrev(o.redact(fmt.Sprintf("rollback to %s failed: %v", revName(it.prev), err)))
		log.Error().Str("reason", reason).Msg("instance rollback failed")
		if in, gerr := st.Instance(ssID, t.Region, t.Account); gerr == nil {
			in.Status, in.StatusReason, in.OutOfService, in.Updated = state.InstanceOperationFailed, reason, reason, o.r.opts.Now()
			if err := st.PutInstance(in); err != nil {
				log.Error().Err(err).Msg("cannot record instance status")
			}
		}
		rr.rolledBack(it, state.InstanceOperationFailed, reason, false)
		return errors.New(clip(reason))
	}
	if it.prev != "" {
		p, err := rr.previous(ctx, it.prev)
		if err != nil {
			return failWith(err)
		}
		prev, redactPrev = p, redactor(p)
	}
	recorded, err := o.r.resources(ssID, t)
	if err != nil {
		return failWith(err)
	}
	var plan *engine.InstancePlan
	switch {
	case prev == nil:
		plan = engine.PlanDestroy(&engine.Instance{Name: o.j.name, StackSetID: ssID, Target: t, DeclaredTypes: o.r.declaredTypes(o.j), Caller: config.CallerAccount(o.j.desired)}, recorded)
	case !slices.Contains(prev.Targets(), t):
		return failWith(fmt.Errorf("%s/%s is not a target of revision %s", t.Region, t.Account, short(it.prev)))
	default:
		began := time.Now()
		p, diags := o.r.opts.Engine.PlanContext(ctx, &engine.Instance{StackSet: prev, StackSetID: ssID, Target: t, Reapply: it.reapply}, recorded)
		o.r.spent(PhasePlan, began)
		if diags.HasErrors() {
			return failWith(engine.DiagsError(diags))
		}
		plan = p
	}
	in, err := st.Instance(ssID, t.Region, t.Account)
	switch {
	case errors.Is(err, state.ErrNotFound):
		in = state.Instance{StackSetID: ssID, Region: t.Region, Account: t.Account}
	case err != nil:
		return failWith(err)
	}
	in.Status, in.StatusReason, in.Updated = state.InstanceOperationInProgress, "rolling back to "+revName(it.prev), o.r.opts.Now()
	in.OutOfService = in.StatusReason
	if err := st.PutInstance(in); err != nil {
		return failWith(err)
	}
	j := o.r.journal(o.st(), ssID, t)
	res, err := o.r.opts.Engine.Apply(ctx, plan, j, o.r.observeTime)
	if ferr := j.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		if o.r.stopping(ctx) {
			return err // stopping: the resumed operation rolls back again
		}
		return failWith(err)
	}
	reason := "rolled back to " + revName(it.prev)
	if prev == nil {
		if err := st.DeleteInstance(ssID, t.Region, t.Account); err != nil {
			return failWith(err)
		}
		reason = "deleted: created by the rolled-back operation"
	} else {
		in.Status, in.StatusReason, in.Updated = state.InstanceOperationComplete, reason, o.r.opts.Now()
		in.Revision, in.ConfigHash, in.Outputs = it.prev, prev.InstanceHash(ssID, t), outputsJSON(res.Outputs)
		in.Overrides = overridesOf(prev, t)
		in.OutOfService = reason + "; waiting for the rollback's gate"
		if err := st.PutInstance(in); err != nil {
			return failWith(err)
		}
	}
	log.Info().Msg("instance rolled back")
	rr.rolledBack(it, state.InstanceOperationComplete, reason, true)
	return nil
}

// rolledBack records an instance's rollback in the operation's results.
func (rr *rolloutRun) rolledBack(it rollbackItem, status state.InstanceStatus, reason string, ok bool) {
	o := rr.o
	t := it.target
	o.event(t.Region, t.Account, "", string(status), reason)
	action := state.ActionUpdate
	if it.prev == "" {
		action = state.ActionCreate
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results[t] = state.InstanceResult{Region: t.Region, Account: t.Account, Action: action, Status: status, Reason: reason, Batch: it.batch, RolledBack: ok}
}

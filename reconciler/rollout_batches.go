package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// The batch loop of a rollout (rollout.go): each batch started and recorded,
// run with the operation preferences' concurrency, paused and gated
// (rollout_gate.go), cut again when a tolerated failure takes an instance
// out of service, and stopped by a failure, Abort or a superseding commit.

// drive runs the batches from where the rollout is: each batch's members
// are deployed, then its gate (pause, records, health of this batch and
// of every earlier one) passes, then it holds for promotion or writes its
// status commit. A resumed rollout first finishes the batch it was in —
// its members that had not finished, then the gate of all of them — or
// holds again where it held.
func (rr *rolloutRun) drive(ctx context.Context, resumed *state.RolloutProgress) error {
	o := rr.o
	prog := o.op.Rollout
	k, holding := 1, false
	if resumed != nil {
		switch resumed.Phase {
		case state.RolloutRollingBack:
			return &batchFailure{batch: resumed.FailedBatch, reason: o.op.Reason}
		case state.RolloutDone:
			k = len(prog.Plan) + 1 // interrupted while deleting
		case state.RolloutWaitingForPromotion:
			k, holding = resumed.Batch, true
		default:
			k = max(resumed.Batch, 1)
		}
		if resumed.Batch > 0 {
			o.log.Info().Int("batch", resumed.Batch).Int("batches", prog.Batches).Str("phase", string(resumed.Phase)).Msg("resuming the rollout where it was")
		}
	}
	for ; k <= len(prog.Plan); k++ {
		if !holding {
			if k > prog.Batch {
				if err := rr.startBatch(k); err != nil {
					return err
				}
				if rr.isAborted() {
					return &batchFailure{aborted: true, reason: fmt.Sprintf("%s before batch %d of %d", rr.abortedBy(), k, prog.Batches)}
				}
			} else if rr.isAborted() {
				// Aborted before a restart, in a batch that had started:
				// nothing more starts, and its members in flight at the
				// restart (still OPERATION_IN_PROGRESS) are rolled back
				// with the rest, or failed (see fail).
				return &batchFailure{aborted: true, reason: fmt.Sprintf("%s during batch %d of %d", rr.abortedBy(), k, prog.Batches)}
			}
			if prog.Phase == state.RolloutDeploying {
				o.log.Info().Int("batch", k).Int("batches", prog.Batches).Int("instances", len(prog.Plan[k-1].Members)).Msg("rollout batch started")
				if err := rr.runBatch(ctx, k, rr.pending(k)); err != nil {
					return err
				}
			}
			if err := rr.gate(ctx, k); err != nil {
				return err
			}
		}
		holding = false
		if k == len(prog.Plan) {
			break // the operation's own status commit follows
		}
		if err := rr.hold(ctx, k); err != nil {
			return err
		}
	}
	if rr.isAborted() && len(prog.Plan) > 0 {
		return &batchFailure{aborted: true, reason: fmt.Sprintf("%s during batch %d of %d", rr.abortedBy(), prog.Batches, prog.Batches)}
	}
	return nil
}

// startBatch makes batch k the current one and records it before any of
// its members starts. The batches from k on are cut again from the
// instances in service now when the batch before ended with a member out
// of service (a failure within the tolerance): with fewer instances
// serving, later batches must shrink to keep min_in_service, and a canary
// grows only after a fully successful batch. It fails when no instance
// can be taken out of service without breaking min_in_service.
func (rr *rolloutRun) startBatch(k int) error {
	o := rr.o
	prog := o.op.Rollout
	if k > 1 {
		ok, err := rr.recut(k)
		if err != nil {
			return err
		}
		if !ok {
			return &batchFailure{batch: k - 1, reason: fmt.Sprintf("batch %d of %d cannot start: min_in_service is %d and taking any of its instances out of service would leave fewer in service", k, prog.Batches, rr.spec.MinInService)}
		}
	}
	prog.Batch, prog.Phase = k, state.RolloutDeploying
	rr.persist()
	return nil
}

// recut cuts the batches from k on again when batch k-1 did not fully
// succeed, and records the new plan (an event says what changed); it
// reports false when batch k would be empty.
func (rr *rolloutRun) recut(k int) (bool, error) {
	o := rr.o
	prog := o.op.Rollout
	if rr.fullySucceeded(k - 1) {
		return true, nil
	}
	var left []state.RolloutMember
	for _, b := range prog.Plan[k-1:] {
		left = append(left, b.Members...)
	}
	now, serving, err := rr.instancesNow()
	if err != nil {
		return false, err
	}
	for i, m := range left {
		in, ok := now[config.Target{Region: m.Region, Account: m.Account}]
		left[i].InService = ok && in.InService()
	}
	// The batch size stays where it was: a canary grows only after a
	// fully successful batch.
	tail, _ := cutBatches(rr.spec, prog.Plan[k-2].Size, left, serving)
	if len(tail) == 0 {
		return false, nil
	}
	msg := fmt.Sprintf("batch %d of %d ended with an instance out of service; batches from %d on are cut again from the %d instances in service (min_in_service %d): sizes %v, were %v",
		k-1, prog.Batches, k, serving, rr.spec.MinInService, state.BatchSizes(tail), state.BatchSizes(prog.Plan[k-1:]))
	prog.Plan = append(prog.Plan[:k-1:k-1], tail...)
	prog.Batches = len(prog.Plan)
	o.mu.Lock()
	for i, b := range tail {
		for _, m := range b.Members {
			rr.batchOf[config.Target{Region: m.Region, Account: m.Account}] = k + i
		}
	}
	o.mu.Unlock()
	o.log.Warn().Msg("rollout replanned: " + msg)
	o.event("", "", "", eventRolloutReplanned, msg)
	return true, nil
}

// fullySucceeded reports whether every member of batch k that ran
// completed and passed the gate (none failed).
func (rr *rolloutRun) fullySucceeded(k int) bool {
	for _, res := range rr.results() {
		if res.Batch == k && res.Status != state.InstanceOperationComplete {
			return false
		}
	}
	return true
}

// pending are the works of batch k's members that have not finished: all
// of them, but for a resumed batch those that finished before.
func (rr *rolloutRun) pending(k int) []*work {
	o := rr.o
	finished := map[config.Target]bool{}
	for _, pr := range rr.prior {
		if pr.Batch == k {
			finished[config.Target{Region: pr.Region, Account: pr.Account}] = true
		}
	}
	var out []*work
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.op.Rollout.Plan[k-1].Members {
		t := config.Target{Region: m.Region, Account: m.Account}
		if _, done := o.results[t]; done || finished[t] {
			continue
		}
		if w := rr.works[t]; w != nil {
			out = append(out, w)
		}
	}
	return out
}

// runBatch runs one batch's works region by region (SEQUENTIAL) or all
// regions at once (PARALLEL), each region with its limits; failures count
// against the region's tolerance across batches.
func (rr *rolloutRun) runBatch(ctx context.Context, n int, batch []*work) error {
	o := rr.o
	var regions []string
	byRegion := map[string][]*work{}
	for _, w := range batch {
		if _, ok := byRegion[w.target.Region]; !ok {
			regions = append(regions, w.target.Region)
		}
		byRegion[w.target.Region] = append(byRegion[w.target.Region], w)
	}
	strict := rr.prefs.Strict()
	run := func(region string) (failed, tolerance int, ok bool) {
		tolerance, maxConc := rr.prefs.Limits(rr.o.regionBase(region))
		rr.mu.Lock()
		before := rr.regionFailures[region]
		rr.mu.Unlock()
		failed, ok = o.runRegionWith(ctx, byRegion[region], tolerance, maxConc, strict, before)
		rr.mu.Lock()
		rr.regionFailures[region] = failed
		rr.mu.Unlock()
		return failed, tolerance, ok
	}
	interrupted := func() bool { return ctx.Err() != nil || o.r.stop.Stopped() }
	total := o.op.Rollout.Batches
	exceeded := func(region string, failed, tolerance int) error {
		return &batchFailure{batch: n, reason: fmt.Sprintf("batch %d of %d failed: failure tolerance exceeded in region %s (%s failed, tolerance %d)%s", n, total, region, plural(failed, "instance"), tolerance, o.firstFailure(byRegion[region]))}
	}
	// An abort lets the instances in flight finish and starts no other.
	abortedDuring := func() error {
		return &batchFailure{aborted: true, reason: fmt.Sprintf("%s during batch %d of %d", rr.abortedBy(), n, total)}
	}
	var (
		mu    sync.Mutex
		first error
	)
	forEachRegion(regions, rr.prefs.RegionConcurrency == config.Parallel, func(region string) bool {
		failed, tol, ok := run(region)
		switch {
		case interrupted():
			return false
		case !ok:
			mu.Lock()
			if first == nil {
				first = exceeded(region, failed, tol)
			}
			mu.Unlock()
			return false
		}
		return !rr.isAborted() // an abort starts no other region
	})
	switch {
	case interrupted():
		return errInterrupted
	case first != nil:
		return first
	case rr.isAborted():
		return abortedDuring()
	}
	return nil
}

// supersedingRev is the revision of the job queued behind the stack set's
// running operation when its rollout block says supersede = true ("" when
// there is none): it ends the running rollout's hold for promotion.
func (r *Reconciler) supersedingRev(name string) string {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	ru := r.runners[name]
	if ru == nil || ru.queued == nil {
		return ""
	}
	if q := ru.queued.desired; q == nil || q.Rollout == nil || !q.Rollout.Supersede {
		return ""
	}
	return ru.queued.rev
}

// sleep waits d on the clock, unless aborted or interrupted first (a
// rollback's waits are not aborted: abort is how many rollbacks start).
func (rr *rolloutRun) sleep(ctx context.Context, d time.Duration) error {
	abort := rr.abort
	if rr.rollingBack.Load() {
		abort = nil
	}
	select {
	case <-rr.o.r.opts.Clock.After(d):
		return nil
	case <-abort:
		return errAborted
	case <-ctx.Done():
		return errInterrupted
	case <-rr.o.r.stop.Done():
		return errInterrupted
	}
}

// waitFailure turns an ended wait into the rollout's stop.
func (rr *rolloutRun) waitFailure(err error, n int, when string) error {
	if errors.Is(err, errAborted) {
		return &batchFailure{aborted: true, reason: fmt.Sprintf("%s after batch %d of %d (%s)", rr.abortedBy(), n, rr.o.op.Rollout.Batches, when)}
	}
	return err
}

func (rr *rolloutRun) isAborted() bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.aborted
}

// abortWith aborts the rollout (see Abort), saying why; the first reason
// stays.
func (rr *rolloutRun) abortWith(reason string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !rr.aborted {
		rr.aborted, rr.abortReason = true, reason
		close(rr.abort)
	}
}

// abortedBy says who aborted the rollout.
func (rr *rolloutRun) abortedBy() string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.abortReason == "" {
		return "aborted by stackd abort"
	}
	return rr.abortReason
}

// phase records where the rollout is.
func (rr *rolloutRun) phase(n int, phase state.RolloutPhase) {
	rr.o.op.Rollout.Batch, rr.o.op.Rollout.Phase = n, phase
	rr.persist()
}

// persist records the operation with the results so far.
func (rr *rolloutRun) persist() {
	if _, err := rr.o.saveProgress(); err != nil {
		rr.o.log.Warn().Err(err).Msg("cannot record rollout progress")
	}
}

// checkpoint records the operation, makes the state durable (a batch
// that passed stays passed across a power loss) and writes its status
// commit: one per batch boundary.
func (rr *rolloutRun) checkpoint(ctx context.Context) {
	o := rr.o
	op, err := o.saveProgress()
	if err != nil {
		o.log.Warn().Err(err).Msg("cannot record rollout progress")
	}
	began := time.Now()
	if err := o.r.opts.Store.Sync(); err != nil {
		o.log.Warn().Err(err).Msg("cannot make the rollout's progress durable")
	}
	o.r.spent(PhaseStateSync, began)
	ss := *o.j.recorded
	if err := o.r.writeOperationStatus(ctx, o.j, &ss, &op); err != nil {
		o.log.Warn().Err(err).Msg("cannot write the batch's status commit")
	}
}

// results are the operation's instance results so far: those of an
// interrupted run, replaced by this run's, each with its batch
// (opRun.mergedResults).
func (rr *rolloutRun) results() []state.InstanceResult {
	return rr.o.mergedResults()
}

// runDeletes removes the instances of removed targets after the batches,
// by the operation preferences as every operation kind (runRegions).
func (rr *rolloutRun) runDeletes(ctx context.Context, deletes []*work) {
	if len(deletes) == 0 {
		return
	}
	rr.o.runRegions(ctx, rr.prefs, deletes)
	if ctx.Err() != nil || rr.o.r.stop.Stopped() {
		rr.interrupted = true
	}
}

// firstFailure names the first failed instance of works and why, for an
// operation's reason (": region/account: reason"), or "".
func (o *opRun) firstFailure(works []*work) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, w := range works {
		if r, ok := o.results[w.target]; ok && r.Status == state.InstanceOperationFailed {
			return fmt.Sprintf("; first failure %s/%s: %s", r.Region, r.Account, clip(r.Reason))
		}
	}
	return ""
}

// clip is a reason on one line, at most 300 bytes.
func clip(reason string) string {
	reason = strings.Join(strings.Fields(reason), " ")
	if len(reason) > 300 {
		reason = strings.ToValidUTF8(reason[:300], "") + "…"
	}
	return reason
}

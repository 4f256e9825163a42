package reconciler

// Rollouts (DESIGN §6, the Heat seed): with a rollout block, an operation's
// creates and updates go in batches (rolling or canary), each followed by a
// pause and a gate — every instance of the batch at the operation's
// revision and healthy, and the earlier batches still healthy — before the
// next batch starts; pause = "until_promoted" holds after each batch until
// Promote (or a newer commit with supersede = true). A failed gate, an
// exceeded failure tolerance or Abort stops the rollout; with on_failure =
// "rollback" each instance the operation changed goes back to the revision
// it ran before, newest batch first, each batch paced and gated.
//
// The rollout is a state machine whose state is the operation's
// RolloutProgress: the batch plan (members, previous revisions) is recorded
// before the first instance starts, the current batch and phase before each
// step, each instance's result (event and instance record) the moment it
// finishes. A restart resumes at the recorded batch with the recorded
// members. min_in_service counts the instances that serve
// (state.Instance.InService), not status labels.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

var (
	// ErrNoRollout is returned by Promote and Abort when no rollout of the
	// stack set is running.
	ErrNoRollout = errors.New("no rollout is running for this stack set")
	// ErrNotWaiting is returned by Promote when the rollout is not holding
	// for promotion (it is deploying, pausing or checking health).
	ErrNotWaiting = errors.New("the rollout is not waiting for promotion")

	// errAborted and errInterrupted end a wait: Abort was called, or the
	// daemon is stopping (the operation resumes on restart).
	errAborted     = errors.New("aborted")
	errInterrupted = errors.New("interrupted")
)

// Promote releases a rollout holding after a batch (pause =
// "until_promoted"): the next batch starts.
//
// Errors: ErrNoRollout, ErrNotWaiting (wrapped, naming the stack set).
func (r *Reconciler) Promote(name string) error {
	v, ok := r.rollouts.Load(name)
	if !ok {
		return fmt.Errorf("stack set %s: %w", name, ErrNoRollout)
	}
	rr := v.(*rolloutRun)
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !rr.waiting {
		return fmt.Errorf("stack set %s: %w", name, ErrNotWaiting)
	}
	select {
	case rr.promote <- struct{}{}:
	default: // already promoted, not yet taken: promoting twice is once
	}
	return nil
}

// Abort stops a running rollout at once: no instance starts after it
// (those in flight finish), a pause, health check or promotion hold ends;
// instances not started are cancelled and, with on_failure = "rollback",
// what the operation changed is rolled back. Aborting twice is aborting
// once.
//
// Errors: ErrNoRollout (wrapped, naming the stack set).
func (r *Reconciler) Abort(name string) error {
	v, ok := r.rollouts.Load(name)
	if !ok {
		return fmt.Errorf("stack set %s: %w", name, ErrNoRollout)
	}
	rr := v.(*rolloutRun)
	const reason = "aborted by stackd abort"
	rr.abortWith(reason)
	// Recorded before the answer: an abort accepted is not lost to a
	// restart, even one before the instances in flight settle.
	if err := r.opts.Store.SetMeta(metaRolloutAbort+rr.o.op.ID, []byte(reason)); err != nil {
		return fmt.Errorf("stack set %s: aborted, but the abort could not be recorded (a restart would resume the rollout): %w", name, err)
	}
	return nil
}

// metaRolloutAbort+operation id records an abort of the operation's
// rollout (its reason) until the operation ends.
const metaRolloutAbort = "rollout_abort/"

// rolloutRun is the rollout of one running operation: a state machine
// whose state is the operation's RolloutProgress, recorded in the store
// before each batch starts and at every phase change, so that a restart
// resumes it where it was (DESIGN §6).
type rolloutRun struct {
	o     *opRun
	spec  *config.Rollout
	prefs config.OperationPreferences
	// prevRev is the revision the stack set was at before the operation;
	// each instance rolls back to its own (its plan member's).
	prevRev string
	// prevs are the stack sets at the previous revisions the plan's
	// members ran, by revision, loaded when the rollout starts so that a
	// rollback does not depend on them still being readable from Git.
	prevs map[string]*config.StackSet
	// prior are the results an interrupted run of the operation recorded.
	prior []state.InstanceResult
	// batchOf is each plan member's batch, member its plan record and
	// works the instances this run may deploy (guarded by o.mu once the
	// rollout runs).
	batchOf map[config.Target]int
	member  map[config.Target]state.RolloutMember
	works   map[config.Target]*work
	// interrupted: the daemon stopped the rollout; it resumes on restart.
	interrupted bool
	// rollingBack: the rollout is rolling back (an abort no longer ends
	// its waits).
	rollingBack atomic.Bool
	// outcome and reason, when the rollout did not succeed: the
	// operation's status and reason.
	outcome state.OperationStatus
	reason  string

	mu      sync.Mutex
	waiting bool
	promote chan struct{}
	// queued is told when a job queues behind the operation (it may
	// supersede a hold).
	queued         chan struct{}
	abort          chan struct{}
	aborted        bool
	abortReason    string
	regionFailures map[string]int
}

// batchFailure is why a rollout stopped.
type batchFailure struct {
	batch   int // the failed batch; 0 when aborted between batches
	aborted bool
	reason  string
}

func (b *batchFailure) Error() string { return b.reason }

// runRollout schedules the operation's works in batches.
func (o *opRun) runRollout(ctx context.Context, prefs config.OperationPreferences) {
	rr := &rolloutRun{
		o: o, spec: o.j.desired.Rollout, prefs: prefs, prevRev: o.j.recorded.Revision,
		prevs: map[string]*config.StackSet{}, batchOf: map[config.Target]int{},
		member: map[config.Target]state.RolloutMember{}, works: map[config.Target]*work{}, regionFailures: map[string]int{},
		promote: make(chan struct{}, 1), queued: make(chan struct{}, 1), abort: make(chan struct{}),
	}
	var resumed *state.RolloutProgress
	if o.resumed && o.op.Rollout != nil {
		p := *o.op.Rollout
		resumed = &p
		rr.prevRev = p.PreviousRevision
	}
	o.ro = rr
	if reason, _ := o.r.opts.Store.Meta(metaRolloutAbort + o.op.ID); len(reason) > 0 {
		// Aborted before the restart: the resumed rollout is aborted.
		rr.abortWith(string(reason))
	}
	o.r.rollouts.Store(o.j.name, rr)
	defer o.r.rollouts.CompareAndDelete(o.j.name, rr)
	defer func() {
		if !rr.interrupted {
			_ = o.r.opts.Store.DeleteMeta(metaRolloutAbort + o.op.ID)
		}
	}()

	var deploy, deletes []*work
	for _, w := range o.j.works {
		switch w.action {
		case actionSkip:
			o.settle(w, state.InstanceSkippedSuspendedAccount, "the account is suspended in the organization", nil)
		case changeset.InstanceDelete:
			deletes = append(deletes, w)
		default:
			deploy = append(deploy, w)
			rr.works[w.target] = w
		}
	}
	prog := &state.RolloutProgress{Pattern: rr.spec.Pattern, Phase: state.RolloutDeploying, PreviousRevision: rr.prevRev}
	if resumed != nil {
		*prog = *resumed
	}
	if err := rr.planBatches(prog, deploy, resumed); err != nil {
		o.log.Error().Err(err).Msg("cannot plan the rollout")
		rr.outcome, rr.reason = state.OperationFailed, "cannot plan the rollout: "+err.Error()
		o.op.Rollout = prog
		for _, w := range append(deploy, deletes...) {
			o.settle(w, state.InstanceCancelComplete, rr.reason, nil)
		}
		return
	}
	o.op.Rollout = prog
	o.mu.Lock()
	for k, b := range prog.Plan {
		for _, m := range b.Members {
			t := config.Target{Region: m.Region, Account: m.Account}
			rr.batchOf[t], rr.member[t] = k+1, m
		}
	}
	o.mu.Unlock()
	rr.prior = make([]state.InstanceResult, len(o.prior))
	for i, pr := range o.prior {
		t := config.Target{Region: pr.Region, Account: pr.Account}
		if pr.Batch == 0 {
			pr.Batch = rr.batchOf[t]
		}
		rr.prior[i] = pr
		if w := rr.works[t]; w != nil {
			// Finished before the restart, marked waiting by it: the
			// rollout does not run it again (pending), so its outcome is
			// put back now.
			rr.restore(w, pr)
		}
	}
	if rr.spec.OnFailure == config.OnFailureRollback {
		rr.loadPrevious(ctx)
	}
	// The plan is recorded before any instance starts; the stack set's
	// status shows this operation while it runs.
	rr.persist()
	o.j.recorded.LastOperation = o.op.ID
	if err := o.r.opts.Store.PutStackSet(*o.j.recorded); err != nil {
		o.log.Warn().Err(err).Msg("cannot record the running operation on the stack set")
	}
	o.log.Info().Str("pattern", rr.spec.Pattern).Int("batches", prog.Batches).Ints("sizes", prog.BatchSizes()).Bool("resumed", resumed != nil).Msg("rollout planned")

	stop := rr.drive(ctx, resumed)
	switch {
	case errors.Is(stop, errInterrupted):
		rr.interrupted = true
		return
	case stop != nil:
		var bf *batchFailure
		errors.As(stop, &bf)
		rr.fail(ctx, bf)
		return
	}
	// Deletions follow the batches, by the operation preferences.
	rr.runDeletes(ctx, deletes)
	if !rr.interrupted && rr.isAborted() {
		o.mu.Lock()
		cancelled := 0
		for _, w := range deletes {
			if o.results[w.target].Status == state.InstanceCancelComplete {
				cancelled++
			}
		}
		o.mu.Unlock()
		if cancelled > 0 {
			rr.outcome = state.OperationStopped
			rr.reason = fmt.Sprintf("%s while deleting the instances of removed targets (%d not deleted)", rr.abortedBy(), cancelled)
		}
	}
	o.op.Rollout.Phase = state.RolloutDone
}

// planBatches fills prog.Plan: a resumed rollout keeps the plan it
// recorded; a new one cuts the instances it deploys into batches as they
// will go if every batch passes (engine.Rollout.PlanBatches), each member
// with the revision it runs now. A resumed rollout recorded before plans
// were (its results carry their batches) gets the batches it ran from its
// results and the rest cut anew.
func (rr *rolloutRun) planBatches(prog *state.RolloutProgress, deploy []*work, resumed *state.RolloutProgress) error {
	o := rr.o
	if resumed != nil && len(resumed.Plan) > 0 {
		return nil
	}
	have, serving, err := rr.instancesNow()
	if err != nil {
		return err
	}
	placed := map[config.Target]bool{}
	if resumed != nil {
		// Recorded before plans were: the batches it ran, from its results.
		byBatch := map[int][]state.RolloutMember{}
		for _, pr := range o.prior {
			if pr.Batch > 0 && pr.Batch <= resumed.Batch {
				byBatch[pr.Batch] = append(byBatch[pr.Batch], state.RolloutMember{Region: pr.Region, Account: pr.Account, PreviousRevision: resumed.PreviousRevision})
				placed[config.Target{Region: pr.Region, Account: pr.Account}] = true
			}
		}
		for k := 1; k <= resumed.Batch; k++ {
			prog.Plan = append(prog.Plan, state.RolloutBatch{Size: len(byBatch[k]), Members: byBatch[k]})
		}
	}
	var left []*work
	for _, w := range deploy {
		if !placed[w.target] {
			left = append(left, w)
		}
	}
	members := make([]state.RolloutMember, len(left))
	for i, w := range left {
		in, ok := have[w.target]
		members[i] = state.RolloutMember{Region: w.target.Region, Account: w.target.Account, PreviousRevision: in.Revision, InService: ok && in.InService()}
	}
	batches, ok := cutBatches(rr.spec, max(rr.spec.BatchSize, 1), members, serving)
	if !ok {
		// CheckMinInService rejects what can never be met; this is a fleet
		// with too few instances serving now.
		return fmt.Errorf("min_in_service is %d but only %d of the stack set's instances are in service, and every instance the operation deploys serves: none can be taken out of service", rr.spec.MinInService, serving)
	}
	prog.Plan = append(prog.Plan, batches...)
	prog.Batches = len(prog.Plan)
	return nil
}

// instancesNow reads the stack set's instance records: by target, and how
// many serve.
func (rr *rolloutRun) instancesNow() (map[config.Target]state.Instance, int, error) {
	ins, err := rr.o.r.opts.Store.Instances(rr.o.j.recorded.ID)
	if err != nil {
		return nil, 0, err
	}
	have := make(map[config.Target]state.Instance, len(ins))
	serving := 0
	for _, in := range ins {
		have[config.Target{Region: in.Region, Account: in.Account}] = in
		if in.InService() {
			serving++
		}
	}
	return have, serving, nil
}

// cutBatches cuts members (InService as they are now) into batches as
// the rollout will run them if each passes (engine.Rollout.PlanBatches),
// the first of nominal size size; it reports whether every member found
// a batch.
func cutBatches(spec *config.Rollout, size int, members []state.RolloutMember, serving int) ([]state.RolloutBatch, bool) {
	cut := *spec
	cut.BatchSize = size
	cands := make([]config.Candidate, len(members))
	for i, m := range members {
		cands[i] = config.Candidate{Region: m.Region, InService: m.InService}
	}
	idx, ok := cut.PlanBatches(cands, serving)
	out := make([]state.RolloutBatch, len(idx))
	for k, b := range idx {
		out[k].Size = size
		for _, i := range b {
			out[k].Members = append(out[k].Members, members[i])
		}
		size = cut.NextSize(size, true)
	}
	return out, ok
}

// loadPrevious loads the stack set at every previous revision a rollback
// may re-deploy, so that it does not depend on Git later; a revision that
// does not load now is tried again by the rollback.
func (rr *rolloutRun) loadPrevious(ctx context.Context) {
	seen := map[string]bool{}
	for _, b := range rr.o.op.Rollout.Plan {
		for _, m := range b.Members {
			if m.PreviousRevision == "" || seen[m.PreviousRevision] {
				continue
			}
			seen[m.PreviousRevision] = true
			if _, err := rr.previous(ctx, m.PreviousRevision); err != nil {
				rr.o.log.Warn().Str("error", rr.o.redact(err.Error())).Str("previous", short(m.PreviousRevision)).Msg("a previous revision does not load now; a rollback will try again")
			}
		}
	}
}

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
			o.log.Info().Int("batch", resumed.Batch).Int("batches", prog.Batches).Str("phase", resumed.Phase).Msg("resuming the rollout where it was")
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
	o.event("", "", "", "ROLLOUT_REPLANNED", msg)
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
func (rr *rolloutRun) phase(n int, phase string) {
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

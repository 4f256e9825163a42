package reconciler

// Rollouts (docs/design.md §6, the Heat seed): with a rollout block, an operation's
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
	"strconv"
	"sync"
	"sync/atomic"

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

// What a rollout records in its operation's event log (state.Event.Status),
// next to the instance and operation statuses.
const (
	eventHealthCheckFailed = "HEALTH_CHECK_FAILED" // an instance failed its health check
	eventPromoted          = "PROMOTED"            // a held rollout was promoted
	eventRolloutReplanned  = "ROLLOUT_REPLANNED"   // later batches cut again (min_in_service)
	eventRolloutStopped    = "ROLLOUT_STOPPED"     // the rollout stopped (failure, abort)
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
	if !rr.waiting {
		rr.mu.Unlock()
		return fmt.Errorf("stack set %s: %w", name, ErrNotWaiting)
	}
	n := rr.holdBatch
	select {
	case rr.promote <- struct{}{}:
	default: // already promoted, not yet taken: promoting twice is once
	}
	rr.mu.Unlock()
	// Recorded like an abort: a replica that takes the rollout over while
	// it still holds after batch n finds it promoted.
	if err := r.opts.Store.SetMeta(metaRolloutPromote+rr.o.op.ID, []byte(strconv.Itoa(n))); err != nil {
		return fmt.Errorf("stack set %s: promoted, but the promotion could not be recorded (a takeover would hold again): %w", name, err)
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

// metaRolloutPromote+operation id records a promotion of the operation's
// rollout: the batch after which it held (decimal), until the operation
// ends. The hold after that batch takes it, also a replica's that resumes
// the rollout (docs/design.md §13).
const metaRolloutPromote = "rollout_promote/"

// RecordRolloutRequest records verb ("promote" or "abort") for the
// running rollout of stack set name when another replica runs it
// (docs/design.md §13): an abort as Abort records it, a promotion as the
// batch after which the recorded progress holds. The replica that runs
// the rollout applies it (ApplyRolloutRequests, on state.ChannelRollout
// with the returned operation id), as does one that resumes it.
//
// Errors: ErrNoRollout (no operation of the stack set with a rollout is
// running), ErrNotWaiting (promote while the recorded progress does not
// hold for promotion), the store's (all wrapped, naming the stack set).
func (r *Reconciler) RecordRolloutRequest(name, verb string) (opID string, err error) {
	ss, err := r.opts.Store.StackSetByName(name)
	if errors.Is(err, state.ErrNotFound) {
		return "", fmt.Errorf("stack set %s: %w", name, ErrNoRollout)
	} else if err != nil {
		return "", fmt.Errorf("stack set %s: %w", name, err)
	}
	ops, err := r.opts.Store.Operations(ss.ID)
	if err != nil {
		return "", fmt.Errorf("stack set %s: %w", name, err)
	}
	var op *state.Operation
	for i := range ops {
		if ops[i].Status == state.OperationRunning && ops[i].Rollout != nil {
			op = &ops[i]
		}
	}
	if op == nil {
		return "", fmt.Errorf("stack set %s: %w", name, ErrNoRollout)
	}
	switch verb {
	case "abort":
		err = r.opts.Store.SetMeta(metaRolloutAbort+op.ID, []byte("aborted by stackd abort"))
	case "promote":
		if op.Rollout.Phase != state.RolloutWaitingForPromotion {
			return "", fmt.Errorf("stack set %s: %w", name, ErrNotWaiting)
		}
		err = r.opts.Store.SetMeta(metaRolloutPromote+op.ID, []byte(strconv.Itoa(op.Rollout.Batch)))
	default:
		return "", fmt.Errorf("rollout request %q: want promote or abort", verb)
	}
	if err != nil {
		return "", fmt.Errorf("stack set %s: cannot record the %s: %w", name, verb, err)
	}
	return op.ID, nil
}

// ApplyRolloutRequests applies the promotion or abort recorded for
// operation opID ("": for every rollout) to the rollout this replica runs
// for it; a rollout it does not run is left to its owner.
func (r *Reconciler) ApplyRolloutRequests(opID string) {
	r.rollouts.Range(func(_, v any) bool {
		rr := v.(*rolloutRun)
		if opID != "" && rr.o.op.ID != opID {
			return true
		}
		if reason, _ := r.opts.Store.Meta(metaRolloutAbort + rr.o.op.ID); len(reason) > 0 {
			rr.abortWith(string(reason))
		}
		rr.mu.Lock()
		n := rr.holdBatch
		rr.mu.Unlock()
		if n > 0 && rr.promotedAt(n) {
			rr.o.log.Info().Int("batch", n).Msg("promotion recorded by another replica")
		}
		return true
	})
}

// promotedAt releases the hold after batch n when a promotion of it is
// recorded and the rollout holds there; it reports whether it did.
func (rr *rolloutRun) promotedAt(n int) bool {
	v, err := rr.o.r.opts.Store.Meta(metaRolloutPromote + rr.o.op.ID)
	if err != nil || string(v) != strconv.Itoa(n) {
		return false
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !rr.waiting || rr.holdBatch != n {
		return false
	}
	select {
	case rr.promote <- struct{}{}:
	default:
	}
	return true
}

// rolloutRun is the rollout of one running operation: a state machine
// whose state is the operation's RolloutProgress, recorded in the store
// before each batch starts and at every phase change, so that a restart
// resumes it where it was (docs/design.md §6).
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
	// holdBatch is the batch after which the rollout holds (while
	// waiting).
	holdBatch int
	promote   chan struct{}
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
	o.r.rollouts.Store(o.j.name, rr)
	defer o.r.rollouts.CompareAndDelete(o.j.name, rr)
	// Read once the rollout is registered: an abort recorded by another
	// replica is either seen here or applied by ApplyRolloutRequests.
	if reason, _ := o.r.opts.Store.Meta(metaRolloutAbort + o.op.ID); len(reason) > 0 {
		// Aborted before the restart: the resumed rollout is aborted.
		rr.abortWith(string(reason))
	}
	defer func() {
		if !rr.interrupted {
			_ = o.st().DeleteMeta(metaRolloutAbort + o.op.ID)
			_ = o.st().DeleteMeta(metaRolloutPromote + o.op.ID)
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
	if err := o.st().PutStackSet(*o.j.recorded); err != nil {
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

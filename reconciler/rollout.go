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
	"github.com/stackd/stackd/internal/version"

	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/state"
)

// defaultHealthClient keeps no idle connections: a health check polls
// each instance a few times, then never again.
var defaultHealthClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}

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

// maxProbes bounds the health checks of one batch running at once.
const maxProbes = 32

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
	v.(*rolloutRun).abortWith("aborted by stackd abort")
	return nil
}

// rolloutRun is the rollout of one running operation: a state machine
// whose state is the operation's RolloutProgress, recorded in the store
// before each batch starts and at every phase change, so that a restart
// resumes it where it was (DESIGN §6).
type rolloutRun struct {
	o     *opRun
	spec  *engine.Rollout
	prefs engine.OperationPreferences
	// prevRev is the revision the stack set was at before the operation;
	// each instance rolls back to its own (its plan member's).
	prevRev string
	// prevs are the stack sets at the previous revisions the plan's
	// members ran, by revision, loaded when the rollout starts so that a
	// rollback does not depend on them still being readable from Git.
	prevs map[string]*engine.StackSet
	// prior are the results an interrupted run of the operation recorded.
	prior []state.InstanceResult
	// regionTotal counts the operation's instances per region (the base
	// of percentages, as without a rollout).
	regionTotal map[string]int
	// batchOf is each plan member's batch, member its plan record and
	// works the instances this run may deploy (guarded by o.mu once the
	// rollout runs).
	batchOf map[engine.Target]int
	member  map[engine.Target]state.RolloutMember
	works   map[engine.Target]*work
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
func (o *opRun) runRollout(ctx context.Context, prefs engine.OperationPreferences) {
	rr := &rolloutRun{
		o: o, spec: o.j.desired.Rollout, prefs: prefs, prevRev: o.j.recorded.Revision,
		prevs: map[string]*engine.StackSet{}, regionTotal: map[string]int{}, batchOf: map[engine.Target]int{},
		member: map[engine.Target]state.RolloutMember{}, works: map[engine.Target]*work{}, regionFailures: map[string]int{},
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

	var deploy, deletes []*work
	for _, w := range o.j.works {
		rr.regionTotal[w.target.Region]++
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
			t := engine.Target{Region: m.Region, Account: m.Account}
			rr.batchOf[t], rr.member[t] = k+1, m
		}
	}
	o.mu.Unlock()
	rr.prior = make([]state.InstanceResult, len(o.prior))
	for i, pr := range o.prior {
		t := engine.Target{Region: pr.Region, Account: pr.Account}
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
	if rr.spec.OnFailure == engine.OnFailureRollback {
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
	placed := map[engine.Target]bool{}
	if resumed != nil {
		// Recorded before plans were: the batches it ran, from its results.
		byBatch := map[int][]state.RolloutMember{}
		for _, pr := range o.prior {
			if pr.Batch > 0 && pr.Batch <= resumed.Batch {
				byBatch[pr.Batch] = append(byBatch[pr.Batch], state.RolloutMember{Region: pr.Region, Account: pr.Account, PreviousRevision: resumed.PreviousRevision})
				placed[engine.Target{Region: pr.Region, Account: pr.Account}] = true
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
func (rr *rolloutRun) instancesNow() (map[engine.Target]state.Instance, int, error) {
	ins, err := rr.o.r.opts.Store.Instances(rr.o.j.recorded.ID)
	if err != nil {
		return nil, 0, err
	}
	have := make(map[engine.Target]state.Instance, len(ins))
	serving := 0
	for _, in := range ins {
		have[engine.Target{Region: in.Region, Account: in.Account}] = in
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
func cutBatches(spec *engine.Rollout, size int, members []state.RolloutMember, serving int) ([]state.RolloutBatch, bool) {
	cut := *spec
	cut.BatchSize = size
	cands := make([]engine.Candidate, len(members))
	for i, m := range members {
		cands[i] = engine.Candidate{Region: m.Region, InService: m.InService}
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
			}
			if rr.isAborted() {
				return &batchFailure{aborted: true, reason: fmt.Sprintf("%s before batch %d of %d", rr.abortedBy(), k, prog.Batches)}
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
		in, ok := now[engine.Target{Region: m.Region, Account: m.Account}]
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
			rr.batchOf[engine.Target{Region: m.Region, Account: m.Account}] = k + i
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
	finished := map[engine.Target]bool{}
	for _, pr := range rr.prior {
		if pr.Batch == k {
			finished[engine.Target{Region: pr.Region, Account: pr.Account}] = true
		}
	}
	var out []*work
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.op.Rollout.Plan[k-1].Members {
		t := engine.Target{Region: m.Region, Account: m.Account}
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
		tolerance, maxConc := rr.prefs.Limits(rr.regionTotal[region])
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
	forEachRegion(regions, rr.prefs.RegionConcurrency == engine.Parallel, func(region string) bool {
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

// gate waits the pause, then checks batch n: at least one of its
// instances deployed; every one that did is recorded complete at the
// operation's revision; each passes its health check; and every instance
// of an earlier batch still does (as Argo Rollouts' background analysis:
// one that degrades after its own gate fails the rollout). The instances
// of a batch that passes serve again.
func (rr *rolloutRun) gate(ctx context.Context, n int) error {
	o := rr.o
	total := o.op.Rollout.Batches
	if rr.spec.Pause > 0 {
		rr.phase(n, state.RolloutPaused)
		o.log.Info().Int("batch", n).Str("pause", rr.spec.Pause.String()).Msg("rollout pausing")
		if err := rr.sleep(ctx, rr.spec.Pause); err != nil {
			return rr.waitFailure(err, n, "while pausing")
		}
	}
	rr.phase(n, state.RolloutHealthCheck)
	results := map[engine.Target]state.InstanceResult{}
	for _, res := range rr.results() {
		results[engine.Target{Region: res.Region, Account: res.Account}] = res
	}
	var done, earlier, failed []engine.Target
	ran := 0
	for k, b := range o.op.Rollout.Plan[:n] {
		for _, m := range b.Members {
			t := engine.Target{Region: m.Region, Account: m.Account}
			res, ok := results[t]
			switch {
			case !ok:
			case k+1 < n:
				if res.Status == state.InstanceOperationComplete {
					earlier = append(earlier, t)
				}
			default:
				ran++
				switch res.Status {
				case state.InstanceOperationComplete:
					done = append(done, t)
				case state.InstanceOperationFailed:
					failed = append(failed, t)
				}
			}
		}
	}
	st := o.r.opts.Store
	ssID := o.j.recorded.ID
	for _, t := range failed {
		// Deployed, then failed this gate before a restart: the batch
		// failed, whatever the tolerance says of apply failures.
		in, err := st.Instance(ssID, t.Region, t.Account)
		if err == nil && in.Revision == o.op.Revision {
			return &batchFailure{batch: n, reason: o.redact(fmt.Sprintf("batch %d of %d failed its gate: instance %s/%s is recorded %s: %s",
				n, total, t.Region, t.Account, in.Status, in.StatusReason))}
		}
	}
	if ran > 0 && len(done) == 0 {
		// A batch with no healthy instance never passes, whatever the
		// failure tolerance allows.
		first := ""
		for _, m := range o.op.Rollout.Plan[n-1].Members {
			if res := results[engine.Target{Region: m.Region, Account: m.Account}]; first == "" && res.Status == state.InstanceOperationFailed {
				first = fmt.Sprintf("; first failure %s/%s: %s", res.Region, res.Account, clip(res.Reason))
			}
		}
		return &batchFailure{batch: n, reason: o.redact(fmt.Sprintf("batch %d of %d failed its gate: none of its %s deployed%s", n, total, plural(ran, "instance"), first))}
	}
	outputs := map[engine.Target][]byte{}
	for _, t := range append(slices.Clone(done), earlier...) {
		// The record, not what this run remembers: stale status never
		// lets a batch pass.
		in, err := st.Instance(ssID, t.Region, t.Account)
		want := o.j.desired.InstanceHash(ssID, t)
		switch {
		case err != nil:
			return &batchFailure{batch: n, reason: fmt.Sprintf("batch %d of %d failed its gate: instance %s/%s: %v", n, total, t.Region, t.Account, err)}
		case in.Status == state.InstanceOperationFailed && in.Revision == o.op.Revision:
			// Failed this gate before a restart.
			return &batchFailure{batch: n, reason: o.redact(fmt.Sprintf("batch %d of %d failed its gate: instance %s/%s is recorded %s: %s",
				n, total, t.Region, t.Account, in.Status, in.StatusReason))}
		case in.Revision != o.op.Revision || in.Status != state.InstanceOperationComplete || in.ConfigHash != want:
			return &batchFailure{batch: n, reason: fmt.Sprintf("batch %d of %d failed its gate: instance %s/%s is recorded %s at revision %s, not %s at %s",
				n, total, t.Region, t.Account, in.Status, short(in.Revision), state.InstanceOperationComplete, short(o.op.Revision))}
		}
		outputs[t] = in.Outputs
	}
	if hc := rr.spec.HealthCheck; hc != nil {
		o.log.Info().Int("batch", n).Int("instances", len(done)).Int("earlier", len(earlier)).Msg("rollout health checks started")
		probed := append(slices.Clone(done), earlier...)
		errs, err := rr.probeAll(ctx, o.j.desired, probed, outputs)
		if err != nil {
			return rr.waitFailure(err, n, "during its health checks")
		}
		var bad []string
		for i, err := range errs {
			if err == nil {
				continue
			}
			t := probed[i]
			what := "health check failed: " + err.Error()
			if i >= len(done) {
				what = fmt.Sprintf("health check failed after batch %d passed its gate: %v", rr.batchOf[t], err)
			}
			bad = append(bad, fmt.Sprintf("%s/%s: %s", t.Region, t.Account, what))
			o.event(t.Region, t.Account, "", "HEALTH_CHECK_FAILED", err.Error())
			rr.gateFailed(t, what)
		}
		if len(bad) > 0 {
			reason := fmt.Sprintf("batch %d of %d failed its health check: %s", n, total, bad[0])
			if len(bad) > 1 {
				reason += fmt.Sprintf(" (and %s more)", plural(len(bad)-1, "instance"))
			}
			return &batchFailure{batch: n, reason: o.redact(reason)}
		}
	}
	rr.serve(done)
	o.log.Info().Int("batch", n).Int("batches", total).Int("healthy", len(done)).Int("failed", ran-len(done)).Msg("rollout batch passed its gate")
	return nil
}

// probeAll health-checks instances of ss at once (at most maxProbes in
// flight): one error per instance (nil: healthy), or the error that ended
// the wait (abort, stop).
func (rr *rolloutRun) probeAll(ctx context.Context, ss *engine.StackSet, ts []engine.Target, outputs map[engine.Target][]byte) ([]error, error) {
	hc := rr.spec.HealthCheck
	errs := make([]error, len(ts))
	sem := make(chan struct{}, maxProbes)
	var wg sync.WaitGroup
	for i, t := range ts {
		url, err := hc.URLFor(ss, rr.o.j.recorded.ID, t, outputs[t])
		if err != nil {
			errs[i] = err
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = rr.probe(ctx, url)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, errAborted) || errors.Is(err, errInterrupted) {
			return nil, err
		}
	}
	return errs, nil
}

// serve records that instances passed their gate: they are in service.
func (rr *rolloutRun) serve(ts []engine.Target) {
	o := rr.o
	st := o.r.opts.Store
	var ins []state.Instance
	for _, t := range ts {
		in, err := st.Instance(o.j.recorded.ID, t.Region, t.Account)
		if err != nil || in.OutOfService == "" {
			continue
		}
		in.OutOfService = ""
		ins = append(ins, in)
	}
	if err := st.PutInstances(ins); err != nil {
		o.log.Error().Err(err).Msg("cannot record instances in service")
	}
}

// gateFailed records that instance t, deployed, failed a gate: it is
// OPERATION_FAILED with the reason and out of service, in the state and in
// the operation's results (its action and batch kept).
func (rr *rolloutRun) gateFailed(t engine.Target, reason string) {
	o := rr.o
	reason = o.redact(reason)
	st := o.r.opts.Store
	if in, err := st.Instance(o.j.recorded.ID, t.Region, t.Account); err == nil {
		in.Status, in.StatusReason, in.OutOfService, in.Updated = state.InstanceOperationFailed, reason, reason, o.r.opts.Now()
		if err := st.PutInstance(in); err != nil {
			o.log.Error().Err(err).Msg("cannot record instance status")
		}
	}
	o.event(t.Region, t.Account, "", string(state.InstanceOperationFailed), reason)
	res, ok := rr.resultOf(t)
	if !ok {
		res = state.InstanceResult{Region: t.Region, Account: t.Account, Action: state.ActionNone}
	}
	// A rolled-back instance failing the rollback's gate is not rolled
	// back: it failed.
	res.Status, res.Reason, res.RolledBack = state.InstanceOperationFailed, reason, false
	o.mu.Lock()
	o.results[t] = res
	o.mu.Unlock()
}

// resultOf is instance t's result in the operation so far.
func (rr *rolloutRun) resultOf(t engine.Target) (state.InstanceResult, bool) {
	o := rr.o
	o.mu.Lock()
	res, ok := o.results[t]
	o.mu.Unlock()
	if ok {
		return res, true
	}
	for _, pr := range rr.prior {
		if pr.Region == t.Region && pr.Account == t.Account {
			return pr, true
		}
	}
	return state.InstanceResult{}, false
}

// probe polls one instance until it answers the expected status healthy
// times in a row, or the deadline passes.
func (rr *rolloutRun) probe(ctx context.Context, url string) error {
	hc := rr.spec.HealthCheck
	clock := rr.o.r.opts.Clock
	start := clock.Now()
	good := 0
	last := ""
	for attempt := 1; ; attempt++ {
		status, err := rr.get(ctx, url, hc.Timeout)
		switch {
		case err != nil:
			good, last = 0, err.Error()
		case status != hc.Expect:
			good, last = 0, fmt.Sprintf("GET %s answered %d, want %d", url, status, hc.Expect)
		default:
			good++
			if good >= hc.Healthy {
				return nil
			}
			last = fmt.Sprintf("GET %s: %d of %d consecutive successes", url, good, hc.Healthy)
		}
		if ctx.Err() != nil {
			return errInterrupted
		}
		if clock.Now().Sub(start)+hc.Interval >= hc.Deadline {
			return fmt.Errorf("not healthy within %s (%d attempts): %s", hc.Deadline, attempt, last)
		}
		if err := rr.sleep(ctx, hc.Interval); err != nil {
			return err
		}
	}
}

// get makes one health check request, bounded by timeout.
func (rr *rolloutRun) get(ctx context.Context, url string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "stackd-health-check "+version.UserAgent("stackd"))
	resp, err := rr.o.r.opts.HealthClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// hold ends batch n: with pause = "until_promoted" it records
// WAITING_FOR_PROMOTION, writes the batch's status commit and waits for
// Promote; otherwise it writes the status commit.
func (rr *rolloutRun) hold(ctx context.Context, n int) error {
	o := rr.o
	if !rr.spec.UntilPromoted {
		rr.checkpoint(ctx)
		return nil
	}
	rr.mu.Lock()
	rr.waiting = true
	rr.mu.Unlock()
	defer func() {
		rr.mu.Lock()
		rr.waiting = false
		rr.mu.Unlock()
	}()
	o.op.Rollout.Batch, o.op.Rollout.Phase = n, state.RolloutWaitingForPromotion
	rr.checkpoint(ctx)
	o.log.Info().Int("batch", n).Int("batches", o.op.Rollout.Batches).Msg("rollout waiting for promotion (stackd promote " + o.j.name + ")")
	for {
		if rev := o.r.supersedingRev(o.j.name); rev != "" {
			// A newer commit with supersede = true waits behind this hold.
			rr.abortWith("superseded by revision " + short(rev))
			o.log.Warn().Str("by", short(rev)).Msg("held rollout superseded by a newer commit (supersede = true)")
		}
		select {
		case <-rr.promote:
			o.log.Info().Int("batch", n).Msg("rollout promoted")
			o.event("", "", "", "PROMOTED", fmt.Sprintf("promoted after batch %d of %d", n, o.op.Rollout.Batches))
			return nil
		case <-rr.queued:
			continue // look whether it supersedes
		case <-rr.abort:
			return rr.waitFailure(errAborted, n, "while waiting for promotion")
		case <-ctx.Done():
			return errInterrupted
		case <-o.r.stop.Done():
			return errInterrupted
		}
	}
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

// fail stops the rollout: what has not started is cancelled, and with
// on_failure = "rollback" what the operation changed is rolled back.
func (rr *rolloutRun) fail(ctx context.Context, bf *batchFailure) {
	o := rr.o
	prog := o.op.Rollout
	prog.FailedBatch = bf.batch
	o.log.Error().Int("batch", bf.batch).Bool("aborted", bf.aborted).Str("reason", bf.reason).Msg("rollout stopped")
	o.event("", "", "", "ROLLOUT_STOPPED", bf.reason)
	var rest []*work
	o.mu.Lock()
	prior := map[engine.Target]state.InstanceResult{}
	for _, pr := range rr.prior {
		prior[engine.Target{Region: pr.Region, Account: pr.Account}] = pr
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
		o.settle(w, state.InstanceCancelComplete, cancelReason, nil)
	}
	rr.reason = bf.reason
	switch {
	case rr.spec.OnFailure == engine.OnFailureRollback:
		o.op.Reason = bf.reason
		if prog.Phase != state.RolloutRollingBack || prog.RollbackBatch == 0 {
			prog.RollbackBatch = max(prog.Batch, 1)
		}
		prog.Phase = state.RolloutRollingBack
		rr.persist()
		rr.rollingBack.Store(true)
		o.log.Warn().Int("from_batch", prog.RollbackBatch).Msg("rollout rolling back")
		restored, revs, where, err := rr.rollback(ctx)
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
	st := rr.o.r.opts.Store
	in, err := st.Instance(rr.o.j.recorded.ID, w.target.Region, w.target.Account)
	if err != nil {
		return
	}
	in.Status, in.StatusReason, in.Updated = pr.Status, pr.Reason, rr.o.r.opts.Now()
	if err := st.PutInstance(in); err != nil {
		rr.o.log.Error().Err(err).Msg("cannot record instance status")
	}
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
	target engine.Target
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
	st := o.r.opts.Store
	var items []rollbackItem
	for _, m := range o.op.Rollout.Plan[k-1].Members {
		t := engine.Target{Region: m.Region, Account: m.Account}
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
	for k := prog.RollbackBatch; k >= 1; k-- {
		items, err := rr.rollbackItems(k)
		if err != nil {
			return restored, "", "", err
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
		prog.RollbackBatch = k
		rr.persist()
		o.log.Warn().Int("batch", k).Int("instances", len(items)).Msg("rolling back batch")
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
	st := o.r.opts.Store
	byRev := map[string][]engine.Target{}
	outputs := map[engine.Target][]byte{}
	var restored []engine.Target
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
					o.event(t.Region, t.Account, "", "HEALTH_CHECK_FAILED", err.Error())
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
func (rr *rolloutRun) previous(ctx context.Context, rev string) (*engine.StackSet, error) {
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
	var mu sync.Mutex
	var failures []string
	region := func(region string) {
		_, maxConc := rr.prefs.Limits(rr.regionTotal[region])
		sem := make(chan struct{}, maxConc)
		var wg sync.WaitGroup
		for _, it := range byRegion[region] {
			if ctx.Err() != nil || rr.o.r.stop.Stopped() {
				break
			}
			sem <- struct{}{}
			rr.o.r.inflight <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := rr.rollbackOne(ctx, it)
				<-rr.o.r.inflight
				<-sem
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					restored++
				case ctx.Err() == nil:
					failures = append(failures, fmt.Sprintf("%s/%s: %v", it.target.Region, it.target.Account, err))
				}
			}()
		}
		wg.Wait()
	}
	forEachRegion(regions, rr.prefs.RegionConcurrency == engine.Parallel, func(r string) bool {
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
	st := o.r.opts.Store
	ssID := o.j.recorded.ID
	t := it.target
	log := o.log.With().Str("region", t.Region).Str("account", t.Account).Int("batch", it.batch).Logger()
	var prev *engine.StackSet
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
		plan = engine.PlanDestroy(&engine.Instance{Name: o.j.name, StackSetID: ssID, Target: t, DeclaredTypes: o.r.declaredTypes(o.j), Caller: engine.CallerAccount(o.j.desired)}, recorded)
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
	j := o.r.journal(ssID, t)
	res, err := o.r.opts.Engine.Apply(ctx, plan, j, o.r.observeTime)
	if ferr := j.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		if ctx.Err() != nil {
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

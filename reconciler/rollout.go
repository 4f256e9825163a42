package reconciler

// Rollouts (DESIGN §6, the Heat seed): with a rollout block, an operation's
// creates and updates go in batches (rolling or canary), each followed by a
// pause and a gate — every instance of the batch at the operation's
// revision and healthy — before the next batch starts; pause =
// "until_promoted" holds after each batch until Promote. A failed gate, an
// exceeded failure tolerance or Abort stops the rollout; with on_failure =
// "rollback" the previous revision is then re-deployed to every instance
// the operation changed, newest batch first.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/state"
)

// Clock is the time source of rollout pauses and health checks.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

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
	rr := v.(*rolloutRun)
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !rr.aborted {
		rr.aborted = true
		close(rr.abort)
	}
	return nil
}

// rolloutRun is the rollout of one running operation.
type rolloutRun struct {
	o     *opRun
	spec  *engine.Rollout
	prefs engine.OperationPreferences
	// prevRev is the revision a rollback re-deploys ("" for a stack set
	// never deployed: a rollback then deletes what was created).
	prevRev string
	// prev is the stack set at prevRev once loaded (prevLoaded): loaded
	// when the rollout starts, so that a rollback does not depend on the
	// revision still being readable from Git by then.
	prev       *engine.StackSet
	prevLoaded bool
	// prior are the results an interrupted run of the operation recorded.
	prior []state.InstanceResult
	// regionTotal counts the operation's instances per region (the base
	// of percentages, as without a rollout).
	regionTotal map[string]int
	// batchOf is each instance's batch (guarded by o.mu).
	batchOf map[engine.Target]int
	// interrupted: the daemon stopped the rollout; it resumes on restart.
	interrupted bool
	// outcome and reason, when the rollout did not succeed: the
	// operation's status and reason.
	outcome, reason string

	mu             sync.Mutex
	waiting        bool
	promote        chan struct{}
	abort          chan struct{}
	aborted        bool
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
		regionTotal: map[string]int{}, batchOf: map[engine.Target]int{}, regionFailures: map[string]int{},
		promote: make(chan struct{}, 1), abort: make(chan struct{}),
	}
	var resumed *state.RolloutProgress
	if o.resumed && o.op.Rollout != nil {
		p := *o.op.Rollout
		resumed = &p
		rr.prevRev = p.PreviousRevision
		rr.prior = rolloutPrior(o.prior, len(o.op.Results), &p)
	}
	if rr.spec.OnFailure == engine.OnFailureRollback {
		if _, err := rr.previous(ctx); err != nil {
			o.log.Warn().Str("error", o.redact(err.Error())).Str("previous", rr.prevName()).Msg("the previous revision does not load now; a rollback will try again")
		}
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
		case engine.InstanceDelete:
			deletes = append(deletes, w)
		default:
			deploy = append(deploy, w)
		}
	}
	untouched, err := o.r.untouchedInService(o.j)
	if err != nil {
		o.log.Warn().Err(err).Msg("cannot count the instances in service; counting none")
	}
	inService := make([]bool, len(deploy))
	for i, w := range deploy {
		inService[i] = w.inService
	}
	var batches [][]*work
	for _, n := range rr.spec.BatchSizes(inService, untouched) {
		batches, deploy = append(batches, deploy[:n]), deploy[n:]
	}
	base := 0
	if resumed != nil {
		base = resumed.Batch
	}
	o.op.Rollout = &state.RolloutProgress{Pattern: rr.spec.Pattern, Batch: base, Batches: base + len(batches), Phase: state.RolloutDeploying, PreviousRevision: rr.prevRev}
	if resumed != nil {
		o.op.Rollout.Phase, o.op.Rollout.FailedBatch = resumed.Phase, resumed.FailedBatch
	}
	// The stack set's status shows this operation while it runs.
	o.j.recorded.LastOperation = o.op.ID
	if err := o.r.opts.Store.PutStackSet(*o.j.recorded); err != nil {
		o.log.Warn().Err(err).Msg("cannot record the running operation on the stack set")
	}
	o.log.Info().Str("pattern", rr.spec.Pattern).Int("batches", len(batches)).Ints("sizes", sizes(batches)).Int("in_service_untouched", untouched).Msg("rollout planned")

	var stop error
	switch {
	case resumed != nil && resumed.Phase == state.RolloutRollingBack:
		stop = &batchFailure{batch: resumed.FailedBatch, reason: o.op.Reason}
	case resumed != nil && resumed.Batch > 0 && resumed.Phase != state.RolloutDone:
		// Interrupted after batch k was deployed: its gate (and hold)
		// must pass again before anything else starts.
		stop = rr.resumeGate(ctx, resumed, len(batches) > 0)
	}
	if stop == nil {
		stop = rr.deploy(ctx, batches, base)
	}
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
			rr.reason = fmt.Sprintf("aborted by stackd abort while deleting the instances of removed targets (%d not deleted)", cancelled)
		}
	}
	o.op.Rollout.Phase = state.RolloutDone
}

func sizes(batches [][]*work) []int {
	out := make([]int, len(batches))
	for i, b := range batches {
		out[i] = len(b)
	}
	return out
}

// untouchedInService counts the stack set's instances the job does not
// touch whose last operation completed (min_in_service counts them).
func (r *Reconciler) untouchedInService(j *job) (int, error) {
	if j.recorded == nil {
		return 0, nil
	}
	ins, err := r.opts.Store.Instances(j.recorded.ID)
	if err != nil {
		return 0, err
	}
	touched := map[engine.Target]bool{}
	for _, w := range j.works {
		touched[w.target] = true
	}
	n := 0
	for _, in := range ins {
		if !touched[engine.Target{Region: in.Region, Account: in.Account}] && in.Status == state.InstanceOperationComplete {
			n++
		}
	}
	return n, nil
}

// deploy runs the batches in order, each followed by its gate and, but for
// the last, its hold or status commit.
func (rr *rolloutRun) deploy(ctx context.Context, batches [][]*work, base int) error {
	o := rr.o
	total := base + len(batches)
	for i, batch := range batches {
		n := base + i + 1
		if rr.isAborted() {
			return &batchFailure{aborted: true, reason: fmt.Sprintf("aborted by stackd abort before batch %d of %d", n, total)}
		}
		o.mu.Lock()
		for _, w := range batch {
			rr.batchOf[w.target] = n
		}
		o.mu.Unlock()
		rr.phase(n, state.RolloutDeploying)
		o.log.Info().Int("batch", n).Int("batches", total).Int("instances", len(batch)).Msg("rollout batch started")
		if err := rr.runBatch(ctx, n, batch); err != nil {
			return err
		}
		var done []engine.Target
		o.mu.Lock()
		for _, w := range batch {
			if o.results[w.target].Status == state.InstanceOperationComplete {
				done = append(done, w.target)
			}
		}
		o.mu.Unlock()
		if err := rr.gate(ctx, n, done); err != nil {
			return err
		}
		o.log.Info().Int("batch", n).Int("batches", total).Int("healthy", len(done)).Int("failed", len(batch)-len(done)).Msg("rollout batch passed its gate")
		if i == len(batches)-1 {
			break // the operation's own status commit follows
		}
		if err := rr.hold(ctx, n); err != nil {
			return err
		}
	}
	if rr.isAborted() && len(batches) > 0 {
		return &batchFailure{aborted: true, reason: fmt.Sprintf("aborted by stackd abort during batch %d of %d", total, total)}
	}
	return nil
}

// resumeGate re-checks the gate of the batch an interrupted run was in,
// then holds if the rollout holds and batches are left.
func (rr *rolloutRun) resumeGate(ctx context.Context, p *state.RolloutProgress, more bool) error {
	if p.Phase != state.RolloutWaitingForPromotion {
		var done []engine.Target
		for _, res := range rr.prior {
			if res.Batch == p.Batch && res.Status == state.InstanceOperationComplete {
				done = append(done, engine.Target{Region: res.Region, Account: res.Account})
			}
		}
		rr.o.log.Info().Int("batch", p.Batch).Str("phase", p.Phase).Msg("resumed rollout: checking the interrupted batch's gate again")
		if err := rr.gate(ctx, p.Batch, done); err != nil {
			return err
		}
	}
	if !more {
		return nil
	}
	return rr.hold(ctx, p.Batch)
}

// rolloutPrior are the results an interrupted rollout finished: recorded
// holds first the recorded results, then those completed from the event log
// (finished after the last record, which is written at every phase
// change). Those can only belong to the batch the run was deploying, and
// get its number, so that its gate checks them and a rollback restores
// them.
func rolloutPrior(prior []state.InstanceResult, recorded int, p *state.RolloutProgress) []state.InstanceResult {
	out := slices.Clone(prior)
	if p.Phase != state.RolloutDeploying || p.Batch == 0 {
		return out
	}
	for i := recorded; i < len(out); i++ {
		switch out[i].Action {
		case strings.ToLower(engine.InstanceCreate), strings.ToLower(engine.InstanceUpdate):
			if out[i].Batch == 0 {
				out[i].Batch = p.Batch
			}
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
	strict := rr.prefs.FailureToleranceMode != "SOFT_FAILURE_TOLERANCE"
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
	interrupted := func() bool { return ctx.Err() != nil || o.r.isStopping() }
	total := o.op.Rollout.Batches
	exceeded := func(region string, failed, tolerance int) error {
		return &batchFailure{batch: n, reason: fmt.Sprintf("batch %d of %d failed: failure tolerance exceeded in region %s (%s failed, tolerance %d)%s", n, total, region, plural(failed, "instance"), tolerance, o.firstFailure(byRegion[region]))}
	}
	// An abort lets the instances in flight finish and starts no other.
	abortedDuring := func() error {
		return &batchFailure{aborted: true, reason: fmt.Sprintf("aborted by stackd abort during batch %d of %d", n, total)}
	}
	if rr.prefs.RegionConcurrency == "PARALLEL" {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
		)
		for _, region := range regions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if failed, tol, ok := run(region); !ok && !interrupted() {
					mu.Lock()
					if first == nil {
						first = exceeded(region, failed, tol)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if interrupted() {
			return errInterrupted
		}
		if first == nil && rr.isAborted() {
			return abortedDuring()
		}
		return first
	}
	for _, region := range regions {
		failed, tol, ok := run(region)
		if interrupted() {
			return errInterrupted
		}
		if !ok {
			return exceeded(region, failed, tol)
		}
		if rr.isAborted() {
			return abortedDuring()
		}
	}
	return nil
}

// gate waits the pause, then checks that every instance of batch n that
// completed is recorded at the operation's revision, complete, and passes
// its health check.
func (rr *rolloutRun) gate(ctx context.Context, n int, done []engine.Target) error {
	o := rr.o
	total := o.op.Rollout.Batches
	if rr.spec.Pause > 0 {
		rr.phase(n, state.RolloutPaused)
		o.log.Info().Int("batch", n).Dur("pause", rr.spec.Pause).Msg("rollout pausing")
		if err := rr.sleep(ctx, rr.spec.Pause); err != nil {
			return rr.waitFailure(err, n, "while pausing")
		}
	}
	rr.phase(n, state.RolloutHealthCheck)
	st := o.r.opts.Store
	ssID := o.j.recorded.ID
	outputs := make([][]byte, len(done))
	for i, t := range done {
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
		outputs[i] = in.Outputs
	}
	hc := rr.spec.HealthCheck
	if hc == nil || len(done) == 0 {
		return nil
	}
	o.log.Info().Int("batch", n).Int("instances", len(done)).Msg("rollout health checks started")
	errs := make([]error, len(done))
	sem := make(chan struct{}, maxProbes)
	var wg sync.WaitGroup
	for i, t := range done {
		url, err := hc.URLFor(o.j.desired, ssID, t, outputs[i])
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
	var bad []string
	for i, err := range errs {
		switch {
		case errors.Is(err, errAborted), errors.Is(err, errInterrupted):
			return rr.waitFailure(err, n, "during its health checks")
		case err != nil:
			t := done[i]
			bad = append(bad, fmt.Sprintf("%s/%s: %v", t.Region, t.Account, err))
			o.event(t.Region, t.Account, "", "HEALTH_CHECK_FAILED", err.Error())
			rr.gateFailed(t, "health check failed: "+err.Error())
		}
	}
	if len(bad) == 0 {
		return nil
	}
	reason := fmt.Sprintf("batch %d of %d failed its health check: %s", n, total, bad[0])
	if len(bad) > 1 {
		reason += fmt.Sprintf(" (and %s more)", plural(len(bad)-1, "instance"))
	}
	return &batchFailure{batch: n, reason: o.redact(reason)}
}

// gateFailed records that instance t, deployed, failed its batch's gate:
// it is OPERATION_FAILED with the reason, in the state and in the
// operation's results (its action and batch kept).
func (rr *rolloutRun) gateFailed(t engine.Target, reason string) {
	o := rr.o
	reason = o.redact(reason)
	st := o.r.opts.Store
	if in, err := st.Instance(o.j.recorded.ID, t.Region, t.Account); err == nil {
		in.Status, in.StatusReason, in.Updated = state.InstanceOperationFailed, reason, o.r.opts.Now()
		if err := st.PutInstance(in); err != nil {
			o.log.Error().Err(err).Msg("cannot record instance status")
		}
	}
	o.event(t.Region, t.Account, "", state.InstanceOperationFailed, reason)
	o.mu.Lock()
	defer o.mu.Unlock()
	res, ok := o.results[t]
	if !ok {
		for _, pr := range rr.prior {
			if pr.Region == t.Region && pr.Account == t.Account {
				res, ok = pr, true
			}
		}
	}
	if !ok {
		res = state.InstanceResult{Region: t.Region, Account: t.Account, Action: "none"}
	}
	res.Status, res.Reason = state.InstanceOperationFailed, reason
	o.results[t] = res
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
	req.Header.Set("User-Agent", "stackd-health-check")
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
	select {
	case <-rr.promote:
		o.log.Info().Int("batch", n).Msg("rollout promoted")
		o.event("", "", "", "PROMOTED", fmt.Sprintf("promoted after batch %d of %d", n, o.op.Rollout.Batches))
		return nil
	case <-rr.abort:
		return rr.waitFailure(errAborted, n, "while waiting for promotion")
	case <-ctx.Done():
		return errInterrupted
	case <-o.r.stopping:
		return errInterrupted
	}
}

// sleep waits d on the clock, unless aborted or interrupted first.
func (rr *rolloutRun) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-rr.o.r.opts.Clock.After(d):
		return nil
	case <-rr.abort:
		return errAborted
	case <-ctx.Done():
		return errInterrupted
	case <-rr.o.r.stopping:
		return errInterrupted
	}
}

// waitFailure turns an ended wait into the rollout's stop.
func (rr *rolloutRun) waitFailure(err error, n int, when string) error {
	if errors.Is(err, errAborted) {
		return &batchFailure{aborted: true, reason: fmt.Sprintf("aborted by stackd abort after batch %d of %d (%s)", n, rr.o.op.Rollout.Batches, when)}
	}
	return err
}

func (rr *rolloutRun) isAborted() bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.aborted
}

// phase records where the rollout is.
func (rr *rolloutRun) phase(n int, phase string) {
	rr.o.op.Rollout.Batch, rr.o.op.Rollout.Phase = n, phase
	rr.persist()
}

// persist records the operation with the results so far.
func (rr *rolloutRun) persist() {
	op := *rr.o.op
	op.Results = rr.results()
	if err := rr.o.r.opts.Store.PutOperation(op); err != nil {
		rr.o.log.Warn().Err(err).Msg("cannot record rollout progress")
	}
}

// checkpoint records the operation and writes its status commit: one per
// batch boundary.
func (rr *rolloutRun) checkpoint(ctx context.Context) {
	o := rr.o
	op := *o.op
	op.Results = rr.results()
	if err := o.r.opts.Store.PutOperation(op); err != nil {
		o.log.Warn().Err(err).Msg("cannot record rollout progress")
	}
	ss := *o.j.recorded
	if err := o.r.writeOperationStatus(ctx, o.j, &ss, &op); err != nil {
		o.log.Warn().Err(err).Msg("cannot write the batch's status commit")
	}
}

// results are the operation's instance results so far: those of an
// interrupted run, replaced by this run's, each with its batch.
func (rr *rolloutRun) results() []state.InstanceResult {
	o := rr.o
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]state.InstanceResult, 0, len(rr.prior)+len(o.results))
	seen := map[engine.Target]bool{}
	add := func(t engine.Target, res state.InstanceResult) {
		if res.Batch == 0 {
			res.Batch = rr.batchOf[t]
		}
		seen[t] = true
		out = append(out, res)
	}
	for _, pr := range rr.prior {
		t := engine.Target{Region: pr.Region, Account: pr.Account}
		if res, ok := o.results[t]; ok {
			if res.Batch == 0 {
				res.Batch = pr.Batch
			}
			add(t, res)
			continue
		}
		add(t, pr)
	}
	for _, w := range o.j.works {
		if res, ok := o.results[w.target]; ok && !seen[w.target] {
			add(w.target, res)
		}
	}
	return out
}

// runDeletes removes the instances of removed targets after the batches.
func (rr *rolloutRun) runDeletes(ctx context.Context, deletes []*work) {
	if len(deletes) == 0 {
		return
	}
	var regions []string
	byRegion := map[string][]*work{}
	for _, w := range deletes {
		if _, ok := byRegion[w.target.Region]; !ok {
			regions = append(regions, w.target.Region)
		}
		byRegion[w.target.Region] = append(byRegion[w.target.Region], w)
	}
	for i, region := range regions {
		if !rr.o.runRegion(ctx, rr.prefs, byRegion[region]) {
			if ctx.Err() != nil || rr.o.r.isStopping() {
				rr.interrupted = true
				return
			}
			for _, rest := range regions[i+1:] {
				rr.o.cancel(byRegion[rest], "failure tolerance exceeded in region "+region)
			}
			return
		}
	}
}

// fail stops the rollout: what has not started is cancelled, and with
// on_failure = "rollback" what the operation changed is rolled back.
func (rr *rolloutRun) fail(ctx context.Context, bf *batchFailure) {
	o := rr.o
	o.op.Rollout.FailedBatch = bf.batch
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
		rr.phase(o.op.Rollout.Batch, state.RolloutRollingBack)
		restored, failed, err := rr.rollback(ctx)
		switch {
		case errors.Is(err, errInterrupted):
			rr.interrupted = true
			return
		case err != nil:
			rr.outcome = state.OperationRollbackFailed
			rr.reason += fmt.Sprintf("; rollback to %s failed: %v", rr.prevName(), err)
		case failed > 0:
			rr.outcome = state.OperationRollbackFailed
			rr.reason += fmt.Sprintf("; rollback to %s failed for %d of %s", rr.prevName(), failed, plural(restored+failed, "instance"))
		default:
			rr.outcome = state.OperationRolledBack
			rr.reason += fmt.Sprintf("; rolled back %s to %s", plural(restored, "instance"), rr.prevName())
		}
	case bf.aborted:
		rr.outcome = state.OperationStopped
	default:
		rr.outcome = state.OperationFailed
		rr.reason += "; stopped (on_failure = \"stop\")"
	}
	o.op.Rollout.Phase = state.RolloutDone
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

func (rr *rolloutRun) prevName() string {
	if rr.prevRev == "" {
		return "nothing (the stack set was never deployed)"
	}
	return short(rr.prevRev)
}

// rollbackItem is one instance the operation changed.
type rollbackItem struct {
	target engine.Target
	create bool // created by the operation: a rollback deletes it
	batch  int
}

// rollback re-deploys the previous revision to every instance the
// operation changed (completed or failed), newest batch first, each batch
// with the operation preferences' concurrency. It returns how many
// instances were restored and how many could not be.
func (rr *rolloutRun) rollback(ctx context.Context) (restored, failed int, err error) {
	o := rr.o
	byBatch := map[int][]rollbackItem{}
	for _, res := range rr.results() {
		if res.Batch == 0 || res.RolledBack || res.Action == strings.ToLower(engine.InstanceDelete) ||
			res.Status != state.InstanceOperationComplete && res.Status != state.InstanceOperationFailed {
			continue
		}
		byBatch[res.Batch] = append(byBatch[res.Batch], rollbackItem{
			target: engine.Target{Region: res.Region, Account: res.Account},
			create: res.Action == strings.ToLower(engine.InstanceCreate), batch: res.Batch,
		})
	}
	var order []int
	for b := range byBatch {
		order = append(order, b)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(order)))
	prev, err := rr.previous(ctx)
	if err != nil {
		return 0, 0, err
	}
	o.log.Warn().Str("to", rr.prevName()).Ints("batches", order).Msg("rollout rolling back")
	for _, b := range order {
		items := byBatch[b]
		o.op.Rollout.Batch = b
		rr.persist()
		o.log.Info().Int("batch", b).Int("instances", len(items)).Msg("rolling back batch")
		ok, bad := rr.rollbackBatch(ctx, prev, items)
		restored, failed = restored+ok, failed+bad
		if ctx.Err() != nil || o.r.isStopping() {
			return restored, failed, errInterrupted
		}
	}
	return restored, failed, nil
}

// previous loads the stack set at the previous revision (nil when there
// is none: a rollback deletes what the operation created).
func (rr *rolloutRun) previous(ctx context.Context) (*engine.StackSet, error) {
	if rr.prevRev == "" || rr.prevLoaded {
		return rr.prev, nil
	}
	o := rr.o
	fsys, err := o.r.opts.Source.Tree(ctx, rr.prevRev)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", short(rr.prevRev), err)
	}
	defs, diags := o.r.opts.Engine.Load(fsys, o.r.opts.Path)
	if diags.HasErrors() {
		return nil, fmt.Errorf("revision %s does not load: %s", short(rr.prevRev), diags.Errs()[0])
	}
	ss := defs.StackSet(o.j.name)
	if ss == nil {
		return nil, fmt.Errorf("revision %s has no stack set %q", short(rr.prevRev), o.j.name)
	}
	rr.prev, rr.prevLoaded = ss, true
	return ss, nil
}

// rollbackBatch rolls back one batch's instances: regions in reverse
// order (all at once when PARALLEL), each with its max concurrency.
func (rr *rolloutRun) rollbackBatch(ctx context.Context, prev *engine.StackSet, items []rollbackItem) (restored, failed int) {
	var regions []string
	byRegion := map[string][]rollbackItem{}
	for _, it := range items {
		if _, ok := byRegion[it.target.Region]; !ok {
			regions = append(regions, it.target.Region)
		}
		byRegion[it.target.Region] = append(byRegion[it.target.Region], it)
	}
	slices.Reverse(regions)
	var targets map[engine.Target]bool
	if prev != nil {
		targets = map[engine.Target]bool{}
		for _, t := range prev.Targets() {
			targets[t] = true
		}
	}
	var mu sync.Mutex
	region := func(region string) {
		_, maxConc := rr.prefs.Limits(rr.regionTotal[region])
		sem := make(chan struct{}, maxConc)
		var wg sync.WaitGroup
		for _, it := range byRegion[region] {
			if ctx.Err() != nil || rr.o.r.isStopping() {
				break
			}
			sem <- struct{}{}
			rr.o.r.inflight <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok := rr.rollbackOne(ctx, prev, targets, it)
				<-rr.o.r.inflight
				<-sem
				mu.Lock()
				if ok {
					restored++
				} else if ctx.Err() == nil {
					failed++
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	if rr.prefs.RegionConcurrency == "PARALLEL" {
		var wg sync.WaitGroup
		for _, r := range regions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				region(r)
			}()
		}
		wg.Wait()
	} else {
		for _, r := range regions {
			region(r)
		}
	}
	return restored, failed
}

// rollbackOne re-deploys the previous revision to one instance (or deletes
// an instance the operation created); it reports success.
func (rr *rolloutRun) rollbackOne(ctx context.Context, prev *engine.StackSet, targets map[engine.Target]bool, it rollbackItem) bool {
	o := rr.o
	st := o.r.opts.Store
	ssID := o.j.recorded.ID
	t := it.target
	log := o.log.With().Str("region", t.Region).Str("account", t.Account).Int("batch", it.batch).Logger()
	redactPrev := redactor(prev)
	failWith := func(err error) bool {
		reason := redactPrev(o.redact(fmt.Sprintf("rollback to %s failed: %v", rr.prevName(), err)))
		log.Error().Str("reason", reason).Msg("instance rollback failed")
		if in, gerr := st.Instance(ssID, t.Region, t.Account); gerr == nil {
			in.Status, in.StatusReason, in.Updated = state.InstanceOperationFailed, reason, o.r.opts.Now()
			if err := st.PutInstance(in); err != nil {
				log.Error().Err(err).Msg("cannot record instance status")
			}
		}
		rr.rolledBack(it, state.InstanceOperationFailed, reason, false)
		return false
	}
	recorded, err := o.r.resources(ssID, t)
	if err != nil {
		return failWith(err)
	}
	destroy := it.create || prev == nil
	var plan *engine.InstancePlan
	switch {
	case destroy:
		plan = engine.PlanDestroy(&engine.Instance{Name: o.j.name, StackSetID: ssID, Target: t, DeclaredTypes: o.r.declaredTypes(o.j)}, recorded)
	case !targets[t]:
		return failWith(fmt.Errorf("%s/%s is not a target of revision %s", t.Region, t.Account, short(rr.prevRev)))
	default:
		p, diags := o.r.opts.Engine.PlanContext(ctx, &engine.Instance{StackSet: prev, StackSetID: ssID, Target: t}, recorded)
		if diags.HasErrors() {
			return failWith(diagError(diags))
		}
		plan = p
	}
	in, err := st.Instance(ssID, t.Region, t.Account)
	if err != nil {
		in = state.Instance{StackSetID: ssID, Region: t.Region, Account: t.Account}
	}
	in.Status, in.StatusReason, in.Updated = state.InstanceOperationInProgress, "rolling back to "+rr.prevName(), o.r.opts.Now()
	if err := st.PutInstance(in); err != nil {
		return failWith(err)
	}
	j := &journal{store: st, ssID: ssID, region: t.Region, account: t.Account, now: o.r.opts.Now}
	res, err := o.r.opts.Engine.Apply(ctx, plan, j, nil)
	if ferr := j.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		if ctx.Err() != nil {
			return false // stopping: the resumed operation rolls back again
		}
		return failWith(err)
	}
	reason := "rolled back to " + rr.prevName()
	if destroy {
		if err := st.DeleteInstance(ssID, t.Region, t.Account); err != nil {
			return failWith(err)
		}
		reason = "deleted: created by the rolled-back operation"
	} else {
		in.Status, in.StatusReason, in.Updated = state.InstanceOperationComplete, reason, o.r.opts.Now()
		in.Revision, in.ConfigHash, in.Outputs = rr.prevRev, prev.InstanceHash(ssID, t), outputsJSON(res.Outputs)
		if err := st.PutInstance(in); err != nil {
			return failWith(err)
		}
	}
	log.Info().Msg("instance rolled back")
	rr.rolledBack(it, state.InstanceOperationComplete, reason, true)
	return true
}

// rolledBack records an instance's rollback in the operation's results.
func (rr *rolloutRun) rolledBack(it rollbackItem, status, reason string, ok bool) {
	o := rr.o
	t := it.target
	o.event(t.Region, t.Account, "", status, reason)
	action := strings.ToLower(engine.InstanceUpdate)
	if it.create {
		action = strings.ToLower(engine.InstanceCreate)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results[t] = state.InstanceResult{Region: t.Region, Account: t.Account, Action: action, Status: status, Reason: reason, Batch: it.batch, RolledBack: ok}
}

// diagError joins diagnostics into one error.
func diagError(diags interface{ Errs() []error }) error {
	return errors.Join(diags.Errs()...)
}

// firstFailure names the first failed instance of works and why, for an
// operation's reason (": region/account: reason"), or "".
func (o *opRun) firstFailure(works []*work) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, w := range works {
		if r, ok := o.results[w.target]; ok && r.Status == state.InstanceOperationFailed {
			reason := strings.Join(strings.Fields(r.Reason), " ")
			if len(reason) > 300 {
				reason = strings.ToValidUTF8(reason[:300], "") + "…"
			}
			return fmt.Sprintf("; first failure %s/%s: %s", r.Region, r.Account, reason)
		}
	}
	return ""
}

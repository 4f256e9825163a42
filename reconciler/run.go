package reconciler

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/internal/backoff"
)

// Health is the outcome of the latest reconcile pass, for /readyz and
// metrics.
type Health struct {
	LastAttempt time.Time
	LastSuccess time.Time
	Revision    string
	Err         string
	// Rejected is the deploy branch's head when it did not validate or
	// plan (the last good revision stays deployed), with the number of
	// its errors; empty once a revision is accepted.
	Rejected       string `json:",omitempty"`
	RejectedErrors int    `json:",omitempty"`
}

// Health returns the latest pass's outcome.
func (r *Reconciler) Health() Health {
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	return r.health
}

func (r *Reconciler) setHealth(res *Result, err error) {
	r.healthMu.Lock()
	defer r.healthMu.Unlock()
	now := r.opts.Now()
	r.health.LastAttempt = now
	if err != nil {
		r.health.Err = err.Error()
		return
	}
	r.health.Err = ""
	r.health.LastSuccess = now
	if res != nil {
		r.health.Revision = res.Revision
		r.health.Rejected, r.health.RejectedErrors = "", 0
		if res.Rejected {
			r.health.Rejected = res.Revision
			for _, d := range res.Diagnostics {
				if d.Severity == changeset.SeverityError {
					r.health.RejectedErrors++
				}
			}
		}
	}
}

// stopProvidersTimeout bounds how long shutdown waits for Terraform
// providers to answer StopProvider once the grace period is over.
const stopProvidersTimeout = 5 * time.Second

// Run reconciles now and then on every trigger until ctx ends. After a
// failed pass (Git unreachable, ...) a trigger (a poll tick, a webhook)
// still reconciles at once: a remote that came back is used at once; the
// backoff (capped, exponential, with jitter, on Options.Clock) only spaces
// the retries nothing asked for. When ctx ends, no new instance starts;
// instances in flight get grace to finish before their context is
// cancelled too, then the status documents owed are pushed (for at most
// statusWriteGrace).
func (r *Reconciler) Run(ctx context.Context, trigger <-chan struct{}, grace time.Duration) error {
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	r.stop = stopSignal{done: ctx.Done()}
	r.callsStopped.Store(false)
	r.opsCtx.Store(&work)
	go func() {
		select {
		case <-ctx.Done():
		case <-work.Done():
			return
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			r.log.Warn().Str("grace", grace.String()).Msg("grace period over: stopping and cancelling provider calls in flight")
			// Terraform providers are asked to stop first (StopProvider),
			// so that they wind down what they started, then the calls'
			// contexts end. A call that fails from the stop is an
			// interruption, not a failure (StopProviderCalls marks it so
			// before the providers are asked).
			stop, done := context.WithTimeout(context.WithoutCancel(ctx), stopProvidersTimeout)
			r.StopProviderCalls(stop)
			done()
			cancel()
		case <-work.Done():
		}
	}()
	// On return, operations in flight finish (or are cancelled when the
	// grace period ends) before Run returns, and then their status is
	// written (deferred calls run last first).
	r.status.setRetrying(true)
	defer func() {
		if err := r.status.drainFor(statusWriteGrace); err != nil {
			r.log.Warn().Err(err).Msg("status commits still owed at shutdown; they are written at the next start")
		}
	}()
	defer r.Wait()
	// Pull-request branches are planned by a worker of their own, after
	// each fetch: a branch slow or hostile to plan never delays the next
	// reconcile of the deploy branch. It stops at once on a stop.
	branches := make(chan struct{}, 1)
	var branchWorker sync.WaitGroup
	branchWorker.Go(func() { r.planBranchesLoop(ctx, branches) })
	defer branchWorker.Wait()
	// Drift is checked by a worker of its own too (drift blocks with an
	// interval); it stops at once on a stop.
	var driftWorker sync.WaitGroup
	driftWorker.Go(func() { r.driftLoop(ctx) })
	defer driftWorker.Wait()
	retryPolicy := backoff.Policy{Min: time.Second, Max: 5 * time.Minute, Jitter: true}
	failures := 0
	for {
		r.passes.begin()
		res, _, err := r.start(work)
		r.passes.end(res, err)
		if err == nil {
			r.status.remoteAnswered()
			select {
			case branches <- struct{}{}:
			default: // a pass is due already; it will see this fetch
			}
		}
		r.setHealth(res, err)
		var retry <-chan time.Time // nil (never) unless the pass failed
		if err != nil && ctx.Err() == nil {
			failures++
			d := retryPolicy.Delay(failures)
			r.log.Error().Err(err).Str("retry_in", d.String()).Msg("reconcile failed")
			retry = r.opts.Clock.After(d)
		} else {
			failures = 0
		}
		// A trigger (watch tick, webhook) reconciles now even while backing
		// off: the triggers' own pace (--interval) bounds how often a
		// failing remote is tried, the backoff how often it is retried
		// unasked.
		select {
		case <-ctx.Done():
			return nil
		case <-retry:
		case _, ok := <-trigger:
			if !ok {
				return nil
			}
		}
	}
}

// planBranchesLoop runs PlanBranches on every signal until ctx ends.
func (r *Reconciler) planBranchesLoop(ctx context.Context, signal <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-signal:
		}
		if err := r.PlanBranches(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn().Err(err).Msg("planning pull-request branches failed")
		}
	}
}

// PlanResult is the change set of every stack set at a revision.
type PlanResult struct {
	Revision    string
	ChangeSets  []*changeset.StackSetChangeSet
	Diagnostics []engine.Diagnostic
}

var commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Plan computes, without applying anything, what reconciling ref (a
// branch name or a full commit hash) would do against the current state.
//
// It never waits for the deploy branch's reconcile: a ref other than the
// deploy branch's head is untrusted and planned under Options.PlanBudget
// without the state's sensitive values, as pull-request branches are. A
// plan of the same revision against the same state is answered from the
// cache (what PlanBranches or an earlier call planned). Calls plan one at
// a time; one that waits gives up when ctx ends (the client went away).
func (r *Reconciler) Plan(ctx context.Context, ref string) (*PlanResult, error) {
	return r.PlanWith(ctx, ref, PlanOptions{})
}

// PlanOptions change what Plan does.
type PlanOptions struct {
	// Refresh reads every deployed instance before planning (stackd plan
	// --refresh): the change sets also show the changes that would correct
	// drift. Only the deploy branch: what a read finds is not shown to a
	// ref anyone may push. Never cached.
	Refresh bool
}

// ErrRefreshUntrusted is returned by PlanWith for a refresh of a ref that
// is not the deploy branch.
var ErrRefreshUntrusted = errors.New("a refresh plans only the deploy branch: what it reads is not shown to other refs")

// PlanWith is Plan with options.
func (r *Reconciler) PlanWith(ctx context.Context, ref string, o PlanOptions) (*PlanResult, error) {
	defer r.reportGitFaults()
	fctx, cancel := r.gitContext(ctx)
	defer cancel()
	if err := r.opts.Source.Fetch(fctx); err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	if ref == "" {
		ref = r.opts.Branch
	}
	rev := ref
	if !commitRe.MatchString(ref) {
		var err error
		if rev, err = r.opts.Source.Head(fctx, ref); err != nil {
			return nil, fmt.Errorf("resolve %s: %w", ref, err)
		}
	}
	deployHead, err := r.opts.Source.Head(fctx, r.opts.Branch)
	untrusted := err != nil || rev != deployHead
	if o.Refresh {
		if untrusted {
			return nil, ErrRefreshUntrusted
		}
		select {
		case r.planSem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		defer func() { <-r.planSem }()
		return r.planRevision(ctx, rev, false, modePlanRefresh)
	}
	if res := r.plans.get(rev, untrusted, r.stateGen.Load()); res != nil {
		return res, nil
	}
	select {
	case r.planSem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-r.planSem }()
	return r.planBudgeted(ctx, rev, untrusted)
}

// planRevision plans a commit for a change set. untrusted: see job.untrusted.
func (r *Reconciler) planRevision(ctx context.Context, rev string, untrusted bool, mode planMode) (*PlanResult, error) {
	jobs, diags, err := r.prepare(ctx, rev, mode, untrusted)
	if err != nil {
		return nil, err
	}
	res := &PlanResult{Revision: rev, Diagnostics: config.DiagnosticsJSON(diags)}
	if diags.HasErrors() {
		return res, nil
	}
	for _, j := range jobs {
		res.ChangeSets = append(res.ChangeSets, j.changeSet)
	}
	return res, nil
}

// passLog records Run's passes for WaitPass.
type passLog struct {
	mu             sync.Mutex
	started, ended uint64
	last           *Result
	lastErr        error
	done           chan struct{}
}

func (p *passLog) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started++
}

func (p *passLog) end(res *Result, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended++
	p.last, p.lastErr = res, err
	if p.done != nil {
		close(p.done)
		p.done = nil
	}
}

// PassesStarted is how many passes Run has started. A pass numbered
// higher than it starts after the call: what WaitPass waits for.
func (r *Reconciler) PassesStarted() uint64 {
	r.passes.mu.Lock()
	defer r.passes.mu.Unlock()
	return r.passes.started
}

// WaitPass waits until Run's pass number n+1 (the first to start after
// PassesStarted returned n) has ended and returns its outcome: its result
// (operations it started may still run) and error. Passes run one at a
// time, so that is when n+1 passes have ended.
func (r *Reconciler) WaitPass(ctx context.Context, n uint64) (*Result, error) {
	for {
		r.passes.mu.Lock()
		if r.passes.ended > n {
			res, err := r.passes.last, r.passes.lastErr
			r.passes.mu.Unlock()
			return res, err
		}
		if r.passes.done == nil {
			r.passes.done = make(chan struct{})
		}
		done := r.passes.done
		r.passes.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-done:
		}
	}
}

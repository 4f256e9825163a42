package reconciler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/stackd/stackd/engine"
)

// Health is the outcome of the latest reconcile pass, for /readyz and
// metrics.
type Health struct {
	LastAttempt time.Time
	LastSuccess time.Time
	Revision    string
	Err         string
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
	}
}

// Run reconciles now and then on every trigger until ctx ends. Errors
// (Git unreachable, ...) are retried with capped exponential backoff and
// jitter. When ctx ends, no new instance starts; instances in flight get
// grace to finish before their context is cancelled too.
func (r *Reconciler) Run(ctx context.Context, trigger <-chan struct{}, grace time.Duration) error {
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	r.stopping = ctx.Done()
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
			r.log.Warn().Dur("grace", grace).Msg("grace period over: cancelling provider calls in flight")
			cancel()
		case <-work.Done():
		}
	}()
	// On return, operations in flight finish (or are cancelled when the
	// grace period ends) before Run returns.
	defer r.Wait()
	const minBackoff, maxBackoff = time.Second, 5 * time.Minute
	backoff := minBackoff
	for {
		res, _, err := r.start(work)
		if err == nil {
			if perr := r.PlanBranches(work); perr != nil {
				r.log.Warn().Err(perr).Msg("planning pull-request branches failed")
			}
		}
		r.setHealth(res, err)
		var retry <-chan time.Time
		if err != nil && ctx.Err() == nil {
			d := backoff/2 + rand.N(backoff/2+1)
			r.log.Error().Err(err).Dur("retry_in", d).Msg("reconcile failed")
			retry = time.After(d)
			backoff = min(backoff*2, maxBackoff)
		} else {
			backoff = minBackoff
		}
		if retry != nil {
			// Backing off: triggers (watch ticks, webhooks) wait for the
			// retry, so a failing remote is not hammered every interval.
			select {
			case <-ctx.Done():
				return nil
			case <-retry:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-trigger:
			if !ok {
				return nil
			}
		}
	}
}

func (r *Reconciler) isStopping() bool {
	if r.stopping == nil {
		return false
	}
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

// PlanResult is the change set of every stack set at a revision.
type PlanResult struct {
	Revision    string
	ChangeSets  []*engine.StackSetChangeSet
	Diagnostics []engine.Diagnostic
}

var commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Plan computes, without applying anything, what reconciling ref (a
// branch name or a full commit hash) would do against the current state.
func (r *Reconciler) Plan(ctx context.Context, ref string) (*PlanResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.reportGitFaults()
	if err := r.opts.Source.Fetch(ctx); err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	if ref == "" {
		ref = r.opts.Branch
	}
	rev := ref
	if !commitRe.MatchString(ref) {
		var err error
		if rev, err = r.opts.Source.Head(ctx, ref); err != nil {
			return nil, fmt.Errorf("resolve %s: %w", ref, err)
		}
	}
	return r.planRevision(ctx, rev)
}

// planRevision plans a commit (r.mu held).
func (r *Reconciler) planRevision(ctx context.Context, rev string) (*PlanResult, error) {
	jobs, diags, err := r.prepare(ctx, rev, modePlan)
	if err != nil {
		return nil, err
	}
	res := &PlanResult{Revision: rev, Diagnostics: engine.DiagnosticsJSON(diags)}
	if diags.HasErrors() {
		return res, nil
	}
	for _, j := range jobs {
		res.ChangeSets = append(res.ChangeSets, j.changeSet)
	}
	return res, nil
}

package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/stackd/stackd/state"
)

// runner carries out the operations of one stack set, one at a time. A job
// dispatched while one runs waits in queued; a newer job replaces a queued
// one (coalescing: only the latest commit matters).
type runner struct {
	busy   bool
	queued *job
	// drift is the drift check running while no operation does (it is
	// stopped before one starts).
	drift *driftRun
}

// pass collects what the operations a reconcile pass dispatched did.
type pass struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	ops  []state.Operation
	errs []error
}

func (p *pass) record(name string, op *state.Operation, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("stack set %s: %w", name, err))
	}
	if op != nil {
		p.ops = append(p.ops, *op)
	}
}

// join merges two passes into one to wait on (either may be nil).
func (p *pass) join(q *pass) *pass {
	if p == nil {
		return q
	}
	if q == nil {
		return p
	}
	both := &pass{}
	both.wg.Add(1)
	go func() {
		defer both.wg.Done()
		p.wg.Wait()
		q.wg.Wait()
		both.ops = append(append(both.ops, p.ops...), q.ops...)
		both.errs = append(append(both.errs, p.errs...), q.errs...)
	}()
	return both
}

// wait blocks until the pass's operations end and adds them to res.
func (p *pass) wait(res *Result, ctx context.Context) error {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	res.Operations = append(res.Operations, p.ops...)
	sort.Slice(res.Operations, func(a, b int) bool { return res.Operations[a].StackSet < res.Operations[b].StackSet })
	if err := errors.Join(p.errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// dispatch hands a job to its stack set's runner: it starts at once if the
// runner is idle, else it is queued (replacing an older queued job). On a
// shared state, only a replica holding the stack set's lease runs it:
// false when this one does not.
func (r *Reconciler) dispatch(ctx context.Context, j *job, p *pass) bool {
	if !r.hold(j) {
		return false
	}
	j.pass = p
	p.wg.Add(1)
	r.runMu.Lock()
	ru := r.runners[j.name]
	if ru == nil {
		ru = &runner{}
		r.runners[j.name] = ru
	}
	if ru.busy {
		old := ru.queued
		ru.queued = j
		r.runMu.Unlock()
		if old != nil {
			r.coalesce(old, j)
		}
		r.recordQueued(j)
		if v, ok := r.rollouts.Load(j.name); ok {
			// A rollout holding for promotion looks whether j supersedes it.
			select {
			case v.(*rolloutRun).queued <- struct{}{}:
			default:
			}
		}
		r.opts.Metrics.QueueLength(r.queued())
		r.log.Info().Str("stack_set", j.name).Str("revision", short(j.rev)).Msg("operation queued behind the running one")
		return true
	}
	ru.busy = true
	checking := stopDrift(ru)
	r.runMu.Unlock()
	if checking != nil {
		<-checking // a drift check of the stack set ends at once
	}
	r.wg.Add(1)
	go r.runLoop(ctx, ru, j)
	return true
}

// dispatchIfIdle dispatches j only when no operation of its stack set runs
// or waits (a drift correction must not replace a queued deploy).
func (r *Reconciler) dispatchIfIdle(ctx context.Context, j *job, p *pass) bool {
	r.runMu.Lock()
	ru := r.runners[j.name]
	busy := ru != nil && (ru.busy || ru.queued != nil)
	r.runMu.Unlock()
	if busy {
		return false
	}
	return r.dispatch(ctx, j, p)
}

// runLoop runs a job, then whatever was queued behind it.
func (r *Reconciler) runLoop(ctx context.Context, ru *runner, j *job) {
	defer r.wg.Done()
	for {
		jctx, cancel := holdContext(ctx, j)
		op, err := r.runJob(jctx, j)
		cancel()
		if err != nil {
			r.log.Error().Err(err).Str("stack_set", j.name).Msg("operation error")
		}
		j.pass.record(j.name, op, err)
		j.releaseHold()

		r.runMu.Lock()
		next := ru.queued
		ru.queued = nil
		if next == nil || ctx.Err() != nil || r.stop.Stopped() {
			// Idle before the pass is told: whoever waited on it sees the
			// runner free (and its operations no longer "in progress").
			ru.busy = false
			r.runMu.Unlock()
			r.status.wake() // status held for this operation goes now
			j.pass.wg.Done()
			if next != nil {
				// Stopping: the QUEUED operation stays recorded and runs
				// after the restart.
				next.releaseHold()
				next.pass.wg.Done()
			}
			return
		}
		r.runMu.Unlock()
		j.pass.wg.Done()
		// The state changed while the job waited: decide its instances again.
		if err := r.refresh(ctx, next); err != nil {
			next.pass.record(next.name, nil, err)
			next.releaseHold()
			next.pass.wg.Done()
			r.runMu.Lock()
			ru.busy = false
			r.runMu.Unlock()
			r.status.wake()
			return
		}
		j = next
	}
}

// refresh re-reads the stack set record and re-decides a queued job's
// instances against the state its predecessor left.
func (r *Reconciler) refresh(ctx context.Context, j *job) error {
	rec, err := r.opts.Store.StackSetByName(j.name)
	switch {
	case errors.Is(err, state.ErrNotFound):
		j.recorded = nil // deleted meanwhile: re-created with a new id
	case err != nil:
		return err
	default:
		j.recorded = &rec
	}
	if j.kind == state.KindDriftCorrection && j.recorded != nil {
		// Still drifted after the operation it waited for?
		j.works, err = r.driftWorks(j)
		return err
	}
	_, err = r.planJob(ctx, j, modeWorks)
	return err
}

// recordQueued records a QUEUED operation for a job waiting behind a
// running one, so that status and a restart know about it.
func (r *Reconciler) recordQueued(j *job) {
	if j.recorded == nil {
		return
	}
	now := r.opts.Now()
	op, _, err := j.store(r).ClaimOperation(state.Operation{
		ID: state.NewOperationID(), StackSetID: j.recorded.ID, StackSet: j.name,
		Kind: j.kind, Revision: j.rev, Status: state.OperationQueued, Created: now,
	})
	if err != nil {
		r.log.Warn().Err(err).Str("stack_set", j.name).Msg("cannot record queued operation")
		return
	}
	j.queuedOp = op.ID
}

// coalesce drops a queued job in favour of a newer one for the same stack set.
func (r *Reconciler) coalesce(old, newer *job) {
	defer old.releaseHold()
	old.pass.wg.Done()
	if old.queuedOp == "" {
		return
	}
	op, err := r.opts.Store.Operation(old.queuedOp)
	if err != nil || op.Status != state.OperationQueued {
		return
	}
	if err := r.endOperation(old.store(r), op, state.OperationCancelled, "coalesced into revision "+short(newer.rev)); err != nil {
		r.log.Warn().Err(err).Str("stack_set", old.name).Msg("cannot record coalesced operation")
	}
	r.log.Info().Str("stack_set", old.name).Str("revision", short(old.rev)).Str("by", short(newer.rev)).Msg("queued operation coalesced")
}

// Wait blocks until every runner is idle and the status documents their
// operations wrote are pushed, or their push failed (they stay owed and
// are retried): used on shutdown, by one-shot commands and by tests.
func (r *Reconciler) Wait() {
	r.wg.Wait()
	if err := r.flushStatus(context.Background()); err != nil {
		r.log.Warn().Err(err).Msg("status commits still owed")
	}
}

// queued counts jobs waiting behind a running operation.
func (r *Reconciler) queued() int {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	n := 0
	for _, ru := range r.runners {
		if ru.queued != nil {
			n++
		}
	}
	return n
}

// Busy reports whether an operation runs or waits in this process
// (dispatched, perhaps not yet recorded as RUNNING).
func (r *Reconciler) Busy() bool {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	for _, ru := range r.runners {
		if ru.busy || ru.queued != nil {
			return true
		}
	}
	return false
}

package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/state"
)

// The pass: one run of the control loop over the deploy branch's head —
// fetch, check the state, resume what a stop or crash interrupted, then
// validate and plan the head (planning.go) and dispatch its jobs
// (runner.go). Reconciler.start is the one place that records its outcome.

// Result summarises one reconcile pass.
type Result struct {
	Revision string
	// UpToDate is set when the revision was already reconciled.
	UpToDate bool
	// Rejected is set when the revision did not validate or plan; nothing
	// was applied and Diagnostics say why.
	Rejected    bool
	Diagnostics []engine.Diagnostic
	Operations  []state.Operation
}

// Failed reports whether any operation of the pass failed or any instance
// ended in OPERATION_FAILED.
func (r *Result) Failed() bool {
	return slices.ContainsFunc(r.Operations, func(op state.Operation) bool { return operationFailed(&op) })
}

// operationFailed reports whether op did not succeed or left an instance
// in OPERATION_FAILED.
func operationFailed(op *state.Operation) bool {
	return op.Status != state.OperationSucceeded ||
		slices.ContainsFunc(op.Results, func(ir state.InstanceResult) bool { return ir.Status == state.InstanceOperationFailed })
}

// Reconcile fetches the deploy branch, reconciles its head and waits
// until the operations it started (and any they queued behind) are done
// and their status is written to the status branch. This is the one-shot
// form (stackd apply, tests); Run does not wait.
func (r *Reconciler) Reconcile(ctx context.Context) (*Result, error) {
	res, p, err := r.start(ctx)
	if err != nil {
		return res, err
	}
	if p != nil {
		err = p.wait(res, ctx)
	}
	return res, errors.Join(err, r.flushStatus(ctx))
}

// gitContext is ctx, also ended by a stop: a fetch or push to a stalled
// remote must not hold up the shutdown (it would until --git-timeout),
// while provider calls in flight get the grace period.
func (r *Reconciler) gitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return r.stopBounded(ctx, 0)
}

// statusWriteGrace is how long a status write in flight when the stop
// comes may still take: a healthy remote takes well under a second, so a
// graceful stop leaves the status branch matching the state, while a
// stalled remote holds the shutdown no longer than this. An interrupted
// status write is owed and caught up at the next start.
const statusWriteGrace = 5 * time.Second

// statusContext is the context of a status write: ctx, also ended
// statusWriteGrace after a stop.
func (r *Reconciler) statusContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return r.stopBounded(ctx, statusWriteGrace)
}

// stopBounded is ctx, also ended grace after a stop.
func (r *Reconciler) stopBounded(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(ctx)
	if stop := r.stop.Done(); stop != nil {
		go func() {
			select {
			case <-stop:
			case <-gctx.Done():
				return
			}
			if grace > 0 {
				t := time.NewTimer(grace)
				defer t.Stop()
				select {
				case <-t.C:
				case <-gctx.Done():
					return
				}
			}
			cancel()
		}()
	}
	return gctx, cancel
}

// start does the synchronous part of a pass, in ordered steps: fetch the
// deploy branch's head, check the state (lost state, status owed, already
// reconciled, disk space), resume interrupted rollouts at their own
// revisions, then plan the head and dispatch its operations to the stack
// sets' runners (reconcileRevision), which run and finish them (runJob)
// and write their status commits. When the head is rejected, operations a
// crash interrupted finish at their own revisions. The returned pass (nil
// when nothing was dispatched) completes when the operations end. A call
// whose ctx ends while another pass holds the lock returns ctx.Err().
func (r *Reconciler) start(ctx context.Context) (res *Result, p *pass, err error) {
	if err := r.mu.lock(ctx); err != nil {
		return nil, nil, err
	}
	defer r.mu.unlock()
	defer r.reportGitFaults()
	began := time.Now()
	defer func() {
		// A failed fetch or resolve (the remote is down) and a rejected
		// revision are failed reconciles for alerting; a pass cut short by
		// a stop is none.
		failed := err
		if failed == nil && res != nil && res.Rejected {
			failed = fmt.Errorf("revision %s rejected", short(res.Revision))
		}
		if failed != nil && r.stop.Stopped() {
			return
		}
		r.opts.Metrics.ReconcileDone(time.Since(began), failed)
	}()
	head, err := r.fetchHead(ctx, began)
	if err != nil {
		return nil, nil, err
	}
	// While the pass dispatches, the status writer holds what finishes (one
	// status commit for the pass's operations).
	r.dispatching.Store(true)
	defer func() {
		r.dispatching.Store(false)
		r.status.wake()
	}()
	if r.opts.Shard != nil {
		r.opts.Shard.Rebalance() // operations taken over are resumed now
	}
	unfinished, res, err := r.checkPass(ctx, head)
	if err != nil || res != nil {
		return res, nil, err
	}
	resumed, resumedIDs := r.resumeRollouts(ctx, head, unfinished)
	resumed = resumed.join(r.resumeDriftCorrections(ctx, unfinished, resumedIDs))
	res, p, err = r.reconcileRevision(ctx, head)
	p = resumed.join(p)
	p = r.forgeDeploy(head, res, err, p)
	if err != nil || !res.Rejected {
		return res, p, err
	}
	p, err = r.resumeUnfinished(ctx, head, unfinished, resumedIDs, p)
	return res, p, err
}

// fetchHead fetches the repository and resolves the deploy branch's head.
func (r *Reconciler) fetchHead(ctx context.Context, began time.Time) (string, error) {
	fctx, cancelFetch := r.gitContext(ctx)
	defer cancelFetch()
	err := r.opts.Source.Fetch(fctx)
	r.opts.Metrics.FetchDone(time.Since(began), err)
	if err != nil {
		if !r.stop.Stopped() {
			r.opts.Metrics.GitFault("fetch")
		}
		return "", fmt.Errorf("fetch: %w", err)
	}
	head, err := r.opts.Source.Head(fctx, r.opts.Branch)
	if err != nil {
		r.opts.Metrics.GitFault("resolve")
		return "", fmt.Errorf("resolve branch %s: %w", r.opts.Branch, err)
	}
	return head, nil
}

// checkPass checks the state before a pass at head: not lost (checkState),
// status commits owed written, room on disk. It returns the operations
// left unfinished, or the pass's result when head is already reconciled
// (or rejected) and nothing is left to finish.
func (r *Reconciler) checkPass(ctx context.Context, head string) ([]state.Operation, *Result, error) {
	if err := r.checkState(ctx); err != nil {
		return nil, nil, err
	}
	r.catchUpStatus()
	unfinished, err := r.unfinished()
	if err != nil {
		return nil, nil, err
	}
	if len(unfinished) == 0 {
		if last, _ := r.opts.Store.Meta(metaLastRevision); string(last) == head && r.upToDateHere(head) {
			r.catchUpIndex(head)
			// Instances the last operations failed stay failed until the
			// next operation: the result says so (stackd apply exits 1).
			return nil, &Result{Revision: head, UpToDate: true, Operations: r.failedLastOperations()}, nil
		}
		if rej, _ := r.opts.Store.Meta(metaRejectedRevision); string(rej) == head && r.rejectedHere.Load().is(head, r.registryKey()) {
			res := &Result{Revision: head, UpToDate: true, Rejected: true}
			if b, _ := r.opts.Store.Meta(metaRejectedDiagnostics); len(b) > 0 {
				_ = json.Unmarshal(b, &res.Diagnostics)
			}
			return nil, res, nil
		}
	}
	if err := r.checkSpace(head); err != nil {
		return nil, nil, err
	}
	return unfinished, nil, nil
}

// failedLastOperations are, for each stack set whose last deploying
// operation (drift corrections aside: they re-apply some instances only)
// failed or left an instance failed, that operation. Every poll of an
// up-to-date deploy branch asks: the stack set's last operation is read,
// and its history only when that was a drift correction.
func (r *Reconciler) failedLastOperations() []state.Operation {
	sets, err := r.opts.Store.ListStackSets()
	if err != nil {
		return nil
	}
	var out []state.Operation
	for _, ss := range sets {
		if ss.LastOperation == "" {
			continue
		}
		op, err := r.opts.Store.Operation(ss.LastOperation)
		if err != nil {
			continue
		}
		if op.Kind == state.KindDriftCorrection {
			if op, err = r.lastDeploying(ss.ID); err != nil {
				continue
			}
		}
		if op.Status.Done() && operationFailed(&op) {
			out = append(out, op)
		}
	}
	return out
}

// lastDeploying is the newest operation of stack set ssID that is not a
// drift correction (state.ErrNotFound when there is none).
func (r *Reconciler) lastDeploying(ssID string) (state.Operation, error) {
	ops, err := r.opts.Store.Operations(ssID)
	if err != nil {
		return state.Operation{}, err
	}
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].Kind != state.KindDriftCorrection {
			return ops[i], nil
		}
	}
	return state.Operation{}, state.ErrNotFound
}

// diagBound keeps a revision's diagnostics to engine.MaxRevisionDiagnostics
// (a branch anyone can push goes to status commits and PR comments), and
// counts the rest.
type diagBound struct {
	more    int
	moreErr bool
}

// add appends d to diags as far as the bound allows.
func (b *diagBound) add(diags, d hcl.Diagnostics) hcl.Diagnostics {
	room := max(config.MaxRevisionDiagnostics-len(diags), 0)
	if len(d) > room {
		b.more += len(d) - room
		b.moreErr = b.moreErr || d[room:].HasErrors()
		d = d[:room]
	}
	return append(diags, d...)
}

// finish says how many diagnostics were left out, if any.
func (b *diagBound) finish(diags hcl.Diagnostics) hcl.Diagnostics {
	if b.more == 0 {
		return diags
	}
	return diags.Append(engine.TooManyDiagnostics(b.more, b.moreErr, "this revision"))
}

// rejection is a revision rejected by this process, and the registry key
// (registryKey) it was validated against.
type rejection struct{ rev, registry string }

func (rj *rejection) is(rev, registry string) bool {
	return rj != nil && rj.rev == rev && rj.registry == registry
}

// registryKey identifies the resource type registry's content: a revision
// rejected for an unregistered type is validated again once it changed.
func (r *Reconciler) registryKey() string {
	types, err := r.opts.Store.ResourceTypes()
	if err != nil {
		return "" // unreadable: matches no earlier key
	}
	var b strings.Builder
	for _, t := range types {
		b.WriteString(t.Name)
		b.WriteByte(0)
	}
	return b.String()
}

// resumeRollouts resumes each interrupted rollout at its own revision
// first: its batch plan, its hold for promotion and its rollback are
// promises a newer commit does not break. The head's job for its stack set
// queues behind it, as a commit arriving while it ran would have (and with
// supersede = true ends a hold). It returns the pass of the resumed
// operations and their ids.
func (r *Reconciler) resumeRollouts(ctx context.Context, head string, unfinished []state.Operation) (*pass, map[string]bool) {
	var resumed *pass
	resumedIDs := map[string]bool{}
	for _, op := range unfinished {
		if op.Status != state.OperationRunning || op.Rollout == nil || op.Revision == head {
			continue
		}
		r.log.Info().Str("stack_set", op.StackSet).Str("operation", op.ID).Str("revision", short(op.Revision)).Msg("resuming interrupted rollout at its own revision")
		_, rp, rerr := r.reconcileRevision(ctx, op.Revision, op.StackSet)
		if rerr != nil {
			r.log.Warn().Err(rerr).Str("stack_set", op.StackSet).Msg("cannot resume the interrupted rollout at its revision; the head takes its instances over")
			continue
		}
		resumedIDs[op.ID] = true
		resumed = resumed.join(rp)
	}
	return resumed, resumedIDs
}

// resumeUnfinished finishes, when the head is rejected, each operation a
// crash interrupted (but the rollouts resumeRollouts resumed) at the
// revision it was started for; their passes join p.
func (r *Reconciler) resumeUnfinished(ctx context.Context, head string, unfinished []state.Operation, resumedIDs map[string]bool, p *pass) (*pass, error) {
	for _, op := range unfinished {
		if op.Revision == head || resumedIDs[op.ID] {
			continue
		}
		r.log.Warn().Str("stack_set", op.StackSet).Str("operation", op.ID).Str("revision", short(op.Revision)).Msg("resuming interrupted operation at its own revision")
		_, rp, err := r.reconcileRevision(ctx, op.Revision, op.StackSet)
		if err != nil {
			return p, err
		}
		p = p.join(rp)
	}
	return p, nil
}

// reportGitFaults counts and logs the faults the Source got past by itself
// since the last call.
func (r *Reconciler) reportGitFaults() {
	fr, ok := r.opts.Source.(FaultReporter)
	if !ok {
		return
	}
	for _, f := range fr.Faults() {
		kind := faultKind(f)
		r.opts.Metrics.GitFault(kind)
		r.log.Warn().Str("kind", kind).Str("fault", f.Error()).Msg("git fault worked around")
	}
}

// faultKind is the kind of a fault from a FaultReporter: what its
// FaultKind method says, or "other".
func faultKind(err error) string {
	var k interface{ FaultKind() string }
	if errors.As(err, &k) && k.FaultKind() != "" {
		return k.FaultKind()
	}
	return "other"
}

// unfinished lists RUNNING or QUEUED operations that no runner of this
// process is carrying out: left by a crash or a stop.
func (r *Reconciler) unfinished() ([]state.Operation, error) {
	ops, err := r.opts.Store.OperationsByStatus(string(state.OperationRunning), string(state.OperationQueued))
	if err != nil {
		return nil, err
	}
	r.runMu.Lock()
	defer r.runMu.Unlock()
	out := ops[:0]
	for _, op := range ops {
		if ru := r.runners[op.StackSet]; ru != nil && ru.busy {
			continue
		}
		if r.opts.Shard != nil && !r.opts.Shard.Owns(op.StackSet) {
			continue // another replica's (or an owner's to be)
		}
		out = append(out, op)
	}
	return out, nil
}

// reconcileRevision validates and plans the revision, then dispatches its
// operations. With only set, just those stack sets are reconciled.
func (r *Reconciler) reconcileRevision(ctx context.Context, rev string, only ...string) (*Result, *pass, error) {
	log := r.log.With().Str("revision", short(rev)).Logger()
	res := &Result{Revision: rev}
	jobs, diags, err := r.prepare(ctx, rev, modeApply, false)
	if err != nil {
		return nil, nil, err
	}
	if diags.HasErrors() {
		res.Rejected = true
		res.Diagnostics = config.DiagnosticsJSON(diags)
		log.Error().Int("errors", len(diags.Errs())).Msg("revision rejected: nothing applied")
		for _, d := range res.Diagnostics {
			log.Error().Str("diagnostic", d.String()).Msg("validation error")
		}
		r.rejectedHere.Store(&rejection{rev: rev, registry: r.registryKey()})
		r.writeRejection(rev, res.Diagnostics)
		if b, err := json.Marshal(res.Diagnostics); err == nil {
			if err := r.opts.Store.SetMeta(metaRejectedDiagnostics, b); err != nil {
				return res, nil, err
			}
		}
		return res, nil, r.opts.Store.SetMeta(metaRejectedRevision, []byte(rev))
	}
	if r.opts.Shard != nil && len(only) == 0 {
		r.opts.Shard.Rebalance() // the revision's new stack sets get owners
	}
	gen := r.shardGeneration() // read before the leases are looked at
	p := &pass{}
	dispatched := 0
	left, err := r.unfinished()
	if err != nil {
		return nil, nil, err
	}
	for _, j := range jobs {
		if len(only) > 0 && !slices.Contains(only, j.name) {
			continue
		}
		if !r.hold(j) {
			continue // another replica runs this stack set
		}
		if j.kind == "" {
			// Nothing left to apply, but an operation a crash or stop
			// interrupted may still be open: finish it at this revision
			// (its status commit is written) or end it as superseded.
			for _, op := range left {
				if op.StackSet != j.name {
					continue
				}
				if j.recorded != nil && op.StackSetID == j.recorded.ID && op.Kind == state.KindDriftCorrection && j.desired != nil {
					// A drift correction interrupted: re-apply what is
					// still drifted, in the same operation.
					j.kind, j.claim = op.Kind, op.Claim
					if j.works, err = r.driftWorks(j); err != nil {
						return nil, nil, err
					}
					continue
				}
				if j.recorded != nil && op.StackSetID == j.recorded.ID {
					// Run an operation at this revision with nothing to
					// apply: it ends the interrupted one (the same, or
					// STOPPED as superseded), records the stack set at this
					// revision and writes its status.
					j.kind = op.Kind
					continue
				}
				if err := r.endOperation(j.store(r), op, state.OperationStopped, "its stack set no longer exists"); err != nil {
					return nil, nil, err
				}
			}
			if j.kind == "" {
				j.releaseHold()
				continue
			}
		}
		if r.dispatch(ctx, j, p) {
			dispatched++
		}
	}
	if len(only) == 0 {
		if rej, _ := r.opts.Store.Meta(metaRejectedRevision); len(rej) > 0 {
			// The error reported for an earlier commit is over: clear it
			// once the status branch says so.
			r.validIndex(rev, string(rej))
		}
		if err := r.opts.Store.SetMeta(metaLastRevision, []byte(rev)); err != nil {
			return res, p, err
		}
		r.notePassed(rev, gen)
	}
	if dispatched == 0 {
		log.Info().Msg("no changes")
		return res, nil, nil
	}
	return res, p, nil
}

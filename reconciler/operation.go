package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/state"
)

// runJob runs (or resumes) the operation of one stack set at its revision
// and writes its status commit.
func (r *Reconciler) runJob(ctx context.Context, j *job) (*state.Operation, error) {
	st := j.store(r)
	now := r.opts.Now()
	rev := j.rev
	if j.recorded == nil {
		id := j.newID
		if id == "" {
			id = uuid.NewString()
		}
		ss, err := st.CreateStackSetWithID(j.name, id, now)
		if err != nil {
			return nil, fmt.Errorf("create stack set record: %w", err)
		}
		j.recorded = &ss
		if id != j.newID {
			// Planned without this id: the instances re-plan before applying.
			for _, w := range j.works {
				w.plan = nil
				if w.action != changeset.InstanceDelete {
					w.hash = j.desired.InstanceHash(ss.ID, w.target)
				}
			}
		}
	}
	opID := j.opID
	if opID == "" {
		opID = state.NewOperationID()
	}
	op, created, err := st.ClaimOperation(state.Operation{
		ID: opID, StackSetID: j.recorded.ID, StackSet: j.name,
		Kind: j.kind, Revision: rev, Status: state.OperationRunning, Created: now, Started: now,
		Instances: len(j.works), Claim: j.claim,
	})
	if err != nil {
		return nil, fmt.Errorf("claim operation: %w", err)
	}
	log := r.log.With().Str("stack_set", j.name).Str("operation", op.ID).Str("kind", string(op.Kind)).Str("revision", short(rev)).Logger()
	if !created && op.Status != state.OperationRunning && op.Status != state.OperationQueued {
		log.Debug().Str("status", string(op.Status)).Msg("operation for this revision already done")
		return nil, nil
	}
	resumed := !created && op.Status == state.OperationRunning
	var prior []state.InstanceResult
	switch {
	case resumed:
		// The same operation, interrupted: it keeps its kind (re-planning
		// sees only what is left, which may look like another kind) and
		// the results of the instances it finished before.
		log.Info().Int("instances", len(j.works)).Msg("resuming operation")
		if prior, err = r.priorResults(&op); err != nil {
			return nil, err
		}
		if op.Instances == 0 {
			// Recorded before operations counted their instances: those
			// finished before and those left.
			op.Instances = len(unionTargets(prior, j.works))
		}
		op.Status = state.OperationRunning
		if err := st.PutOperation(op); err != nil {
			return nil, err
		}
	case !created:
		log.Info().Int("instances", len(j.works)).Msg("operation started (was queued)")
		// Nothing ran yet: the kind is the one decided now.
		op.Status, op.Started, op.Kind, op.Instances = state.OperationRunning, now, j.kind, len(j.works)
		if err := st.PutOperation(op); err != nil {
			return nil, err
		}
	default:
		log.Info().Int("instances", len(j.works)).Msg("operation started")
	}
	if r.opts.Progress != nil {
		r.opts.Progress.OperationStarted(j.name, len(j.works))
	}
	if !resumed {
		r.sendEvent(notify.Event{Type: notify.TypeOperationStarted, StackSet: j.name, Operation: op.ID, Kind: string(op.Kind), Revision: op.Revision, Instances: len(j.works)})
	}
	if err := r.stopOthers(j, &op); err != nil {
		return nil, err
	}
	r.owe(j.name, op.ID)
	run := &opRun{r: r, j: j, op: &op, log: log, redact: redactor(j.desired), resumed: !created, prior: prior}
	run.event("", "", "", string(op.Status), fmt.Sprintf("%s of %d instances at %s", op.Kind, len(j.works), short(rev)))
	if err := run.markWaiting(); err != nil {
		return nil, err
	}
	run.schedule(ctx)
	return run.finish(ctx)
}

// stopOthers ends operations of the stack set left RUNNING or QUEUED for
// other revisions (by a crash or a stop): this operation takes their
// instances over.
func (r *Reconciler) stopOthers(j *job, cur *state.Operation) error {
	ops, err := r.opts.Store.Operations(j.recorded.ID)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op.ID == cur.ID || op.Status != state.OperationRunning && op.Status != state.OperationQueued {
			continue
		}
		if op.Status == state.OperationQueued && op.Created.After(cur.Created) {
			// A newer commit queued behind this one (as behind a resumed
			// rollout) runs next: it is not taken over.
			continue
		}
		if err := r.endOperation(j.store(r), op, state.OperationStopped, "superseded by revision "+short(cur.Revision)); err != nil {
			return err
		}
	}
	return nil
}

// endOperation ends an operation this run does not carry out — superseded
// by a newer one, coalesced into it, or left for a stack set that no
// longer exists — with status and reason: the one place those records are
// written (finish writes the outcome of those it runs).
func (r *Reconciler) endOperation(st *state.Store, op state.Operation, status state.OperationStatus, reason string) error {
	op.Status, op.Reason, op.Ended = status, reason, r.opts.Now()
	return st.PutOperation(op)
}

// opRun is one running operation.
type opRun struct {
	// resumed is set when the operation was interrupted before: plans made
	// by the pass may predate what the interrupted run did, so instances
	// re-plan against the state.
	resumed bool
	r       *Reconciler
	j       *job
	op      *state.Operation
	log     zerolog.Logger
	redact  func(string) string

	// prior are the results of the instances a resumed operation finished
	// before it was interrupted (priorResults).
	prior []state.InstanceResult

	mu      sync.Mutex
	results map[config.Target]state.InstanceResult
	// ro is the rollout of an operation of a stack set with a rollout block.
	ro *rolloutRun

	baseOnce sync.Once
	base     map[string]int // regionBase
}

func (o *opRun) event(region, account, resource, status, msg string) {
	defer o.r.spent(PhaseJournal, time.Now())
	if _, err := o.st().AppendEvent(state.Event{
		OperationID: o.op.ID, Time: o.r.opts.Now(), Region: region, Account: account,
		Resource: resource, Status: status, Message: o.redact(msg),
	}); err != nil {
		o.log.Warn().Err(err).Msg("cannot record event")
	}
}

// markWaiting records every instance of the operation as WAIT_IN_PROGRESS.
func (o *opRun) markWaiting() error {
	now := o.r.opts.Now()
	existing, err := o.r.opts.Store.Instances(o.j.recorded.ID)
	if err != nil {
		return err
	}
	have := map[config.Target]state.Instance{}
	for _, in := range existing {
		have[config.Target{Region: in.Region, Account: in.Account}] = in
	}
	ran := map[config.Target]bool{}
	for _, pr := range o.prior {
		ran[config.Target{Region: pr.Region, Account: pr.Account}] = true
	}
	ins := make([]state.Instance, 0, len(o.j.works))
	for _, w := range o.j.works {
		in, ok := have[w.target]
		switch {
		case !ok && o.resumed && ran[w.target]:
			// Deleted since it ran (a rollback of its creation): no
			// record comes back for it.
			continue
		case !ok:
			in = state.Instance{StackSetID: o.j.recorded.ID, Region: w.target.Region, Account: w.target.Account}
		case o.resumed && in.Status == state.InstanceOperationInProgress:
			// Deploying when the operation was interrupted: it stays so
			// until it runs again, so that a stop before then (an abort)
			// knows it was changed, maybe part way.
			ins = append(ins, in)
			continue
		}
		in.Status, in.StatusReason, in.Updated = state.InstanceWaitInProgress, "", now
		if o.j.desired != nil {
			in.OU = o.j.desired.OU(w.target.Account)
		}
		ins = append(ins, in)
	}
	o.results = map[config.Target]state.InstanceResult{}
	return o.st().PutInstances(ins)
}

// execute applies one instance; it reports success.
func (o *opRun) execute(ctx context.Context, w *work) bool {
	began := time.Now()
	defer func() { o.r.opts.Metrics.InstanceDuration(string(o.op.Kind), time.Since(began)) }()
	st := o.st()
	ssID := o.j.recorded.ID
	t := w.target
	log := o.log.With().Str("region", t.Region).Str("account", t.Account).Logger()
	if w.action == actionSkip {
		o.settle(w, state.InstanceSkippedSuspendedAccount, "the account is suspended in the organization", nil)
		return true
	}
	in, err := st.Instance(ssID, t.Region, t.Account)
	switch {
	case errors.Is(err, state.ErrNotFound):
		in = state.Instance{StackSetID: ssID, Region: t.Region, Account: t.Account}
	case err != nil:
		return o.fail(w, log, err) // never overwrite a record it cannot read
	}
	in.Status, in.StatusReason, in.Updated = state.InstanceOperationInProgress, "", o.r.opts.Now()
	in.OutOfService = "being deployed at revision " + short(o.op.Revision)
	wrote := time.Now()
	if err := st.PutInstance(in); err != nil {
		return o.fail(w, log, err)
	}
	o.r.spent(PhaseJournal, wrote)
	o.event(t.Region, t.Account, "", string(state.InstanceOperationInProgress), string(w.action))
	var recorded []engine.ResourceState
	if w.plan == nil || o.resumed {
		var err error
		if recorded, err = o.r.resources(ssID, t); err != nil {
			return o.fail(w, log, err)
		}
	}
	plan := w.plan
	switch {
	case plan != nil && !o.resumed:
		// Planned when the pass validated the commit, against this same
		// recorded state (one operation per stack set at a time).
	case w.action == changeset.InstanceDelete:
		// StackSet: a removed target's destroy-time provisioners run (nil
		// when the stack set itself was removed, as Terraform runs none
		// without the configuration).
		plan = engine.PlanDestroy(&engine.Instance{StackSet: o.j.desired, Name: o.j.name, StackSetID: ssID, Target: t, DeclaredTypes: o.r.declaredTypes(o.j), Caller: config.CallerAccount(o.j.desired)}, recorded)
	default:
		if err := o.plan(ctx, t, recorded, &plan); err != nil {
			if o.r.stopping(ctx) {
				return false // stopping: left to the resumed operation
			}
			return o.fail(w, log, err)
		}
	}
	j := o.r.journal(o.st(), ssID, t)
	res, err := o.r.opts.Engine.Apply(ctx, plan, j, func(ev engine.Event) {
		o.r.observeTime(ev)
		msg := ev.Action.String()
		if ev.Err != nil {
			msg += ": " + ev.Err.Error()
		}
		if ev.Phase == engine.EventFailed {
			o.event(t.Region, t.Account, ev.Address, string(ev.Phase), msg)
		}
		switch ev.Phase {
		case engine.EventBatch:
			log.Info().Str("resource", ev.Address).Msg(ev.Detail)
		case engine.EventWait:
			log.Info().Str("resource", ev.Address).Msg("waiting for signals")
		default:
			log.Debug().Str("resource", ev.Address).Str("action", ev.Action.String()).Str("phase", string(ev.Phase)).Msg("resource")
		}
	})
	if err != nil || w.action == changeset.InstanceDelete {
		if ferr := j.Flush(); err == nil && ferr != nil {
			err = ferr
		}
	}
	if err != nil {
		if o.r.stopping(ctx) {
			// Stopping (the context ended, or shutdown stopped the
			// provider calls): leave the instance to the resumed
			// operation.
			return false
		}
		return o.fail(w, log, err)
	}
	if w.action == changeset.InstanceDelete {
		if err := st.DeleteInstance(ssID, t.Region, t.Account); err != nil {
			return o.fail(w, log, err)
		}
		o.settle(w, state.InstanceOperationComplete, "", nil)
		log.Info().Str("duration", time.Since(began).Round(time.Millisecond).String()).Msg("instance deleted")
		return true
	}
	// The journal's last records and the instance's status in one write.
	if err := o.record(w, &in, j.take(), state.InstanceOperationComplete, "", outputsJSON(res.Outputs)); err != nil {
		return o.fail(w, log, err)
	}
	log.Info().Str("duration", time.Since(began).Round(time.Millisecond).String()).Msg("instance complete")
	return true
}

// plan re-plans an instance right before applying it (its stack set id is
// known now), so the plan matches the recorded state it will change.
//
// A DriftCorrection reads the instance first and plans against what it
// found (engine.InstanceDrift.Refresh): the plan restores what drifted,
// even if the drift changed since it was detected.
func (o *opRun) plan(ctx context.Context, t config.Target, recorded []engine.ResourceState, out **engine.InstancePlan) error {
	defer o.r.spent(PhasePlan, time.Now())
	inst := &engine.Instance{StackSet: o.j.desired, StackSetID: o.j.recorded.ID, Target: t}
	if o.op.Kind == state.KindDriftCorrection {
		var ignore []string
		if d := o.j.desired.Drift; d != nil {
			ignore = d.Ignore
		}
		d, err := o.r.opts.Engine.CheckDrift(ctx, inst, recorded, ignore)
		if err != nil {
			return err
		}
		recorded, inst.Drifted = d.Refresh(recorded)
	}
	p, diags := o.r.opts.Engine.PlanContext(ctx, inst, recorded)
	if diags.HasErrors() {
		return engine.DiagsError(diags)
	}
	*out = p
	return nil
}

func (o *opRun) fail(w *work, log zerolog.Logger, err error) bool {
	reason := o.redact(err.Error())
	log.Error().Str("reason", reason).Msg("instance failed")
	o.settle(w, state.InstanceOperationFailed, reason, nil)
	return false
}

// settle records an instance's final status for this operation.
func (o *opRun) settle(w *work, status state.InstanceStatus, reason string, outputs json.RawMessage) {
	_ = o.record(w, nil, nil, status, reason, outputs) // logged; the result is kept either way
}

// record records an instance's final status for this operation, starting
// from its record as read at the start (known) or, when nil, as read now,
// and writes the journal's last records (writes) in the same transaction.
// It returns the error only when writes could not be written (the caller
// fails the instance); other errors are logged and the result is kept.
func (o *opRun) record(w *work, known *state.Instance, writes []state.ResourceWrite, status state.InstanceStatus, reason string, outputs json.RawMessage) error {
	st := o.st()
	t := w.target
	if !(w.action == changeset.InstanceDelete && status == state.InstanceOperationComplete) {
		var in state.Instance
		var err error
		if known != nil {
			in = *known
		} else {
			in, err = st.Instance(o.j.recorded.ID, t.Region, t.Account)
		}
		if errors.Is(err, state.ErrNotFound) {
			in, err = state.Instance{StackSetID: o.j.recorded.ID, Region: t.Region, Account: t.Account}, nil
		}
		if err != nil {
			// A record it cannot read is never overwritten with a blank
			// one (its revision would be lost); the event says the outcome.
			o.log.Error().Err(err).Str("region", t.Region).Str("account", t.Account).Msg("cannot read instance record to settle it")
			o.event(t.Region, t.Account, "", string(status), reason)
			o.mu.Lock()
			o.results[t] = state.InstanceResult{Region: t.Region, Account: t.Account, Action: state.ParseInstanceAction(string(w.action)), Status: status, Reason: reason}
			o.mu.Unlock()
			if p := o.r.opts.Progress; p != nil {
				p.InstanceSettled(o.j.name, status)
			}
			return nil
		}
		in.Status, in.StatusReason, in.Updated = status, reason, o.r.opts.Now()
		switch status {
		case state.InstanceOperationComplete:
			in.Revision, in.ConfigHash, in.Outputs = o.op.Revision, w.hash, outputs
			in.Overrides = overridesOf(o.j.desired, t)
			in.OutOfService = ""
			// What a drift check found is stale once the instance is
			// applied again (the next check tells).
			in.Drift = nil
			if o.ro != nil {
				// A rollout's instance serves once its batch passes its gate.
				in.OutOfService = "deployed at revision " + short(o.op.Revision) + "; waiting for its batch's gate"
			}
		case state.InstanceOperationFailed:
			in.OutOfService = "its operation at revision " + short(o.op.Revision) + " failed"
		}
		began := time.Now()
		err = st.WriteInstance(in, writes)
		o.r.spent(PhaseJournal, began)
		if err != nil && len(writes) > 0 {
			return err
		}
		if err != nil {
			o.log.Error().Err(err).Msg("cannot record instance status")
		}
	}
	o.event(t.Region, t.Account, "", string(status), reason)
	o.mu.Lock()
	o.results[t] = state.InstanceResult{Region: t.Region, Account: t.Account, Action: state.ParseInstanceAction(string(w.action)), Status: status, Reason: reason}
	o.mu.Unlock()
	if p := o.r.opts.Progress; p != nil {
		p.InstanceSettled(o.j.name, status)
	}
	return nil
}

// finish is the one place that summarises and persists the operation's
// outcome (steps record instance results and rollout progress, never the
// final status): it records the operation, updates the stack set record
// and writes the status commit. An interrupted operation stays RUNNING.
func (o *opRun) finish(ctx context.Context) (*state.Operation, error) {
	st := o.st()
	op := o.op
	op.Results = o.mergedResults()
	if o.interrupted(ctx) {
		// The daemon is stopping: the operation stays RUNNING and resumes.
		if err := st.PutOperation(*op); err != nil {
			return op, err
		}
		o.log.Warn().Msg("operation interrupted; it resumes on restart")
		return op, nil
	}
	// Make everything the operation journaled survive a machine crash
	// before its outcome is recorded.
	began := time.Now()
	if err := st.Sync(); err != nil {
		return op, err
	}
	o.r.spent(PhaseStateSync, began)
	out := o.summarise(op)
	ss, err := o.recordStackSet(op, out)
	if err != nil {
		return op, err
	}
	o.r.opts.Metrics.OperationFinished(string(op.Kind), string(op.Status))
	o.r.sendEvent(finishedEvent(o.j.name, op))
	o.r.stateGen.Add(1)
	o.event("", "", "", string(op.Status), op.Reason)
	o.log.Info().Str("status", string(op.Status)).Int("instances", len(op.Results)).Int("failed", out.failed).Int("cancelled", out.cancelled).
		Str("duration", op.Ended.Sub(op.Started).Round(time.Millisecond).String()).Msg("operation finished")
	return op, o.r.writeOperationStatus(ctx, o.j, &ss, op)
}

// interrupted reports whether the operation was interrupted by a stop (or
// its context ended) before it could finish: it resumes on restart.
func (o *opRun) interrupted(ctx context.Context) bool {
	return ctx.Err() != nil || o.r.stop.Stopped() && len(o.results) < len(o.j.works) || o.ro != nil && o.ro.interrupted
}

// recordStackSet records the ended operation together with its stack
// set's record, in one transaction (or, when a DeleteStackSet succeeded,
// records the operation and then deletes the stack set: a crash between
// the two leaves a stack set no longer desired, deleted again at the
// next start); it returns the stack set record.
func (o *opRun) recordStackSet(op *state.Operation, out outcome) (state.StackSet, error) {
	st := o.st()
	ss := *o.j.recorded
	ss.LastOperation = op.ID
	switch {
	case o.j.desired != nil:
		if out.clean() && op.Kind != state.KindDriftCorrection {
			// A drift correction re-applies only some instances: the
			// configuration recorded stays the one every instance reached.
			ss.Revision = op.Revision
			ss.ConfigHash = o.j.desired.ConfigHash
		}
		if !out.stopped || o.ro.outcome == state.OperationFailed || o.ro.outcome == state.OperationStopped {
			// A rolled-back stack set keeps the variables it had.
			ss.VarNames, ss.Vars = varsRecord(o.j.desired)
		}
		ss.Status = state.StackSetActive
	case out.failed == 0 && out.cancelled == 0:
		if err := st.PutOperation(*op); err != nil {
			return ss, err
		}
		return ss, st.DeleteStackSet(ss.ID)
	default:
		ss.Status = state.StackSetDeleteFailed
	}
	return ss, st.EndOperation(*op, ss)
}

// saveProgress persists the running operation with its results so far
// (a rollout's progress at each phase and batch boundary) and returns the
// record it wrote.
func (o *opRun) saveProgress() (state.Operation, error) {
	op := *o.op
	op.Results = o.mergedResults()
	return op, o.st().PutOperation(op)
}

// varsRecord returns the stack set's variable names and values with
// sensitive values redacted, for the state record.
func varsRecord(ss *config.StackSet) ([]string, json.RawMessage) {
	names := make([]string, 0, len(ss.Vars))
	vals := map[string]json.RawMessage{}
	for n, v := range ss.Vars {
		names = append(names, n)
		if ss.SensitiveVar(n) {
			vals[n] = json.RawMessage(`"` + engine.SensitivePlaceholder + `"`)
			continue
		}
		b, err := ctyJSON(v)
		if err == nil {
			vals[n] = b
		}
	}
	sort.Strings(names)
	b, _ := json.Marshal(vals)
	return names, b
}

// outputsJSON renders outputs as a JSON object; sensitive and unknown ones
// are replaced by placeholders.
func outputsJSON(outputs map[string]cty.Value) json.RawMessage {
	if len(outputs) == 0 {
		return nil
	}
	m := map[string]json.RawMessage{}
	for n, v := range outputs {
		switch {
		case v.IsMarked() || hasMarks(v):
			m[n] = json.RawMessage(`"` + engine.SensitivePlaceholder + `"`)
		case !v.IsWhollyKnown():
			m[n] = json.RawMessage(`"` + engine.KnownAfterApplyPlaceholder + `"`)
		default:
			b, err := ctyJSON(v)
			if err == nil {
				m[n] = b
			}
		}
	}
	b, _ := json.Marshal(m)
	return b
}

func hasMarks(v cty.Value) bool {
	_, pvm := v.UnmarkDeepWithPaths()
	return len(pvm) > 0
}

// redactor returns a function that replaces the values the stack set
// gives its sensitive variables (in vars, vars_file and overrides) in free
// text: provider errors may echo them. The engine redacts what only an
// instance knows (NoEcho data) from the errors of its applies.
func redactor(ss *config.StackSet) func(string) string {
	return ss.Redactor().Redact
}

// finishedEvent is the notification of an operation that ended.
func finishedEvent(stackSet string, op *state.Operation) notify.Event {
	typ := notify.TypeOperationFailed
	switch op.Status {
	case state.OperationSucceeded:
		typ = notify.TypeOperationSucceeded
	case state.OperationRolledBack:
		typ = notify.TypeOperationRolledBack
	}
	c := Counts(op)
	return notify.Event{Type: typ, StackSet: stackSet, Operation: op.ID, Kind: string(op.Kind), Revision: op.Revision,
		Status: string(op.Status), Reason: op.Reason, Instances: c.Total, Succeeded: c.Succeeded, Failed: c.Failed}
}

package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/internal/clock"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/state"
)

// Operation kinds (RFS names): state's.
const (
	KindCreateStackInstances = state.KindCreateStackInstances
	KindUpdateStackInstances = state.KindUpdateStackInstances
	KindDeployStackSet       = state.KindDeployStackSet
	KindDeleteStackInstances = state.KindDeleteStackInstances
	KindDeleteStackSet       = state.KindDeleteStackSet
)

// Meta keys kept in the state store.
const (
	metaLastRevision     = "last_revision"
	metaRejectedRevision = "rejected_revision"
	// metaRejectedDiagnostics are the diagnostics of the rejected
	// revision (JSON), told again to whoever asks for it once more.
	metaRejectedDiagnostics = "rejected_diagnostics"
)

// Options configure a Reconciler.
type Options struct {
	Source Source
	Store  *state.Store
	Engine *engine.Engine
	// Branch is the deploy branch (default "main").
	Branch string
	// Path is the definitions directory inside the repository (default ".").
	Path string
	Log  zerolog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// StatusBranch is where status is written (excluded from PRBranches).
	StatusBranch string
	// PRBranches is a path.Match pattern of the branches whose change sets
	// PlanBranches writes (default "*": every branch but the deploy and
	// status branches).
	PRBranches string
	// Notifier, if set, posts each branch's Markdown change sets to a forge.
	Notifier Notifier
	// Events, if set, is sent what happens to operations and revisions
	// (internal/notify delivers them to webhooks). Send must not block.
	Events EventSink
	// Metrics, if set, receives measurements (the api package's Metrics).
	Metrics Metrics
	// DriftConcurrency bounds the instances a drift check reads at once
	// (default DefaultDriftConcurrency).
	DriftConcurrency int
	// Progress, if set, is told how far operations are (stackd apply's
	// progress bar on a terminal).
	Progress Progress
	// MaxInFlight bounds the instances applied at the same time across all
	// operations and regions (default 256): operation preferences decide
	// the order and the per-region concurrency, this keeps a fleet of
	// 10,000 PARALLEL instances from running 10,000 at once in one process.
	MaxInFlight int
	// Clock times rollout pauses and health checks, and the backoffs of
	// failed passes and status pushes (default: the real clock); tests use
	// a fake one.
	Clock clock.Clock
	// HealthClient makes rollout health checks (default: a client that
	// keeps no idle connections). Each request gets the health check's
	// timeout through its context.
	HealthClient *http.Client
	// PlanBudget bounds the time planning one untrusted ref may take (a
	// pull-request branch, or a ref other than the deploy branch's head
	// asked for through Plan); default DefaultPlanBudget. A plan over its
	// budget ends with a diagnostic saying so.
	PlanBudget time.Duration
	// AdoptEmptyState lets passes deploy from an empty state although the
	// status branch shows deployed stack sets (see CheckState): every
	// instance is then created again. Off by default.
	AdoptEmptyState bool
	// Space, if set, is asked before a pass starts operations; while it
	// reports no room, the pass fails before anything is dispatched.
	Space SpaceGate
}

// DefaultPlanBudget is the default Options.PlanBudget: a fleet of 10,000
// instances of a 10-resource template plans in about 5 s on two cores, so
// 60 s leaves room for honest work while a hostile branch is stopped long
// before it matters.
const DefaultPlanBudget = 60 * time.Second

// Metrics is what the reconciler reports to monitoring.
type Metrics interface {
	OperationFinished(kind, status string)
	InstanceDuration(kind string, d time.Duration)
	ReconcileDone(d time.Duration, err error)
	FetchDone(d time.Duration, err error)
	QueueLength(n int)
	// GitFault counts a Git failure by kind: "fetch", "resolve",
	// "status_write", or the kind of a fault the Source got past by itself
	// (FaultReporter; gitsource: "force_push", "cache_damaged",
	// "status_ref_damaged").
	GitFault(kind string)
	// PhaseTime adds d to the time spent in phase (one of Phases), summed
	// over instances applied at the same time: where the time goes.
	PhaseTime(phase string, d time.Duration)
	// Drift sets the number of resources the last drift check of stackSet
	// found drifted.
	Drift(stackSet string, drifted int)
}

// Progress is told how far the operations are: each operation's instance
// count when it starts (or resumes), then each instance as it settles.
// Calls come from many goroutines.
type Progress interface {
	OperationStarted(stackSet string, instances int)
	InstanceSettled(stackSet string, status state.InstanceStatus)
}

// EventSink receives the events notifications are made of.
type EventSink interface {
	Send(notify.Event)
}

// sendEvent sends e when there is an EventSink.
func (r *Reconciler) sendEvent(e notify.Event) {
	if r.opts.Events != nil {
		r.opts.Events.Send(e)
	}
}

// The phases of an operation whose time is accounted (Metrics.PhaseTime).
const (
	PhasePlan         = "plan"          // planning instances (engine)
	PhaseProvider     = "provider"      // provider calls: create, update, delete
	PhaseFlush        = "flush"         // making what providers wrote durable (provider.Syncer)
	PhaseJournal      = "journal"       // state writes of resources, instances and events
	PhaseStateSync    = "state_sync"    // fsync of the state at the end of an operation
	PhaseStatusCommit = "status_commit" // the status commit of an operation
)

// Phases are the phases of PhaseTime, in the order an operation meets them.
var Phases = []string{PhasePlan, PhaseProvider, PhaseFlush, PhaseJournal, PhaseStateSync, PhaseStatusCommit}

// spent accounts the time since began to phase.
func (r *Reconciler) spent(phase string, began time.Time) {
	r.opts.Metrics.PhaseTime(phase, time.Since(began))
}

// observeTime accounts the durations apply events carry: provider calls
// and the flushes that make them durable.
func (r *Reconciler) observeTime(ev engine.Event) {
	switch {
	case ev.Phase == "sync":
		r.opts.Metrics.PhaseTime(PhaseFlush, ev.Duration)
	case ev.Duration > 0:
		r.opts.Metrics.PhaseTime(PhaseProvider, ev.Duration)
	}
}

type noMetrics struct{}

func (noMetrics) OperationFinished(string, string)       {}
func (noMetrics) InstanceDuration(string, time.Duration) {}
func (noMetrics) ReconcileDone(time.Duration, error)     {}
func (noMetrics) FetchDone(time.Duration, error)         {}
func (noMetrics) QueueLength(int)                        {}
func (noMetrics) GitFault(string)                        {}
func (noMetrics) PhaseTime(string, time.Duration)        {}
func (noMetrics) Drift(string, int)                      {}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.Source == nil || o.Store == nil || o.Engine == nil {
		return errors.New("reconciler: Source, Store and Engine are required")
	}
	if o.Branch == "" {
		o.Branch = "main"
	}
	if o.Path == "" {
		o.Path = "."
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	if o.StatusBranch == "" {
		o.StatusBranch = "stackd/status"
	}
	if o.PRBranches == "" {
		o.PRBranches = "*"
	}
	if _, err := path.Match(o.PRBranches, ""); err != nil {
		return fmt.Errorf("reconciler: PRBranches %q: %w", o.PRBranches, err)
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 256
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.PlanBudget <= 0 {
		o.PlanBudget = DefaultPlanBudget
	}
	if o.HealthClient == nil {
		o.HealthClient = defaultHealthClient
	}
	return nil
}

// Reconciler turns commits into operations. Reconcile passes are serialized.
//
// Planning untrusted refs (pull-request branches, Plan of any other ref)
// never takes mu: a branch that is slow or hostile to plan cannot hold up
// the deploy branch. PlanBranches passes are serialized by branchMu, Plan
// calls by planSem, and both share the cache of finished plans.
type Reconciler struct {
	opts Options
	log  zerolog.Logger
	// mu serializes reconcile passes of the deploy branch; waiting for it
	// ends with the caller's context.
	mu passLock
	// branchMu serializes PlanBranches passes.
	branchMu sync.Mutex
	// planSem bounds the Plan calls that plan at the same time.
	planSem chan struct{}
	// plans caches finished plans (see planCache).
	plans planCache
	// stateGen counts the operations that finished: a cached plan made
	// before the state changed is not reused.
	stateGen atomic.Int64
	// stop fires when Run's context ends: no new instance starts.
	stop stopSignal
	// callsStopped is set once shutdown has asked the providers to stop
	// their calls in flight (StopProviderCalls): a call failing from then
	// on was stopped by the daemon, not failed by the world.
	callsStopped atomic.Bool
	healthMu     sync.Mutex
	health       Health
	// passes counts Run's passes: started and ended, the outcome of the
	// last, and a channel closed (and replaced) when one ends (WaitPass).
	passes passLog
	// lastRejected is the last revision notified as rejected.
	lastRejected atomic.Pointer[string]
	// rejectedHere is the revision this process found rejected, with the
	// resource type registry it was validated against: only a rejection
	// made under the same flags and registry is not validated again.
	rejectedHere atomic.Pointer[rejection]

	// runMu guards runners: one per stack set name, running at most one
	// operation at a time, with at most one job queued behind it.
	runMu   sync.Mutex
	runners map[string]*runner
	wg      sync.WaitGroup
	// inflight is the MaxInFlight semaphore.
	inflight chan struct{}
	// gitTypes are the resource types declared by the last applied revision.
	gitTypes atomic.Pointer[map[string]string]
	// driftSpecs are the drift blocks of the revision last reconciled, by
	// stack set name (driftLoop).
	driftSpecs atomic.Pointer[map[string]*config.DriftSpec]
	// opsCtx is Run's context for operations (it outlives a stop by the
	// grace period): operations started outside a pass (a drift
	// correction asked for through the API) run under it, not under the
	// request's.
	opsCtx atomic.Pointer[context.Context]
	// driftSpecsChanged is told when driftSpecs is replaced.
	driftSpecsChanged chan struct{}
	// rollouts holds the running rollouts by stack set name (*rolloutRun),
	// for Promote and Abort.
	rollouts sync.Map
	// stateKnown is set once the state is known not to be lost (checkState).
	stateKnown atomic.Bool
	// status is the status writer (statuswriter.go); oweMu orders the
	// status_owed marks set by operations and cleared by it.
	status *statusQueue
	oweMu  sync.Mutex
	// dispatching is set while a pass dispatches operations.
	dispatching atomic.Bool
}

// GitTypes returns the resource types (name → default service token)
// declared by the definitions of the revision last reconciled.
func (r *Reconciler) GitTypes() map[string]string {
	if p := r.gitTypes.Load(); p != nil {
		return *p
	}
	return nil
}

// New returns a Reconciler.
func New(opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &Reconciler{
		opts: opts, log: opts.Log, runners: map[string]*runner{}, mu: newPassLock(),
		inflight: make(chan struct{}, opts.MaxInFlight), planSem: make(chan struct{}, 1),
		driftSpecsChanged: make(chan struct{}, 1),
	}
	r.status = newStatusQueue(r)
	return r, nil
}

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
	unfinished, res, err := r.checkPass(ctx, head)
	if err != nil || res != nil {
		return res, nil, err
	}
	resumed, resumedIDs := r.resumeRollouts(ctx, head, unfinished)
	resumed = resumed.join(r.resumeDriftCorrections(ctx, unfinished, resumedIDs))
	res, p, err = r.reconcileRevision(ctx, head)
	p = resumed.join(p)
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
		if last, _ := r.opts.Store.Meta(metaLastRevision); string(last) == head {
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
		out = append(out, op)
	}
	return out, nil
}

// job is the work of one stack set at one revision.
type job struct {
	name string
	rev  string
	// untrusted is set when rev is not the deploy branch's head (a
	// pull-request branch): its plan must not see the sensitive values
	// recorded in the state (DESIGN §9, untrusted input).
	untrusted bool
	// files are the files the planned instances manage, by target (for
	// checkFileOwners).
	files    map[config.Target][]engine.FileClaim
	desired  *config.StackSet // nil: the block was removed (DeleteStackSet)
	recorded *state.StackSet  // nil: new stack set
	// opID, if set, is the id its operation gets when it is claimed new
	// (a drift correction names it before it runs).
	opID string
	// newID is the id a new stack set will get (chosen before planning so
	// plans and instance hashes use it).
	newID string
	kind  state.OperationKind
	// claim, when set, registers the operation instead of rev
	// (state.Operation.Claim): a DriftCorrection's.
	claim string
	// refresh: the plan reads the deployed instances first
	// (modePlanRefresh).
	refresh bool
	works   []*work
	// changeSet is filled while planning.
	changeSet *changeset.StackSetChangeSet
	// pass is the reconcile pass that dispatched the job; queuedOp the
	// QUEUED operation recorded while it waits behind a running one.
	pass     *pass
	queuedOp string
	// dropPlans: validate each instance's plan, then let it go.
	dropPlans bool
}

// id is the stack set's id: recorded, or chosen for a new stack set.
func (j *job) id() string {
	if j.recorded != nil {
		return j.recorded.ID
	}
	return j.newID
}

// work is one instance of an operation.
type work struct {
	target config.Target
	action changeset.InstanceAction // changeset.InstanceCreate | InstanceUpdate | InstanceDelete | actionSkip
	hash   string
	plan   *engine.InstancePlan
	// inService: the instance served (state.Instance.InService) when the
	// operation was planned (rollout min_in_service counts it).
	inService bool
	// refreshOnly: planned for a change set after a read (modePlanRefresh),
	// not part of an operation.
	refreshOnly bool
}

// actionSkip marks an instance of a suspended account: it is recorded as
// SKIPPED_SUSPENDED_ACCOUNT and never fails or blocks the operation.
const actionSkip changeset.InstanceAction = "Skip"

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
				if err := r.endOperation(op, state.OperationStopped, "its stack set no longer exists"); err != nil {
					return nil, nil, err
				}
			}
			if j.kind == "" {
				continue
			}
		}
		r.dispatch(ctx, j, p)
		dispatched++
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
	}
	if dispatched == 0 {
		log.Info().Msg("no changes")
		return res, nil, nil
	}
	return res, p, nil
}

// prepare loads the revision's definitions and builds one job per stack set
// that exists in the definitions or in the state. Except in modeWorks,
// every instance that must change is planned (so evaluation errors reject
// the commit before anything is applied).
//
// untrusted marks a revision that is not the deploy branch's head (only in
// modePlan): see job.untrusted.
func (r *Reconciler) prepare(ctx context.Context, rev string, mode planMode, untrusted bool) ([]*job, hcl.Diagnostics, error) {
	fsys, err := r.opts.Source.Tree(ctx, rev)
	if err != nil {
		return nil, nil, fmt.Errorf("read tree %s: %w", short(rev), err)
	}
	load := r.opts.Engine.Load
	if untrusted {
		load = r.opts.Engine.LoadUntrusted
	}
	defs, diags := load(fsys, r.opts.Path)
	if diags.HasErrors() {
		return nil, diags, nil
	}
	if mode == modeApply {
		r.gitTypes.Store(&defs.ResourceTypes)
		specs := map[string]*config.DriftSpec{}
		for _, ss := range defs.StackSets {
			if ss.Drift != nil {
				specs[ss.Name] = ss.Drift
			}
		}
		r.driftSpecs.Store(&specs)
		select {
		case r.driftSpecsChanged <- struct{}{}:
		default:
		}
	}
	recorded, err := r.opts.Store.ListStackSets()
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*state.StackSet{}
	for i := range recorded {
		byName[recorded[i].Name] = &recorded[i]
	}
	var jobs []*job
	for _, ss := range defs.StackSets {
		jobs = append(jobs, &job{name: ss.Name, rev: rev, desired: ss, recorded: byName[ss.Name], untrusted: untrusted})
		delete(byName, ss.Name)
	}
	for _, name := range sortedNames(byName) {
		jobs = append(jobs, &job{name: name, rev: rev, recorded: byName[name], untrusted: untrusted})
	}
	// Decide the instances first (cheap: hashes), then plan them. A pass
	// planning more instances than keepPlansLimit validates each plan and
	// drops it (the instance re-plans right before it is applied), so that
	// memory stays bounded for very large fleets.
	dropPlans := false
	rejected := map[*job]bool{}
	var bounded diagBound
	if mode == modeApply {
		n := 0
		for _, j := range jobs {
			jdiags, err := r.planJob(ctx, j, modeWorks)
			if err != nil {
				return nil, nil, err
			}
			if jdiags.HasErrors() {
				diags = bounded.add(diags, jdiags)
				rejected[j] = true
			}
			n += len(j.works)
		}
		dropPlans = n > keepPlansLimit
	}
	for _, j := range jobs {
		if rejected[j] || mode == modeApply && len(j.works) == 0 && j.kind == "" {
			continue // nothing to plan
		}
		j.dropPlans = dropPlans
		jdiags, err := r.planJob(ctx, j, mode)
		if err != nil {
			return nil, nil, err
		}
		diags = bounded.add(diags, jdiags)
	}
	diags = bounded.finish(diags)
	if !diags.HasErrors() {
		odiags, err := r.checkFileOwners(jobs)
		if err != nil {
			return nil, nil, err
		}
		diags = append(diags, odiags...)
	}
	// The claims are needed for the check only: at 10,000 instances of ten
	// files they are ~18 MB the rest of the pass would keep alive.
	for _, j := range jobs {
		j.files = nil
	}
	return jobs, diags, nil
}

// keepPlansLimit is the number of instance plans a pass keeps in memory
// between validating a commit and applying it (~40 KB each for a
// 10-resource template); beyond it, plans are made twice instead.
const keepPlansLimit = 2000

func sortedNames(m map[string]*state.StackSet) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// planMode says how much planJob does.
type planMode int

const (
	// modeApply plans every instance with the stack set's id (a new stack
	// set gets its id chosen now), for a pass that will run operations.
	modeApply planMode = iota
	// modePlan plans every instance for a change set only: a new stack
	// set's id is left unknown.
	modePlan
	// modePlanRefresh is modePlan that reads every deployed instance first
	// (stackd plan --refresh): the change set also shows the changes that
	// would correct drift, their BeforeValue the value found.
	modePlanRefresh
	// modeWorks only decides the instances of the operation (a queued job
	// about to start); each instance is planned right before it is applied.
	modeWorks
)

// planJob decides the instances to create, update and delete, and the
// operation kind (decideOperation), then plans the instances and fills the
// job's change set (except in modeWorks).
func (r *Reconciler) planJob(ctx context.Context, j *job, mode planMode) (hcl.Diagnostics, error) {
	var diags hcl.Diagnostics
	rev := j.rev
	plan := mode != modeWorks
	// Change sets are kept for stackd plan only: an applying pass needs the
	// plans, and 10,000 instances' change records are a lot of memory.
	keep := mode == modePlan || mode == modePlanRefresh
	addChange := func(ic changeset.InstanceChangeSet) {
		if keep {
			j.changeSet.Add(ic)
		}
	}
	j.works, j.kind, j.files = nil, "", nil
	if j.recorded == nil && j.desired != nil && !keep && j.newID == "" {
		j.newID = uuid.NewString()
	}
	id := j.id()
	j.changeSet = &changeset.StackSetChangeSet{StackSetName: j.name, StackSetId: id, Revision: rev}
	ss := j.desired
	if ss != nil {
		if ss.ID != "" && ss.ID != id {
			detail := fmt.Sprintf("Stack set %q pins id %q, but no stack set of that name exists: stackd gives a stack set its id when it creates it. Remove the id attribute.", ss.Name, ss.ID)
			if j.recorded != nil {
				detail = fmt.Sprintf("Stack set %q pins id %q, but the recorded stack set of that name has id %q (a stack set deleted and created again gets a new id). Remove the id attribute or set it to the recorded id.", ss.Name, ss.ID, id)
			}
			return diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Stack set id mismatch",
				Detail:  detail,
				Subject: ss.DeclRange.Ptr(),
			}), nil
		}
		if ss.Suspend {
			j.changeSet.Action = changeset.InstanceNoChange
			return nil, nil
		}
	}
	var existing []state.Instance
	if j.recorded != nil {
		var err error
		if existing, err = r.opts.Store.Instances(id); err != nil {
			return nil, err
		}
	}
	if d := checkOverrides(ss, existing); d.HasErrors() {
		return append(diags, d...), nil
	}
	dec := decideOperation(ss, j.recorded, id, existing)
	j.refresh = mode == modePlanRefresh && ss != nil
	if j.refresh {
		// Every deployed instance left as it is gets planned too, after
		// a read: drift makes it change.
		for i, dc := range dec.instances {
			if dc.work == nil && dc.recorded != nil && dc.recorded.Revision != "" {
				dec.instances[i].work = &work{target: dc.target, action: changeset.InstanceUpdate, hash: dc.recorded.ConfigHash, refreshOnly: true}
			}
		}
	}
	var prior *priorStackSets
	if keep {
		prior = newPriorStackSets(r, j)
	}
	// Instance plans are made in parallel (they are independent), then
	// taken in order: the change set, the works and the first diagnostics
	// reported are the same as one after another.
	var plans []instancePlan
	var warns planWarnings // plan_warnings.go
	if plan {
		plans = r.planInstances(ctx, j, dec.instances, prior, keep)
	}
	for i, dc := range dec.instances {
		t, w, in := dc.target, dc.work, dc.recorded
		switch {
		case w == nil || w.action == actionSkip:
			// Untouched, or a suspended account's instance: no change.
			addChange(changeset.InstanceChangeSet{Region: t.Region, Account: t.Account, Action: changeset.InstanceNoChange})
		case w.action == changeset.InstanceDelete:
			if j.desired != nil || plan {
				recorded, err := r.resources(id, t)
				if err != nil {
					return nil, err
				}
				// A target removed while the template still protects
				// one of its resources (prevent_destroy) is refused.
				if pd := engine.DestroyPrevented(j.desired, t, recorded); pd.HasErrors() {
					return append(diags, pd...), nil
				}
				if !plan {
					break
				}
				w.plan = engine.PlanDestroy(&engine.Instance{Name: j.name, StackSetID: id, Target: t, Prior: prior.of(ctx, in), DeclaredTypes: r.declaredTypes(j), Caller: config.CallerAccount(j.desired)}, recorded)
				addChange(changeset.InstanceChangeSet{Region: t.Region, Account: t.Account, Action: changeset.InstanceDelete, Changes: w.plan.Changes()})
			}
		case plan:
			if plans[i].err != nil {
				return nil, plans[i].err
			}
			ip := plans[i]
			pdiags := ip.diags
			if pdiags.HasErrors() {
				for _, d := range pdiags {
					d.Detail = fmt.Sprintf("%s (stack set %q, instance %s/%s)", d.Detail, ss.Name, t.Region, t.Account)
				}
				// One instance's errors are enough to reject the commit.
				return append(diags, pdiags...), nil
			}
			warns.add(pdiags, t)
			if len(ip.files) > 0 {
				if j.files == nil {
					j.files = map[config.Target][]engine.FileClaim{}
				}
				j.files[t] = ip.files
			}
			w.plan = ip.plan // nil when the pass drops its plans
			ic := changeset.InstanceChangeSet{Region: t.Region, Account: t.Account, Action: w.action, Changes: ip.changes}
			if w.action == changeset.InstanceUpdate && !ip.hasChanges {
				ic.Action = changeset.InstanceNoChange
			}
			addChange(ic)
		}
		if w != nil && !w.refreshOnly {
			j.works = append(j.works, w)
		}
	}
	if ss != nil && ss.Rollout != nil {
		// A min_in_service the operation can never meet rejects the commit.
		if d := ss.Rollout.CheckMinInService(ss.Name, dec.creates+dec.updates, dec.untouched); d != nil {
			return diags.Append(d), nil
		}
	}
	j.kind, j.changeSet.Action = dec.kind, dec.action
	if keep && ss != nil {
		j.changeSet.Diagnostics = append(j.changeSet.Diagnostics, warns.diagnostics(ss.Name)...)
	}
	if dec.noChange() {
		j.works = nil
	}
	if keep && ss != nil && ss.Rollout != nil {
		plan, err := r.rolloutPlan(j)
		if err != nil {
			return diags, err
		}
		j.changeSet.Rollout = plan
	}
	return diags, nil
}

// instancePlan is what a pass keeps of one instance's plan (or why there
// is none): the plan itself unless the pass drops its plans (past
// dropPlansOver instances each is made again right before it is applied),
// the files it claims, whether it changes anything, and its change
// records when the pass keeps a change set.
type instancePlan struct {
	plan       *engine.InstancePlan
	files      []engine.FileClaim
	changes    []changeset.Change
	hasChanges bool
	diags      hcl.Diagnostics
	err        error
}

// planInstances plans the instances of decided that are created or
// updated, on as many goroutines as the process has CPUs; the result is
// indexed like decided. Once an instance fails to plan, those after it in
// decided are not planned (the pass stops at the first failure, as it
// would one at a time), while those before it still are.
func (r *Reconciler) planInstances(ctx context.Context, j *job, decided []instanceDecision, prior *priorStackSets, keepChanges bool) []instancePlan {
	out := make([]instancePlan, len(decided))
	priors := make([]*config.StackSet, len(decided))
	var todo []int
	for i, dc := range decided {
		if w := dc.work; w != nil && w.action != actionSkip && w.action != changeset.InstanceDelete {
			priors[i] = prior.of(ctx, dc.recorded) // not safe for concurrent use
			todo = append(todo, i)
		}
	}
	id := j.id()
	var next atomic.Int64
	var firstFailed atomic.Int64
	firstFailed.Store(int64(len(decided)))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(todo)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(todo) {
					return
				}
				i := todo[k]
				if int64(i) > firstFailed.Load() {
					continue
				}
				t := decided[i].target
				var recorded []engine.ResourceState
				if j.recorded != nil {
					var err error
					if recorded, err = r.resources(id, t); err != nil {
						out[i].err = err
						lowerTo(&firstFailed, int64(i))
						continue
					}
				}
				began := time.Now()
				inst := &engine.Instance{StackSet: j.desired, StackSetID: id, Target: t, Untrusted: j.untrusted, Prior: priors[i]}
				if j.refresh && len(recorded) > 0 {
					var ignore []string
					if d := j.desired.Drift; d != nil {
						ignore = d.Ignore
					}
					d, err := r.opts.Engine.CheckDrift(ctx, inst, recorded, ignore)
					if err != nil {
						out[i].err = err
						lowerTo(&firstFailed, int64(i))
						continue
					}
					recorded, inst.Drifted = d.Refresh(recorded)
				}
				p, diags := r.opts.Engine.PlanContext(ctx, inst, recorded)
				r.spent(PhasePlan, began)
				if diags.HasErrors() {
					out[i].diags = diags
					lowerTo(&firstFailed, int64(i))
					continue
				}
				ip := instancePlan{files: p.Files(), hasChanges: p.HasChanges(), diags: diags}
				if keepChanges {
					ip.changes = p.Changes()
				}
				if !j.dropPlans {
					ip.plan = p
				}
				out[i] = ip
			}
		})
	}
	wg.Wait()
	return out
}

// lowerTo sets a to v if v is lower.
func lowerTo(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v >= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// rolloutPlan is how the job's instances to create or update will roll out
// (nil when there are none), as runRollout will batch them.
func (r *Reconciler) rolloutPlan(j *job) (*changeset.RolloutPlan, error) {
	var cands []config.Candidate
	for _, w := range j.works {
		if w.action == changeset.InstanceCreate || w.action == changeset.InstanceUpdate {
			cands = append(cands, config.Candidate{Region: w.target.Region, InService: w.inService})
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	serving, err := r.serving(j)
	if err != nil {
		return nil, err
	}
	return j.desired.Rollout.PlanRollout(cands, serving), nil
}

// serving counts the stack set's instances in service now
// (state.Instance.InService): min_in_service counts every one of them,
// touched by the operation or not.
func (r *Reconciler) serving(j *job) (int, error) {
	if j.recorded == nil {
		return 0, nil
	}
	ins, err := r.opts.Store.Instances(j.recorded.ID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, in := range ins {
		if in.InService() {
			n++
		}
	}
	return n, nil
}

// resources reads an instance's recorded resources in the engine's form.
func (r *Reconciler) resources(ssID string, t config.Target) ([]engine.ResourceState, error) {
	recs, err := r.opts.Store.Resources(ssID, t.Region, t.Account)
	if err != nil {
		return nil, err
	}
	out := make([]engine.ResourceState, len(recs))
	for i, rec := range recs {
		out[i] = resourceState(rec)
	}
	return out, nil
}

func short(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

// declaredTypes are the resource types a job's destroys may need: those of
// its revision's definitions, or (a deleted stack set) of the revision last
// reconciled.
func (r *Reconciler) declaredTypes(j *job) map[string]string {
	if j.desired != nil {
		return j.desired.ResourceTypes
	}
	return r.GitTypes()
}

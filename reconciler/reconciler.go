package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/internal/clock"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/state"
)

// Operation kinds (RFS names): state's constants themselves (state.Kind…,
// one declaration), re-exported for the reconciler's callers, which name
// kinds when they read results (api, cmd/stackd and their tests). The
// reconciler's own code uses state's names.
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
	// Shard, if set, makes this process one replica of several sharing a
	// PostgreSQL state: it runs only the stack sets whose lease it holds
	// (shard.go, docs/design.md §13).
	Shard Shard
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
	r.forgeEvent(e)
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
	case ev.Phase == engine.EventSync:
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
	// passed is this process's last pass over the head's jobs, on a
	// shared state (upToDateHere); desiredNames the stack sets of the last
	// revision planned for deploying (StackSetNames).
	passed       atomic.Pointer[passedAt]
	desiredNames atomic.Pointer[[]string]
	// forge is what the reconciler remembers of the forge (forge.go).
	forge forgeState

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

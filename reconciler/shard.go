package reconciler

import (
	"context"
	"slices"

	"github.com/stackd/stackd/state"
)

// Sharing the stack sets between replicas (docs/design.md §13): on a
// shared PostgreSQL state, several daemons run one fleet, and each stack
// set's operations are run by the one replica holding its lease. The
// reconciler asks its Shard, before it dispatches a stack set's job,
// whether this replica holds the lease; the job then writes through the
// lease's fenced store and ends when the lease is lost. Planning (and so
// the validation of a revision) covers every stack set on every replica,
// so that a revision is accepted or rejected as a whole, as with one
// daemon; only the dispatching is shared.

// Shard is this replica's share of a shared state's stack sets
// (Options.Shard; nil: this process owns every stack set).
type Shard interface {
	// Hold returns this replica's lease of stack set name, taking one use
	// of it (the lease is not given up while used), or false when this
	// replica does not hold it.
	Hold(name string) (Hold, bool)
	// Owns reports whether this replica holds stack set name's lease.
	Owns(name string) bool
	// Generation changes whenever the set of leases held changes: a pass
	// at the same revision is due then (stack sets taken over).
	Generation() uint64
	// Leader reports whether this replica does the fleet's global duties
	// (planning pull-request branches, forge reviews) now.
	Leader() bool
	// Rebalance takes and gives up leases now, before a pass dispatches:
	// the stack sets of a new revision get their owners at once.
	Rebalance()
}

// Hold is one use of a held lease.
type Hold interface {
	// Store is the state fenced by the lease: its writes commit only while
	// the lease is held with its epoch.
	Store() *state.Store
	// Lost is closed once the lease is lost, or may be (self-fencing on
	// the replica's own clock): the stack set's provider calls stop.
	Lost() <-chan struct{}
	// Release ends the use.
	Release()
}

// owns reports whether this process may run stack set name's operations.
func (r *Reconciler) owns(name string) bool {
	return r.opts.Shard == nil || r.opts.Shard.Owns(name)
}

// leader reports whether this process does the global duties.
func (r *Reconciler) leader() bool {
	return r.opts.Shard == nil || r.opts.Shard.Leader()
}

// hold attaches this replica's lease of j's stack set to j; false when
// another replica owns it (j is not to run here).
func (r *Reconciler) hold(j *job) bool {
	if r.opts.Shard == nil || j.hold != nil {
		return true
	}
	h, ok := r.opts.Shard.Hold(j.name)
	if !ok {
		return false
	}
	j.hold = h
	return true
}

// releaseHold ends j's use of its lease.
func (j *job) releaseHold() {
	if j.hold != nil {
		j.hold.Release()
		j.hold = nil
	}
}

// holdContext is ctx, also ended when j's lease is lost.
func holdContext(ctx context.Context, j *job) (context.Context, context.CancelFunc) {
	if j.hold == nil {
		return ctx, func() {}
	}
	hctx, cancel := context.WithCancel(ctx)
	lost := j.hold.Lost()
	go func() {
		select {
		case <-lost:
			cancel()
		case <-hctx.Done():
		}
	}()
	return hctx, cancel
}

// passedAt is the revision and shard generation of this process's last
// pass that dispatched the head's jobs: on a shared state, another
// replica's last_revision says nothing of the stack sets this one took
// over since.
type passedAt struct {
	rev string
	gen uint64
}

// upToDateHere reports whether this process already passed head with the
// leases it holds now.
func (r *Reconciler) upToDateHere(head string) bool {
	if r.opts.Shard == nil {
		return true
	}
	p := r.passed.Load()
	return p != nil && p.rev == head && p.gen == r.opts.Shard.Generation()
}

// notePassed records a pass over head's jobs at the generation gen read
// before it dispatched.
func (r *Reconciler) notePassed(head string, gen uint64) {
	r.passed.Store(&passedAt{rev: head, gen: gen})
}

// shardGeneration is the shard's generation (0 without one).
func (r *Reconciler) shardGeneration() uint64 {
	if r.opts.Shard == nil {
		return 0
	}
	return r.opts.Shard.Generation()
}

// StackSetNames lists the stack sets to share between replicas: those of
// the last revision planned for deploying, and those the state records.
func (r *Reconciler) StackSetNames() ([]string, error) {
	sets, err := r.opts.Store.ListStackSets()
	if err != nil {
		return nil, err
	}
	var names []string
	if d := r.desiredNames.Load(); d != nil {
		names = append(names, (*d)...)
	}
	for _, ss := range sets {
		names = append(names, ss.Name)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// StackSetBusy reports whether an operation of stack set name runs or
// waits in this process, or a rollout of it holds: its lease must not
// move now (ownership moves only between operations).
func (r *Reconciler) StackSetBusy(name string) bool {
	if _, ok := r.rollouts.Load(name); ok {
		return true
	}
	r.runMu.Lock()
	defer r.runMu.Unlock()
	ru := r.runners[name]
	return ru != nil && (ru.busy || ru.queued != nil || ru.drift != nil)
}

// st is the state the operation writes through (job.store).
func (o *opRun) st() *state.Store { return o.j.store(o.r) }

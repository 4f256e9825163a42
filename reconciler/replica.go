package reconciler

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/state"
)

// A Replica is the Shard of one daemon among several sharing a PostgreSQL
// state (docs/design.md §13). Every TTL/3 (and at once when a member
// joins or leaves, or a lease is released: state.ChannelLease) it
//
//   - records itself as a live member (a heartbeat row, expiry by the
//     database's clock);
//   - renews the leases it holds; one it cannot renew before its own
//     deadline (its monotonic clock, a tenth of the TTL before the
//     database's expiry) is lost at once: its jobs' contexts end and its
//     fenced store refuses every write (self-fencing);
//   - shares the stack sets between the live members, the same way on
//     every replica (rendezvous hashing with bounded load: each takes at
//     most ⌈sets/members⌉), takes the leases assigned to it that are free
//     or expired, and gives up those no longer assigned to it once no
//     operation of theirs runs or waits here (ownership moves only
//     between operations);
//   - holds the leader lease if it is free: the leader plans pull-request
//     branches and posts forge reviews, once for the fleet.
//
// When the leases held change, the reconciler is woken for a pass (the
// stack sets taken over resume their interrupted operations as after a
// restart). On Close, leases are released and the member row removed at
// once, so the others take over without waiting for expiry.

// DefaultLeaseTTL is the default lease and membership time to live.
const DefaultLeaseTTL = 15 * time.Second

// LeaderLease is the name of the leader's lease: not a valid stack set
// name, so no stack set's lease can be it.
const LeaderLease = ":leader"

// ReplicaMetrics is what a Replica reports to monitoring.
type ReplicaMetrics interface {
	// LeasesHeld is the number of stack set leases held now.
	LeasesHeld(n int)
	// LeaseTakeover counts a lease taken from a replica that did not
	// release it (its lease expired: it died or stalled).
	LeaseTakeover()
}

// ReplicaOptions configure a Replica.
type ReplicaOptions struct {
	// Store is the shared state (not a fenced view).
	Store *state.Store
	// ID names this replica, unique per process; Info is shown beside it
	// (host, version, listen address).
	ID, Info string
	// TTL of the leases and of the membership (default DefaultLeaseTTL).
	TTL     time.Duration
	Log     zerolog.Logger
	Metrics ReplicaMetrics
}

// Replica holds this daemon's leases; safe for concurrent use.
type Replica struct {
	o ReplicaOptions
	r *Reconciler
	// wake asks the reconciler for a pass.
	wake func()

	// roundMu makes rounds one at a time (the loop's, a pass's).
	roundMu sync.Mutex
	mu      sync.Mutex
	leases  map[string]*heldLease
	gen     atomic.Uint64
	// kick asks for a round now.
	kick chan struct{}
	// soon kicks a round when the next lease or membership of another
	// replica expires: a dead replica's stack sets are taken over then,
	// not up to a renewal period later.
	soon *time.Timer
}

// heldLease is one lease this replica holds (or held, until it is lost).
type heldLease struct {
	rep   *Replica
	store *state.Store // the fenced view
	lost  chan struct{}
	// mu guards what follows.
	mu       sync.Mutex
	lease    state.Lease
	deadline time.Time // local, monotonic: lease.Deadline less a margin
	timer    *time.Timer
	gone     bool
	uses     int
}

var _ Shard = (*Replica)(nil)

// NewReplica returns a replica of o.Store; Run it.
func NewReplica(o ReplicaOptions) *Replica {
	if o.TTL <= 0 {
		o.TTL = DefaultLeaseTTL
	}
	if o.Metrics == nil {
		o.Metrics = nopReplicaMetrics{}
	}
	return &Replica{o: o, leases: map[string]*heldLease{}, kick: make(chan struct{}, 1)}
}

// ID is the replica's id.
func (p *Replica) ID() string { return p.o.ID }

// TTL is the lease time to live.
func (p *Replica) TTL() time.Duration { return p.o.TTL }

// Attach gives the replica the reconciler whose stack sets it shares and
// the function that asks it for a pass. Call before Run.
func (p *Replica) Attach(r *Reconciler, wake func()) {
	p.r, p.wake = r, wake
}

// Kick asks for a round now (a member joined or left, a lease was freed).
func (p *Replica) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run keeps the membership and the leases until ctx ends; it then
// releases every lease and leaves. Call it once, after Attach, and end
// its ctx only once the reconciler's operations ended (a lease released
// earlier would let another replica start on a stack set this one still
// works on; the fence would refuse this one's writes).
func (p *Replica) Run(ctx context.Context) {
	if p.r == nil {
		panic("reconciler: Replica.Run before Attach")
	}
	defer p.close()
	var notes <-chan string
	if ch, err := p.o.Store.Listen(ctx, state.ChannelLease); err == nil {
		notes = ch
	} else {
		p.o.Log.Warn().Err(err).Msg("cannot listen for lease changes; rebalancing on the renewal tick only")
	}
	t := time.NewTicker(p.o.TTL / 3)
	defer t.Stop()
	for {
		p.round()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		case _, ok := <-notes:
			if !ok {
				notes = nil
			}
		}
	}
}

// Rebalance implements Shard: the leases taken and given up now; the
// heartbeat and the renewals are the loop's (a pass need not repeat them).
func (p *Replica) Rebalance() {
	p.roundMu.Lock()
	defer p.roundMu.Unlock()
	p.rebalance()
}

// round is one heartbeat, renewal and rebalance.
func (p *Replica) round() {
	p.roundMu.Lock()
	defer p.roundMu.Unlock()
	if err := p.o.Store.Heartbeat(p.o.ID, p.o.Info, p.o.TTL); err != nil {
		p.o.Log.Warn().Err(err).Msg("replica heartbeat failed")
	}
	p.renew()
	p.rebalance()
}

// rebalance shares the stack sets between the live members, takes the
// leases assigned here and gives up the others that are idle.
func (p *Replica) rebalance() {
	st := p.o.Store
	members, err := st.Members()
	if err != nil {
		p.o.Log.Warn().Err(err).Msg("cannot list replicas; leases kept as they are")
		return
	}
	names, err := p.r.StackSetNames()
	if err != nil {
		p.o.Log.Warn().Err(err).Msg("cannot list stack sets; leases kept as they are")
		return
	}
	ids := make([]string, 0, len(members))
	dbNow, err := st.DBNow()
	if err != nil {
		p.o.Log.Warn().Err(err).Msg("cannot read the database's clock; leases kept as they are")
		return
	}
	next := time.Duration(-1) // until the next expiry that may free work
	for _, m := range members {
		ids = append(ids, m.ID)
		if m.ID != p.o.ID {
			next = earliest(next, m.Expires.Sub(dbNow))
		}
	}
	if !slices.Contains(ids, p.o.ID) {
		// Our heartbeat failed: share as if we were a member, so that we
		// keep (and renew) what we hold rather than drop it.
		ids = append(ids, p.o.ID)
		slices.Sort(ids)
	}
	mine := map[string]bool{LeaderLease: true}
	for name, owner := range Assign(names, ids) {
		if owner == p.o.ID {
			mine[name] = true
		}
	}
	changed := p.giveUp(mine)
	took, wait := p.take(mine, ids, dbNow)
	if took {
		changed = true
	}
	p.kickIn(earliest(next, wait))
	if changed {
		p.gen.Add(1)
		if p.wake != nil {
			p.wake()
		}
	}
	p.o.Metrics.LeasesHeld(p.held())
}

// renew extends every lease held; one found lost is dropped.
func (p *Replica) renew() {
	for _, h := range p.snapshotMap() {
		h.mu.Lock()
		l, gone := h.lease, h.gone
		h.mu.Unlock()
		if gone {
			continue
		}
		nl, err := p.o.Store.RenewLease(l, p.o.TTL)
		switch {
		case err == nil:
			h.renewed(nl)
		case errors.Is(err, state.ErrLeaseLost):
			p.o.Log.Warn().Str("stack_set", l.StackSet).Uint64("epoch", l.Epoch).Msg("lease lost: another replica may own the stack set now")
			p.drop(l.StackSet, h)
		default:
			// The database is unreachable: kept until the local deadline
			// (the timer loses it then).
			p.o.Log.Warn().Err(err).Str("stack_set", l.StackSet).Msg("cannot renew lease")
		}
	}
}

// giveUp releases the leases held but no longer assigned to this replica
// whose stack sets are idle here. It reports whether one was released.
func (p *Replica) giveUp(mine map[string]bool) bool {
	changed := false
	for name, h := range p.snapshotMap() {
		if mine[name] || p.r.StackSetBusy(name) {
			continue
		}
		h.mu.Lock()
		idle := h.uses == 0 && !h.gone
		if idle {
			h.gone = true // no new use from now on
		}
		l := h.lease
		h.mu.Unlock()
		if !idle {
			continue
		}
		p.drop(name, h)
		if err := p.o.Store.ReleaseLease(l); err != nil {
			p.o.Log.Warn().Err(err).Str("stack_set", name).Msg("cannot release lease; it expires by itself")
		}
		p.o.Log.Info().Str("stack_set", name).Uint64("epoch", l.Epoch).Msg("lease released: another replica's share now")
		changed = true
	}
	return changed
}

// take acquires the leases assigned to this replica that it does not
// hold; live are the live members' ids, now the database's time. It
// reports whether one was taken, and how long until the first of those
// another replica holds expires (-1: none).
func (p *Replica) take(mine map[string]bool, live []string, now time.Time) (took bool, wait time.Duration) {
	wait = -1
	all, err := p.o.Store.Leases()
	if err != nil {
		p.o.Log.Warn().Err(err).Msg("cannot read leases")
		return false, wait
	}
	before := map[string]state.Lease{}
	for _, l := range all {
		before[l.StackSet] = l
	}
	names := make([]string, 0, len(mine))
	for name := range mine {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if p.holds(name) {
			continue
		}
		prev, had := before[name]
		if had && prev.Holder != p.o.ID && prev.Expires.After(now) {
			// Held by another replica: it gives it up between operations,
			// or, if it died, the lease expires.
			wait = earliest(wait, prev.Expires.Sub(now))
			continue
		}
		l, err := p.o.Store.AcquireLease(name, p.o.ID, p.o.TTL)
		if err != nil {
			if !errors.Is(err, state.ErrLeaseHeld) {
				p.o.Log.Warn().Err(err).Str("stack_set", name).Msg("cannot acquire lease")
			}
			continue
		}
		if err := p.add(l); err != nil {
			p.o.Log.Warn().Err(err).Str("stack_set", name).Msg("cannot use lease")
			_ = p.o.Store.ReleaseLease(l)
			continue
		}
		// Taken from a replica that is no longer a live member (it died
		// or stalled past its TTL), not one that gave the lease up.
		takeover := had && prev.Holder != p.o.ID && !slices.Contains(live, prev.Holder)
		ev := p.o.Log.Info()
		if takeover {
			ev = p.o.Log.Warn().Str("from", prev.Holder)
			if name != LeaderLease {
				p.o.Metrics.LeaseTakeover()
			}
		}
		ev.Str("stack_set", name).Uint64("epoch", l.Epoch).Bool("takeover", takeover).Msg("lease acquired")
		took = true
	}
	return took, wait
}

// earliest is the shorter of two waits, -1 meaning none.
func earliest(a, b time.Duration) time.Duration {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	return min(a, b)
}

// kickIn asks for a round d from now (just after an expiry), unless the
// renewal tick comes first; d < 0: none.
func (p *Replica) kickIn(d time.Duration) {
	if d < 0 || d >= p.o.TTL/3 {
		return
	}
	d += 5 * time.Millisecond // past the expiry, on the database's clock
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.soon == nil {
		p.soon = time.AfterFunc(d, p.Kick)
		return
	}
	p.soon.Reset(d)
}

// add starts holding l.
func (p *Replica) add(l state.Lease) error {
	h := &heldLease{rep: p, lost: make(chan struct{})}
	store, err := p.o.Store.FencedWhile(l, h.valid)
	if err != nil {
		return err
	}
	h.store = store
	h.renewed(l)
	p.mu.Lock()
	p.leases[l.StackSet] = h
	p.mu.Unlock()
	return nil
}

// drop forgets h (if still the lease held for name) and marks it lost.
func (p *Replica) drop(name string, h *heldLease) {
	p.mu.Lock()
	if p.leases[name] == h {
		delete(p.leases, name)
	}
	p.mu.Unlock()
	h.lose()
}

// close releases every lease and leaves the membership.
func (p *Replica) close() {
	p.mu.Lock()
	if p.soon != nil {
		p.soon.Stop()
	}
	p.mu.Unlock()
	for name, h := range p.snapshotMap() {
		h.mu.Lock()
		l := h.lease
		h.mu.Unlock()
		p.drop(name, h)
		if err := p.o.Store.ReleaseLease(l); err != nil {
			p.o.Log.Warn().Err(err).Str("stack_set", name).Msg("cannot release lease on leaving; it expires by itself")
		}
	}
	if err := p.o.Store.Leave(p.o.ID); err != nil {
		p.o.Log.Warn().Err(err).Msg("cannot leave the replicas; the membership expires by itself")
	}
	p.o.Metrics.LeasesHeld(0)
}

func (p *Replica) snapshotMap() map[string]*heldLease {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]*heldLease, len(p.leases))
	for k, h := range p.leases {
		out[k] = h
	}
	return out
}

func (p *Replica) lookup(name string) *heldLease {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leases[name]
}

func (p *Replica) holds(name string) bool { return p.lookup(name) != nil }

// held counts the stack set leases held (the leader's aside).
func (p *Replica) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.leases)
	if p.leases[LeaderLease] != nil {
		n--
	}
	return n
}

// Held lists the stack sets whose lease this replica holds and may use.
func (p *Replica) Held() []string {
	var out []string
	for name, h := range p.snapshotMap() {
		if name != LeaderLease && h.valid() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Hold implements Shard.
func (p *Replica) Hold(name string) (Hold, bool) {
	h := p.lookup(name)
	if h == nil {
		return nil, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone || !time.Now().Before(h.deadline) {
		return nil, false
	}
	h.uses++
	return &holdUse{h: h}, true
}

// Owns implements Shard.
func (p *Replica) Owns(name string) bool {
	h := p.lookup(name)
	return h != nil && h.valid()
}

// Generation implements Shard.
func (p *Replica) Generation() uint64 { return p.gen.Load() }

// Leader implements Shard.
func (p *Replica) Leader() bool { return p.Owns(LeaderLease) }

// selfFenceMargin is how long before the lease's own deadline (taken
// before the request that set the database's expiry) a holder that could
// not renew considers it lost: room for the clocks' rates to differ.
func selfFenceMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// renewed records l (acquired or renewed) and re-arms the self-fencing
// timer at its deadline.
func (h *heldLease) renewed(l state.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone {
		return
	}
	h.lease = l
	h.deadline = l.Deadline.Add(-selfFenceMargin(h.rep.o.TTL))
	d := time.Until(h.deadline)
	if h.timer == nil {
		h.timer = time.AfterFunc(d, h.expire)
	} else {
		h.timer.Reset(d)
	}
}

// expire runs at the deadline: unless renewed meanwhile, the lease is
// lost.
func (h *heldLease) expire() {
	h.mu.Lock()
	late := !time.Now().Before(h.deadline)
	name, epoch := h.lease.StackSet, h.lease.Epoch
	h.mu.Unlock()
	if !late {
		return // renewed meanwhile
	}
	h.rep.o.Log.Error().Str("stack_set", name).Uint64("epoch", epoch).Msg("lease not renewed in time: stopping the stack set's work (self-fencing)")
	h.rep.drop(name, h)
	h.rep.gen.Add(1)
}

// lose marks the lease lost: no new use, writes refused, Lost closed.
func (h *heldLease) lose() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
	if !isClosed(h.lost) {
		h.gone = true
		close(h.lost)
	}
}

// valid reports whether the holder may still act on the lease.
func (h *heldLease) valid() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !isClosed(h.lost) && time.Now().Before(h.deadline)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// holdUse is one use of a held lease.
type holdUse struct {
	h    *heldLease
	once sync.Once
}

func (u *holdUse) Store() *state.Store   { return u.h.store }
func (u *holdUse) Lost() <-chan struct{} { return u.h.lost }
func (u *holdUse) Release() {
	u.once.Do(func() {
		u.h.mu.Lock()
		u.h.uses--
		u.h.mu.Unlock()
		u.h.rep.Kick() // a lease waiting to be given up may go now
	})
}

type nopReplicaMetrics struct{}

func (nopReplicaMetrics) LeasesHeld(int) {}
func (nopReplicaMetrics) LeaseTakeover() {}

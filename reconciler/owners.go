package reconciler

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/state"
)

// The operations view of a shared state (docs/design.md §13): who owns
// which stack set, read the same way on any replica and by a command on
// the database itself (stackd status --owners, GET /v1/owners), and the
// watch that raises an alert for a stack set without a live owner.
//
// A stack set has a live owner while its lease has not expired by the
// database's clock and its holder is a live replica (a member whose
// heartbeat has not expired): a lease renewed by something that is no
// replica, or kept by a replica that stopped heartbeating, runs nothing
// the fleet can see.

// Owners is who owns which stack set of a shared state, by the database's
// clock.
type Owners struct {
	// Now is the database's clock when the view was read.
	Now time.Time `json:"now"`
	// StackSets are the stack sets known to the state or to the last
	// revision planned, by name.
	StackSets []StackSetOwner `json:"stack_sets"`
	// Replicas are the live replicas, by id.
	Replicas []ReplicaInfo `json:"replicas"`
	// Leader is the live replica holding the leader lease ("" if none).
	Leader string `json:"leader,omitempty"`
}

// StackSetOwner is one stack set's lease.
type StackSetOwner struct {
	StackSet string `json:"stack_set"`
	// Owner is the live replica holding the lease ("": none).
	Owner string `json:"owner,omitempty"`
	// Holder is the lease's holder, live or not ("": never leased).
	Holder string `json:"holder,omitempty"`
	// Epoch is the lease's epoch (the fencing token).
	Epoch uint64 `json:"epoch,omitempty"`
	// Expires is the lease's expiry by the database's clock, and
	// ExpiresIn the seconds left until then (negative: expired).
	Expires   *time.Time `json:"expires,omitempty"`
	ExpiresIn float64    `json:"expires_in_seconds"`
	// Ownerless: no live replica holds the lease.
	Ownerless bool `json:"ownerless"`
	// OwnerlessSince and Alert are the watch's (set by a replica's view
	// only): since when it has been ownerless as far as this replica
	// saw, and whether that is longer than twice the lease TTL.
	OwnerlessSince *time.Time `json:"ownerless_since,omitempty"`
	Alert          bool       `json:"alert,omitempty"`
}

// ReplicaInfo is one live replica.
type ReplicaInfo struct {
	ID   string `json:"id"`
	Info string `json:"info,omitempty"`
	// Started is its first heartbeat, by the database's clock.
	Started time.Time `json:"started"`
	// LastHeartbeat is its heartbeat's expiry less the reader's lease TTL
	// (replicas of one fleet share --lease-ttl); zero when the reader
	// does not know the TTL.
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	// HeartbeatExpires is when it drops out unless it heartbeats again,
	// and ExpiresIn the seconds left until then.
	HeartbeatExpires time.Time `json:"heartbeat_expires"`
	ExpiresIn        float64   `json:"expires_in_seconds"`
	// Leases counts the stack set leases it holds.
	Leases int `json:"leases"`
}

// ReadOwners reads who owns names (and only them: the lease of a stack set
// deleted since is not shown) in st, a shared state. ttl, if known, dates
// the replicas' last heartbeats.
//
// Errors: state.ErrNotShared (a Badger state has no owners: one process
// runs every stack set), and those of the database.
func ReadOwners(st *state.Store, names []string, ttl time.Duration) (*Owners, error) {
	now, err := st.DBNow()
	if err != nil {
		return nil, err
	}
	leases, err := st.Leases()
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	members, err := st.Members()
	if err != nil {
		return nil, err
	}
	o := &Owners{Now: now, StackSets: []StackSetOwner{}, Replicas: make([]ReplicaInfo, 0, len(members))}
	live := make(map[string]int, len(members))
	for _, m := range members {
		ri := ReplicaInfo{ID: m.ID, Info: m.Info, Started: m.Started, HeartbeatExpires: m.Expires, ExpiresIn: seconds(m.Expires.Sub(now))}
		if ttl > 0 {
			lh := m.Expires.Add(-ttl)
			ri.LastHeartbeat = &lh
		}
		live[m.ID] = len(o.Replicas)
		o.Replicas = append(o.Replicas, ri)
	}
	byName := make(map[string]state.Lease, len(leases))
	for _, l := range leases {
		byName[l.StackSet] = l
	}
	if l, ok := byName[LeaderLease]; ok && l.Expires.After(now) {
		if _, ok := live[l.Holder]; ok {
			o.Leader = l.Holder
		}
	}
	names = slices.Clone(names)
	sort.Strings(names)
	for _, name := range slices.Compact(names) {
		so := StackSetOwner{StackSet: name, Ownerless: true}
		if l, ok := byName[name]; ok {
			exp := l.Expires
			so.Holder, so.Epoch, so.Expires, so.ExpiresIn = l.Holder, l.Epoch, &exp, seconds(exp.Sub(now))
			if i, ok := live[l.Holder]; ok && exp.After(now) {
				so.Owner, so.Ownerless = l.Holder, false
				o.Replicas[i].Leases++
			}
		}
		o.StackSets = append(o.StackSets, so)
	}
	return o, nil
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}

// OwnerlessAfter is how long a stack set may be without a live owner, in
// lease TTLs, before the watch raises its alert: one TTL passes normally
// before a dead owner's lease expires, and a take-over follows within a
// renewal period.
const OwnerlessAfter = 2

// Event types of the ownerless alert (internal/notify events).
const (
	// EventOwnerless: a stack set has had no live owner for more than
	// OwnerlessAfter × TTL; sent once per episode.
	EventOwnerless = notify.TypeStackSetOwnerless
	// EventOwnerRestored: a stack set an EventOwnerless was sent for has
	// a live owner again.
	EventOwnerRestored = notify.TypeStackSetOwnerRestored
)

// OwnerlessStackSet is a stack set of the alert: without a live owner for
// more than OwnerlessAfter × TTL. /readyz lists them.
type OwnerlessStackSet struct {
	StackSet string    `json:"stack_set"`
	Since    time.Time `json:"since"`
	// Holder is the lease's last holder ("" if never leased).
	Holder string `json:"holder,omitempty"`
}

// OwnerWatchOptions configure an OwnerWatch.
type OwnerWatchOptions struct {
	// Store is the shared state.
	Store *state.Store
	// Names lists the stack sets to watch (Reconciler.StackSetNames).
	Names func() ([]string, error)
	// TTL is the lease TTL: the view is read every TTL/3, and the alert
	// is raised past OwnerlessAfter × TTL.
	TTL time.Duration
	// Leader reports whether this replica sends the events (the fleet's
	// leader, so that one replica sends them). Nil: it always does.
	Leader func() bool
	// Events receives the alert's events. Nil: none.
	Events EventSink
	Log    zerolog.Logger
}

// OwnerWatch reads the owners every TTL/3 and keeps the alert: each
// replica watches (its /readyz shows the alert), and the leader sends the
// events, once per episode (an episode that outlives a change of leader
// may be sent again by the new one). Safe for concurrent use.
type OwnerWatch struct {
	o OwnerWatchOptions

	mu sync.Mutex
	// last is the latest view read (nil before the first).
	last *Owners
	// since is when each stack set without a live owner was first seen so
	// (or its lease expired, if earlier); sent those whose alert event
	// was sent.
	since map[string]time.Time
	sent  map[string]bool
}

// NewOwnerWatch returns a watch; Run it, or Check it.
func NewOwnerWatch(o OwnerWatchOptions) *OwnerWatch {
	if o.TTL <= 0 {
		o.TTL = DefaultLeaseTTL
	}
	return &OwnerWatch{o: o, since: map[string]time.Time{}, sent: map[string]bool{}}
}

// Run checks every TTL/3 until ctx ends.
func (w *OwnerWatch) Run(ctx context.Context) {
	t := time.NewTicker(w.o.TTL / 3)
	defer t.Stop()
	for {
		if err := w.Check(); err != nil && ctx.Err() == nil {
			w.o.Log.Warn().Err(err).Msg("cannot read the stack sets' owners")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check reads the owners now and updates the alert.
func (w *OwnerWatch) Check() error {
	names, err := w.o.Names()
	if err != nil {
		return err
	}
	v, err := ReadOwners(w.o.Store, names, w.o.TTL)
	if err != nil {
		return err
	}
	w.observe(v)
	return nil
}

// observe updates the alert from v, sending the events that are due.
func (w *OwnerWatch) observe(v *Owners) {
	leader := w.o.Leader == nil || w.o.Leader()
	var events []notify.Event
	w.mu.Lock()
	seen := make(map[string]bool, len(v.StackSets))
	for i := range v.StackSets {
		so := &v.StackSets[i]
		seen[so.StackSet] = true
		if !so.Ownerless {
			if w.sent[so.StackSet] && leader {
				events = append(events, notify.Event{Type: EventOwnerRestored, StackSet: so.StackSet, Time: v.Now,
					Reason: fmt.Sprintf("owned by replica %s (lease epoch %d)", so.Owner, so.Epoch)})
				delete(w.sent, so.StackSet)
			}
			delete(w.since, so.StackSet)
			continue
		}
		since, ok := w.since[so.StackSet]
		if !ok {
			since = v.Now
		}
		if so.Expires != nil && so.Expires.Before(since) {
			since = *so.Expires // known ownerless since its lease expired
		}
		w.since[so.StackSet] = since
		s := since
		so.OwnerlessSince = &s
		so.Alert = v.Now.Sub(since) > OwnerlessAfter*w.o.TTL
		if so.Alert && !w.sent[so.StackSet] && leader {
			events = append(events, notify.Event{Type: EventOwnerless, StackSet: so.StackSet, Time: v.Now,
				Reason: ownerlessReason(so, v.Now.Sub(since))})
			w.sent[so.StackSet] = true
		}
	}
	for name := range w.since {
		if !seen[name] {
			delete(w.since, name) // deleted: no longer watched
			delete(w.sent, name)
		}
	}
	w.last = v
	w.mu.Unlock()
	for _, e := range events {
		if e.Type == EventOwnerless {
			w.o.Log.Error().Str("stack_set", e.StackSet).Msg("stack set without a live owner: " + e.Reason)
		} else {
			w.o.Log.Info().Str("stack_set", e.StackSet).Msg("stack set has a live owner again: " + e.Reason)
		}
		if w.o.Events != nil {
			w.o.Events.Send(e)
		}
	}
}

// ownerlessReason says why so has no live owner.
func ownerlessReason(so *StackSetOwner, d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case so.Holder == "":
		return fmt.Sprintf("no replica has taken its lease for %s", d)
	case so.ExpiresIn <= 0:
		return fmt.Sprintf("its lease (epoch %d, last held by %s) expired and no replica has taken it for %s", so.Epoch, so.Holder, d)
	default:
		return fmt.Sprintf("its lease (epoch %d) is held by %s, which is no live replica, for %s", so.Epoch, so.Holder, d)
	}
}

// Last is the latest view read, with the alert (nil before the first
// Check). The caller must not change it.
func (w *OwnerWatch) Last() *Owners {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Ownerless lists the stack sets of the alert, by name.
func (w *OwnerWatch) Ownerless() []OwnerlessStackSet {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		return nil
	}
	var out []OwnerlessStackSet
	for _, so := range w.last.StackSets {
		if so.Alert {
			out = append(out, OwnerlessStackSet{StackSet: so.StackSet, Since: *so.OwnerlessSince, Holder: so.Holder})
		}
	}
	return out
}

// Annotate adds this watch's alert (as of its last Check) to v.
func (w *OwnerWatch) Annotate(v *Owners) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range v.StackSets {
		so := &v.StackSets[i]
		if !so.Ownerless {
			continue
		}
		if since, ok := w.since[so.StackSet]; ok {
			s := since
			so.OwnerlessSince = &s
			so.Alert = v.Now.Sub(since) > OwnerlessAfter*w.o.TTL
		}
	}
}

// Read reads the owners now, with the alert as last observed.
func (w *OwnerWatch) Read() (*Owners, error) {
	names, err := w.o.Names()
	if err != nil {
		return nil, err
	}
	v, err := ReadOwners(w.o.Store, names, w.o.TTL)
	if err != nil {
		return nil, err
	}
	w.Annotate(v)
	return v, nil
}

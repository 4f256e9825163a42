package reconciler

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/internal/pgtest"
	"github.com/stackd/stackd/state"
)

// TestReadOwners: on a real PostgreSQL state, a stack set is owned while
// its lease is unexpired and held by a live replica; a lease held by
// something that is no live replica, an expired or released one, and none
// at all are ownerless; only the stack sets asked about are shown, and the
// leader is the live holder of the leader lease.
func TestReadOwners(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	st, err := state.OpenPostgres(pg.NewDatabase(t), state.PostgresOptions{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Heartbeat("r1", "host-a v1", time.Minute))
	must(st.Heartbeat("r2", "host-b v1", time.Minute))
	acquire := func(ss, holder string) state.Lease {
		t.Helper()
		l, err := st.AcquireLease(ss, holder, time.Minute)
		must(err)
		return l
	}
	acquire("web", "r1")
	acquire("api", "ghost") // no live replica
	acquire("gone", "r2")   // not asked about
	acquire(LeaderLease, "r2")
	must(st.ReleaseLease(acquire("db", "r2")))

	v, err := ReadOwners(st, []string{"web", "api", "db", "queue", "web"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Set, Owner, Holder string
		Ownerless, Expired bool
	}
	var got []row
	for _, so := range v.StackSets {
		got = append(got, row{so.StackSet, so.Owner, so.Holder, so.Ownerless, so.Expires != nil && so.ExpiresIn <= 0})
	}
	want := []row{
		{"api", "", "ghost", true, false},
		{"db", "", "r2", true, true},
		{"queue", "", "", true, false},
		{"web", "r1", "r1", false, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
	if v.Leader != "r2" {
		t.Errorf("leader = %q, want r2", v.Leader)
	}
	var reps []string
	for _, r := range v.Replicas {
		reps = append(reps, r.ID)
		if r.LastHeartbeat == nil || r.LastHeartbeat.After(v.Now) || r.ExpiresIn <= 0 || r.Started.After(v.Now) {
			t.Errorf("replica %+v: want a last heartbeat, a start before now (%v) and a future expiry", r, v.Now)
		}
		if wantLeases := map[string]int{"r1": 1, "r2": 0}[r.ID]; r.Leases != wantLeases {
			t.Errorf("replica %s holds %d of the stack sets shown, want %d", r.ID, r.Leases, wantLeases)
		}
	}
	if !slices.Equal(reps, []string{"r1", "r2"}) {
		t.Errorf("replicas %v, want [r1 r2]", reps)
	}

	// r1 leaves: web is ownerless though its lease has not expired.
	must(st.Leave("r1"))
	v, err = ReadOwners(st, []string{"web"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if so := v.StackSets[0]; !so.Ownerless || so.Holder != "r1" || so.ExpiresIn <= 0 {
		t.Errorf("web after r1 left: %+v, want ownerless, held by r1, unexpired", so)
	}
	if v.Replicas[0].LastHeartbeat != nil {
		t.Errorf("without a TTL, the last heartbeat is unknown: %v", v.Replicas[0].LastHeartbeat)
	}
}

// TestReadOwnersNotShared: a Badger state has no owners.
func TestReadOwnersNotShared(t *testing.T) {
	t.Parallel()
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := ReadOwners(st, []string{"web"}, time.Minute); err == nil {
		t.Error("ReadOwners on Badger succeeded, want state.ErrNotShared")
	}
}

// eventLog is an EventSink that records.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Send(e notify.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e.Type+" "+e.StackSet)
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// TestOwnerWatchEpisodes: the alert of a stack set without a live owner
// is raised once it has lasted more than OwnerlessAfter × TTL (since the
// lease's expiry when that is known, else since first seen), sent once per
// episode and only by the leader, and "restored" follows when an owner is
// back; /readyz's list follows the alert.
func TestOwnerWatchEpisodes(t *testing.T) {
	const ttl = 10 * time.Second
	events := &eventLog{}
	leader := true
	w := NewOwnerWatch(OwnerWatchOptions{TTL: ttl, Events: events, Leader: func() bool { return leader }})
	t0 := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	owned := func(set string) StackSetOwner {
		return StackSetOwner{StackSet: set, Owner: "r1", Holder: "r1", Epoch: 3}
	}
	orphan := func(set string, expires time.Time, now time.Time) StackSetOwner {
		e := expires
		return StackSetOwner{StackSet: set, Holder: "r9", Epoch: 4, Expires: &e, ExpiresIn: e.Sub(now).Seconds(), Ownerless: true}
	}
	step := func(now time.Time, sets ...StackSetOwner) {
		t.Helper()
		w.observe(&Owners{Now: now, StackSets: sets})
	}
	alerts := func() []string {
		var out []string
		for _, o := range w.Ownerless() {
			out = append(out, o.StackSet)
		}
		return out
	}
	check := func(what string, wantAlerts, wantEvents []string) {
		t.Helper()
		if got := alerts(); !slices.Equal(got, wantAlerts) {
			t.Errorf("%s: alerts %v, want %v", what, got, wantAlerts)
		}
		if got := events.take(); !slices.Equal(got, wantEvents) {
			t.Errorf("%s: events %v, want %v", what, got, wantEvents)
		}
	}

	// api's lease (held by a dead replica) expires at t0+5s; web is owned.
	lease := t0.Add(5 * time.Second)
	step(t0, owned("web"), orphan("api", lease, t0))
	check("first seen", nil, nil)
	step(t0.Add(2*ttl), owned("web"), orphan("api", lease, t0.Add(2*ttl)))
	check("2×TTL since first seen: not more", nil, nil)
	step(t0.Add(2*ttl+time.Second), owned("web"), orphan("api", lease, t0.Add(2*ttl+time.Second)))
	check("past 2×TTL", []string{"api"}, []string{EventOwnerless + " api"})
	step(lease.Add(3*ttl), owned("web"), orphan("api", lease, lease.Add(3*ttl)))
	check("still ownerless", []string{"api"}, nil)
	step(lease.Add(4*ttl), owned("web"), owned("api"))
	check("taken over", nil, []string{EventOwnerRestored + " api"})

	// A new episode, seen first by a replica that is not the leader: no
	// event until it leads; a stack set without any lease counts from
	// when it was first seen.
	t1 := lease.Add(10 * ttl)
	never := StackSetOwner{StackSet: "db", Ownerless: true}
	leader = false
	step(t1, owned("web"), owned("api"), never)
	step(t1.Add(2*ttl+time.Second), owned("web"), owned("api"), never)
	check("not the leader", []string{"db"}, nil)
	leader = true
	step(t1.Add(3*ttl), owned("web"), owned("api"), never)
	check("leader now", []string{"db"}, []string{EventOwnerless + " db"})
	// db deleted: no longer watched, no restored event.
	step(t1.Add(4*ttl), owned("web"), owned("api"))
	check("deleted", nil, nil)
	// A lease that expired long before this replica first saw it: the
	// alert is raised at once.
	t2 := t1.Add(5 * ttl)
	step(t2, owned("web"), orphan("api", t2.Add(-3*ttl), t2))
	check("expired long ago", []string{"api"}, []string{EventOwnerless + " api"})
	if v := w.Last(); v == nil || len(v.StackSets) != 2 {
		t.Errorf("Last() = %+v, want the last view of 2 stack sets", v)
	}
}

// BenchmarkReadOwners: one read of the owners of 1,000 stack sets held by
// 3 replicas on a real PostgreSQL — what each replica's OwnerWatch does
// every TTL/3, and what GET /v1/owners costs.
func BenchmarkReadOwners(b *testing.B) {
	pg := pgtest.Start(b)
	st, err := state.OpenPostgres(pg.NewDatabase(b), state.PostgresOptions{MaxConns: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ids := []string{"r1", "r2", "r3"}
	for _, id := range ids {
		if err := st.Heartbeat(id, "bench", time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("set-%04d", i)
		if _, err := st.AcquireLease(names[i], ids[i%len(ids)], time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		v, err := ReadOwners(st, names, time.Hour)
		if err != nil || len(v.StackSets) != len(names) || v.StackSets[0].Ownerless {
			b.Fatalf("ReadOwners: %v", err)
		}
	}
}

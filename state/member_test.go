package state

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// openShared opens a store on dsn, closed after the test.
func openShared(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := OpenPostgres(dsn, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func memberIDs(ms []Member) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

func findMember(ms []Member, id string) (Member, bool) {
	for _, m := range ms {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// TestMembers: replicas on one database see each other's heartbeats, by
// id; a heartbeat refreshes the expiry and keeps the start; Leave removes
// a member at once.
func TestMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dsn := pgDatabase(t)
	a, b := openShared(t, dsn), openShared(t, dsn)
	if ms, err := a.Members(); err != nil || len(ms) != 0 {
		t.Fatalf("members of a new database: %v, %v", ms, err)
	}
	const ttl = time.Hour // long enough not to expire during the test
	if err := b.Heartbeat("replica-b", "host-b stackd 1.0 127.0.0.1:8081", ttl); err != nil {
		t.Fatal(err)
	}
	if err := a.Heartbeat("replica-a", "host-a stackd 1.0 127.0.0.1:8080", ttl); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		ms, err := s.Members()
		if err != nil {
			t.Fatal(err)
		}
		if got := memberIDs(ms); !slices.Equal(got, []string{"replica-a", "replica-b"}) {
			t.Fatalf("members = %v, want replica-a and replica-b, by id", got)
		}
		if ms[0].Info != "host-a stackd 1.0 127.0.0.1:8080" || ms[1].Info != "host-b stackd 1.0 127.0.0.1:8081" {
			t.Errorf("infos = %q, %q", ms[0].Info, ms[1].Info)
		}
		for _, m := range ms {
			if d := m.Expires.Sub(m.Started); d != ttl {
				t.Errorf("%s: expires %s after it started, want the ttl %s", m.ID, d, ttl)
			}
		}
	}
	now, err := a.DBNow()
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := a.Members()
	first, _ := findMember(ms, "replica-a")
	if now.Before(first.Started) || !now.Before(first.Expires) {
		t.Errorf("the database's now %s is not within replica-a's life %s .. %s", now, first.Started, first.Expires)
	}

	// A heartbeat moves the expiry from the database's now, keeps the
	// start, and takes new info.
	if err := a.Heartbeat("replica-a", "host-a stackd 1.1", 2*ttl); err != nil {
		t.Fatal(err)
	}
	ms, _ = b.Members()
	again, _ := findMember(ms, "replica-a")
	if !again.Started.Equal(first.Started) || !again.Expires.After(first.Expires) || again.Info != "host-a stackd 1.1" {
		t.Errorf("after a second heartbeat: %+v, first %+v; want the same start, a later expiry and the new info", again, first)
	}

	// Leave removes the member at once; leaving twice, or a replica
	// never seen, is not an error.
	if err := b.Leave("replica-b"); err != nil {
		t.Fatal(err)
	}
	if ms, _ := a.Members(); !slices.Equal(memberIDs(ms), []string{"replica-a"}) {
		t.Errorf("members after replica-b left = %v", memberIDs(ms))
	}
	for _, id := range []string{"replica-b", "never-seen"} {
		if err := a.Leave(id); err != nil {
			t.Errorf("Leave(%s): %v", id, err)
		}
	}
}

// TestMemberExpires: a replica that stops heartbeating drops out when its
// ttl has passed by the database's clock; its next heartbeat is a new
// start.
func TestMemberExpires(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dsn := pgDatabase(t)
	a, b := openShared(t, dsn), openShared(t, dsn)
	const ttl = 2 * time.Second
	before, err := b.DBNow()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Heartbeat("replica-a", "", ttl); err != nil {
		t.Fatal(err)
	}
	ms, err := b.Members()
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := b.DBNow(); now.Before(before.Add(ttl)) {
		// Listed before its ttl can have passed: it must be there.
		if _, ok := findMember(ms, "replica-a"); !ok {
			t.Fatalf("members within the ttl of replica-a's heartbeat = %v", memberIDs(ms))
		}
	}
	var started time.Time
	deadline := time.Now().Add(time.Minute)
	for {
		ms, err := b.Members()
		if err != nil {
			t.Fatal(err)
		}
		m, ok := findMember(ms, "replica-a")
		if !ok {
			break
		}
		started = m.Started
		if time.Now().After(deadline) {
			t.Fatalf("replica-a still a member a minute after its heartbeat of ttl %s: %+v", ttl, m)
		}
		time.Sleep(50 * time.Millisecond) // polling the database's clock, bounded by the deadline
	}
	now, err := b.DBNow()
	if err != nil {
		t.Fatal(err)
	}
	if now.Before(before.Add(ttl)) {
		t.Errorf("replica-a dropped out at %s, before its ttl of %s from %s passed", now, ttl, before)
	}
	if err := a.Heartbeat("replica-a", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	ms, _ = b.Members()
	m, ok := findMember(ms, "replica-a")
	if !ok || !m.Started.After(started) || m.Started.Before(now) {
		t.Errorf("after rejoining: %+v (found %v); want a start after %s", m, ok, now)
	}
}

// TestMemberInput: bad ids, infos and ttls are refused, nothing written.
func TestMemberInput(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	s := openShared(t, pgDatabase(t))
	for _, tc := range []struct {
		name, id, info string
		ttl            time.Duration
		want           error
	}{
		{"empty id", "", "x", time.Second, ErrInvalidKey},
		{"NUL in id", "a\x00b", "x", time.Second, ErrInvalidKey},
		{"long id", strings.Repeat("r", maxReplicaID+1), "x", time.Second, ErrInvalidKey},
		{"NUL in info", "a", "x\x00", time.Second, ErrInvalidKey},
		{"info not UTF-8", "a", "\xff\xfe", time.Second, ErrInvalidKey},
		{"long info", "a", strings.Repeat("i", maxMemberInfo+1), time.Second, ErrInvalidKey},
		{"zero ttl", "a", "x", 0, ErrInvalid},
		{"negative ttl", "a", "x", -time.Second, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Heartbeat(tc.id, tc.info, tc.ttl); !errors.Is(err, tc.want) {
				t.Errorf("Heartbeat: %v, want %v", err, tc.want)
			}
		})
	}
	if err := s.Leave(""); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Leave(\"\"): %v, want ErrInvalidKey", err)
	}
	if ms, err := s.Members(); err != nil || len(ms) != 0 {
		t.Errorf("members after refused heartbeats: %v, %v", ms, err)
	}
	s.Close()
	if err := s.Heartbeat("a", "", time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Heartbeat after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Members(); !errors.Is(err, ErrClosed) {
		t.Errorf("Members after Close: %v, want ErrClosed", err)
	}
}

// TestMembersNeedPostgres: a Badger state has no members and no
// database clock, and refuses no fenced write.
func TestMembersNeedPostgres(t *testing.T) {
	if testing.Short() || openedOnPostgres() {
		t.Skip("Badger only")
	}
	s := newStore(t)
	if err := s.Heartbeat("me", "", time.Second); !errors.Is(err, ErrNotShared) {
		t.Errorf("Heartbeat on Badger: %v, want ErrNotShared", err)
	}
	if err := s.Leave("me"); !errors.Is(err, ErrNotShared) {
		t.Errorf("Leave on Badger: %v, want ErrNotShared", err)
	}
	if _, err := s.Members(); !errors.Is(err, ErrNotShared) {
		t.Errorf("Members on Badger: %v, want ErrNotShared", err)
	}
	if _, err := s.DBNow(); !errors.Is(err, ErrNotShared) {
		t.Errorf("DBNow on Badger: %v, want ErrNotShared", err)
	}
	if n := s.FencedWritesRefused(); n != 0 {
		t.Errorf("FencedWritesRefused on Badger = %d", n)
	}
}

// TestFencedWritesRefused: every write of a fenced view refused for a
// lost lease counts once on the store the views were made of, across
// views; the new owner's store counts none.
func TestFencedWritesRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dsn := pgDatabase(t)
	a, b := openShared(t, dsn), openShared(t, dsn)
	ss := mustCreate(t, a, "web")
	la, err := a.AcquireLease(ss.ID, "replica-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fa, _ := a.Fenced(la)
	fa2, _ := a.Fenced(la)
	if err := fa.SetMeta("k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	op, _, err := a.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: "DeployStackSet", Revision: "r1", Status: "RUNNING", Created: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fa.AppendEvent(Event{OperationID: op.ID, Status: "INFO"}); err != nil {
		t.Fatal(err)
	}
	if n := a.FencedWritesRefused(); n != 0 {
		t.Fatalf("refusals while the lease is held = %d", n)
	}
	expireLease(t, dsn, ss.ID)
	lb, err := b.AcquireLease(ss.ID, "replica-b", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i, write := range []func() error{
		func() error { return fa.SetMeta("k", []byte("2")) },
		func() error { _, err := fa.AppendEvent(Event{OperationID: op.ID, Status: "INFO"}); return err },
		func() error { return fa2.SetMeta("k", []byte("3")) },
	} {
		if err := write(); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("write %d after the takeover: %v, want ErrLeaseLost", i, err)
		}
		if n := a.FencedWritesRefused(); n != uint64(i+1) {
			t.Errorf("after %d refused writes, FencedWritesRefused = %d", i+1, n)
		}
	}
	// Views report their parent's count; unfenced writes and the new
	// owner's fenced ones count nothing.
	if n := fa2.FencedWritesRefused(); n != 3 {
		t.Errorf("a view's FencedWritesRefused = %d, want its store's 3", n)
	}
	fb, _ := b.Fenced(lb)
	if err := fb.SetMeta("k", []byte("4")); err != nil {
		t.Fatal(err)
	}
	if err := a.SetMeta("unfenced", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if na, nb := a.FencedWritesRefused(), b.FencedWritesRefused(); na != 3 || nb != 0 {
		t.Errorf("FencedWritesRefused = %d (old owner), %d (new owner); want 3, 0", na, nb)
	}
}

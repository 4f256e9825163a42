package state

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// expireLease moves the expiry of ss's lease into the past: the
// database's clock, fast-forwarded, without waiting.
func expireLease(t *testing.T, dsn, ss string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE stackd_leases SET expires = clock_timestamp() - interval '1 second' WHERE stack_set = $1`, ss); err != nil {
		t.Fatal(err)
	}
}

// TestLeases: one holder at a time, epochs that only grow, and writes
// fenced by the lease in their own transaction.
func TestLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dsn := pgDatabase(t)
	open := func() *Store {
		s, err := OpenPostgres(dsn, PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	ss := mustCreate(t, a, "web")
	const ttl = time.Hour // expiry is moved by expireLease, not waited for

	before := time.Now()
	la, err := a.AcquireLease(ss.ID, "replica-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if la.Epoch != 1 || !la.Valid(time.Now()) || la.Deadline.Before(before.Add(ttl)) || la.Deadline.After(time.Now().Add(ttl)) {
		t.Errorf("first lease = %+v, want epoch 1 and a deadline one TTL after the request", la)
	}
	if la.Valid(before.Add(ttl + time.Second)) {
		t.Error("the lease is valid past its deadline")
	}
	if _, err := b.AcquireLease(ss.ID, "replica-b", ttl); !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), "replica-a") {
		t.Errorf("acquire of a held lease: %v, want ErrLeaseHeld naming replica-a", err)
	}
	if la, err = a.RenewLease(la, ttl); err != nil || la.Epoch != 1 {
		t.Fatalf("renew: %+v, %v", la, err)
	}
	fa, err := a.Fenced(la)
	if err != nil {
		t.Fatal(err)
	}
	if err := fa.SetMeta("owner-write", []byte("1")); err != nil {
		t.Fatalf("fenced write while held: %v", err)
	}

	// The lease expires (by the database's clock); b takes it over.
	expireLease(t, dsn, ss.ID)
	lb, err := b.AcquireLease(ss.ID, "replica-b", ttl)
	if err != nil || lb.Epoch != 2 {
		t.Fatalf("takeover: %+v, %v; want epoch 2", lb, err)
	}
	// a's writes, renewals and events are refused now; nothing is written.
	if err := fa.SetMeta("stale-write", []byte("1")); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("fenced write after a takeover: %v, want ErrLeaseLost", err)
	}
	if _, err := a.Meta("stale-write"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused write was stored: %v", err)
	}
	op, _, err := a.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: "DeployStackSet", Revision: "r1", Status: "RUNNING", Created: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fa.AppendEvent(Event{OperationID: op.ID, Status: "INFO"}); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("fenced event after a takeover: %v, want ErrLeaseLost", err)
	}
	if evs, _ := a.Events(op.ID); len(evs) != 0 {
		t.Errorf("the refused event was stored: %v", evs)
	}
	if _, err := a.RenewLease(la, ttl); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("renew after a takeover: %v, want ErrLeaseLost", err)
	}
	fb, err := b.Fenced(lb)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := fb.AppendEvent(Event{OperationID: op.ID, Status: "INFO"}); err != nil || ev.Seq != 1 {
		t.Errorf("the new owner's event: %+v, %v", ev, err)
	}
	// Releasing a's old lease changes nothing; b's release frees it at
	// once, and the next holder's epoch is greater still.
	if err := a.ReleaseLease(la); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AcquireLease(ss.ID, "replica-a", ttl); !errors.Is(err, ErrLeaseHeld) {
		t.Errorf("acquire after a stale release: %v, want ErrLeaseHeld", err)
	}
	if err := b.ReleaseLease(lb); err != nil {
		t.Fatal(err)
	}
	if err := fb.SetMeta("after-release", []byte("1")); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("fenced write after release: %v, want ErrLeaseLost", err)
	}
	la3, err := a.AcquireLease(ss.ID, "replica-a", ttl)
	if err != nil || la3.Epoch != 3 {
		t.Errorf("acquire after release: %+v, %v; want epoch 3", la3, err)
	}
	ls, err := b.Leases()
	if err != nil || len(ls) != 1 || ls[0].Holder != "replica-a" || ls[0].Epoch != 3 {
		t.Errorf("Leases = %+v, %v", ls, err)
	}
	// Closing a fenced view leaves its store open.
	fa.Close()
	if _, err := a.StackSetByName("web"); err != nil {
		t.Errorf("the store after closing a fenced view: %v", err)
	}
}

// TestLeaseOneHolder: replicas racing for free leases get one holder each.
func TestLeaseOneHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dsn := pgDatabase(t)
	stores := make([]*Store, 3)
	for i := range stores {
		s, err := OpenPostgres(dsn, PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	for round := range 20 {
		ss := mustCreate(t, stores[0], "set-"+itoa(round))
		var wg sync.WaitGroup
		won := make([]bool, len(stores))
		for i, s := range stores {
			wg.Go(func() {
				_, err := s.AcquireLease(ss.ID, "replica-"+itoa(i), time.Hour)
				switch {
				case err == nil:
					won[i] = true
				case !errors.Is(err, ErrLeaseHeld):
					t.Errorf("AcquireLease: %v", err)
				}
			})
		}
		wg.Wait()
		n := 0
		for _, w := range won {
			if w {
				n++
			}
		}
		if n != 1 {
			t.Errorf("round %d: %d replicas hold the lease, want 1", round, n)
		}
	}
}

// TestLeasesNeedPostgres: a Badger state has no leases.
func TestLeasesNeedPostgres(t *testing.T) {
	if testing.Short() || openedOnPostgres() {
		t.Skip("Badger only")
	}
	s := newStore(t)
	if _, err := s.AcquireLease("x", "me", time.Second); !errors.Is(err, ErrNotShared) {
		t.Errorf("AcquireLease on Badger: %v, want ErrNotShared", err)
	}
	if _, err := s.Fenced(Lease{}); !errors.Is(err, ErrNotShared) {
		t.Errorf("Fenced on Badger: %v, want ErrNotShared", err)
	}
}

// TestFencedWritesStopAtTakeover: an owner writing in a loop while its
// lease expires and another replica takes over: once the takeover
// returns, no write of the old owner lands (its in-flight write, if any,
// committed before the takeover did).
func TestFencedWritesStopAtTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dsn := pgDatabase(t)
	a, err := OpenPostgres(dsn, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenPostgres(dsn, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ss := mustCreate(t, a, "web")
	la, err := a.AcquireLease(ss.ID, "replica-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fa, err := a.Fenced(la)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan int)
	go func() {
		i := 0
		for ; ; i++ {
			if i == 5 {
				close(started)
			}
			err := fa.SetMeta("counter", []byte(itoa(i)))
			if errors.Is(err, ErrLeaseLost) {
				break
			}
			if err != nil {
				t.Errorf("fenced write %d: %v", i, err)
				break
			}
		}
		done <- i
	}()
	<-started
	expireLease(t, dsn, ss.ID)
	if _, err := b.AcquireLease(ss.ID, "replica-b", time.Hour); err != nil {
		t.Fatal(err)
	}
	atTakeover, err := b.Meta("counter")
	if err != nil {
		t.Fatal(err)
	}
	refused := <-done
	final, err := b.Meta("counter")
	if err != nil {
		t.Fatal(err)
	}
	if string(final) != string(atTakeover) {
		t.Errorf("counter was %s at the takeover and %s after: the old owner wrote after losing its lease", atTakeover, final)
	}
	if string(final) != itoa(refused-1) {
		t.Errorf("the last write that succeeded was %d, the state holds %s", refused-1, final)
	}
}

package state

import (
	"context"
	"testing"
	"time"

	"github.com/stackd/stackd/internal/pgtest"
)

// BenchmarkWakeUp measures what a replica's wake-up and membership cost
// on PostgreSQL (a throwaway local cluster on 127.0.0.1): a notification
// from one store until another store's listener has it (Notify's round
// trip, the server's delivery, the listener's read and queue), and one
// heartbeat of a live member; Badger's in-process notification for
// comparison.
//
// Measured on the reference machine (2 cores, shared with other builds;
// -benchtime 200x -count 5; median, range):
//
//	postgres/NotifyToListener   149 (113-205) µs
//	badger/NotifyToListener     1.6 (0.95-2.8) µs
//	postgres/Heartbeat          171 (103-277) µs
//	postgres/Members3           127 (44-201) µs
//
// A wake-up across replicas is thus about one round trip: far below the
// lease TTL/3 tick it shortcuts.
func BenchmarkWakeUp(b *testing.B) {
	c := pgtest.Start(b)
	dsn := c.NewDatabase(b)
	open := func(b *testing.B) *Store {
		s, err := OpenPostgres(dsn, PostgresOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	roundTrip := func(b *testing.B, from, to *Store) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch, err := to.Listen(ctx, ChannelResponse)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			want := "req-" + itoa(i)
			if err := from.Notify(ChannelResponse, want); err != nil {
				b.Fatal(err)
			}
			for p := range ch {
				if p == want {
					break
				}
			}
		}
	}
	b.Run("postgres/NotifyToListener", func(b *testing.B) {
		roundTrip(b, open(b), open(b))
	})
	b.Run("badger/NotifyToListener", func(b *testing.B) {
		s := benchStore(b, SyncWrites)
		roundTrip(b, s, s)
	})
	b.Run("postgres/Heartbeat", func(b *testing.B) {
		s := open(b)
		for b.Loop() {
			if err := s.Heartbeat("replica-a", "host-a", time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("postgres/Members3", func(b *testing.B) {
		s := open(b)
		for _, id := range []string{"replica-a", "replica-b", "replica-c"} {
			if err := s.Heartbeat(id, "host", time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			if ms, err := s.Members(); err != nil || len(ms) != 3 {
				b.Fatal(ms, err)
			}
		}
	})
}

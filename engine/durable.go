package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stackd/stackd/engine/provider"
)

// syncJournal holds back what a journal records after the calls of a
// provider.Syncer (the file provider writes without fsync) until those
// calls are durable: its flush makes one Sync per such provider for the
// instance and only then passes the held records on, in order. Records
// written before a call (Pending*) go through at once, so the journal
// always knows a call may have started; a record of another provider goes
// through at once too, unless records of its address are held (order per
// address is kept).
//
// So a resource the journal records as done is on disk, and a crash before
// the flush leaves it pending: the resumed operation repeats the call with
// the same RequestID (create-or-verify), which rewrites what the crash may
// have lost.
type syncJournal struct {
	j        Journal
	target   provider.Target
	syncerOf func(typ string) provider.Syncer
	// types are the resource types of addresses seen in Save, so a Remove
	// (which has only the address) is held when its resource's is.
	types map[string]string
	held  []heldWrite
	// heldAddrs counts the held records per address.
	heldAddrs map[string]int
	// syncers are the providers to Sync before the held records go on,
	// in the order first used.
	syncers []provider.Syncer
	// synced, if set, is told how long each Sync took.
	synced func(time.Duration)
}

// heldWrite is a held Save (rec) or Remove (remove, the address).
type heldWrite struct {
	rec    *ResourceState
	remove string
}

func newSyncJournal(j Journal, target provider.Target, syncerOf func(string) provider.Syncer) *syncJournal {
	return &syncJournal{j: j, target: target, syncerOf: syncerOf, types: map[string]string{}, heldAddrs: map[string]int{}}
}

// hold reports whether a record of address (of type typ) written after a
// call is held, and notes the provider to Sync.
func (s *syncJournal) hold(address, typ string) bool {
	if sy := s.syncerOf(typ); sy != nil {
		if !slices.Contains(s.syncers, sy) {
			s.syncers = append(s.syncers, sy)
		}
		return true
	}
	return s.heldAddrs[address] > 0
}

func (s *syncJournal) Save(ctx context.Context, r ResourceState) error {
	s.types[r.Address] = r.Type
	if IsPending(r.Status) {
		if s.heldAddrs[r.Address] > 0 {
			// A new call on a resource whose last one is not yet durable
			// (a replacement's delete, then its create): settle first.
			if err := s.flush(ctx); err != nil {
				return err
			}
		}
		return s.j.Save(ctx, r)
	}
	if !s.hold(r.Address, r.Type) {
		return s.j.Save(ctx, r)
	}
	s.held = append(s.held, heldWrite{rec: &r})
	s.heldAddrs[r.Address]++
	return nil
}

func (s *syncJournal) Remove(ctx context.Context, address string) error {
	if !s.hold(address, s.types[address]) {
		return s.j.Remove(ctx, address)
	}
	s.held = append(s.held, heldWrite{remove: address})
	s.heldAddrs[address]++
	return nil
}

// flush makes the held calls durable (one Sync per provider) and passes
// their records on. When a Sync fails nothing held is recorded: those
// resources stay pending and the next operation repeats their calls.
func (s *syncJournal) flush(ctx context.Context) error {
	if len(s.held) == 0 {
		return nil
	}
	for _, sy := range s.syncers {
		began := time.Now()
		err := sy.Sync(ctx, s.target)
		if s.synced != nil {
			s.synced(time.Since(began))
		}
		if err != nil {
			return fmt.Errorf("make what the provider did durable: %w", err)
		}
	}
	var errs []error
	for _, w := range s.held {
		if w.rec != nil {
			errs = append(errs, s.j.Save(ctx, *w.rec))
		} else {
			errs = append(errs, s.j.Remove(ctx, w.remove))
		}
	}
	s.held, s.syncers = s.held[:0], s.syncers[:0]
	clear(s.heldAddrs)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// IsPending reports whether a journal status is one of the Pending*
// statuses written before a provider call.
func IsPending(status string) bool {
	return status == StatusPendingCreate || status == StatusPendingUpdate || status == StatusPendingDelete
}

package state

import (
	"errors"
	"fmt"
	"time"
)

// Leases (docs/design.md §13): on a shared PostgreSQL state, each stack set has at
// most one owner, the holder of its lease row (holder, epoch, expiry set by
// the database's clock). AcquireLease takes a free or expired lease with
// the next epoch; RenewLease extends it while it is still held;
// ReleaseLease gives it up at once. A store made with Fenced commits its
// writes only while its lease is held with the same epoch, checked in the
// same transaction as the write (a taker's acquisition waits for that
// transaction, so no write of an old owner commits after a new owner took
// over). Lease rows are runtime, not state: backups do not carry them.
//
// The owner also fences itself: Lease.Deadline is on the owner's monotonic
// clock, taken before the request that set the expiry, so it passes before
// the database's expiry does; an owner that has not renewed by then must
// stop calling providers for the stack set.

// Errors of leases.
var (
	// ErrNotShared: leases exist only on a shared (PostgreSQL) state.
	ErrNotShared = errors.New("leases need a shared state (--state-url, PostgreSQL)")
	// ErrLeaseHeld: another holder has the lease, and it has not expired.
	ErrLeaseHeld = errors.New("lease held by another replica")
	// ErrLeaseLost: the lease is no longer held with this epoch (expired,
	// released, or taken over); a fenced write was not committed.
	ErrLeaseLost = errors.New("lease lost")
)

// Lease is one holder's lease of a stack set.
type Lease struct {
	// StackSet is what the lease is of (a stack set id).
	StackSet string
	// Holder names the replica; it must be unique per process.
	Holder string
	// Epoch grows by one with every acquisition: the fencing token.
	Epoch uint64
	// Expires is the expiry by the database's clock.
	Expires time.Time
	// Deadline is when the holder must consider the lease lost unless it
	// renewed it: the local (monotonic) time before the request that set
	// Expires, plus the TTL.
	Deadline time.Time
}

// Valid reports whether the holder may still act on the lease at now (a
// time.Now() reading, so monotonic).
func (l Lease) Valid(now time.Time) bool { return now.Before(l.Deadline) }

// leaser is a backend with leases.
type leaser interface {
	acquireLease(ss, holder string, ttl time.Duration) (Lease, error)
	renewLease(l Lease, ttl time.Duration) (Lease, error)
	releaseLease(l Lease) error
	leases() ([]Lease, error)
	// updateFenced is update, committed only while l is held.
	updateFenced(l Lease, fn func(kvTxn) error) error
}

func (s *Store) leaser() (leaser, error) {
	l, ok := s.kv.(leaser)
	if !ok {
		return nil, ErrNotShared
	}
	return l, nil
}

// AcquireLease takes the lease of stack set ss for holder for ttl if it is
// free, expired or already holder's, with the next epoch.
//
// Errors: ErrLeaseHeld (wrapped, naming the holder and the expiry),
// ErrNotShared, ErrInvalidKey, ErrClosed.
func (s *Store) AcquireLease(ss, holder string, ttl time.Duration) (Lease, error) {
	if err := checkComponent("stack set id", ss); err != nil {
		return Lease{}, err
	}
	if err := checkLast("lease holder", holder); err != nil {
		return Lease{}, err
	}
	b, err := s.leaser()
	if err != nil {
		return Lease{}, err
	}
	l, err := b.acquireLease(ss, holder, ttl)
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease of stack set %s: %w", ss, err)
	}
	return l, nil
}

// RenewLease extends l by ttl from now if it is still held with its epoch.
//
// Errors: ErrLeaseLost, ErrNotShared, ErrClosed.
func (s *Store) RenewLease(l Lease, ttl time.Duration) (Lease, error) {
	b, err := s.leaser()
	if err != nil {
		return Lease{}, err
	}
	nl, err := b.renewLease(l, ttl)
	if err != nil {
		return Lease{}, fmt.Errorf("renew lease of stack set %s (epoch %d): %w", l.StackSet, l.Epoch, err)
	}
	return nl, nil
}

// ReleaseLease gives l up at once (a replica leaving); the epoch stays,
// so the next holder gets a greater one. A release notifies ChannelLease
// (payload: the stack set id) when it commits, so the other replicas
// rebalance at once. Releasing a lease no longer held is not an error
// (and notifies no one).
//
// Errors: ErrNotShared, ErrClosed.
func (s *Store) ReleaseLease(l Lease) error {
	b, err := s.leaser()
	if err != nil {
		return err
	}
	if err := b.releaseLease(l); err != nil {
		return fmt.Errorf("release lease of stack set %s: %w", l.StackSet, err)
	}
	return nil
}

// Leases lists every lease row (held, expired or released), by stack set.
//
// Errors: ErrNotShared, ErrClosed.
func (s *Store) Leases() ([]Lease, error) {
	b, err := s.leaser()
	if err != nil {
		return nil, err
	}
	return b.leases()
}

// Fenced returns a view of s whose writes commit only while l is held with
// its epoch (ErrLeaseLost otherwise, nothing written); reads are s's.
// Closing the view does not close s.
//
// Errors of the view's writes: ErrLeaseLost (wrapped), and those of s.
func (s *Store) Fenced(l Lease) (*Store, error) {
	if _, err := s.leaser(); err != nil {
		return nil, err
	}
	return &Store{kv: s.kv, key: s.key, stop: make(chan struct{}), fence: &l, parent: s}, nil
}

// FencedWhile is Fenced, with valid asked before every write: while it
// reports false (the holder's own clock says the lease may be lost, or the
// holder gave it up), writes are refused with ErrLeaseLost before they
// reach the database. The database's check still decides every write
// valid lets through.
func (s *Store) FencedWhile(l Lease, valid func() bool) (*Store, error) {
	f, err := s.Fenced(l)
	if err != nil {
		return nil, err
	}
	f.fenceValid = valid
	return f, nil
}

// checkFence refuses a write of a fenced view whose holder considers its
// lease lost.
func (s *Store) checkFence() error {
	if s.fenceValid != nil && !s.fenceValid() {
		return fmt.Errorf("lease of stack set %s (epoch %d): %w", s.fence.StackSet, s.fence.Epoch, ErrLeaseLost)
	}
	return nil
}

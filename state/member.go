package state

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Membership (docs/design.md §13): on a shared PostgreSQL state, every
// replica heartbeats a member row (id, info, first heartbeat, expiry by the
// database's clock) every TTL/3 or so; the live members are those whose
// expiry is after the database's now, and they share the stack sets. A
// replica that leaves (SIGTERM) removes its row at once; one that dies
// drops out at its expiry. A member that joins (its first heartbeat, or
// one after its row expired) and one that leaves notify ChannelLease, so
// the others rebalance at once rather than at their next heartbeat; a
// member that dies notifies no one, and is seen gone by the next
// rebalance after its expiry. Member rows are runtime, not state: backups
// do not carry them.

// Member is one live replica of a shared state (§13).
type Member struct {
	ID      string    // unique per process (e.g. host-pid-random)
	Info    string    // free text shown by status --owners: host name, version, listen address
	Started time.Time // by the database clock, at the first heartbeat
	Expires time.Time // by the database clock
}

const (
	// maxReplicaID bounds a replica's id (bytes): it travels in
	// notifications.
	maxReplicaID = 256
	// maxMemberInfo bounds Member.Info (bytes).
	maxMemberInfo = 1024
	// memberForget is how long after its expiry a dead member's row is
	// deleted (by the heartbeat of another).
	memberForget = time.Hour
)

// memberBackend is a backend with membership (PostgreSQL).
type memberBackend interface {
	// heartbeat upserts the row of id; joined reports a new member (no
	// row, or an expired one), whose join was notified on ChannelLease
	// in the same statement.
	heartbeat(id, info string, ttl time.Duration) (joined bool, err error)
	// leave deletes the row of id, notifying ChannelLease if it was live.
	leave(id string) error
	members() ([]Member, error)
	dbNow() (time.Time, error)
}

func (s *Store) members() (memberBackend, error) {
	m, ok := s.kv.(memberBackend)
	if !ok {
		return nil, ErrNotShared
	}
	return m, nil
}

// memberPayload is the ChannelLease payload of a member that joined or
// left.
func memberPayload(id string) string { return "member:" + id }

// checkReplicaID validates a replica's id: non-empty, no NUL, at most
// maxReplicaID bytes.
func checkReplicaID(id string) error {
	if err := checkLast("replica id", id); err != nil {
		return err
	}
	if len(id) > maxReplicaID {
		return fmt.Errorf("%w: replica id is %d bytes long (at most %d)", ErrInvalidKey, len(id), maxReplicaID)
	}
	return nil
}

// Heartbeat records (or refreshes) replica id as live until now+ttl by the
// database clock. The first heartbeat of id (or the first after its row
// expired) is a join: Started is set, and ChannelLease is notified.
//
// Errors: ErrNotShared, ErrInvalidKey (an id that is empty, has NUL or is
// longer than 256 bytes; info with NUL, not UTF-8 or longer than 1,024
// bytes), ErrInvalid (a ttl that is not positive),
// ErrClosed.
func (s *Store) Heartbeat(id, info string, ttl time.Duration) error {
	if err := checkReplicaID(id); err != nil {
		return err
	}
	if len(info) > maxMemberInfo || strings.ContainsRune(info, 0) || !utf8.ValidString(info) {
		return fmt.Errorf("%w: the info of replica %s must be UTF-8 text without NUL of at most %d bytes", ErrInvalidKey, id, maxMemberInfo)
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: heartbeat ttl %s is under a millisecond", ErrInvalid, ttl)
	}
	b, err := s.members()
	if err != nil {
		return err
	}
	if _, err := b.heartbeat(id, info, ttl); err != nil {
		return fmt.Errorf("heartbeat of replica %s: %w", id, err)
	}
	return nil
}

// Leave removes replica id from the members at once (a replica leaving on
// SIGTERM), notifying ChannelLease. Not an error if absent.
//
// Errors: ErrNotShared, ErrInvalidKey, ErrClosed.
func (s *Store) Leave(id string) error {
	if err := checkReplicaID(id); err != nil {
		return err
	}
	b, err := s.members()
	if err != nil {
		return err
	}
	if err := b.leave(id); err != nil {
		return fmt.Errorf("replica %s leaving: %w", id, err)
	}
	return nil
}

// Members lists the live replicas (expiry after the database's now), by
// ID.
//
// Errors: ErrNotShared, ErrClosed.
func (s *Store) Members() ([]Member, error) {
	b, err := s.members()
	if err != nil {
		return nil, err
	}
	ms, err := b.members()
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	return ms, nil
}

// DBNow is the database clock's now (to compare lease expiries with, in
// status).
//
// Errors: ErrNotShared (a Badger state has no database clock to share),
// ErrClosed.
func (s *Store) DBNow() (time.Time, error) {
	b, err := s.members()
	if err != nil {
		return time.Time{}, err
	}
	now, err := b.dbNow()
	if err != nil {
		return time.Time{}, fmt.Errorf("read the database's clock: %w", err)
	}
	return now, nil
}

// fenceCounter is a backend that counts the fenced writes it refused.
type fenceCounter interface {
	fencedWritesRefused() uint64
}

// FencedWritesRefused counts the writes of Fenced views of s (all of
// them, past and present) refused with ErrLeaseLost since s was opened:
// stackd_fenced_writes_total. Always 0 on Badger, which has no leases.
func (s *Store) FencedWritesRefused() uint64 {
	if fc, ok := s.kv.(fenceCounter); ok {
		return fc.fencedWritesRefused()
	}
	return 0
}

package state

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/google/uuid"
)

// NewOperationID returns a new operation id: a UUID v7, whose string form
// sorts by creation time, so op/<ss-id>/ keys list oldest first.
func NewOperationID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// checkOperation validates the keys an operation is stored under.
func checkOperation(op Operation) error {
	if err := checkComponent("operation id", op.ID); err != nil {
		return err
	}
	return checkComponent("stack set id", op.StackSetID)
}

// putOperation writes op and its id index, refusing to move an existing
// operation to another stack set.
func putOperation(txn kvTxn, op Operation) error {
	owner, err := getRaw(txn, operationIDKey(op.ID))
	switch {
	case err == nil && string(owner) != op.StackSetID:
		return fmt.Errorf("%w: operation belongs to stack set %s, not %s", ErrInvalid, owner, op.StackSetID)
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	if err := putRecord(txn, operationKey(op.StackSetID, op.ID), op); err != nil {
		return err
	}
	return txn.Set(operationIDKey(op.ID), []byte(op.StackSetID))
}

// PutOperation creates or replaces operation op (op/ record and opid/
// index). It does not register op.Revision: use ClaimOperation to create an
// operation keyed by (stack set, revision). The stack set need not exist any
// more (the final update of a DeleteStackSet operation comes after it).
//
// Errors: ErrInvalid (wrapped) if op.ID is recorded under another stack set,
// ErrInvalidKey, ErrConflict, ErrClosed.
func (s *Store) PutOperation(op Operation) error {
	if err := checkOperation(op); err != nil {
		return err
	}
	err := s.update(func(txn kvTxn) error { return putOperation(txn, op) })
	if err != nil {
		return fmt.Errorf("put operation %s: %w", op.ID, err)
	}
	return nil
}

// EndOperation records a finished operation and its stack set's record
// (ss, which names op in LastOperation) in one transaction, so a crash
// never leaves an operation ended while its stack set still shows the
// one before it.
//
// Errors: as PutOperation and PutStackSet; ErrInvalid (wrapped) if ss is
// not op's stack set.
func (s *Store) EndOperation(op Operation, ss StackSet) error {
	if err := checkOperation(op); err != nil {
		return err
	}
	if ss.ID != op.StackSetID {
		return fmt.Errorf("%w: operation %s belongs to stack set %s, not %s", ErrInvalid, op.ID, op.StackSetID, ss.ID)
	}
	err := s.update(func(txn kvTxn) error {
		if err := putOperation(txn, op); err != nil {
			return err
		}
		return putStackSet(txn, ss)
	})
	if err != nil {
		return fmt.Errorf("end operation %s: %w", op.ID, err)
	}
	return nil
}

// Operation returns the operation with id.
//
// Errors: ErrNotFound, ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) Operation(id string) (Operation, error) {
	if err := checkComponent("operation id", id); err != nil {
		return Operation{}, err
	}
	var op Operation
	err := s.view(func(txn kvTxn) error {
		ssID, err := getRaw(txn, operationIDKey(id))
		if err != nil {
			return err
		}
		op, err = getRecord[Operation](txn, operationKey(string(ssID), id))
		return err
	})
	if err != nil {
		return Operation{}, fmt.Errorf("operation %s: %w", id, err)
	}
	return op, nil
}

// Operations returns the operations of stack set ssID in key order, which is
// oldest first for ids from NewOperationID. Operations of a deleted stack set
// are still listed.
//
// Errors: ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) Operations(ssID string) ([]Operation, error) {
	if err := checkComponent("stack set id", ssID); err != nil {
		return nil, err
	}
	var out []Operation
	err := s.view(func(txn kvTxn) error {
		var err error
		out, err = scanRecords[Operation](txn, operationsPrefix(ssID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("operations of stack set %s: %w", ssID, err)
	}
	return out, nil
}

// OperationsByStatus returns the operations of all stack sets whose status
// is one of statuses (all operations if none is given), sorted by id (oldest
// first for ids from NewOperationID). It reads every operation record.
//
// Errors: ErrCorrupt, ErrClosed.
func (s *Store) OperationsByStatus(statuses ...string) ([]Operation, error) {
	var out []Operation
	err := s.view(func(txn kvTxn) error {
		out = nil
		return scan(txn, []byte(prefixOperation), func(key, val []byte) error {
			if len(statuses) > 0 {
				// Decode the status alone first: most records do not match.
				var st struct {
					Status string `json:"status"`
				}
				if err := decode(val, &st); err != nil {
					return fmt.Errorf("%q: %w", key, err)
				}
				if !slices.Contains(statuses, st.Status) {
					return nil
				}
			}
			var op Operation
			if err := decode(val, &op); err != nil {
				return fmt.Errorf("%q: %w", key, err)
			}
			out = append(out, op)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("operations by status: %w", err)
	}
	slices.SortStableFunc(out, func(a, b Operation) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// OperationForRevision returns the operation registered (by ClaimOperation)
// for stack set ssID at revision.
//
// Errors: ErrNotFound, ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) OperationForRevision(ssID, revision string) (Operation, error) {
	if err := checkComponent("stack set id", ssID); err != nil {
		return Operation{}, err
	}
	if err := checkLast("revision", revision); err != nil {
		return Operation{}, err
	}
	var op Operation
	err := s.view(func(txn kvTxn) error {
		opID, err := getRaw(txn, operationRevisionKey(ssID, revision))
		if err != nil {
			return err
		}
		op, err = getRecord[Operation](txn, operationKey(ssID, string(opID)))
		return err
	})
	if err != nil {
		return Operation{}, fmt.Errorf("operation of stack set %s at %s: %w", ssID, revision, err)
	}
	return op, nil
}

// ClaimOperation is create-or-verify for the operation of (op.StackSetID,
// op.Revision, or op.Claim when set): if one is registered, it returns (existing, false, nil);
// otherwise it stores op, its id index and the revision key in one
// transaction and returns (op, true, nil). Of concurrent callers for one
// revision exactly one gets true.
//
// Errors: ErrExists if op.ID is already used by another operation,
// ErrNotFound if the revision key points at a missing operation,
// ErrInvalidKey (op.Revision must be set), ErrConflict, ErrClosed.
func (s *Store) ClaimOperation(op Operation) (Operation, bool, error) {
	if err := checkOperation(op); err != nil {
		return Operation{}, false, err
	}
	if err := checkLast("revision", op.Revision); err != nil {
		return Operation{}, false, err
	}
	claim := op.Revision
	if op.Claim != "" {
		claim = op.Claim
	}
	var (
		got     Operation
		created bool
	)
	err := s.update(func(txn kvTxn) error {
		got, created = Operation{}, false
		revKey := operationRevisionKey(op.StackSetID, claim)
		opID, err := getRaw(txn, revKey)
		if err == nil {
			got, err = getRecord[Operation](txn, operationKey(op.StackSetID, string(opID)))
			if err != nil {
				return fmt.Errorf("operation %s: %w", opID, err)
			}
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		taken, err := exists(txn, operationIDKey(op.ID))
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("operation id %s: %w", op.ID, ErrExists)
		}
		if err := putOperation(txn, op); err != nil {
			return err
		}
		if err := txn.Set(revKey, []byte(op.ID)); err != nil {
			return err
		}
		got, created = op, true
		return nil
	})
	if err != nil {
		return Operation{}, false, fmt.Errorf("claim operation of stack set %s at %s: %w", op.StackSetID, op.Revision, err)
	}
	return got, created, nil
}

// AppendEvent appends ev to the event log of operation ev.OperationID,
// assigning the next sequence number (1 for the first event); a zero ev.Time
// is set to the current time. The operation must exist. Safe for concurrent
// use: concurrent appends get distinct sequence numbers, and become
// visible in their order, with no gaps unless an append fails.
//
// Appends of one operation are pipelined: the sequence number is taken
// and the commit queued under the operation's lock, and the wait for the
// commit happens outside it, so hundreds of instances reporting at once
// share Badger's write batches instead of queueing one commit at a time.
//
// Errors: ErrNotFound if the operation does not exist, ErrInvalidKey,
// ErrNoSpace, ErrClosed.
func (s *Store) AppendEvent(ev Event) (Event, error) {
	if err := checkComponent("operation id", ev.OperationID); err != nil {
		return Event{}, err
	}
	if err := s.checkSpace(); err != nil {
		return Event{}, err
	}
	if err := s.checkFence(); err != nil {
		return Event{}, err
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	fail := func(err error) (Event, error) {
		return Event{}, fmt.Errorf("append event to operation %s: %w", ev.OperationID, err)
	}
	if ea, ok := s.kv.(eventAppender); ok {
		seq, err := ea.appendEvent(s.fence, operationIDKey(ev.OperationID), eventsPrefix(ev.OperationID), func(seq uint64) ([]byte, []byte, error) {
			ev.Seq = seq
			b, err := encode(ev)
			return eventKey(ev.OperationID, seq), b, err
		})
		if err != nil {
			return fail(err)
		}
		ev.Seq = seq
		return ev, nil
	}
	// A write-only transaction: it cannot conflict, so the number taken is
	// the one committed. It is made before the lock is taken: making one
	// waits until the commits before it are applied (its read timestamp),
	// which under the lock made every event of an operation wait for the
	// writes of all the others.
	txn := s.db.NewTransaction(true)
	stripe := &s.events[stripe(ev.OperationID)]
	stripe.mu.Lock()
	seq, err := s.nextEventSeq(stripe, ev.OperationID)
	if err != nil {
		stripe.mu.Unlock()
		txn.Discard()
		return fail(err)
	}
	ev.Seq = seq
	b, err := encode(ev)
	if err != nil {
		stripe.mu.Unlock()
		txn.Discard()
		return fail(err)
	}
	if err := txn.Set(eventKey(ev.OperationID, ev.Seq), b); err != nil {
		txn.Discard()
		delete(stripe.next, ev.OperationID)
		stripe.mu.Unlock()
		return fail(convertErr(err))
	}
	done := make(chan error, 1)
	txn.CommitWith(func(err error) { done <- err })
	stripe.mu.Unlock()
	if err := <-done; err != nil {
		stripe.mu.Lock()
		delete(stripe.next, ev.OperationID) // read the log again next time
		stripe.mu.Unlock()
		return fail(convertErr(err))
	}
	return ev, nil
}

// nextEventSeq takes the next sequence number of operation opID: from the
// stripe's counter, or (the first time, or after a failed append) from
// the log after checking that the operation exists. The caller holds
// stripe.mu.
func (s *Store) nextEventSeq(stripe *eventStripe, opID string) (uint64, error) {
	last, ok := stripe.next[opID]
	if !ok {
		err := s.view(func(txn kvTxn) error {
			found, err := exists(txn, operationIDKey(opID))
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("operation: %w", ErrNotFound)
			}
			last = lastEventSeq(txn, opID)
			return nil
		})
		if err != nil {
			return 0, err
		}
		if stripe.next == nil {
			stripe.next = map[string]uint64{}
		}
	}
	stripe.next[opID] = last + 1
	return last + 1, nil
}

// lastEventSeq returns the highest sequence number recorded for opID, or 0.
func lastEventSeq(txn kvTxn, opID string) uint64 {
	prefix := eventsPrefix(opID)
	k, err := txn.Last(prefix)
	if err != nil || len(k) != len(prefix)+8 {
		return 0
	}
	return binary.BigEndian.Uint64(k[len(prefix):])
}

// eventAppender is a backend that numbers an operation's events itself
// (several stores share it, so the store's counters cannot): appendEvent
// takes the next number after the operation's last event, writes what
// build makes of it, and commits, with appends of one operation
// serialised until their commit; with a fence, only while that lease is
// held. Errors: ErrNotFound (wrapped) if opIDKey does not exist,
// ErrLeaseLost.
type eventAppender interface {
	appendEvent(fence *Lease, opIDKey, prefix []byte, build func(seq uint64) (key, val []byte, err error)) (uint64, error)
}

func stripe(id string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % eventLocks)
}

// Events returns the event log of operation opID ordered by sequence number.
//
// Errors: ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) Events(opID string) ([]Event, error) {
	if err := checkComponent("operation id", opID); err != nil {
		return nil, err
	}
	var out []Event
	err := s.view(func(txn kvTxn) error {
		var err error
		out, err = scanRecords[Event](txn, eventsPrefix(opID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("events of operation %s: %w", opID, err)
	}
	return out, nil
}

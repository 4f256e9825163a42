package state

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// CreateStackSet records a new stack set named name with a fresh random (v4)
// id and status ACTIVE. The record and its name index are written in one
// transaction; of concurrent creates of one name exactly one succeeds.
//
// Errors: ErrExists if a stack set of that name exists, ErrInvalidKey for an
// empty name or one containing NUL, ErrConflict, ErrClosed.
func (s *Store) CreateStackSet(name string, now time.Time) (StackSet, error) {
	return s.CreateStackSetWithID(name, uuid.NewString(), now)
}

// CreateStackSetWithID is CreateStackSet with an id chosen by the caller
// (a fresh uuid, chosen before planning so plans can use stack_set.id). It
// returns ErrExists if the name or the id is taken, ErrInvalid for an id
// that is not a uuid.
func (s *Store) CreateStackSetWithID(name, id string, now time.Time) (StackSet, error) {
	if err := checkLast("stack set name", name); err != nil {
		return StackSet{}, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return StackSet{}, fmt.Errorf("stack set id %q: %w", id, ErrInvalid)
	}
	ss := StackSet{
		ID:      id,
		Name:    name,
		Created: now.Round(0), // strip the monotonic reading: stored as written
		Status:  StackSetActive,
	}
	err := s.update(func(txn kvTxn) error {
		taken, err := exists(txn, stackSetNameKey(name))
		if err != nil {
			return err
		}
		if taken {
			return fmt.Errorf("stack set %q: %w", name, ErrExists)
		}
		if used, err := exists(txn, stackSetKey(ss.ID)); err != nil {
			return err
		} else if used {
			return fmt.Errorf("stack set id %s: %w", ss.ID, ErrExists)
		}
		if err := putRecord(txn, stackSetKey(ss.ID), ss); err != nil {
			return err
		}
		return txn.Set(stackSetNameKey(name), []byte(ss.ID))
	})
	if err != nil {
		return StackSet{}, err
	}
	return ss, nil
}

// StackSet returns the stack set with id.
//
// Errors: ErrNotFound, ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) StackSet(id string) (StackSet, error) {
	if err := checkComponent("stack set id", id); err != nil {
		return StackSet{}, err
	}
	var ss StackSet
	err := s.view(func(txn kvTxn) error {
		var err error
		ss, err = getRecord[StackSet](txn, stackSetKey(id))
		return err
	})
	if err != nil {
		return StackSet{}, fmt.Errorf("stack set %s: %w", id, err)
	}
	return ss, nil
}

// StackSetByName returns the stack set currently named name.
//
// Errors: ErrNotFound, ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) StackSetByName(name string) (StackSet, error) {
	if err := checkLast("stack set name", name); err != nil {
		return StackSet{}, err
	}
	var ss StackSet
	err := s.view(func(txn kvTxn) error {
		id, err := getRaw(txn, stackSetNameKey(name))
		if err != nil {
			return err
		}
		ss, err = getRecord[StackSet](txn, stackSetKey(string(id)))
		return err
	})
	if err != nil {
		return StackSet{}, fmt.Errorf("stack set %q: %w", name, err)
	}
	return ss, nil
}

// PutStackSet updates an existing stack set (found by ss.ID). Its name
// cannot change.
//
// Errors: ErrNotFound if ss.ID does not exist, ErrInvalid (wrapped) if
// ss.Name differs from the recorded name, ErrInvalidKey, ErrCorrupt,
// ErrConflict, ErrClosed.
func (s *Store) PutStackSet(ss StackSet) error {
	if err := checkComponent("stack set id", ss.ID); err != nil {
		return err
	}
	err := s.update(func(txn kvTxn) error { return putStackSet(txn, ss) })
	if err != nil {
		return fmt.Errorf("put stack set %s: %w", ss.ID, err)
	}
	return nil
}

// putStackSet replaces the existing stack set ss.ID, refusing a rename.
func putStackSet(txn kvTxn, ss StackSet) error {
	old, err := getRecord[StackSet](txn, stackSetKey(ss.ID))
	if err != nil {
		return err
	}
	if old.Name != ss.Name {
		return fmt.Errorf("%w: cannot rename %q to %q", ErrInvalid, old.Name, ss.Name)
	}
	return putRecord(txn, stackSetKey(ss.ID), ss)
}

// ListStackSets returns all stack sets sorted by name.
//
// Errors: ErrCorrupt, ErrClosed.
func (s *Store) ListStackSets() ([]StackSet, error) {
	var out []StackSet
	err := s.view(func(txn kvTxn) error {
		var err error
		out, err = scanRecords[StackSet](txn, []byte(prefixStackSet))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list stack sets: %w", err)
	}
	slices.SortFunc(out, func(a, b StackSet) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// DeleteStackSet removes the stack set id, its name index, and all its
// instances and resources, in one transaction. If that does not fit into one
// transaction, it deletes instance by instance (first the resources, then the
// instance) over several transactions and the stack set and its name last, so
// a partial delete is still consistent. Operations, events and revision keys
// stay as history.
//
// Errors: ErrNotFound, ErrInvalidKey, ErrConflict, ErrClosed.
func (s *Store) DeleteStackSet(id string) error {
	if err := checkComponent("stack set id", id); err != nil {
		return err
	}
	err := s.deleteInOrder(func(txn kvTxn) (keys, final [][]byte, err error) {
		ss, err := getRecord[StackSet](txn, stackSetKey(id))
		if err != nil {
			return nil, nil, err
		}
		keys = instanceDeleteOrder(
			scanKeys(txn, instancesPrefix(id)),
			scanKeys(txn, stackSetResourcesPrefix(id)),
		)
		final = [][]byte{stackSetKey(id)}
		// Only remove the name index if it still points at this stack set.
		if owner, err := getRaw(txn, stackSetNameKey(ss.Name)); err == nil && string(owner) == id {
			final = append(final, stackSetNameKey(ss.Name))
		}
		return keys, final, nil
	})
	if err != nil {
		return fmt.Errorf("delete stack set %s: %w", id, err)
	}
	return nil
}

// instanceDeleteOrder orders instance and resource keys of one stack set for
// deletion: resources without an instance first, then for each instance its
// resources followed by the instance itself.
func instanceDeleteOrder(instKeys, resKeys [][]byte) [][]byte {
	byInst := make(map[string][][]byte, len(instKeys))
	for _, k := range instKeys {
		byInst[string(k)] = nil
	}
	var out [][]byte
	for _, k := range resKeys {
		p, ok := splitKey(k, prefixResource, 4)
		if ok {
			ik := string(instanceKey(p[0], p[1], p[2]))
			if _, has := byInst[ik]; has {
				byInst[ik] = append(byInst[ik], k)
				continue
			}
		}
		out = append(out, k) // orphan
	}
	for _, k := range instKeys {
		out = append(out, byInst[string(k)]...)
		out = append(out, k)
	}
	return out
}

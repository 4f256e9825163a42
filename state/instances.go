package state

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Instance returns the instance (ssID, region, account).
//
// Errors: ErrNotFound, ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) Instance(ssID, region, account string) (Instance, error) {
	if err := checkInstanceKey(ssID, region, account); err != nil {
		return Instance{}, err
	}
	var in Instance
	err := s.view(func(txn kvTxn) error {
		var err error
		in, err = getRecord[Instance](txn, instanceKey(ssID, region, account))
		return err
	})
	if err != nil {
		return Instance{}, fmt.Errorf("instance %s/%s of stack set %s: %w", region, account, ssID, err)
	}
	return in, nil
}

// Instances returns all instances of stack set ssID sorted by region, then
// account. A stack set without instances (or an unknown one) gives none.
//
// Errors: ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) Instances(ssID string) ([]Instance, error) {
	if err := checkComponent("stack set id", ssID); err != nil {
		return nil, err
	}
	var out []Instance
	err := s.view(func(txn kvTxn) error {
		var err error
		out, err = scanRecords[Instance](txn, instancesPrefix(ssID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("instances of stack set %s: %w", ssID, err)
	}
	// Key order is not (region, account) order: "eu-west/" sorts before "eu/".
	slices.SortFunc(out, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(a.Region, b.Region), cmp.Compare(a.Account, b.Account))
	})
	return out, nil
}

// PutInstance creates or replaces the instance (in.StackSetID, in.Region,
// in.Account). Its stack set must exist.
//
// Errors: ErrNotFound if the stack set does not exist, ErrInvalidKey,
// ErrConflict, ErrClosed.
func (s *Store) PutInstance(in Instance) error {
	return s.PutInstances([]Instance{in})
}

// PutInstances creates or replaces many instances, committing as many per
// transaction as fit. It is not atomic: on an error, an unspecified prefix of
// ins has been written. All keys are validated before anything is written,
// and every instance's stack set must exist.
//
// Errors: ErrNotFound if a stack set does not exist, ErrInvalidKey,
// ErrConflict, ErrClosed.
func (s *Store) PutInstances(ins []Instance) error {
	for _, in := range ins {
		if err := checkInstanceKey(in.StackSetID, in.Region, in.Account); err != nil {
			return err
		}
	}
	for start := 0; start < len(ins); {
		n := 0
		err := s.update(func(txn kvTxn) error {
			n = 0
			checked := map[string]bool{}
			for _, in := range ins[start:] {
				if !checked[in.StackSetID] {
					ok, err := exists(txn, stackSetKey(in.StackSetID))
					if err != nil {
						return err
					}
					if !ok {
						return fmt.Errorf("stack set %s: %w", in.StackSetID, ErrNotFound)
					}
					checked[in.StackSetID] = true
				}
				err := putRecord(txn, instanceKey(in.StackSetID, in.Region, in.Account), in)
				if errors.Is(err, ErrTooLarge) && n > 0 {
					return nil // commit what fits; the next round goes on
				}
				if err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("put instances: %w", err)
		}
		start += n
	}
	return nil
}

// WriteInstance writes the instance record in and applies writes to its
// resources, in order, in one transaction: the end of an instance's apply
// records its status together with the journal's last records. Its stack
// set must exist.
//
// Errors: ErrNotFound if the stack set does not exist, ErrInvalidKey,
// ErrTxnTooBig-wrapped errors when the writes do not fit, ErrConflict,
// ErrClosed.
func (s *Store) WriteInstance(in Instance, writes []ResourceWrite) error {
	if err := checkInstanceKey(in.StackSetID, in.Region, in.Account); err != nil {
		return err
	}
	for _, w := range writes {
		addr := w.Delete
		if w.Resource != nil {
			addr = w.Resource.Address
		}
		if err := checkResourceKey(in.StackSetID, in.Region, in.Account, addr); err != nil {
			return err
		}
	}
	err := s.update(func(txn kvTxn) error {
		ok, err := exists(txn, stackSetKey(in.StackSetID))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("stack set %s: %w", in.StackSetID, ErrNotFound)
		}
		for _, w := range writes {
			key := resourceKey(in.StackSetID, in.Region, in.Account, w.Delete)
			if w.Resource != nil {
				key = resourceKey(in.StackSetID, in.Region, in.Account, w.Resource.Address)
				if err := putRecord(txn, key, *w.Resource); err != nil {
					return err
				}
				continue
			}
			if err := txn.Delete(key); err != nil {
				return err
			}
		}
		return putRecord(txn, instanceKey(in.StackSetID, in.Region, in.Account), in)
	})
	if err != nil {
		return fmt.Errorf("write instance %s/%s of stack set %s with %d resources: %w", in.Region, in.Account, in.StackSetID, len(writes), err)
	}
	return nil
}

// DeleteInstance removes the instance (ssID, region, account) and all its
// resources in one transaction (over several, resources first, only if they
// do not fit into one).
//
// Errors: ErrNotFound if the instance does not exist (resources recorded
// under it without an instance record are removed all the same),
// ErrInvalidKey, ErrConflict, ErrClosed.
func (s *Store) DeleteInstance(ssID, region, account string) error {
	if err := checkInstanceKey(ssID, region, account); err != nil {
		return err
	}
	missing := false
	err := s.deleteInOrder(func(txn kvTxn) (keys, final [][]byte, err error) {
		ok, err := exists(txn, instanceKey(ssID, region, account))
		if err != nil {
			return nil, nil, err
		}
		missing = !ok
		keys = scanKeys(txn, resourcesPrefix(ssID, region, account))
		if ok {
			final = [][]byte{instanceKey(ssID, region, account)}
		}
		return keys, final, nil
	})
	if err == nil && missing {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete instance %s/%s of stack set %s: %w", region, account, ssID, err)
	}
	return nil
}

// checkResourceKey validates the components naming a resource.
func checkResourceKey(ssID, region, account, address string) error {
	if err := checkInstanceKey(ssID, region, account); err != nil {
		return err
	}
	return checkLast("resource address", address)
}

// Resources returns the resources of one instance sorted by address.
//
// Errors: ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) Resources(ssID, region, account string) ([]Resource, error) {
	if err := checkInstanceKey(ssID, region, account); err != nil {
		return nil, err
	}
	var out []Resource
	err := s.view(func(txn kvTxn) error {
		var err error
		// Addresses are the last key component: key order is address order.
		out, err = scanRecords[Resource](txn, resourcesPrefix(ssID, region, account))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("resources of %s/%s of stack set %s: %w", region, account, ssID, err)
	}
	return out, nil
}

// PutResource creates or replaces resource r.Address of one instance. The
// instance must exist. This is the resource journal: write the Pending*
// record before a provider action starts and the settled one after it ends.
// The write survives a crash of the process when PutResource returns; see SyncWrites.
//
// Errors: ErrNotFound if the instance does not exist, ErrInvalidKey (for an
// empty address or one containing NUL), ErrConflict, ErrClosed.
func (s *Store) PutResource(ssID, region, account string, r Resource) error {
	if err := checkResourceKey(ssID, region, account, r.Address); err != nil {
		return err
	}
	err := s.update(func(txn kvTxn) error {
		ok, err := exists(txn, instanceKey(ssID, region, account))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("instance: %w", ErrNotFound)
		}
		return putRecord(txn, resourceKey(ssID, region, account, r.Address), r)
	})
	if err != nil {
		return fmt.Errorf("put resource %s of %s/%s of stack set %s: %w", r.Address, region, account, ssID, err)
	}
	return nil
}

// DeleteResource removes one resource of one instance.
//
// Errors: ErrNotFound if it does not exist, ErrInvalidKey, ErrConflict,
// ErrClosed.
func (s *Store) DeleteResource(ssID, region, account, address string) error {
	if err := checkResourceKey(ssID, region, account, address); err != nil {
		return err
	}
	key := resourceKey(ssID, region, account, address)
	err := s.update(func(txn kvTxn) error {
		ok, err := exists(txn, key)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		return txn.Delete(key)
	})
	if err != nil {
		return fmt.Errorf("delete resource %s of %s/%s of stack set %s: %w", address, region, account, ssID, err)
	}
	return nil
}

// ResourceWrite is one change of WriteResources: Put the Resource when it
// is set, else Delete the resource at Address (a missing one is fine).
type ResourceWrite struct {
	Resource *Resource
	Delete   string
}

// WriteResources applies writes to one instance's resources in order, in
// one transaction (the journal of one instance writes this way: a pending
// record together with the settled records before it). It returns
// ErrNotFound if the instance does not exist, ErrInvalidKey for a bad
// address, ErrTxnTooBig-wrapped errors when the batch does not fit.
func (s *Store) WriteResources(ssID, region, account string, writes []ResourceWrite) error {
	for _, w := range writes {
		addr := w.Delete
		if w.Resource != nil {
			addr = w.Resource.Address
		}
		if err := checkResourceKey(ssID, region, account, addr); err != nil {
			return err
		}
	}
	err := s.update(func(txn kvTxn) error {
		ok, err := exists(txn, instanceKey(ssID, region, account))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("instance: %w", ErrNotFound)
		}
		for _, w := range writes {
			if w.Resource != nil {
				if err := putRecord(txn, resourceKey(ssID, region, account, w.Resource.Address), *w.Resource); err != nil {
					return err
				}
				continue
			}
			if err := txn.Delete(resourceKey(ssID, region, account, w.Delete)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write %d resources of %s/%s of stack set %s: %w", len(writes), region, account, ssID, err)
	}
	return nil
}

// InstanceDrift is a drift check's result for one instance (SetDrift).
type InstanceDrift struct {
	Region, Account string
	Drift           *Drift
}

// SetDrift records drift checks of instances of stack set ssID, each in
// its instance record, read and written in one transaction per batch (an
// operation writing the same record meanwhile makes the batch retry, never
// lost). Instances that no longer exist are skipped.
//
// Errors: ErrInvalidKey, ErrClosed.
func (s *Store) SetDrift(ssID string, drifts []InstanceDrift) error {
	for _, d := range drifts {
		if err := checkInstanceKey(ssID, d.Region, d.Account); err != nil {
			return err
		}
	}
	const batch = 256 // instances per transaction: well below Badger's limits
	for start := 0; start < len(drifts); start += batch {
		part := drifts[start:min(start+batch, len(drifts))]
		err := s.update(func(txn kvTxn) error {
			for _, d := range part {
				key := instanceKey(ssID, d.Region, d.Account)
				in, err := getRecord[Instance](txn, key)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				in.Drift = d.Drift
				if err := putRecord(txn, key, in); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("record drift of stack set %s: %w", ssID, err)
		}
	}
	return nil
}

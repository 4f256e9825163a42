package state

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// PutIdem is create-or-verify for idempotency key key: if key is new it
// stores value and returns (true, nil, nil); otherwise it stores nothing and
// returns (false, the stored value, nil). Of concurrent callers for one key
// exactly one gets true.
//
// Errors: ErrInvalidKey (empty key or one containing NUL), ErrConflict,
// ErrClosed.
func (s *Store) PutIdem(key string, value []byte) (created bool, existing []byte, err error) {
	if err := checkLast("idempotency key", key); err != nil {
		return false, nil, err
	}
	k := idemKey(key)
	err = s.update(func(txn kvTxn) error {
		created, existing = false, nil
		old, err := getOpaque(txn, k)
		if err == nil {
			existing = old
			return nil
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
		created = true
		return txn.Set(k, encodeRaw(value))
	})
	if err != nil {
		return false, nil, fmt.Errorf("put idempotency key %q: %w", key, err)
	}
	return created, existing, nil
}

// Idem returns the value stored for idempotency key key.
//
// Errors: ErrNotFound, ErrInvalidKey, ErrClosed.
func (s *Store) Idem(key string) ([]byte, error) {
	if err := checkLast("idempotency key", key); err != nil {
		return nil, err
	}
	return s.getRawValue(idemKey(key), "idempotency key", key)
}

// SetMeta stores value under metadata key key, replacing any previous value.
//
// Errors: ErrInvalidKey, ErrConflict, ErrClosed.
func (s *Store) SetMeta(key string, value []byte) error {
	if err := checkLast("meta key", key); err != nil {
		return err
	}
	err := s.update(func(txn kvTxn) error {
		return txn.Set(metaKey(key), encodeRaw(value))
	})
	if err != nil {
		return fmt.Errorf("set meta %q: %w", key, err)
	}
	return nil
}

// CreateOrGetMeta sets metadata key to fresh unless it holds a value, in
// one transaction, and returns the value it holds afterwards: processes
// sharing a state (several replicas starting at once) agree on the first
// value created (a key made at start, e.g. a signing key). Metadata, not a
// record: a state holding only such keys still takes a restore.
//
// Errors: ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) CreateOrGetMeta(key string, fresh []byte) ([]byte, error) {
	if err := checkLast("meta key", key); err != nil {
		return nil, err
	}
	var out []byte
	err := s.update(func(txn kvTxn) error {
		cur, err := getOpaque(txn, metaKey(key))
		switch {
		case err == nil:
			out = cur
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		out = fresh
		return txn.Set(metaKey(key), encodeRaw(fresh))
	})
	if err != nil {
		return nil, fmt.Errorf("create or get meta %q: %w", key, err)
	}
	return out, nil
}

// Meta returns the value of metadata key key.
//
// Errors: ErrNotFound, ErrInvalidKey, ErrClosed.
func (s *Store) Meta(key string) ([]byte, error) {
	if err := checkLast("meta key", key); err != nil {
		return nil, err
	}
	return s.getRawValue(metaKey(key), "meta", key)
}

// getOpaque reads a caller's opaque value stored with encodeRaw.
// Errors: ErrNotFound, ErrCorrupt.
func getOpaque(txn kvTxn, key []byte) ([]byte, error) {
	b, err := txn.Get(key)
	if err != nil {
		return nil, err
	}
	return decodeRaw(b)
}

func (s *Store) getRawValue(k []byte, what, name string) ([]byte, error) {
	var v []byte
	err := s.view(func(txn kvTxn) error {
		var err error
		v, err = getOpaque(txn, k)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, name, err)
	}
	return v, nil
}

// PutResourceType is create-or-verify for resource type rt.Name (the
// Placement rule of docs/design.md §8): if it is new, it stores rt and returns (rt,
// true, nil); otherwise it returns (the recorded type, false, nil). Of
// concurrent callers for one name exactly one gets true. The store does not
// check the name's syntax beyond the key rules.
//
// Errors: ErrInvalidKey, ErrCorrupt, ErrConflict, ErrClosed.
func (s *Store) PutResourceType(rt ResourceType) (ResourceType, bool, error) {
	if err := checkLast("resource type", rt.Name); err != nil {
		return ResourceType{}, false, err
	}
	var (
		got     ResourceType
		created bool
	)
	err := s.update(func(txn kvTxn) error {
		var err error
		got, err = getRecord[ResourceType](txn, resourceTypeKey(rt.Name))
		created = errors.Is(err, ErrNotFound)
		if !created {
			return err
		}
		got = rt
		return putRecord(txn, resourceTypeKey(rt.Name), rt)
	})
	if err != nil {
		return ResourceType{}, false, fmt.Errorf("put resource type %q: %w", rt.Name, err)
	}
	return got, created, nil
}

// ResourceType returns the registered resource type name.
//
// Errors: ErrNotFound, ErrInvalidKey, ErrCorrupt, ErrClosed.
func (s *Store) ResourceType(name string) (ResourceType, error) {
	if err := checkLast("resource type", name); err != nil {
		return ResourceType{}, err
	}
	var rt ResourceType
	err := s.view(func(txn kvTxn) error {
		var err error
		rt, err = getRecord[ResourceType](txn, resourceTypeKey(name))
		return err
	})
	if err != nil {
		return ResourceType{}, fmt.Errorf("resource type %q: %w", name, err)
	}
	return rt, nil
}

// ResourceTypes returns all registered resource types sorted by name.
//
// Errors: ErrCorrupt, ErrClosed.
func (s *Store) ResourceTypes() ([]ResourceType, error) {
	var out []ResourceType
	err := s.view(func(txn kvTxn) error {
		var err error
		out, err = scanRecords[ResourceType](txn, []byte(prefixResourceType))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list resource types: %w", err)
	}
	slices.SortFunc(out, func(a, b ResourceType) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteResourceType removes resource type name from the registry. Whether
// a template still uses it is the caller's check (ResourceTypeInUse).
//
// Errors: ErrNotFound, ErrInvalidKey, ErrConflict, ErrClosed.
func (s *Store) DeleteResourceType(name string) error {
	if err := checkLast("resource type", name); err != nil {
		return err
	}
	k := resourceTypeKey(name)
	err := s.update(func(txn kvTxn) error {
		ok, err := exists(txn, k)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		return txn.Delete(k)
	})
	if err != nil {
		return fmt.Errorf("delete resource type %q: %w", name, err)
	}
	return nil
}

// MetaKeys lists the metadata keys that start with prefix, sorted.
func (s *Store) MetaKeys(prefix string) ([]string, error) {
	var keys []string
	err := s.view(func(txn kvTxn) error {
		return txn.Scan(metaKey(prefix), true, func(k, _ []byte) error {
			keys = append(keys, strings.TrimPrefix(string(k), prefixMeta))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list meta keys %q: %w", prefix, err)
	}
	return keys, nil
}

// DeleteMeta removes a metadata key; a missing key is not an error.
func (s *Store) DeleteMeta(key string) error {
	if err := checkLast("meta key", key); err != nil {
		return err
	}
	return s.update(func(txn kvTxn) error { return txn.Delete(metaKey(key)) })
}

package state

// The store's logic (records, indexes, create-or-verify claims, the
// journal's rules, Check, backups) runs on a transactional key-value
// backend: Badger in a directory (kv_badger.go), or a PostgreSQL table
// (kv_postgres.go). The backend knows keys and values as bytes and nothing
// of records; the Store knows records and nothing of the backend but this
// interface.

// kvTxn is one transaction of a backend. Reads see the transaction's own
// writes. In a read-write transaction every read is tracked: a concurrent
// transaction committing a write to something this one read makes this one
// fail with ErrConflict (wrapped) when it commits, and the store retries
// it.
type kvTxn interface {
	// Get returns the value at key (a copy the caller may keep).
	// Errors: ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Set writes val at key. Errors: ErrTooLarge (wrapped) when the
	// transaction cannot take more writes (Badger only).
	Set(key, val []byte) error
	// Delete removes key; a missing key is not an error.
	Delete(key []byte) error
	// Scan calls fn for every key with prefix (all keys for an empty
	// prefix), in key order (bytewise). key and val are only valid during
	// the call; with keysOnly, val is nil. fn may call the transaction's
	// other methods.
	Scan(prefix []byte, keysOnly bool, fn func(key, val []byte) error) error
	// Last returns a copy of the greatest key with prefix, or nil if
	// there is none.
	Last(prefix []byte) ([]byte, error)
}

// backend is where the store keeps its keys and values.
type backend interface {
	// update runs fn in one read-write transaction and commits it, once:
	// a conflict is returned as ErrConflict (wrapped), and retrying is the
	// store's job. Errors are converted to the package's sentinels.
	update(fn func(kvTxn) error) error
	// view runs fn in one read-only transaction that sees one snapshot.
	view(fn func(kvTxn) error) error
	// sync makes every committed write durable.
	sync() error
	// closed reports whether the backend was closed.
	closed() bool
	// close releases the backend.
	close() error
}

// prefixEnd returns the smallest key greater than every key with prefix,
// or nil when there is none (an empty prefix, or one of 0xff bytes only).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

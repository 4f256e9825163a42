package state

import (
	"bytes"

	"github.com/dgraph-io/badger/v4"
)

// badgerBackend is the embedded backend: one Badger database in the state
// directory. Everything Badger-specific beyond this (damage checks, value-
// log GC, encryption at rest, restore into a directory) stays with Open,
// Close and Restore.
type badgerBackend struct{ db *badger.DB }

var (
	_ backend = badgerBackend{}
	_ kvTxn   = badgerTxn{}
)

func (b badgerBackend) update(fn func(kvTxn) error) error {
	return convertErr(b.db.Update(func(txn *badger.Txn) error { return fn(badgerTxn{txn}) }))
}

func (b badgerBackend) view(fn func(kvTxn) error) error {
	return convertErr(b.db.View(func(txn *badger.Txn) error { return fn(badgerTxn{txn}) }))
}

func (b badgerBackend) sync() error  { return b.db.Sync() }
func (b badgerBackend) closed() bool { return b.db.IsClosed() }
func (b badgerBackend) close() error { return b.db.Close() }

// badgerTxn is a kvTxn on a Badger transaction.
type badgerTxn struct{ txn *badger.Txn }

func (t badgerTxn) Get(key []byte) ([]byte, error) {
	item, err := t.txn.Get(key)
	if err != nil {
		return nil, convertErr(err)
	}
	return item.ValueCopy(nil)
}

func (t badgerTxn) Set(key, val []byte) error { return convertErr(t.txn.Set(key, val)) }

func (t badgerTxn) Delete(key []byte) error { return convertErr(t.txn.Delete(key)) }

func (t badgerTxn) Scan(prefix []byte, keysOnly bool, fn func(key, val []byte) error) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	// Values are read one at a time for a whole-database scan (backups,
	// Check): prefetching 100 of them could hold 100 large values in
	// memory at once.
	opts.PrefetchValues = !keysOnly && len(prefix) > 0
	it := t.txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		if keysOnly {
			if err := fn(item.Key(), nil); err != nil {
				return err
			}
			continue
		}
		if err := item.Value(func(v []byte) error { return fn(item.Key(), v) }); err != nil {
			return err
		}
	}
	return nil
}

func (t badgerTxn) Last(prefix []byte) ([]byte, error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	opts.Reverse = true
	it := t.txn.NewIterator(opts)
	defer it.Close()
	// In reverse, Seek finds the largest key <= the seek key: the end of
	// the prefix's range, or a key that equals it (skipped).
	if end := prefixEnd(prefix); end != nil {
		it.Seek(end)
		if it.Valid() && bytes.Equal(it.Item().Key(), end) {
			it.Next()
		}
	} else {
		it.Rewind()
	}
	if !it.ValidForPrefix(prefix) {
		return nil, nil
	}
	return it.Item().KeyCopy(nil), nil
}

package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Errors returned by the store. Callers check them with errors.Is; the store
// wraps them with the record or key concerned.
var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: a create-only write found the record already there.
	ErrExists = errors.New("already exists")
	// ErrInvalid: the record cannot be stored as given (e.g. a rename).
	ErrInvalid = errors.New("invalid record")
	// ErrInvalidKey: a key component is empty, too long, or contains a
	// forbidden character ("/" in ids, regions and accounts; NUL anywhere).
	ErrInvalidKey = errors.New("invalid key")
	// ErrConflict: a transaction kept conflicting with concurrent writers
	// after all retries.
	ErrConflict = errors.New("transaction conflict")
	// ErrTooLarge: a single write does not fit into one transaction.
	ErrTooLarge = errors.New("transaction too large")
	// ErrCorrupt: a stored record cannot be decoded.
	ErrCorrupt = errors.New("corrupt record")
	// ErrInconsistent: returned (wrapped) by Check for each problem found.
	ErrInconsistent = errors.New("inconsistent state")
	// ErrLocked: the state directory is held by another Store (another
	// process, or another Open in this one).
	ErrLocked = errors.New("state directory is locked by another process")
	// ErrNoState: OpenOptions.MustExist and the directory holds no state
	// (it does not exist, or Badger never wrote its MANIFEST there).
	ErrNoState = errors.New("no state in this directory")
	// ErrNotEmpty: Restore refuses to write into a non-empty directory.
	ErrNotEmpty = errors.New("state directory is not empty")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("state store is closed")
	// ErrDamaged: Open found the state directory damaged (a missing or
	// unreadable MANIFEST, a table that is missing or fails its checksum,
	// or anything Badger refuses or panics on while opening). Nothing in
	// the directory was changed.
	ErrDamaged = errors.New("state directory is damaged")
	// ErrNoSpace: the state's file system has less than MinFreeSpace free:
	// the write (or Open) was refused rather than risk Badger dying of
	// SIGBUS on a full disk.
	ErrNoSpace = errors.New("not enough free disk space for the state")
	// ErrBadBackup: a backup is empty, truncated or corrupt (wrapped with
	// what is wrong); Restore changed nothing.
	ErrBadBackup = errors.New("not a complete stackd backup")
	// ErrLegacyBackup: a backup in the format stackd wrote before backups
	// carried a record count and a checksum; see RestoreLegacy.
	ErrLegacyBackup = errors.New("backup in the earlier, unverifiable format (Badger's raw stream, no checksum)")
)

// SyncWrites is the Badger SyncWrites setting the store opens with. It is
// off: a commit is written to Badger's log (the OS page cache) before it
// returns, so a journaled resource survives a crash or SIGKILL of the
// daemon; surviving a crash of the machine needs Sync, which the
// reconciler calls at operation and batch boundaries. Measured on the
// reference machine (2 cores; BenchmarkPutResource): PutResource takes
// ~0.04 ms this way and 0.45-0.9 ms with SyncWrites on (Badger fsyncs its
// log once per commit even when it groups concurrent commits), which would
// make a 10,000-instance deploy spend over a minute in fsync alone.
const SyncWrites = false

const (
	// maxRetries bounds how often a transaction is retried on a conflict.
	maxRetries = 20
	// gcInterval is how often value-log GC runs.
	gcInterval = 5 * time.Minute
	// gcDiscardRatio is the RunValueLogGC discard ratio.
	gcDiscardRatio = 0.5
	// eventLocks is the number of stripes serialising AppendEvent per
	// operation.
	eventLocks = 64
)

// Store is the daemon's state: one Badger database. It is safe for
// concurrent use by many goroutines. Close it when done; no method may be
// called after (or while) Close runs.
type Store struct {
	// kv is where records are kept; db is its Badger database when the
	// state is a directory (nil on PostgreSQL).
	kv backend
	db *badger.DB
	// fence, if set, is the lease every write of this store is fenced
	// by; parent is the store this one is a fenced view of (see Fenced).
	fence  *Lease
	parent *Store
	// fenceValid, if set, is asked before every write of a fenced view:
	// false means its holder considers the lease lost (self-fencing), and
	// the write is refused without reaching the database.
	fenceValid func() bool
	// key encrypts the state and its backups at rest (nil: not).
	key []byte
	// dir is the state directory; writes are refused (ErrNoSpace) while
	// free(dir) is below minFree (see MinFreeSpace).
	dir     string
	free    func(string) (uint64, error)
	minFree uint64
	space   spaceCache

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// events number the events of each operation (striped by operation
	// id hash; see AppendEvent).
	events [eventLocks]eventStripe

	// hub holds the Listen calls, which Close ends (notify.go).
	hub notifyHub
}

// eventStripe holds the last sequence number taken per operation of one
// stripe; a missing entry is read from the log.
type eventStripe struct {
	mu   sync.Mutex
	next map[string]uint64
}

// config holds the knobs tests and benchmarks change; Open uses defaults.
type config struct {
	syncWrites bool
	gcInterval time.Duration
	// gcDone, if set, is called after each value-log GC pass.
	gcDone func()
	// free reports the free bytes of a directory's file system (nil: not
	// checked); minFree is the floor below which writes are refused.
	free    func(string) (uint64, error)
	minFree uint64
	// spaceRecheck is how long a free-space reading above minFree holds.
	spaceRecheck time.Duration
	// key encrypts the state at rest (see OpenOptions); nil: not.
	key []byte
}

func defaultConfig() config {
	return config{syncWrites: SyncWrites, gcInterval: gcInterval, free: freeSpace, minFree: MinFreeSpace, spaceRecheck: spaceRecheck}
}

func badgerOptions(dir string, syncWrites bool) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(nil).
		WithSyncWrites(syncWrites).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(16 << 20).
		WithValueLogFileSize(64 << 20)
}

// withKey adds encryption at rest with key (none when empty): Badger needs
// an index cache then.
func withKey(o badger.Options, key []byte) badger.Options {
	if len(key) == 0 {
		return o
	}
	return o.WithEncryptionKey(key).WithIndexCacheSize(16 << 20)
}

// Open opens the state in dir, creating dir if needed, and starts value-log
// GC in the background. Before Badger sees the directory, Open checks it
// for damage that Badger would answer by deleting table files or by a
// panic (see checkDir), and checks that its file system has MinFreeSpace
// free; it changes nothing in a directory it refuses.
//
// Errors: ErrLocked (wrapped, with Badger's message) if another Store holds
// dir; ErrDamaged (wrapped, saying what is wrong) for a damaged directory;
// ErrNoSpace (wrapped) below MinFreeSpace; otherwise a wrapped I/O error.
func Open(dir string) (*Store, error) {
	return open(dir, defaultConfig())
}

func open(dir string, c config) (s *Store, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open state %s: %w", dir, err)
	}
	if c.free != nil {
		if err := spaceFor(dir, c.free, c.minFree); err != nil {
			return nil, fmt.Errorf("open state %s: %w", dir, err)
		}
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	if err := checkKey(dir, c.key); err != nil {
		return nil, err
	}
	// Badger panics on some damage in the opening goroutine too.
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("open state %s: %w: Badger panicked opening it: %s", dir, ErrDamaged, firstLine(fmt.Sprint(p)))
		}
	}()
	// A process killed while Badger created a memtable or value-log file
	// leaves it empty, and Badger then refuses to open
	// (dgraph-io/badger#2207). An empty file holds nothing: remove such
	// files first, and open once more if Badger still complains (its failed
	// open may have sized a file it then could not use).
	removeEmptyFiles(dir)
	db, err := badger.Open(withKey(badgerOptions(dir, c.syncWrites), c.key))
	for i := 0; err != nil && strings.Contains(err.Error(), "directory lock") && i < 20; i++ {
		// The lock is released when its file is closed; a process that
		// just forked (a command resource, a test's child) holds the
		// descriptor until it execs. Wait a little before giving up.
		time.Sleep(50 * time.Millisecond)
		db, err = badger.Open(withKey(badgerOptions(dir, c.syncWrites), c.key))
	}
	if err != nil && strings.Contains(err.Error(), "Create a new file") {
		removeEmptyFiles(dir)
		db, err = badger.Open(withKey(badgerOptions(dir, c.syncWrites), c.key))
	}
	if errors.Is(err, badger.ErrEncryptionKeyMismatch) {
		return nil, fmt.Errorf("open state %s: %w: it is encrypted with another key, or encrypted while no key was given (--state-encryption-key-file)", dir, ErrEncryptionKey)
	}
	if err != nil {
		return nil, classifyOpenError(dir, err)
	}
	s = &Store{kv: badgerBackend{db}, db: db, dir: dir, free: c.free, minFree: c.minFree, stop: make(chan struct{}), key: c.key}
	s.space.ttl = c.spaceRecheck
	s.wg.Add(1)
	go s.gcLoop(c.gcInterval, c.gcDone)
	return s, nil
}

// removeEmptyFiles deletes zero-length *.mem and *.vlog files in dir; it
// reports whether it removed any.
func removeEmptyFiles(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	removed := false
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".mem") && !strings.HasSuffix(e.Name(), ".vlog") {
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() == 0 {
			if os.Remove(filepath.Join(dir, e.Name())) == nil {
				removed = true
			}
		}
	}
	return removed
}

// gcLoop runs value-log GC every interval until Close.
func (s *Store) gcLoop(interval time.Duration, done func()) {
	defer s.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		// Each successful run rewrote one file; keep going while it pays
		// (and while the disk has room for the rewrite).
		for s.checkSpace() == nil && s.db.RunValueLogGC(gcDiscardRatio) == nil {
			select {
			case <-s.stop:
				return
			default:
			}
		}
		if done != nil {
			done()
		}
	}
}

// Close stops value-log GC and closes the database. Calling it again returns
// the first call's result.
//
// Closing flushes Badger's memtable into a new table file written through
// a memory map, which on a full disk is a SIGBUS. Below MinFreeSpace, Close
// therefore only syncs Badger's log (the memtable's write-ahead log, which
// the next Open replays) and leaves the database open: its directory lock
// and goroutines go with the process, which is about to exit.
//
// Errors: ErrNoSpace (wrapped) when it did not close for lack of space; a
// wrapped Badger error if flushing or closing failed.
func (s *Store) Close() error {
	if s.parent != nil {
		return nil // a fenced view: its parent owns the backend
	}
	s.closeOnce.Do(func() {
		s.hub.close()
		close(s.stop)
		s.wg.Wait()
		if s.db == nil {
			if err := s.kv.close(); err != nil {
				s.closeErr = fmt.Errorf("close state: %w", err)
			}
			return
		}
		if s.free != nil {
			if err := spaceFor(s.dir, s.free, s.minFree); err != nil {
				s.closeErr = fmt.Errorf("close state: %w; its log is synced and replays at the next start", err)
				if serr := s.db.Sync(); serr != nil {
					s.closeErr = fmt.Errorf("%w (sync: %v)", s.closeErr, serr)
				}
				return
			}
		}
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close state: %w", err)
		}
	})
	return s.closeErr
}

// Sync flushes committed writes to disk (fsync). With SyncWrites on (the
// default) every commit is already synced when it returns; Sync is the
// explicit barrier for code that must not depend on that setting.
//
// Errors: ErrClosed, or a wrapped I/O error.
func (s *Store) Sync() error {
	if s.kv.closed() {
		return ErrClosed
	}
	if err := s.kv.sync(); err != nil {
		return fmt.Errorf("sync state: %w", err)
	}
	return nil
}

// convertErr maps Badger errors to the package's sentinels at the boundary.
func convertErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return ErrNotFound
	case errors.Is(err, badger.ErrDBClosed):
		return ErrClosed
	case errors.Is(err, badger.ErrTxnTooBig):
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	case errors.Is(err, badger.ErrConflict):
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}

// update runs fn in a read-write transaction, retrying on conflicts. fn must
// be safe to run more than once: reset anything it captures at its start.
//
// Errors: ErrNoSpace (wrapped) when the disk is nearly full (see
// MinFreeSpace), else what fn or the backend returned, converted.
func (s *Store) update(fn func(txn kvTxn) error) error {
	if err := s.checkSpace(); err != nil {
		return err
	}
	if err := s.checkFence(); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		var err error
		if s.fence != nil {
			err = s.kv.(leaser).updateFenced(*s.fence, fn)
		} else {
			err = s.kv.update(fn)
		}
		if !errors.Is(err, ErrConflict) || attempt == maxRetries {
			return err
		}
		// Back off a little, with jitter, so the retries spread out.
		d := time.Duration(attempt+1) * 50 * time.Microsecond
		time.Sleep(d + rand.N(d))
	}
}

// view runs fn in a read-only transaction.
func (s *Store) view(fn func(txn kvTxn) error) error {
	return s.kv.view(fn)
}

// getRecord reads and decodes the record at key.
// Errors: ErrNotFound, ErrCorrupt.
func getRecord[T any](txn kvTxn, key []byte) (T, error) {
	var v T
	b, err := txn.Get(key)
	if err != nil {
		return v, err
	}
	err = decode(b, &v)
	return v, err
}

// getRaw returns a copy of the raw value at key.
// Errors: ErrNotFound.
func getRaw(txn kvTxn, key []byte) ([]byte, error) {
	return txn.Get(key)
}

// exists reports whether key exists. In a read-write transaction the read is
// tracked, so a concurrent write of key makes the commit conflict.
func exists(txn kvTxn, key []byte) (bool, error) {
	_, err := txn.Get(key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

// putRecord encodes v and sets it at key.
func putRecord(txn kvTxn, key []byte, v any) error {
	b, err := encode(v)
	if err != nil {
		return err
	}
	return txn.Set(key, b)
}

// scan calls fn for every key with prefix, in key order. key and val are
// only valid during the call.
func scan(txn kvTxn, prefix []byte, fn func(key, val []byte) error) error {
	return txn.Scan(prefix, false, fn)
}

// scanKeys returns copies of all keys with prefix, in key order, without
// reading values.
func scanKeys(txn kvTxn, prefix []byte) [][]byte {
	var keys [][]byte
	_ = txn.Scan(prefix, true, func(k, _ []byte) error {
		keys = append(keys, bytes.Clone(k))
		return nil
	})
	return keys
}

// scanRecords decodes every record with prefix, in key order.
func scanRecords[T any](txn kvTxn, prefix []byte) ([]T, error) {
	var out []T
	err := scan(txn, prefix, func(key, val []byte) error {
		var v T
		if err := decode(val, &v); err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// deleteInOrder deletes the keys that collect lists, then final, in one
// transaction. collect runs inside the transaction and may fail (e.g. with
// ErrNotFound) to abort. If the deletes do not fit into one transaction,
// the keys are deleted in order over as many transactions as needed, and
// then collect runs again in one last transaction that deletes whatever it
// lists now (normally only final). Callers order keys so that every prefix
// of the deletion leaves the state consistent.
func (s *Store) deleteInOrder(collect func(txn kvTxn) (keys, final [][]byte, err error)) error {
	var keys, final [][]byte
	err := s.update(func(txn kvTxn) error {
		var err error
		keys, final, err = collect(txn)
		if err != nil {
			return err
		}
		for _, k := range append(keys[:len(keys):len(keys)], final...) {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, ErrTooLarge) || s.db == nil {
		return err
	}
	// Too big for one transaction: chunk. Blind deletes do not conflict.
	if err := s.checkSpace(); err != nil {
		return err
	}
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, k := range keys {
		err := txn.Delete(k)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return convertErr(err)
			}
			txn = s.db.NewTransaction(true)
			err = txn.Delete(k)
		}
		if err != nil {
			return convertErr(err)
		}
	}
	if err := txn.Commit(); err != nil {
		return convertErr(err)
	}
	// The last step re-collects: anything written meanwhile is deleted too,
	// if it fits.
	return s.update(func(txn kvTxn) error {
		keys, final, err := collect(txn)
		if err != nil {
			return err
		}
		for _, k := range append(keys, final...) {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

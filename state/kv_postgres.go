package state

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL backend (docs/design.md §13): the same keys and values as Badger,
// in one table of bytea key -> bytea value whose primary key's B-tree
// orders keys bytewise, as Badger does, so prefix scans are index range
// scans. Read-write transactions run SERIALIZABLE: PostgreSQL's
// serialization failures (and a unique violation or deadlock) are the
// store's ErrConflict, retried exactly as Badger's conflicts are, so
// create-or-verify claims have exactly one winner across processes too.
// Reads run REPEATABLE READ READ ONLY (one snapshot, as a Badger view).
//
// Round trips: a transaction's BEGIN travels with its first read, and its
// writes are buffered (reads see them) and sent with COMMIT in one
// pipelined batch (an upsert of all of them and a delete of all of them),
// so a write-only transaction is one round trip and a read-then-write
// claim is two.
//
// The schema is created and migrated by stackd (pgMigrations, recorded in
// stackd_schema); a database whose schema is newer than this stackd knows
// is refused (ErrSchemaTooNew) rather than written with older rules.
//
// Encryption at rest: with an EncryptionKey, every value is sealed with
// AES-GCM (the key as AES key, a random nonce per write, the row's key as
// additional data so a value cannot be moved to another key). Keys stay
// readable: they are ids, names, regions, accounts and resource addresses,
// never a sensitive value. A check value in stackd_settings tells a wrong
// or missing key (ErrEncryptionKey) before anything is read.

// ErrSchemaTooNew: the database was migrated by a newer stackd.
var ErrSchemaTooNew = errors.New("the state database's schema is newer than this stackd knows")

// pgMigrations are the schema's versions, in order: version i+1 is
// pgMigrations[i]. Append only; never edit a released one.
var pgMigrations = []string{
	// 1: records and settings.
	`CREATE TABLE stackd_kv (k bytea PRIMARY KEY, v bytea NOT NULL);
	 CREATE TABLE stackd_settings (name text PRIMARY KEY, value bytea NOT NULL)`,
	// 2: leases, and the fence a lease holder's writes check (lease_postgres.go).
	`CREATE TABLE stackd_leases (
		stack_set text PRIMARY KEY,
		holder text NOT NULL,
		epoch bigint NOT NULL,
		expires timestamptz NOT NULL);
	 CREATE FUNCTION stackd_fence(ss text, h text, e bigint) RETURNS void LANGUAGE plpgsql AS $$
	 BEGIN
		PERFORM 1 FROM stackd_leases
			WHERE stack_set = ss AND holder = h AND epoch = e AND expires > clock_timestamp()
			FOR SHARE;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'lease of stack set % (holder %, epoch %) is no longer held', ss, h, e
				USING ERRCODE = 'SDL01';
		END IF;
	 END $$`,
	// 3: replicas (member_postgres.go).
	`CREATE TABLE stackd_members (
		id text PRIMARY KEY,
		info text NOT NULL,
		started timestamptz NOT NULL,
		expires timestamptz NOT NULL)`,
}

const (
	// pgMigrateLock is the advisory lock id serialising migrations of
	// replicas that start at once.
	pgMigrateLock = 0x737461636b64 // "stackd"
	// pgTxnTimeout bounds one transaction.
	pgTxnTimeout = time.Minute
	// pgMaxPending is how many writes a transaction buffers before it
	// sends them.
	pgMaxPending = 4096
	// pgConnRetries is how often a transaction is run again on a new
	// connection after a lost one (see run).
	pgConnRetries = 3
	// pgScanPage is how many rows a scan reads per query.
	pgScanPage = 1000
	// keyCheckName is the settings row that checks the encryption key.
	keyCheckName  = "encryption-check"
	keyCheckPlain = "stackd state encryption check"
)

// PostgresOptions configure OpenPostgres.
type PostgresOptions struct {
	// Password, if set, is the database password (from a file; never on
	// a command line): it replaces any password the URL or the PG*
	// environment gives.
	Password string
	// EncryptionKey, if set, seals every value with AES-GCM: 16, 24 or
	// 32 bytes.
	EncryptionKey []byte
	// MaxConns bounds the connection pool (0: pgxpool's default, the
	// larger of 4 and the number of CPUs).
	MaxConns int32
}

// OpenPostgres opens the state in the PostgreSQL database dsn (a
// postgres:// URL or a key=value connection string; the PG* environment
// variables and ~/.pgpass fill what it leaves out), creating or migrating
// its schema (in the DSN's search_path).
//
// Errors: ErrSchemaTooNew, ErrEncryptionKey, or a wrapped connection
// error; the DSN's password never appears in them.
func OpenPostgres(dsn string, o PostgresOptions) (*Store, error) {
	if k := len(o.EncryptionKey); k != 0 && k != 16 && k != 24 && k != 32 {
		return nil, fmt.Errorf("open state %s: the encryption key must be 16, 24 or 32 bytes, not %d", RedactDSN(dsn), k)
	}
	b, err := openPostgres(dsn, o)
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", RedactDSN(dsn), err)
	}
	return &Store{kv: b, key: o.EncryptionKey, stop: make(chan struct{})}, nil
}

func openPostgres(dsn string, o PostgresOptions) (*pgBackend, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors redact the password; say no more.
		return nil, errors.New("invalid database URL (see the PostgreSQL connection string documentation)")
	}
	if o.Password != "" {
		cfg.ConnConfig.Password = o.Password
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "stackd"
	ctx, cancel := context.WithTimeout(context.Background(), pgTxnTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, pgConvert(err)
	}
	b := &pgBackend{pool: pool}
	if len(o.EncryptionKey) > 0 {
		block, err := aes.NewCipher(o.EncryptionKey)
		if err != nil {
			pool.Close()
			return nil, err
		}
		if b.aead, err = cipher.NewGCM(block); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if err := b.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := b.checkKey(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return b, nil
}

// RedactDSN returns dsn with any password replaced by "xxxxx", for logs
// and errors.
func RedactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return kvPassword.ReplaceAllString(dsn, "password=xxxxx")
}

// kvPassword finds the password of a key=value connection string (quoted
// or not).
var kvPassword = regexp.MustCompile(`password\s*=\s*('(\\.|[^'])*'|\S+)`)

// pgBackend is the PostgreSQL backend.
type pgBackend struct {
	pool     *pgxpool.Pool
	aead     cipher.AEAD
	isClosed atomic.Bool
	// fencedRefused counts fenced writes refused with ErrLeaseLost.
	fencedRefused atomic.Uint64
	// channelSuffix (notify_postgres.go) is set on first use.
	channelMu     sync.Mutex
	channelSuffix *string
}

var (
	_ backend       = (*pgBackend)(nil)
	_ eventAppender = (*pgBackend)(nil)
	_ kvTxn         = (*pgTxn)(nil)
)

// migrate brings the schema to the newest version this stackd knows, under
// an advisory lock so that replicas starting at once migrate once.
func (b *pgBackend) migrate(ctx context.Context) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return pgConvert(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgMigrateLock)); err != nil {
		return pgConvert(err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS stackd_schema (
		version integer PRIMARY KEY,
		applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		return pgConvert(err)
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM stackd_schema`).Scan(&have); err != nil {
		return pgConvert(err)
	}
	if have > len(pgMigrations) {
		return fmt.Errorf("%w: it is at version %d, this stackd knows versions up to %d; run a newer stackd (or restore a backup into a new database)", ErrSchemaTooNew, have, len(pgMigrations))
	}
	for v := have + 1; v <= len(pgMigrations); v++ {
		if _, err := tx.Exec(ctx, pgMigrations[v-1]); err != nil {
			return fmt.Errorf("migrate the state database to version %d: %w", v, pgConvert(err))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO stackd_schema (version) VALUES ($1)`, v); err != nil {
			return pgConvert(err)
		}
	}
	return pgConvert(tx.Commit(ctx))
}

// checkKey compares the encryption key with the check value the database
// was created with (writing it on first use).
func (b *pgBackend) checkKey(ctx context.Context) error {
	var check []byte
	err := b.pool.QueryRow(ctx, `SELECT value FROM stackd_settings WHERE name = $1`, keyCheckName).Scan(&check)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if b.aead == nil {
			return nil
		}
		var any bool
		if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM stackd_kv)`).Scan(&any); err != nil {
			return pgConvert(err)
		}
		if any {
			return fmt.Errorf("%w: the state database holds records written without encryption, and a key was given", ErrEncryptionKey)
		}
		_, err := b.pool.Exec(ctx, `INSERT INTO stackd_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
			keyCheckName, b.seal([]byte(keyCheckName), []byte(keyCheckPlain)))
		if err != nil {
			return pgConvert(err)
		}
		return b.checkKey(ctx) // a replica that raced us wrote its own: compare
	case err != nil:
		return pgConvert(err)
	case b.aead == nil:
		return fmt.Errorf("%w: the state database is encrypted, and no key was given (--state-encryption-key-file)", ErrEncryptionKey)
	}
	if plain, err := b.unseal([]byte(keyCheckName), check); err != nil || string(plain) != keyCheckPlain {
		return fmt.Errorf("%w: the state database is encrypted with another key", ErrEncryptionKey)
	}
	return nil
}

// seal encrypts val for key (a no-op without a key).
func (b *pgBackend) seal(key, val []byte) []byte {
	if b.aead == nil {
		return val
	}
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(val)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return b.aead.Seal(nonce, nonce, val, key)
}

// unseal decrypts what seal wrote. Errors: ErrCorrupt (wrapped).
func (b *pgBackend) unseal(key, val []byte) ([]byte, error) {
	if b.aead == nil {
		return val, nil
	}
	n := b.aead.NonceSize()
	if len(val) < n {
		return nil, fmt.Errorf("%w: sealed value too short", ErrCorrupt)
	}
	plain, err := b.aead.Open(nil, val[:n], val[n:], key)
	if err != nil {
		return nil, fmt.Errorf("%w: sealed value does not open with the key", ErrCorrupt)
	}
	return plain, nil
}

func (b *pgBackend) update(fn func(kvTxn) error) error {
	return b.run(`BEGIN ISOLATION LEVEL SERIALIZABLE`, nil, fn)
}

func (b *pgBackend) updateFenced(l Lease, fn func(kvTxn) error) error {
	return b.countRefused(b.run(`BEGIN ISOLATION LEVEL SERIALIZABLE`, &l, fn))
}

func (b *pgBackend) view(fn func(kvTxn) error) error {
	return b.run(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`, nil, fn)
}

// run runs fn in one transaction begun with begin, and commits it. A
// connection that fails on the transaction's first round trip (one the
// server cut: a restart, a failover, an idle timeout) is dropped and the
// transaction run again on another, as nothing of it can have happened;
// a connection lost later, with the commit in flight, is an error, since
// the commit may or may not have happened.
func (b *pgBackend) run(begin string, fence *Lease, fn func(kvTxn) error) error {
	for attempt := 0; ; attempt++ {
		err := b.runOnce(begin, fence, fn)
		var ce *pgConnError
		if !errors.As(err, &ce) || !ce.retry || attempt == pgConnRetries {
			return err
		}
	}
}

func (b *pgBackend) runOnce(begin string, fence *Lease, fn func(kvTxn) error) error {
	if b.isClosed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgTxnTimeout)
	defer cancel()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return pgConvert(err)
	}
	t := &pgTxn{ctx: ctx, b: b, conn: conn, begin: begin, pending: map[string]int{}, fence: fence}
	defer t.release()
	if err := fn(t); err != nil {
		return err
	}
	return t.commit()
}

// pgConnError is a lost connection; retry: nothing of the transaction can
// have reached the database.
type pgConnError struct {
	err   error
	retry bool
}

func (e *pgConnError) Error() string { return "postgresql: connection lost: " + e.err.Error() }
func (e *pgConnError) Unwrap() error { return e.err }

// connFailed classifies err of a round trip on t's connection: a lost
// connection becomes a pgConnError (retryable when first says this was
// the transaction's first round trip, or pgx knows nothing was sent), and
// the pool's other connections, likely cut too, are dropped.
func (t *pgTxn) connFailed(err error, first bool) error {
	var pe *pgconn.PgError
	if err == nil || errors.As(err, &pe) || !t.conn.Conn().IsClosed() {
		return pgConvert(err)
	}
	t.b.pool.Reset()
	return &pgConnError{err: err, retry: first || pgconn.SafeToRetry(err)}
}

func (b *pgBackend) sync() error {
	if b.isClosed.Load() {
		return ErrClosed
	}
	return nil // a commit is durable when it returns (synchronous_commit)
}

func (b *pgBackend) closed() bool { return b.isClosed.Load() }

func (b *pgBackend) close() error {
	if !b.isClosed.Swap(true) {
		b.pool.Close()
	}
	return nil
}

// appendEvent numbers and writes one event: an advisory lock per
// operation, held until the commit, serialises the appends of all stores,
// and READ COMMITTED lets each read the last event its predecessor
// committed. Two round trips: BEGIN, lock and read; write and COMMIT.
func (b *pgBackend) appendEvent(fence *Lease, opIDKey, prefix []byte, build func(seq uint64) ([]byte, []byte, error)) (uint64, error) {
	for attempt := 0; ; attempt++ {
		seq, err := b.appendEventOnce(fence, opIDKey, prefix, build)
		var ce *pgConnError
		if !errors.As(err, &ce) || !ce.retry || attempt == pgConnRetries {
			return seq, b.countRefused(err)
		}
	}
}

func (b *pgBackend) appendEventOnce(fence *Lease, opIDKey, prefix []byte, build func(seq uint64) ([]byte, []byte, error)) (uint64, error) {
	if b.isClosed.Load() {
		return 0, ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgTxnTimeout)
	defer cancel()
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return 0, pgConvert(err)
	}
	t := &pgTxn{ctx: ctx, b: b, conn: conn, begin: `BEGIN ISOLATION LEVEL READ COMMITTED`, pending: map[string]int{}, fence: fence}
	defer t.release()
	batch := &pgx.Batch{}
	batch.Queue(t.begin)
	batch.Queue(`SELECT pg_advisory_xact_lock(('x' || substr(md5($1::bytea), 1, 16))::bit(64)::bigint)`, opIDKey)
	lo, hi := rangeArgs(prefix)
	batch.Queue(`SELECT EXISTS (SELECT 1 FROM stackd_kv WHERE k = $1),
		(SELECT k FROM stackd_kv WHERE k >= $2 AND ($3::bytea IS NULL OR k < $3) ORDER BY k DESC LIMIT 1)`, opIDKey, lo, hi)
	t.begun = true
	br := conn.SendBatch(ctx, batch)
	var (
		found bool
		last  []byte
	)
	_, err1 := br.Exec()
	_, err2 := br.Exec()
	err3 := br.QueryRow().Scan(&found, &last)
	if err := errors.Join(err1, err2, err3, br.Close()); err != nil {
		return 0, t.connFailed(err, true)
	}
	if !found {
		return 0, fmt.Errorf("operation: %w", ErrNotFound)
	}
	var seq uint64 = 1
	if len(last) == len(prefix)+8 {
		seq = beUint64(last[len(prefix):]) + 1
	}
	k, v, err := build(seq)
	if err != nil {
		return 0, err
	}
	if err := t.Set(k, v); err != nil {
		return 0, err
	}
	if err := t.commit(); err != nil {
		return 0, err
	}
	return seq, nil
}

func beUint64(b []byte) uint64 {
	var n uint64
	for _, c := range b[:8] {
		n = n<<8 | uint64(c)
	}
	return n
}

// rangeArgs returns the bounds of prefix's key range: lo inclusive, hi
// exclusive or nil for none.
func rangeArgs(prefix []byte) (lo, hi []byte) {
	lo = prefix
	if lo == nil {
		lo = []byte{}
	}
	return lo, prefixEnd(prefix)
}

// pgTxn is one transaction on one pooled connection. BEGIN is sent with
// the first read; writes wait in pending until a scan or the commit sends
// them.
type pgTxn struct {
	ctx   context.Context
	b     *pgBackend
	conn  *pgxpool.Conn
	begin string
	begun bool
	done  bool
	// writes in order; pending maps a key to its latest write.
	writes  []pgWrite
	pending map[string]int
	// fence, if set, is the lease the commit checks (stackd_fence).
	fence *Lease
}

type pgWrite struct {
	key, val []byte // val nil: delete
}

func (t *pgTxn) Get(key []byte) ([]byte, error) {
	if i, ok := t.pending[string(key)]; ok {
		if t.writes[i].val == nil {
			return nil, ErrNotFound
		}
		return bytes.Clone(t.writes[i].val), nil
	}
	var v []byte
	found := false
	err := t.query(func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&v); err != nil {
				return err
			}
		}
		return rows.Err()
	}, `SELECT v FROM stackd_kv WHERE k = $1`, key)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	return t.b.unseal(key, v)
}

func (t *pgTxn) Set(key, val []byte) error {
	if val == nil {
		val = []byte{}
	}
	return t.put(key, bytes.Clone(val))
}

func (t *pgTxn) Delete(key []byte) error {
	return t.put(key, nil)
}

func (t *pgTxn) put(key, val []byte) error {
	k := bytes.Clone(key)
	if i, ok := t.pending[string(k)]; ok {
		t.writes[i].val = val
		return nil
	}
	t.pending[string(k)] = len(t.writes)
	t.writes = append(t.writes, pgWrite{key: k, val: val})
	if len(t.writes) < pgMaxPending {
		return nil
	}
	// A big transaction (a restore) sends its writes as it goes.
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue(t.begin)
	}
	t.queueWrites(b)
	first := !t.begun
	t.begun = true
	return t.connFailed(t.conn.SendBatch(t.ctx, b).Close(), first)
}

func (t *pgTxn) Scan(prefix []byte, keysOnly bool, fn func(key, val []byte) error) error {
	lo, hi := rangeArgs(prefix)
	cols := "k, v"
	if keysOnly {
		cols = "k, NULL::bytea"
	}
	sql := `SELECT ` + cols + ` FROM stackd_kv WHERE k >= $1 AND ($2::bytea IS NULL OR k < $2) AND ($3::bytea IS NULL OR k > $3) ORDER BY k LIMIT ` + fmt.Sprint(pgScanPage)
	var after []byte
	for {
		type row struct{ k, v []byte }
		var page []row
		err := t.query(func(rows pgx.Rows) error {
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.k, &r.v); err != nil {
					return err
				}
				page = append(page, r)
			}
			return rows.Err()
		}, sql, lo, hi, after)
		if err != nil {
			return err
		}
		for _, r := range page {
			v := r.v
			if !keysOnly {
				if v, err = t.b.unseal(r.k, r.v); err != nil {
					return fmt.Errorf("%q: %w", r.k, err)
				}
			}
			if err := fn(r.k, v); err != nil {
				return err
			}
		}
		if len(page) < pgScanPage {
			return nil
		}
		after = page[len(page)-1].k
	}
}

func (t *pgTxn) Last(prefix []byte) ([]byte, error) {
	lo, hi := rangeArgs(prefix)
	var last []byte
	err := t.query(func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&last); err != nil {
				return err
			}
		}
		return rows.Err()
	}, `SELECT k FROM stackd_kv WHERE k >= $1 AND ($2::bytea IS NULL OR k < $2) ORDER BY k DESC LIMIT 1`, lo, hi)
	return last, err
}

// queueWrites queues the pending writes: one upsert of every key written
// and one delete of every key deleted (the latest write of each key).
func (t *pgTxn) queueWrites(b *pgx.Batch) {
	if len(t.writes) == 0 {
		return
	}
	var setK, setV, delK [][]byte
	for _, w := range t.writes {
		if w.val == nil {
			delK = append(delK, w.key)
			continue
		}
		setK = append(setK, w.key)
		setV = append(setV, t.b.seal(w.key, w.val))
	}
	if len(delK) > 0 {
		b.Queue(`DELETE FROM stackd_kv WHERE k = ANY($1::bytea[])`, delK)
	}
	if len(setK) > 0 {
		b.Queue(`INSERT INTO stackd_kv (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])
			ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, setK, setV)
	}
	t.writes, t.pending = t.writes[:0], map[string]int{}
}

// query sends BEGIN (the first time) and the pending writes ahead of sql,
// in one round trip, and passes sql's rows to read.
func (t *pgTxn) query(read func(pgx.Rows) error, sql string, args ...any) error {
	b := &pgx.Batch{}
	first := !t.begun
	if first {
		b.Queue(t.begin)
	}
	t.queueWrites(b)
	n := b.Len()
	b.Queue(sql, args...)
	t.begun = true
	br := t.conn.SendBatch(t.ctx, b)
	for range n {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return t.connFailed(err, first)
		}
	}
	rows, err := br.Query()
	if err == nil {
		err = read(rows)
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return t.connFailed(err, first)
}

// commit sends the pending writes and COMMIT in one round trip.
func (t *pgTxn) commit() error {
	if !t.begun && len(t.writes) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue(t.begin)
	}
	if t.fence != nil {
		// Before the writes, in their transaction: it locks the lease
		// row until the commit, so a taker waits for this commit.
		b.Queue(`SELECT stackd_fence($1, $2, $3)`, t.fence.StackSet, t.fence.Holder, int64(t.fence.Epoch))
	}
	t.queueWrites(b)
	b.Queue(`COMMIT`)
	t.begun = true
	err := t.conn.SendBatch(t.ctx, b).Close()
	if err != nil {
		return t.connFailed(err, false)
	}
	t.done = true
	return nil
}

// release rolls back an unfinished transaction and returns the connection
// to the pool (which drops it if it is broken or still in a transaction).
func (t *pgTxn) release() {
	if t.begun && !t.done {
		_, _ = t.conn.Exec(t.ctx, `ROLLBACK`)
	}
	t.conn.Release()
}

// pgConvert maps PostgreSQL errors to the package's sentinels.
func pgConvert(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "23505": // serialization failure, deadlock, unique violation
			return fmt.Errorf("%w: %s", ErrConflict, pe.Message)
		case "54000": // program limit exceeded
			return fmt.Errorf("%w: %s", ErrTooLarge, pe.Message)
		case pgLeaseLost:
			return fmt.Errorf("%w: %s", ErrLeaseLost, pe.Message)
		}
		return fmt.Errorf("postgresql: %s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	if strings.Contains(err.Error(), "closed pool") {
		return ErrClosed
	}
	return fmt.Errorf("postgresql: %w", err)
}

// Package state is stackd's memory: the one Badger database that records
// stack sets, stack instances, the resources of each instance (the resource
// journal), operations and their event logs, idempotency keys, the resource
// type registry and daemon metadata (docs/design.md §3). It offers typed records and
// small transactions; it knows nothing of HCL, Git or scheduling.
//
// # Backends
//
// The store's logic runs on a small transactional key-value interface
// (kv.go): Badger in a state directory (Open, the embedded default) or a
// PostgreSQL database shared by several stackd replicas (OpenPostgres,
// docs/design.md §13; kv_postgres.go). Every invariant below holds on both, and
// one test suite checks both (TestPostgresConformance runs the store's
// tests again on PostgreSQL). What is said below of Badger's directory,
// SyncWrites, value-log GC, free disk space and damage is of the Badger
// backend; on PostgreSQL a commit is durable when it returns, and Sync
// does nothing. Backups have one format: a Badger backup restores into
// PostgreSQL (RestoreInto) and a PostgreSQL backup into a directory
// (Restore). Only PostgreSQL has leases (lease.go): one owner per stack set
// at a time, and Fenced stores whose writes commit only while their
// owner's lease is held (FencedWritesRefused counts the refusals). Only
// PostgreSQL has members too (member.go): replicas heartbeat a row whose
// expiry is by the database clock, and leave at once on shutdown.
// Notify and Listen (notify.go) wake other replicas: PostgreSQL's
// NOTIFY/LISTEN, or in-process on Badger; a notification carries ids
// only and is a hint (it can be lost, and a listener that reconnected is
// told "" to re-read): the rows are the truth. Member rows, like lease
// rows, are runtime, not state: backups do not carry them.
//
// # Invariants
//
//   - state is the only package that imports Badger or pgx. Their errors
//     stop here: callers see the sentinels of this package (ErrNotFound for
//     badger.ErrKeyNotFound, ErrConflict for Badger's conflicts and
//     PostgreSQL's serialization failures, ErrClosed, ...), wrapped with
//     context and checked with errors.Is.
//   - Every key prefix is declared in keys.go. Key components that other
//     components follow (stack set and operation ids, regions, accounts)
//     never contain "/" or NUL (ErrInvalidKey); the last component (names,
//     resource addresses, revisions, caller keys) may contain "/" but not
//     NUL. Every scan prefix ends in "/", so one instance's resources never
//     bleed into another's (region "eu" vs "eu-west", account "1" vs "12").
//   - Records are stored as one version byte followed by JSON, so they can
//     evolve; indexes (ssname/, opid/, opkey/) hold raw ids.
//   - Stack set ids are random UUIDs, never reused; names are unique at a
//     time (ssname/). Names never change.
//   - Instances exist only under an existing stack set, resources only under
//     an existing instance: PutInstance and PutResource refuse orphans, and
//     deletes remove resources before their instance and instances before
//     their stack set, so even a delete split over several transactions
//     leaves a consistent state. Operations, events and revision keys outlive
//     their stack set as history.
//   - An operation is keyed by (stack set id, revision): ClaimOperation is
//     create-or-verify, and so are PutIdem and PutResourceType (the
//     idempotency rule of docs/design.md §8). Exactly one of concurrent claimers wins.
//   - Event sequence numbers of one operation are 1, 2, 3, ... with no
//     duplicates, also under concurrent AppendEvent, and events become
//     visible in that order (a reader that saw event n has seen every event
//     before it); only a failed append can leave a gap.
//   - Check reports every violation of these invariants (and of the journal
//     rules: no Pending* resource and no in-progress instance without a
//     running operation of its stack set).
//
// # Durability
//
// Writes are committed with Badger's SyncWrites off (see SyncWrites): when a
// write method returns, the write is in Badger's log in the OS page cache.
// Sync makes everything written so far reach the disk; the reconciler calls
// it before it records an operation's outcome and at every rollout batch
// boundary. One process holds the directory lock; a second Open fails with
// ErrLocked.
//
// What that guarantees, together with the engine's journal and the file
// provider (engine/provider.Syncer), is:
//
//   - A crash of the daemon (kill -9, OOM kill, panic): nothing written is
//     lost, since the page cache survives. Every provider call was journaled
//     Pending* before it started, so the resumed operation repeats exactly
//     the calls that may not have finished, with their RequestIDs
//     (create-or-verify); a file whose write was interrupted is rewritten,
//     and the temporary file the write left is swept.
//   - A crash of the machine (power loss, kernel panic): the state keeps
//     everything up to its last Sync and, of what came after, a prefix in
//     commit order (Badger replays its log up to the first damaged entry).
//     A resource the state records as done is on disk as recorded: the
//     file provider does not fsync each file, but the engine journals a
//     file's create, update or delete as done only after one flush of the
//     targets root's filesystem (syncfs) that began after it, so a record
//     that survived implies the file did. A file written after the last
//     flush may come back missing, empty or old; its record is Pending* (or
//     lost with the rest of the unsynced suffix, and then so is the record
//     of the operation having done it), and the resumed or next operation
//     writes it again.
//   - The status commit of an operation can be ahead of a state that lost
//     its last seconds; the resumed operation ends the same way and writes
//     the same status again.
//
// # Encryption at rest
//
// OpenWith with an EncryptionKey encrypts the state at rest (Badger's AES
// encryption) and its backups (age, with a passphrase derived from the
// key); VerifyWith, RestoreWith and SaveBackup take the key to read them.
// The key is checked against Badger's key registry before Badger opens
// the directory: a wrong or missing key is ErrEncryptionKey.
//
// # Damage, backups and a full disk
//
// Open reads the directory before Badger does and refuses (ErrDamaged,
// saying what is wrong, nothing changed) what Badger would otherwise turn
// into an empty state, a panic or a silently dropped table: a missing or
// unreadable MANIFEST next to table files, a listed table that is missing
// or fails its checksums, a truncated KEYREGISTRY. A directory whose every
// file is gone opens empty; telling that from a fresh start is the
// reconciler's job (it compares with the status branch).
//
// Backup writes a versioned format with a trailer (record count, SHA-256);
// BackupFile writes it 0600 to a temporary file, fsyncs, reads it back,
// renames it into place and fsyncs the directory, so the previous backup
// survives any failure. Restore verifies a whole backup before it writes
// anything and builds the restored state in a new directory renamed into
// place when complete (see backup.go for the format).
//
// Below MinFreeSpace free, writes and Open are refused with ErrNoSpace:
// Badger writes through memory maps and would die of SIGBUS on a full disk.
//
// # Concurrency
//
// A Store is safe for concurrent use. Writes run in Badger transactions that
// are retried on conflicts; value-log GC runs in a goroutine that Close stops.
//
// # Imports
//
// state imports no other stackd package (not engine, gitsource, reconciler
// or cmd), and no package outside state imports Badger.
package state

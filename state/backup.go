package state

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The backup format (version 1). A backup is
//
//	header   "STACKDBK" | version uint32 | flags uint32 | created int64 (Unix ns)
//	records  one per key: 'R' | uvarint len(key) | key | uvarint len(value) | value
//	trailer  'T' | record count uint64 | SHA-256 of every byte before it (32 bytes)
//
// with integers big-endian, and nothing after the trailer. Keys come in key
// order, each with its latest value, all from one snapshot. Verify and
// Restore check the whole file (magic, version, every length, the record
// count and the checksum) before anything is written, so a truncated, empty
// or altered backup is refused, never half restored.
//
// Backups written by stackd before this format existed hold Badger's own
// backup stream and no header: Restore refuses them (ErrLegacyBackup), and
// RestoreLegacy loads them on request, unverified.
const (
	backupMagic   = "STACKDBK"
	backupVersion = 1
	headerSize    = len(backupMagic) + 4 + 4 + 8
	tagRecord     = 'R'
	tagTrailer    = 'T'
	checksumSize  = sha256.Size
	// maxBackupKey is Badger's own limit on a key (65,000 bytes): a longer
	// length in a backup is corruption, refused before anything is read.
	maxBackupKey = 65000
	// maxBackupValue bounds one value (256 MiB, as maxBackupFrame): a
	// corrupt length must not make restore allocate gigabytes. Stack set
	// records are kilobytes; the largest values stackd writes (resource
	// records with big attributes) stay far below it.
	maxBackupValue = maxBackupFrame
)

// BackupInfo describes a backup that was written or verified.
type BackupInfo struct {
	// Version is the format version (1); 0 for a legacy backup.
	Version int
	// Created is when the backup was taken (zero for a legacy backup).
	Created time.Time
	// Records is the number of keys the backup holds.
	Records uint64
	// Bytes is the size of the backup.
	Bytes int64
	// SHA256 is the hex checksum stored in the trailer.
	SHA256 string
}

// Backup writes a full backup of the state to w in the backup format (see
// above). It runs alongside other calls and sees one snapshot. w receives
// the bytes as they are produced; a failed Backup leaves a prefix that
// Verify refuses.
//
// Errors: ErrClosed, or a wrapped I/O or Badger error.
func (s *Store) Backup(w io.Writer) (BackupInfo, error) {
	info, err := s.writeBackup(w)
	if err != nil && !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("backup state: %w", err)
	}
	return info, err
}

// writeBackup is Backup without the error's context: the backup format,
// age-encrypted when the state is encrypted at rest.
func (s *Store) writeBackup(w io.Writer) (BackupInfo, error) {
	ew, finish, err := encryptBackup(w, s.key)
	if err != nil {
		return BackupInfo{}, err
	}
	info, err := s.writePlainBackup(ew)
	if err != nil {
		return info, err
	}
	return info, finish()
}

// writePlainBackup writes the backup format to w.
func (s *Store) writePlainBackup(w io.Writer) (BackupInfo, error) {
	if s.kv.closed() {
		return BackupInfo{}, ErrClosed
	}
	info := BackupInfo{Version: backupVersion, Created: time.Now().UTC()}
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	h := sha256.New()
	out := io.MultiWriter(bw, h)
	var head [headerSize]byte
	copy(head[:], backupMagic)
	binary.BigEndian.PutUint32(head[8:], backupVersion)
	binary.BigEndian.PutUint32(head[12:], 0)
	binary.BigEndian.PutUint64(head[16:], uint64(info.Created.UnixNano()))
	if _, err := out.Write(head[:]); err != nil {
		return info, err
	}
	var lenBuf [binary.MaxVarintLen64]byte
	err := s.view(func(txn kvTxn) error {
		return txn.Scan(nil, false, func(k, v []byte) error {
			if _, err := out.Write([]byte{tagRecord}); err != nil {
				return err
			}
			for _, b := range [][]byte{k, v} {
				n := binary.PutUvarint(lenBuf[:], uint64(len(b)))
				if _, err := out.Write(lenBuf[:n]); err != nil {
					return err
				}
				if _, err := out.Write(b); err != nil {
					return err
				}
			}
			info.Records++
			return nil
		})
	})
	if err != nil {
		return info, convertErr(err)
	}
	var tail [1 + 8]byte
	tail[0] = tagTrailer
	binary.BigEndian.PutUint64(tail[1:], info.Records)
	if _, err := out.Write(tail[:]); err != nil {
		return info, err
	}
	sum := h.Sum(nil)
	if _, err := bw.Write(sum); err != nil {
		return info, err
	}
	if err := bw.Flush(); err != nil {
		return info, err
	}
	info.SHA256 = hex.EncodeToString(sum)
	info.Bytes = cw.n
	return info, nil
}

// BackupFile writes a full backup of the state to path, safely: into a new
// 0600 file in path's directory, fsynced and read back through Verify, then
// renamed over path, and the directory fsynced. Until the rename, path keeps
// whatever it held before: a kill, a crash or a full disk during the backup
// leaves the previous backup intact (and, at worst, a ".<name>.tmp-*" file
// next to it).
//
// Errors: ErrClosed, ErrBadBackup (the bytes read back do not verify), or a
// wrapped I/O or Badger error.
func (s *Store) BackupFile(path string) (BackupInfo, error) {
	return s.backupFile(path, nil)
}

// backupFile is BackupFile; wrap, if set, wraps the temporary file's writer
// (tests inject write failures with it).
func (s *Store) backupFile(path string, wrap func(io.Writer) io.Writer) (BackupInfo, error) {
	return saveBackup(path, s.key, func(w io.Writer) (*BackupInfo, error) {
		if wrap != nil {
			w = wrap(w)
		}
		info, err := s.writeBackup(w)
		return &info, err
	})
}

// SaveBackup writes the backup write produces (one a daemon streams over
// its API) to path the way BackupFile does: 0600, through a temporary file
// that is synced, read back and verified before it is renamed over path.
// A stream cut short or altered never replaces the previous backup.
//
// Errors: ErrBadBackup (wrapped) when what was written does not verify,
// the error of write, or a wrapped I/O error.
//
// key is the encryption key of the state the backup is of (nil: none): an
// encrypted backup is verified with it.
func SaveBackup(path string, key []byte, write func(io.Writer) error) (BackupInfo, error) {
	return saveBackup(path, key, func(w io.Writer) (*BackupInfo, error) { return nil, write(w) })
}

// saveBackup writes a backup to path through a temporary file (see
// BackupFile). write produces it and may return what it wrote, which the
// bytes read back must then match.
func saveBackup(path string, key []byte, write func(io.Writer) (*BackupInfo, error)) (info BackupInfo, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return BackupInfo{}, fmt.Errorf("backup state to %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	wrote, err := write(f)
	if err != nil {
		return info, fmt.Errorf("backup state to %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return info, fmt.Errorf("backup state to %s: sync: %w", path, err)
	}
	// Read back what the disk holds: the rename must only ever put a
	// backup that restores in place of the previous one.
	if _, err = f.Seek(0, io.SeekStart); err != nil {
		return info, fmt.Errorf("backup state to %s: %w", path, err)
	}
	info, err = VerifyWith(f, key)
	if err != nil {
		return info, fmt.Errorf("backup state to %s: reading back the new backup: %w", path, err)
	}
	if wrote != nil && (info.SHA256 != wrote.SHA256 || info.Records != wrote.Records) {
		err = fmt.Errorf("backup state to %s: %w: the file read back differs from what was written", path, ErrBadBackup)
		return info, err
	}
	if err = f.Close(); err != nil {
		return info, fmt.Errorf("backup state to %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return info, fmt.Errorf("backup state to %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		// The backup is complete and in place; only its durability across
		// a machine crash is in doubt.
		return info, fmt.Errorf("backup state to %s: sync directory: %w", path, err)
	}
	return info, nil
}

// Verify reads a whole backup from r and checks it: header, every record's
// framing, the record count and the checksum in the trailer, and that
// nothing follows the trailer. It allocates no record's value.
//
// Errors: ErrLegacyBackup for a backup in the format stackd wrote before
// this one, ErrBadBackup (wrapped, with what is wrong) for anything else
// that is not a complete, intact backup, or a wrapped read error.
func Verify(r io.Reader) (BackupInfo, error) {
	return VerifyWith(r, nil)
}

// VerifyWith is Verify of a backup of a state encrypted with key (nil:
// none).
//
// Errors: as Verify's, and ErrEncryptionKey (wrapped) when the backup is
// encrypted and key does not open it, or key is given for a plain one.
func VerifyWith(r io.Reader, key []byte) (BackupInfo, error) {
	pr, err := decryptBackup(r, key)
	if err != nil {
		return BackupInfo{}, err
	}
	return readBackup(pr, nil)
}

// readBackup parses a backup from r, calling fn (if not nil) for each
// record; key and value are fresh slices fn may keep. It returns only
// after the trailer is verified, so whatever fn did must be undone by the
// caller on error.
func readBackup(r io.Reader, fn func(key, val []byte) error) (BackupInfo, error) {
	hr := &hashReader{r: bufio.NewReaderSize(r, 256<<10), h: sha256.New()}
	var info BackupInfo
	var head [headerSize]byte
	n, err := io.ReadFull(hr, head[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return info, fmt.Errorf("read backup: %w", err)
	}
	if n == 0 {
		return info, fmt.Errorf("%w: the file is empty (0 bytes)", ErrBadBackup)
	}
	if m := min(n, len(backupMagic)); string(head[:m]) != backupMagic[:m] {
		if legacyBackup(head[:n]) {
			return info, ErrLegacyBackup
		}
		return info, fmt.Errorf("%w: it does not start with the stackd backup header (%q)", ErrBadBackup, backupMagic)
	}
	if n < headerSize {
		return info, fmt.Errorf("%w: truncated: it ends inside the %d-byte header, after %d bytes", ErrBadBackup, headerSize, n)
	}
	info.Version = int(binary.BigEndian.Uint32(head[8:]))
	if info.Version != backupVersion {
		return info, fmt.Errorf("%w: format version %d; this stackd reads version %d", ErrBadBackup, info.Version, backupVersion)
	}
	if flags := binary.BigEndian.Uint32(head[12:]); flags != 0 {
		return info, fmt.Errorf("%w: unknown flags %#x in the header", ErrBadBackup, flags)
	}
	info.Created = time.Unix(0, int64(binary.BigEndian.Uint64(head[16:]))).UTC()
	truncated := func(where string) error {
		return fmt.Errorf("%w: truncated: it ends %s, after %d bytes and %d complete records", ErrBadBackup, where, hr.n, info.Records)
	}
	for {
		tag, err := hr.ReadByte()
		if err == io.EOF {
			return info, truncated("before the trailer")
		}
		if err != nil {
			return info, fmt.Errorf("read backup: %w", err)
		}
		if tag == tagTrailer {
			break
		}
		if tag != tagRecord {
			return info, fmt.Errorf("%w: unexpected byte %#x at offset %d where a record or the trailer starts", ErrBadBackup, tag, hr.n-1)
		}
		var kv [2][]byte
		for i, limit := range []uint64{maxBackupKey, maxBackupValue} {
			what := [2]string{"key", "value"}[i]
			l, err := binary.ReadUvarint(hr)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return info, truncated(fmt.Sprintf("inside record %d", info.Records+1))
			}
			if err != nil || l > limit || i == 0 && l == 0 {
				return info, fmt.Errorf("%w: record %d has an impossible %s length (offset %d)", ErrBadBackup, info.Records+1, what, hr.n)
			}
			if fn == nil {
				if m, err := io.CopyN(io.Discard, hr, int64(l)); err != nil {
					if err == io.EOF && uint64(m) < l {
						return info, truncated(fmt.Sprintf("inside record %d", info.Records+1))
					}
					return info, fmt.Errorf("read backup: %w", err)
				}
				continue
			}
			kv[i] = make([]byte, l)
			if _, err := io.ReadFull(hr, kv[i]); err != nil {
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					return info, truncated(fmt.Sprintf("inside record %d", info.Records+1))
				}
				return info, fmt.Errorf("read backup: %w", err)
			}
		}
		info.Records++
		if fn != nil {
			if err := fn(kv[0], kv[1]); err != nil {
				return info, err
			}
		}
	}
	var count [8]byte
	if _, err := io.ReadFull(hr, count[:]); err != nil {
		return info, truncated("inside the trailer")
	}
	want := hr.h.Sum(nil)
	var sum [checksumSize]byte
	if _, err := io.ReadFull(hr.r, sum[:]); err != nil {
		return info, truncated("inside the trailer's checksum")
	}
	info.Bytes = hr.n + checksumSize
	info.SHA256 = hex.EncodeToString(sum[:])
	if !bytes.Equal(sum[:], want) {
		return info, fmt.Errorf("%w: checksum mismatch: the trailer says sha256 %s, the content hashes to %s", ErrBadBackup, info.SHA256, hex.EncodeToString(want))
	}
	if c := binary.BigEndian.Uint64(count[:]); c != info.Records {
		return info, fmt.Errorf("%w: the trailer counts %d records, the backup holds %d", ErrBadBackup, c, info.Records)
	}
	if _, err := hr.r.ReadByte(); err != io.EOF {
		if err != nil {
			return info, fmt.Errorf("read backup: %w", err)
		}
		return info, fmt.Errorf("%w: data after the trailer", ErrBadBackup)
	}
	return info, nil
}

// legacyBackup reports whether b starts like Badger's backup stream (what
// stackd wrote before the current format): an 8-byte little-endian frame
// length followed by a KVList protobuf (field 1, length-delimited: 0x0a).
func legacyBackup(b []byte) bool {
	if len(b) < 9 {
		return false
	}
	l := binary.LittleEndian.Uint64(b[:8])
	return l > 0 && l <= maxBackupFrame && b[8] == 0x0a
}

// Restore verifies the backup in r completely, then loads it into dir,
// which must not exist, be empty, or hold a state with nothing but
// metadata (what a stackd that refused a lost state leaves), and must not
// be open. Nothing is
// written before the whole backup has verified; the records are then
// loaded into a new directory next to dir (".<name>.restore-*") that is
// renamed to dir only when complete, so a failed or killed restore never
// leaves a partial state in dir. The backup is read twice (verify, load),
// and the second read is verified too.
//
// Errors: ErrNotEmpty (wrapped) for a dir holding anything else;
// ErrLegacyBackup for a
// backup in the earlier format (see RestoreLegacy); ErrBadBackup (wrapped)
// for a truncated, empty or corrupt backup; or a wrapped I/O or Badger
// error. On any error dir is as it was.
func Restore(dir string, r io.ReadSeeker) (BackupInfo, error) {
	return RestoreWith(dir, r, nil)
}

// RestoreWith is Restore of a backup of a state encrypted with key (nil:
// none); the restored state is encrypted with key too.
func RestoreWith(dir string, r io.ReadSeeker, key []byte) (BackupInfo, error) {
	replace, err := restorable(dir)
	if err != nil {
		return BackupInfo{}, err
	}
	info, err := VerifyWith(r, key)
	if err != nil {
		return info, fmt.Errorf("restore state into %s: %w", dir, err)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return info, fmt.Errorf("restore state into %s: %w", dir, err)
	}
	pr, err := decryptBackup(r, key)
	if err != nil {
		return info, fmt.Errorf("restore state into %s: %w", dir, err)
	}
	err = restoreVia(dir, replace, key, func(db *badger.DB) error {
		wb := db.NewWriteBatch()
		defer wb.Cancel()
		got, err := readBackup(pr, func(k, v []byte) error { return wb.Set(k, v) })
		if err != nil {
			return err
		}
		if got.SHA256 != info.SHA256 {
			return fmt.Errorf("%w: the file changed while it was restored", ErrBadBackup)
		}
		return wb.Flush()
	})
	if err != nil {
		return info, fmt.Errorf("restore state into %s: %w", dir, err)
	}
	return info, nil
}

// RestoreLegacy loads a backup written by stackd before the current format
// (Badger's own backup stream, which carries no record count and no
// checksum) into dir, under the same rules as Restore. It refuses an empty
// stream and one that holds no record, and what Badger's loader refuses,
// but a legacy backup cut off between two of its frames cannot be told from
// a complete one: prefer a backup in the current format.
//
// Errors: as Restore.
func RestoreLegacy(dir string, r io.Reader) (BackupInfo, error) {
	info := BackupInfo{}
	replace, err := restorable(dir)
	if err != nil {
		return info, err
	}
	err = restoreVia(dir, replace, nil, func(db *badger.DB) error {
		if err := load(db, r); err != nil {
			return fmt.Errorf("%w: %v", ErrBadBackup, err)
		}
		return db.View(func(txn *badger.Txn) error {
			opts := badger.DefaultIteratorOptions
			opts.PrefetchValues = false
			it := txn.NewIterator(opts)
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				info.Records++
			}
			if info.Records == 0 {
				return fmt.Errorf("%w: it holds no record", ErrBadBackup)
			}
			return nil
		})
	})
	if err != nil {
		return info, fmt.Errorf("restore state into %s: %w", dir, err)
	}
	return info, nil
}

// restorable checks that dir does not exist, is an empty directory, or
// holds a state with nothing but metadata (what a stackd that refused to
// deploy from a lost state leaves: the keys it generated at start). It
// reports whether dir exists and must be replaced.
func restorable(dir string) (replace bool, err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("restore state into %s: %w", dir, err)
	case len(entries) == 0:
		return true, nil
	case metadataOnly(dir):
		return true, nil
	}
	return false, fmt.Errorf("restore state into %s: %w (it holds a state with records, or something else): move it aside or restore into a new directory", dir, ErrNotEmpty)
}

// metadataOnly reports whether dir holds a state that opens (so it is
// neither damaged nor in use) and has no key outside meta/.
func metadataOnly(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, badger.ManifestFilename)); err != nil {
		return false
	}
	s, err := Open(dir)
	if err != nil {
		return false
	}
	defer s.Close()
	only := true
	err = s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid() && only; it.Next() {
			only = bytes.HasPrefix(it.Item().Key(), []byte(prefixMeta))
		}
		return nil
	})
	return err == nil && only
}

// restoreVia opens a Badger database in a new directory next to dir, runs
// fill on it, closes it, syncs its files and renames it to dir (moving an
// existing dir aside first when replace is set, and removing it once the
// new one is in place). On error the new directory is removed and dir is
// as it was.
func restoreVia(dir string, replace bool, key []byte, fill func(db *badger.DB) error) (err error) {
	dir = filepath.Clean(dir)
	parent, base := filepath.Split(dir)
	if parent == "" {
		parent = "."
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".restore-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	db, err := badger.Open(withKey(badgerOptions(tmp, false), key))
	if err != nil {
		return err
	}
	if err := fill(db); err != nil {
		db.Close()
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	if err := syncTree(tmp); err != nil {
		return err
	}
	if !replace {
		if err := os.Rename(tmp, dir); err != nil {
			return err
		}
		return syncDir(parent)
	}
	// A free name to move dir to (os.Rename never replaces a directory).
	old, err := os.MkdirTemp(parent, "."+base+".replaced-*")
	if err != nil {
		return err
	}
	if err := os.Remove(old); err != nil {
		return err
	}
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return fmt.Errorf("%w (and moving %s back to %s failed: %v)", err, old, dir, rerr)
		}
		return err
	}
	if err := syncDir(parent); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// syncTree fsyncs every regular file in dir, then dir.
func syncTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory, making renames and creations in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// hashReader hashes and counts what is read through it.
type hashReader struct {
	r *bufio.Reader
	h hash.Hash
	n int64
}

func (r *hashReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	return n, err
}

func (r *hashReader) ReadByte() (byte, error) {
	b, err := r.r.ReadByte()
	if err == nil {
		r.h.Write([]byte{b})
		r.n++
	}
	return b, err
}

// ---- the legacy format ------------------------------------------------------

// maxBackupFrame bounds one length-prefixed frame of a backup stream. Badger
// allocates a frame's length before reading it, so a malformed stream could
// ask for any amount of memory; real frames stay far below this.
const maxBackupFrame = 256 << 20

// load runs db.Load on r, checking the frame lengths on the way so that a
// malformed backup is an error and not a panic deep inside Badger.
func load(db *badger.DB, r io.Reader) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed backup: %v", p)
		}
	}()
	fr := &frameReader{r: r}
	err = db.Load(fr, 256)
	if fr.err != nil {
		return fr.err
	}
	return err
}

// frameReader passes a backup stream (frames of an 8-byte little-endian
// length followed by that many bytes) through, failing on a frame longer
// than maxBackupFrame.
type frameReader struct {
	r      io.Reader
	head   [8]byte
	inHead int    // bytes of the current length prefix read so far
	body   uint64 // bytes of the current frame body still to come
	err    error
}

func (f *frameReader) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	// Never read past the current length prefix, so it can be checked
	// before Badger sees it.
	if f.body == 0 {
		p = p[:min(len(p), len(f.head)-f.inHead)]
	} else {
		p = p[:min(uint64(len(p)), f.body)]
	}
	n, err := f.r.Read(p)
	if f.body > 0 {
		f.body -= uint64(n)
		return n, err
	}
	copy(f.head[f.inHead:], p[:n])
	f.inHead += n
	if f.inHead == len(f.head) {
		f.inHead = 0
		f.body = binary.LittleEndian.Uint64(f.head[:])
		if f.body > maxBackupFrame {
			f.err = fmt.Errorf("malformed backup: frame of %d bytes", f.body)
			return 0, f.err
		}
	}
	return n, err
}

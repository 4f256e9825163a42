package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// checkDir looks for damage Badger would not report, or would report by
// panicking in one of its own goroutines (which no recover can catch), and
// returns ErrDamaged (wrapped, naming what is wrong) before Badger opens
// the directory. It only reads. What it catches:
//
//   - table files but no MANIFEST, or a MANIFEST that cannot be read or
//     lists none of them: Badger would delete every table file and open an
//     empty state;
//   - a KEYREGISTRY too short to hold its header;
//   - a table the MANIFEST lists that is missing, empty, truncated, zeroed
//     or fails its checksums: Badger would fail, panic while opening it, or
//     silently ignore it (its "CHECKSUM_MISMATCH: ignoring table").
//
// Table files the MANIFEST does not list while it lists others, or while a
// memtable's write-ahead log (*.mem) is there, are what a crash between
// writing a table and recording it leaves behind (the log still holds their
// data, and is only removed once the table is recorded); Badger deletes
// them, rightly. After a clean close no *.mem file is left, so a MANIFEST
// listing none of the tables then is damage. Encrypted tables are not
// checked.
func checkDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("open state %s: %w", dir, err)
	}
	tables := map[uint64]string{}
	manifest, wal := false, false
	damaged := func(format string, args ...any) error {
		return fmt.Errorf("open state %s: %w: %s", dir, ErrDamaged, fmt.Sprintf(format, args...))
	}
	for _, e := range entries {
		switch name := e.Name(); {
		case name == badger.ManifestFilename:
			manifest = true
		case name == badger.KeyRegistryFileName:
			// An initialisation vector and a sanity text at least: Badger
			// fails on less, leaking the goroutines it has started.
			if info, err := e.Info(); err == nil && info.Size() < keyRegistryMin {
				return damaged("the %s file is truncated (%d bytes)", name, info.Size())
			}
		case strings.HasSuffix(name, ".mem"):
			if info, err := e.Info(); err == nil && info.Size() > 0 {
				wal = true
			}
		case strings.HasSuffix(name, ".sst"):
			if id, ok := table.ParseFileID(name); ok {
				tables[id] = name
			}
		}
	}
	if len(tables) == 0 && !manifest {
		return nil // a new directory, or one whose every file is gone
	}
	if !manifest {
		return damaged("the MANIFEST file is missing but %s exist (%s); opening it would delete them and start from an empty state", plural(len(tables), "table file"), tableNames(tables))
	}
	fp, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		return fmt.Errorf("open state %s: %w", dir, err)
	}
	opts := badgerOptions(dir, false)
	mf, _, err := badger.ReplayManifestFile(fp, opts.ExternalMagicVersion, opts)
	fp.Close()
	if err != nil {
		return damaged("the MANIFEST cannot be read (%v)", err)
	}
	listed := 0
	for id := range tables {
		if _, ok := mf.Tables[id]; ok {
			listed++
		}
	}
	if listed == 0 && len(tables) > 0 && !wal {
		return damaged("the MANIFEST lists none of the %s in the directory (%s): it was truncated or replaced, and opening would delete them and start from an empty state", plural(len(tables), "table file"), tableNames(tables))
	}
	ids := make([]uint64, 0, len(mf.Tables))
	for id := range mf.Tables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		tm := mf.Tables[id]
		name := table.IDToFilename(id)
		if _, ok := tables[id]; !ok {
			return damaged("table %s listed in the MANIFEST is missing", name)
		}
		if tm.KeyID != 0 {
			continue // encrypted: cannot be read without the key
		}
		if err := checkTable(filepath.Join(dir, name), tm.Compression, opts.BlockSize); err != nil {
			return damaged("table %s is unreadable (%v)", name, err)
		}
	}
	return nil
}

// keyRegistryMin is the smallest KEYREGISTRY Badger can read: a 16-byte
// AES initialisation vector and the 12-byte sanity text "Hello Badger".
const keyRegistryMin = 16 + 12

// checkTable opens one table read-only and verifies every block's
// checksum, turning Badger's panics on garbage into errors.
func checkTable(path string, compression options.CompressionType, blockSize int) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("badger panicked reading it: %s", firstLine(fmt.Sprint(p)))
		}
	}()
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if info.Size() == 0 {
		return errors.New("the file is empty")
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer func() {
		// Never truncate, never delete (Table.DecrRef would). OpenTable
		// closes the file itself on some errors: unmapping twice could
		// unmap someone else's mapping.
		if _, err := mf.Fd.Stat(); err == nil {
			mf.Close(-1)
		}
	}()
	pool := z.NewAllocatorPool(1)
	defer pool.Release()
	_, err = table.OpenTable(mf, table.Options{
		ReadOnly: true, BlockSize: blockSize, Compression: compression,
		ChkMode: options.OnTableRead, AllocPool: pool,
	})
	return err
}

// classifyOpenError wraps an error of badger.Open: a locked directory is
// ErrLocked, lack of space ErrNoSpace, permissions stay what they are, and
// anything else means Badger could not make sense of the directory:
// ErrDamaged.
func classifyOpenError(dir string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "directory lock"):
		return fmt.Errorf("open state %s: %w: %v", dir, ErrLocked, err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("open state %s: %w: %v", dir, ErrNoSpace, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("open state %s: %w", dir, err)
	}
	return fmt.Errorf("open state %s: %w: %v", dir, ErrDamaged, firstLine(msg))
}

func tableNames(tables map[uint64]string) string {
	names := make([]string, 0, len(tables))
	for _, n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 5 {
		names = append(names[:5], "...")
	}
	return strings.Join(names, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// firstLine is the first line of s that says something (Badger's panics
// carry dumps and "== ... ==" banners).
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "==") {
			return l
		}
	}
	return "no detail"
}

package state

import (
	"bytes"
	"fmt"
	"io"
)

// RestoreInto restores a backup (either backend's: the format is the same)
// into the open store s, a PostgreSQL state; a state directory is
// restored with Restore. Like Restore it verifies the whole backup first
// and refuses a state that holds records (anything but metadata, which it
// replaces); it writes every record in one transaction, so a failed
// restore leaves the state as it was. A backup of an encrypted state
// needs the same key as s.
//
// Errors: ErrBadBackup, ErrLegacyBackup, ErrEncryptionKey (wrapped),
// ErrNotEmpty, ErrInvalid (s is a Badger state), ErrClosed.
func (s *Store) RestoreInto(r io.ReadSeeker) (BackupInfo, error) {
	fail := func(info BackupInfo, err error) (BackupInfo, error) {
		return info, fmt.Errorf("restore state: %w", err)
	}
	if s.db != nil {
		return fail(BackupInfo{}, fmt.Errorf("%w: a state directory is restored with stackd state restore into a new directory", ErrInvalid))
	}
	info, err := VerifyWith(r, s.key)
	if err != nil {
		return fail(info, err)
	}
	err = s.update(func(txn kvTxn) error {
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return err
		}
		pr, err := decryptBackup(r, s.key)
		if err != nil {
			return err
		}
		var meta [][]byte
		err = txn.Scan(nil, true, func(k, _ []byte) error {
			if !bytes.HasPrefix(k, []byte(prefixMeta)) {
				return fmt.Errorf("%w: it holds records (%q, ...): restore into a new database or schema", ErrNotEmpty, k)
			}
			meta = append(meta, bytes.Clone(k))
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range meta {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		got, err := readBackup(pr, txn.Set)
		if err != nil {
			return err
		}
		if got.SHA256 != info.SHA256 {
			return fmt.Errorf("%w: the file changed while it was restored", ErrBadBackup)
		}
		return nil
	})
	if err != nil {
		return fail(info, err)
	}
	return info, nil
}

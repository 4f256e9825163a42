package state

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEncryptionAtRest: an encrypted state holds no record in clear on
// disk, opens only with its key, and its backups are encrypted, verify and
// restore only with the key, into a state encrypted with it.
func TestEncryptionAtRest(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	dir := filepath.Join(t.TempDir(), "state")
	s, err := OpenWith(dir, OpenOptions{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	const marker = "very-recognisable-stack-set-name"
	if _, err := s.CreateStackSet(marker, t0); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "state.backup")
	if _, err := s.BackupFile(backup); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Nothing readable on disk: not in the state's files, not in the backup.
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range append(files, backup) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(marker)) {
			t.Errorf("%s holds a record in clear", filepath.Base(f))
		}
	}

	if _, err := Open(dir); !errors.Is(err, ErrEncryptionKey) {
		t.Errorf("Open without the key: %v, want ErrEncryptionKey", err)
	}
	if _, err := OpenWith(dir, OpenOptions{EncryptionKey: bytes.Repeat([]byte{8}, 32)}); !errors.Is(err, ErrEncryptionKey) {
		t.Errorf("Open with another key: %v, want ErrEncryptionKey", err)
	}
	s2, err := OpenWith(dir, OpenOptions{EncryptionKey: key})
	if err != nil {
		t.Fatalf("Open with the key: %v", err)
	}
	if _, err := s2.StackSetByName(marker); err != nil {
		t.Errorf("the record after reopening: %v", err)
	}
	s2.Close()

	f, err := os.Open(backup)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Verify(f); !errors.Is(err, ErrEncryptionKey) {
		t.Errorf("Verify of an encrypted backup without the key: %v", err)
	}
	f.Seek(0, 0)
	if _, err := VerifyWith(f, bytes.Repeat([]byte{8}, 32)); !errors.Is(err, ErrEncryptionKey) {
		t.Errorf("Verify with another key: %v", err)
	}
	f.Seek(0, 0)
	info, err := VerifyWith(f, key)
	if err != nil || info.Records == 0 {
		t.Fatalf("Verify with the key: %+v, %v", info, err)
	}
	f.Seek(0, 0)
	restored := filepath.Join(t.TempDir(), "restored")
	if _, err := RestoreWith(restored, f, key); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(restored); !errors.Is(err, ErrEncryptionKey) {
		t.Errorf("the restored state opens without the key: %v", err)
	}
	s3, err := OpenWith(restored, OpenOptions{EncryptionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if _, err := s3.StackSetByName(marker); err != nil {
		t.Errorf("the record in the restored state: %v", err)
	}
	if _, err := OpenWith(filepath.Join(t.TempDir(), "x"), OpenOptions{EncryptionKey: []byte("short")}); err == nil || !strings.Contains(err.Error(), "16, 24 or 32") {
		t.Errorf("a 5-byte key: %v", err)
	}
}

package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// backupOf populates a store (with a deleted stack set and an overwritten
// meta key, which must not come back) and returns it and its backup.
func backupOf(t *testing.T) (*Store, []byte) {
	t.Helper()
	s := newStore(t)
	populate(t, s)
	tmp := mustCreate(t, s, "tmp")
	if err := s.DeleteStackSet(tmp.ID); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2"} {
		if err := s.SetMeta("schema", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	info, err := s.Backup(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.Records, uint64(len(dump(t, s))); got != want {
		t.Errorf("Backup counted %d records, the state holds %d keys", got, want)
	}
	if info.Bytes != int64(buf.Len()) {
		t.Errorf("Backup says %d bytes, wrote %d", info.Bytes, buf.Len())
	}
	return s, buf.Bytes()
}

func TestBackupRestore(t *testing.T) {
	s, backup := backupOf(t)
	t.Run("new dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "restored", "state")
		info, err := Restore(dir, bytes.NewReader(backup))
		if err != nil {
			t.Fatal(err)
		}
		r := openAt(t, dir)
		if diff := cmp.Diff(dump(t, s), dump(t, r)); diff != "" {
			t.Errorf("restored state (-original +restored):\n%s", diff)
		}
		if got, want := info.Records, uint64(len(dump(t, s))); got != want {
			t.Errorf("Restore reports %d records, want %d", got, want)
		}
		checkClean(t, r)
		if v, err := r.Meta("schema"); err != nil || string(v) != "2" {
			t.Errorf("restored Meta = %q, %v; want 2", v, err)
		}
		if _, err := r.StackSetByName("tmp"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the deleted stack set came back: %v", err)
		}
		assertNoLeftovers(t, filepath.Dir(dir))
	})
	t.Run("empty existing dir", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := Restore(dir, bytes.NewReader(backup)); err != nil {
			t.Fatal(err)
		}
		r := openAt(t, dir)
		if got, want := len(dump(t, r)), len(dump(t, s)); got != want {
			t.Errorf("restored %d keys, want %d", got, want)
		}
	})
	t.Run("non-empty dir", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Restore(dir, bytes.NewReader(backup)); !errors.Is(err, ErrNotEmpty) {
			t.Errorf("Restore into non-empty dir: got %v, want ErrNotEmpty", err)
		}
	})
	t.Run("dir holding only metadata", func(t *testing.T) {
		// What a stackd that refused to deploy from a lost state leaves.
		dir := filepath.Join(t.TempDir(), "state")
		m, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetMeta("custom/broker_key", []byte("k")); err != nil {
			t.Fatal(err)
		}
		m.Close()
		if _, err := Restore(dir, bytes.NewReader(backup)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(dump(t, s), dump(t, openAt(t, dir))); diff != "" {
			t.Errorf("restored state (-original +restored):\n%s", diff)
		}
		assertNoLeftovers(t, filepath.Dir(dir))
	})
	t.Run("dir holding a state", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		m, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		mustCreate(t, m, "db")
		m.Close()
		if _, err := Restore(dir, bytes.NewReader(backup)); !errors.Is(err, ErrNotEmpty) {
			t.Errorf("Restore over a state with a stack set: got %v, want ErrNotEmpty", err)
		}
		if _, err := openAt(t, dir).StackSetByName("db"); err != nil {
			t.Errorf("the state refused to be replaced changed: %v", err)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		_, err := Restore(dir, strings.NewReader("this is not a backup at all"))
		if !errors.Is(err, ErrBadBackup) {
			t.Fatalf("Restore(garbage): got %v, want ErrBadBackup", err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("failed Restore left %s behind (%v)", dir, err)
		}
	})
}

// TestRestoreRefusesDamagedBackups: every truncation, an empty file, every
// flipped byte, a wrong record count and trailing data are refused with
// ErrBadBackup, and neither the target directory nor a state already there
// changes.
func TestRestoreRefusesDamagedBackups(t *testing.T) {
	s, backup := backupOf(t)
	want := dump(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "state")
	// An existing empty directory must stay (empty); a missing one must
	// stay missing.
	emptyDir := t.TempDir()
	refused := func(t *testing.T, name string, b []byte) {
		t.Helper()
		if _, err := Verify(bytes.NewReader(b)); !errors.Is(err, ErrBadBackup) {
			t.Fatalf("%s: Verify: got %v, want ErrBadBackup", name, err)
		}
		for _, d := range []string{dir, emptyDir} {
			if _, err := Restore(d, bytes.NewReader(b)); !errors.Is(err, ErrBadBackup) {
				t.Fatalf("%s: Restore: got %v, want ErrBadBackup", name, err)
			}
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: refused Restore created %s (%v)", name, dir, err)
		}
		if entries, err := os.ReadDir(emptyDir); err != nil || len(entries) > 0 {
			t.Fatalf("%s: refused Restore wrote into %s: %v %v", name, emptyDir, entries, err)
		}
	}

	refused(t, "0 bytes", nil)
	for n := 1; n < len(backup); n++ {
		refused(t, "truncated", backup[:n])
	}
	for i := range backup {
		b := bytes.Clone(backup)
		b[i] ^= 0x01
		refused(t, "flipped byte", b)
	}
	refused(t, "trailing data", append(bytes.Clone(backup), 0))

	// The trailer's count is wrong but its checksum matches: caught by the
	// count.
	b := bytes.Clone(backup)
	countAt := len(b) - checksumSize - 8
	binary.BigEndian.PutUint64(b[countAt:], binary.BigEndian.Uint64(b[countAt:])+1)
	sum := sha256.Sum256(b[:len(b)-checksumSize])
	copy(b[len(b)-checksumSize:], sum[:])
	_, err := Verify(bytes.NewReader(b))
	if !errors.Is(err, ErrBadBackup) || !strings.Contains(err.Error(), "trailer counts") {
		t.Errorf("wrong count: got %v, want ErrBadBackup about the trailer's count", err)
	}
	refused(t, "wrong count", b)

	// A state already in place is left alone by a refused restore.
	existing := filepath.Join(t.TempDir(), "state")
	if _, err := Restore(existing, bytes.NewReader(backup)); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(existing, bytes.NewReader(backup[:len(backup)/2])); err == nil {
		t.Error("Restore over an existing state succeeded")
	}
	r := openAt(t, existing)
	if diff := cmp.Diff(want, dump(t, r)); diff != "" {
		t.Errorf("state after a refused restore (-want +got):\n%s", diff)
	}
	assertNoLeftovers(t, parent)
}

// changingReader serves a on the first pass and b after a Seek: the file
// changed between Restore's verification and its load.
type changingReader struct {
	r    *bytes.Reader
	next []byte
}

func (c *changingReader) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *changingReader) Seek(off int64, whence int) (int64, error) {
	if c.next != nil {
		c.r, c.next = bytes.NewReader(c.next), nil
	}
	return c.r.Seek(off, whence)
}

func TestRestoreRefusesFileChangedBetweenPasses(t *testing.T) {
	_, backup := backupOf(t)
	_, other := backupOf(t) // another valid backup (different time, ids)
	dir := filepath.Join(t.TempDir(), "state")
	_, err := Restore(dir, &changingReader{r: bytes.NewReader(backup), next: other})
	if !errors.Is(err, ErrBadBackup) {
		t.Fatalf("got %v, want ErrBadBackup", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused Restore created %s (%v)", dir, err)
	}
	assertNoLeftovers(t, filepath.Dir(dir))
}

func TestBackupOfEmptyState(t *testing.T) {
	s := newStore(t)
	var buf bytes.Buffer
	info, err := s.Backup(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if info.Records != 0 {
		t.Errorf("Records = %d, want 0", info.Records)
	}
	// An empty state's backup is valid (it is what was backed up), and
	// restores to an empty state.
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := Restore(dir, bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, openAt(t, dir)); len(got) != 0 {
		t.Errorf("restored %d keys, want none", len(got))
	}
}

func TestLegacyBackup(t *testing.T) {
	s, _ := backupOf(t)
	var legacy bytes.Buffer
	if _, err := s.db.Backup(&legacy, 0); err != nil { // what stackd wrote before
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := Restore(dir, bytes.NewReader(legacy.Bytes())); !errors.Is(err, ErrLegacyBackup) {
		t.Fatalf("Restore(legacy): got %v, want ErrLegacyBackup", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused Restore created %s (%v)", dir, err)
	}
	info, err := RestoreLegacy(dir, bytes.NewReader(legacy.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	r := openAt(t, dir)
	if diff := cmp.Diff(dump(t, s), dump(t, r)); diff != "" {
		t.Errorf("restored legacy state (-original +restored):\n%s", diff)
	}
	if info.Records != uint64(len(dump(t, s))) {
		t.Errorf("RestoreLegacy reports %d records, want %d", info.Records, len(dump(t, s)))
	}

	// Empty, or without a record: refused.
	var none bytes.Buffer
	if _, err := newStore(t).db.Backup(&none, 0); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"0 bytes": nil, "no record": none.Bytes(), "cut in a frame": legacy.Bytes()[:legacy.Len()-3]} {
		dir := filepath.Join(t.TempDir(), "state")
		if _, err := RestoreLegacy(dir, bytes.NewReader(b)); !errors.Is(err, ErrBadBackup) {
			t.Errorf("RestoreLegacy(%s): got %v, want ErrBadBackup", name, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("RestoreLegacy(%s) left %s behind (%v)", name, dir, err)
		}
		assertNoLeftovers(t, filepath.Dir(dir))
	}
}

// failAfter fails every write after n bytes with ENOSPC, as a full disk does.
type failAfter struct {
	w io.Writer
	n int
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n, _ := f.w.Write(p[:f.n])
		f.n = 0
		return n, &os.PathError{Op: "write", Path: "backup", Err: syscall.ENOSPC}
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func TestBackupFile(t *testing.T) {
	s, _ := backupOf(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "state.bak")
	info, err := s.BackupFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v, want 0600", fi.Mode().Perm())
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if got.SHA256 != info.SHA256 || got.Records != info.Records || got.Bytes != int64(len(first)) {
		t.Errorf("Verify = %+v, BackupFile said %+v (%d bytes on disk)", got, info, len(first))
	}

	// The state changes, and the next backups fail part-way (a full disk):
	// the previous backup is what stays at path.
	if err := s.SetMeta("after", []byte("first backup")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, headerSize, len(first) / 2, len(first) - 1} {
		_, err := s.backupFile(path, func(w io.Writer) io.Writer { return &failAfter{w: w, n: n} })
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("backup failing after %d bytes: got %v, want ENOSPC", n, err)
		}
		now, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(now, first) {
			t.Fatalf("a backup failing after %d bytes changed the previous backup", n)
		}
		assertNoLeftovers(t, dir)
	}

	// A successful second backup replaces the first.
	second, err := s.BackupFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if second.Records != info.Records+1 {
		t.Errorf("second backup has %d records, want %d", second.Records, info.Records+1)
	}
	assertNoLeftovers(t, dir)

	if _, err := s.BackupFile(filepath.Join(dir, "missing", "state.bak")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backup into a missing directory: got %v, want ErrNotExist", err)
	}
}

// assertNoLeftovers fails if dir holds a temporary file or directory of a
// backup or restore.
func assertNoLeftovers(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") || strings.Contains(e.Name(), ".restore-") || strings.Contains(e.Name(), ".replaced-") {
			t.Errorf("leftover %s in %s", e.Name(), dir)
		}
	}
}

// TestSaveBackup: a backup streamed from elsewhere (a daemon) replaces
// FILE only when it verifies; a stream cut short leaves FILE as it was.
func TestSaveBackup(t *testing.T) {
	s := newStore(t)
	mustCreate(t, s, "web")
	var stream bytes.Buffer
	if _, err := s.Backup(&stream); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.backup")
	info, err := SaveBackup(path, nil, func(w io.Writer) error { _, err := w.Write(stream.Bytes()); return err })
	if err != nil || info.Records == 0 {
		t.Fatalf("SaveBackup: %+v, %v", info, err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := stream.Bytes()[:stream.Len()/2]
	if _, err := SaveBackup(path, nil, func(w io.Writer) error { _, err := w.Write(cut); return err }); !errors.Is(err, ErrBadBackup) {
		t.Fatalf("SaveBackup of a stream cut short: %v, want ErrBadBackup", err)
	}
	after, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("a refused backup changed FILE (%v)", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".state.backup.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestLocked: a state directory is locked exactly while a Store has it open.
func TestLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if Locked(dir) {
		t.Fatal("a missing directory is locked")
	}
	s := openAt(t, dir)
	if !Locked(dir) {
		t.Fatal("an open state is not locked")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if Locked(dir) {
		t.Fatal("a closed state is still locked")
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateEncryptedAtRest: with --state-encryption-key-file the state and
// its backups are encrypted; every command that opens them needs the key
// and says so; backup, verify and restore work with it.
func TestStateEncryptedAtRest(t *testing.T) {
	f := newFixture(t)
	keyFile := filepath.Join(t.TempDir(), "state-key")
	if err := os.WriteFile(keyFile, []byte("Zm9yLXRlc3RzLW9ubHktMzItcmFuZG9tLWJ5dGVz\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withKey := func(args ...string) []string { return append(args, "--state-encryption-key-file", keyFile) }
	mustStackd(t, withKey(append([]string{"apply"}, f.flags()...)...)...)

	if res := stackd(t, "status", "--state-dir", f.state); res.err == nil || !strings.Contains(res.err.Error(), "--state-encryption-key-file") {
		t.Errorf("status without the key: %s", res)
	}
	if res := mustStackd(t, withKey("status", "--state-dir", f.state)...); !strings.Contains(res.stdout, "web") {
		t.Errorf("status with the key: %s", res)
	}
	backup := filepath.Join(t.TempDir(), "state.backup")
	mustStackd(t, withKey("state", "backup", backup, "--state-dir", f.state)...)
	if b, _ := os.ReadFile(backup); !strings.HasPrefix(string(b), "age-encryption.org/v1") {
		t.Errorf("the backup is not age-encrypted: %.40q", b)
	}
	if res := stackd(t, "state", "verify", backup); res.err == nil || !strings.Contains(res.err.Error(), "encrypted") {
		t.Errorf("verify without the key: %s", res)
	}
	mustStackd(t, withKey("state", "verify", backup)...)
	restored := filepath.Join(t.TempDir(), "restored")
	mustStackd(t, withKey("state", "restore", backup, "--state-dir", restored)...)
	if res := mustStackd(t, withKey("state", "check", "--state-dir", restored)...); !strings.Contains(res.stdout, "state is consistent") {
		t.Errorf("check of the restored state: %s", res)
	}
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("tooshort"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := stackd(t, "status", "--state-dir", f.state, "--state-encryption-key-file", short); res.err == nil || !strings.Contains(res.err.Error(), "at least 16") {
		t.Errorf("a short secret: %s", res)
	}
}

package secrets

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// The files in testdata were encrypted with the sops command for the
// throwaway age key in testdata/age-key.txt (it protects nothing).
func testFS(t *testing.T) *FS {
	t.Helper()
	m := fstest.MapFS{}
	for _, name := range []string{"secrets.enc.json", "secrets.enc.yaml", "secrets.enc.tfvars"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		m[name] = &fstest.MapFile{Data: b}
	}
	m["plain.tfvars"] = &fstest.MapFile{Data: []byte("a = 1\n")}
	m["main.hcl"] = &fstest.MapFile{Data: []byte("# ENC[AES256_GCM, in a comment\n")}
	return New(m)
}

func TestDecrypt(t *testing.T) {
	key, _ := filepath.Abs(filepath.Join("testdata", "age-key.txt"))
	t.Setenv("SOPS_AGE_KEY_FILE", key)
	t.Setenv("SOPS_AGE_KEY", "")
	f := testFS(t)
	for name, want := range map[string]string{
		"secrets.enc.json": `"db_password":"hunter2-from-sops"`,
		"secrets.enc.yaml": `"db_password":"hunter2-from-sops-yaml"`,
	} {
		b, err := f.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s decrypts to %q, not JSON: %v", name, b, err)
		}
		if !strings.Contains(strings.ReplaceAll(string(b), " ", ""), want) || strings.Contains(string(b), `"sops"`) {
			t.Errorf("%s decrypts to %s", name, b)
		}
		if !f.Secret(name) {
			t.Errorf("%s: not reported secret", name)
		}
	}
	b, err := f.ReadFile("secrets.enc.tfvars")
	if err != nil || !strings.Contains(string(b), `db_password = "hunter2-from-sops-tfvars"`) {
		t.Errorf("tfvars encrypted whole decrypts to %q, %v", b, err)
	}
	for _, name := range []string{"plain.tfvars", "main.hcl"} {
		if f.Secret(name) {
			t.Errorf("%s reported secret", name)
		}
	}
}

// TestNoKey: without a key the file is an error that says what to give,
// never its ciphertext passed on as variables.
func TestNoKey(t *testing.T) {
	t.Setenv("SOPS_AGE_KEY_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("SOPS_AGE_KEY", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	_, err := testFS(t).ReadFile("secrets.enc.json")
	if err == nil || !strings.Contains(err.Error(), "--age-key-file") {
		t.Fatalf("ReadFile without a key: %v", err)
	}
}

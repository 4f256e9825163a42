// Package secrets decrypts SOPS-encrypted variable files (what Flux users
// keep in Git: JSON, YAML, or any file such as tfvars encrypted whole) with
// the getsops/sops library, for age recipients; the key comes from
// SOPS_AGE_KEY_FILE or SOPS_AGE_KEY, as for the sops command.
//
// FS wraps a repository tree: reading a SOPS file through it yields the
// plaintext — a JSON object for a JSON or YAML document, the original text
// for a file encrypted whole — and Secret tells the engine which files were
// encrypted, so every value from one is sensitive (config.SecretFS).
package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/decrypt"
	"go.yaml.in/yaml/v3"
)

// FS decrypts the SOPS files of the file system it wraps. It remembers
// which files are SOPS files: the engine asks after reading one.
type FS struct {
	inner fs.FS
	mu    sync.Mutex
	sops  map[string]bool
}

// New wraps inner.
func New(inner fs.FS) *FS { return &FS{inner: inner, sops: map[string]bool{}} }

// isSOPSFile reports (and remembers) whether raw, the content of name, is
// a SOPS file.
func (f *FS) isSOPSFile(name string, raw []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	is, ok := f.sops[name]
	if !ok {
		is = isSOPS(name, raw)
		f.sops[name] = is
	}
	return is
}

// Open opens the file as it is (encrypted): only ReadFile decrypts.
func (f *FS) Open(name string) (fs.File, error) { return f.inner.Open(name) }

// ReadDir lists a directory of the wrapped file system.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(f.inner, name) }

// Stat describes a file of the wrapped file system.
func (f *FS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(f.inner, name) }

// ReadFile reads a file, decrypted when it is a SOPS file. A SOPS file that
// cannot be decrypted (no key, a key it is not encrypted for, a changed
// file whose MAC fails) is an error saying so, never its ciphertext.
func (f *FS) ReadFile(name string) ([]byte, error) {
	raw, err := fs.ReadFile(f.inner, name)
	if err != nil || !f.isSOPSFile(name, raw) {
		return raw, err
	}
	format := formatOf(name)
	plain, err := decrypt.DataWithFormat(raw, format)
	if err != nil {
		return nil, &fs.PathError{Op: "decrypt", Path: name, Err: fmt.Errorf("a SOPS file that cannot be decrypted (give an age key it is encrypted for: --age-key-file or SOPS_AGE_KEY_FILE): %s", firstLine(err.Error()))}
	}
	if format == formats.Yaml {
		return yamlToJSON(plain)
	}
	return plain, nil
}

// Secret reports whether name is a SOPS file (its plaintext is secret);
// a file already read is not read again.
func (f *FS) Secret(name string) bool {
	f.mu.Lock()
	is, ok := f.sops[name]
	f.mu.Unlock()
	if ok {
		return is
	}
	raw, err := fs.ReadFile(f.inner, name)
	return err == nil && f.isSOPSFile(name, raw)
}

// isSOPS reports whether raw is a SOPS-encrypted document: JSON or YAML
// with the "sops" metadata (a version and a MAC) and ENC[...] values.
// Templates (.hcl) never are.
func isSOPS(name string, raw []byte) bool {
	if strings.HasSuffix(name, ".hcl") || !bytes.Contains(raw, []byte("ENC[AES256_GCM,")) {
		return false
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil { // YAML is a superset of JSON
		return false
	}
	meta, ok := doc["sops"].(map[string]any)
	if !ok {
		return false
	}
	_, hasMAC := meta["mac"]
	_, hasVersion := meta["version"]
	return hasMAC && hasVersion
}

// formatOf is the SOPS format of a file by its name: JSON and YAML
// documents are encrypted value by value, anything else (tfvars) whole.
func formatOf(name string) formats.Format {
	switch strings.ToLower(path.Ext(name)) {
	case ".json":
		return formats.Json
	case ".yaml", ".yml":
		return formats.Yaml
	}
	return formats.Binary
}

// yamlToJSON turns a decrypted YAML document into JSON.
func yamlToJSON(src []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, errors.New("the decrypted YAML document is not a map of variables")
	}
	return b, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

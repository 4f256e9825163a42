package install

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
)

func TestLockFileRoundTrip(t *testing.T) {
	src, err := os.ReadFile("testdata/terraform.lock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseLockFile(src, "terraform.lock.hcl")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if diff := cmp.Diff(string(src), string(l.Bytes())); diff != "" {
		t.Errorf("written lock file differs from the parsed one (-parsed +written):\n%s", diff)
	}
	p, ok := l.Provider(MustParseAddress("hashicorp/local"))
	if !ok {
		t.Fatal("no lock for hashicorp/local")
	}
	if p.Version != "2.5.1" || p.Constraints != "~> 2.5" || len(p.Hashes) != 14 {
		t.Errorf("got version %q constraints %q %d hashes, want 2.5.1, ~> 2.5, 14", p.Version, p.Constraints, len(p.Hashes))
	}
	if _, ok := l.Provider(MustParseAddress("registry.opentofu.org/hashicorp/null")); !ok {
		t.Error("no lock for registry.opentofu.org/hashicorp/null")
	}

	// Written to disk and loaded again: the same bytes.
	path := filepath.Join(t.TempDir(), DefaultLockFileName)
	if err := WriteLockFile(path, l); err != nil {
		t.Fatal(err)
	}
	again, err := LoadLockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(again.Bytes()); got != string(src) {
		t.Errorf("after write and load: got\n%s\nwant\n%s", got, src)
	}
}

func TestLockFileWriteFromScratch(t *testing.T) {
	l := NewLockFile()
	l.SetProvider(ProviderLock{
		Address:     MustParseAddress("hashicorp/random"),
		Version:     "3.6.3",
		Constraints: MustParseConstraints("< 4, >= 3.0").String(),
		Hashes:      []string{"zh:b", "h1:a", "zh:b"},
	})
	l.SetProvider(ProviderLock{Address: MustParseAddress("example.com/acme/thing"), Version: "0.1.0"})
	want := `# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "example.com/acme/thing" {
  version = "0.1.0"
}

provider "registry.terraform.io/hashicorp/random" {
  version     = "3.6.3"
  constraints = ">= 3.0.0, < 4.0.0"
  hashes = [
    "h1:a",
    "zh:b",
  ]
}
`
	if diff := cmp.Diff(want, string(l.Bytes())); diff != "" {
		t.Errorf("lock file (-want +got):\n%s", diff)
	}
}

func TestLoadLockFileMissing(t *testing.T) {
	l, err := LoadLockFile(filepath.Join(t.TempDir(), "nope.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l.Providers()); n != 0 {
		t.Errorf("got %d providers, want 0", n)
	}
}

func TestParseLockFileErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"syntax", `provider "x" {`, "Unclosed configuration block"},
		{"short address", "provider \"hashicorp/local\" {\n  version = \"1.0.0\"\n}\n", "registry.terraform.io/hashicorp/local"},
		{"bad address", "provider \"a/b/c/d\" {\n  version = \"1.0.0\"\n}\n", "Invalid provider source address"},
		{"missing version", "provider \"registry.terraform.io/hashicorp/local\" {\n}\n", "version"},
		{"non-canonical version", "provider \"registry.terraform.io/hashicorp/local\" {\n  version = \"1.0\"\n}\n", "canonical form \"1.0.0\""},
		{"non-canonical constraints", "provider \"registry.terraform.io/hashicorp/local\" {\n  version = \"1.0.0\"\n  constraints = \">=1.0\"\n}\n", "normalized form: \">= 1.0.0\""},
		{"empty hashes", "provider \"registry.terraform.io/hashicorp/local\" {\n  version = \"1.0.0\"\n  hashes = []\n}\n", "at least one hash"},
		{"bad hash", "provider \"registry.terraform.io/hashicorp/local\" {\n  version = \"1.0.0\"\n  hashes = [\"abc\"]\n}\n", "SCHEME:VALUE"},
		{"unknown argument", "provider \"registry.terraform.io/hashicorp/local\" {\n  version = \"1.0.0\"\n  foo = 1\n}\n", "Unsupported argument"},
		{"unknown block", "thing \"x\" {\n}\n", "Unsupported block type"},
		{"duplicate", "provider \"registry.terraform.io/hashicorp/local\" {\n  version = \"1.0.0\"\n}\nprovider \"registry.terraform.io/hashicorp/local\" {\n  version = \"1.0.0\"\n}\n", "Duplicate provider lock"},
		{"too large", strings.Repeat("#", MaxLockFileSize+1), "too large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLockFile([]byte(tc.src), "lock.hcl")
			if err == nil {
				t.Fatal("got no error")
			}
			var diags hcl.Diagnostics
			if !errors.As(err, &diags) {
				t.Errorf("got %T, want hcl.Diagnostics", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseLockFileIgnoresModuleBlocks(t *testing.T) {
	src := "module \"x\" {\n}\n\nprovider \"registry.terraform.io/hashicorp/local\" {\n  version = \"1.0.0\"\n}\n"
	l, err := ParseLockFile([]byte(src), "lock.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l.Providers()); n != 1 {
		t.Errorf("got %d providers, want 1", n)
	}
}

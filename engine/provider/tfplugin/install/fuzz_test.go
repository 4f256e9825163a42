package install

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseLockFile: no input crashes the parser, and what it accepts is
// written in a form that parses to the same bytes again.
func FuzzParseLockFile(f *testing.F) {
	src, err := os.ReadFile("testdata/terraform.lock.hcl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(src))
	f.Add("provider \"registry.terraform.io/hashicorp/local\" {\n  version = \"1.0.0\"\n  hashes = [\"h1:x\"]\n}\n")
	f.Add("module \"x\" {}\n")
	f.Fuzz(func(t *testing.T, src string) {
		l, err := ParseLockFile([]byte(src), "fuzz.hcl")
		if err != nil {
			return
		}
		out := l.Bytes()
		again, err := ParseLockFile(out, "again.hcl")
		if err != nil {
			t.Fatalf("written lock file does not parse: %v\n%s", err, out)
		}
		if got := again.Bytes(); string(got) != string(out) {
			t.Fatalf("not stable:\n%s\nthen\n%s", out, got)
		}
	})
}

// FuzzParseConstraints: no input crashes the parser, and the canonical
// form parses to itself.
func FuzzParseConstraints(f *testing.F) {
	for _, s := range []string{"~> 2.5", ">= 1.0, < 3", "2.5.1", "= 1.0.0-beta1+x", "!= 3, ~> 2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConstraints(s)
		if err != nil {
			return
		}
		canon := c.String()
		c2, err := ParseConstraints(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, s, err)
		}
		if c2.String() != canon {
			t.Fatalf("canonical form of %q is %q, then %q", s, canon, c2.String())
		}
	})
}

// FuzzUnzip: whatever the archive, unzip writes nothing outside its
// directory and fails only with this package's errors.
func FuzzUnzip(f *testing.F) {
	f.Add(providerZip(f, "local", "1.0.0"))
	f.Add(buildZip(f, zipEntry{Name: "../x", Body: "x"}))
	f.Add(buildZip(f, zipEntry{Name: "a/", Body: ""}, zipEntry{Name: "a/b", Body: "b"}))
	f.Add(buildZip(f, zipEntry{Name: "l", Body: "/etc", Symlink: true}))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		zipPath := filepath.Join(root, "p.zip")
		if err := os.WriteFile(zipPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "pkg")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		err := unzip(zipPath, dir, Limits{MaxArchiveEntries: 64, MaxUnpackedBytes: 1 << 20})
		if err != nil && !errors.Is(err, ErrUnsafeArchive) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("unexpected error: %v", err)
		}
		for _, p := range listTree(t, root) {
			if p != "p.zip" && p != "pkg" && !strings.HasPrefix(p, "pkg/") {
				t.Fatalf("unzip wrote %s outside its directory", p)
			}
		}
	})
}

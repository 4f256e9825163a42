package gitsource

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

var definitions = map[string]string{
	"README.md":                       "# definitions\n",
	"organization.hcl":                "organization {}\n",
	"stacks/web.hcl":                  "stack_set \"web\" {}\n",
	"stacks/db.hcl":                   "stack_set \"db\" {}\n",
	"stacks/templates/vpc.hcl":        "resource \"file\" \"vpc\" {}\n",
	"stacks/templates/deep/a/b/c.txt": "deep\n",
	"stacks/templates.hcl":            "# sorts between templates/ and templates.d in Git order\n",
	"a-b/x":                           "x\n",
}

func TestLocalRepository(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	// An executable, and symbolic links to a file and to a directory.
	writeFiles(t, dir, map[string]string{"bin/run.sh": "#!/bin/sh\n"})
	if err := os.Chmod(filepath.Join(dir, "bin/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"web-link.hcl": "stacks/web.hcl", "stacks/tmpl": "templates"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, dir, "add", "-A")
	runGit(t, dir, "commit", "-q", "-m", "Add tools\n\nWith a body.")
	head := runGit(t, dir, "rev-parse", "HEAD")
	runGit(t, dir, "branch", "feature/x", "HEAD~1")
	first := runGit(t, dir, "rev-parse", "HEAD~1")

	s := openT(t, Options{Repo: dir})
	if !s.IsLocal() {
		t.Fatal("IsLocal() = false for a local path, want true")
	}

	got, err := s.Head(ctx, "main")
	if err != nil || got != head {
		t.Fatalf("Head(main) = %q, %v; want %q", got, err, head)
	}
	branches, err := s.Branches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"main": head, "feature/x": first}, branches); diff != "" {
		t.Errorf("Branches() mismatch (-want +got):\n%s", diff)
	}

	info, err := s.Commit(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	if info.Hash != head || info.Short != head[:7] || info.Message != "Add tools\n\nWith a body." ||
		info.Author != "Test User <user@example.com>" || time.Since(info.When) > time.Hour {
		t.Errorf("Commit() = %+v", info)
	}
	if byRev, err := s.Commit(ctx, "main~1"); err != nil || byRev.Hash != first {
		t.Errorf(`Commit("main~1") = %+v, %v; want hash %s`, byRev, err, first)
	}

	fsys, err := s.Tree(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bin/run.sh", "web-link.hcl", "stacks/tmpl"}
	for p := range definitions {
		want = append(want, p)
	}
	if err := fstest.TestFS(fsys, want...); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"stacks/web.hcl":      definitions["stacks/web.hcl"],
		"web-link.hcl":        definitions["stacks/web.hcl"],
		"stacks/tmpl/vpc.hcl": definitions["stacks/templates/vpc.hcl"],
	} {
		b, err := fs.ReadFile(fsys, name)
		if err != nil || string(b) != content {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", name, b, err, content)
		}
	}
	if fi, err := fs.Stat(fsys, "bin/run.sh"); err != nil || fi.Mode() != 0o555 {
		t.Errorf("Stat(bin/run.sh) mode = %v, %v; want -r-xr-xr-x", fi.Mode(), err)
	}
	if target, err := fsys.(fs.ReadLinkFS).ReadLink("stacks/tmpl"); err != nil || target != "templates" {
		t.Errorf("ReadLink(stacks/tmpl) = %q, %v; want templates", target, err)
	}
	if _, err := fs.ReadFile(fsys, "missing.hcl"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing.hcl) error = %v, want fs.ErrNotExist", err)
	}

	t.Run("new commit by the CLI", func(t *testing.T) {
		writeFiles(t, dir, map[string]string{"stacks/web.hcl": "stack_set \"web\" { v = 2 }\n"})
		next := commitAll(t, dir, "web v2")
		if err := s.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Head(ctx, "main"); err != nil || got != next {
			t.Fatalf("Head(main) after commit = %q, %v; want %q", got, err, next)
		}
		head = next
	})

	t.Run("after git gc", func(t *testing.T) {
		old := fsys // opened before the repack
		runGit(t, dir, "gc", "-q", "--prune=now")
		if loose, _ := filepath.Glob(filepath.Join(dir, ".git/objects/??")); len(loose) != 0 {
			t.Fatalf("git gc left loose objects: %v", loose)
		}
		if err := s.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Head(ctx, "main"); err != nil || got != head {
			t.Fatalf("Head(main) after gc = %q, %v; want %q", got, err, head)
		}
		fsys, err := s.Tree(ctx, head)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := fs.ReadFile(fsys, "stacks/web.hcl"); err != nil || !strings.Contains(string(b), "v = 2") {
			t.Errorf("ReadFile(stacks/web.hcl) after gc = %q, %v", b, err)
		}
		if err := fstest.TestFS(old, want...); err != nil {
			t.Errorf("FS opened before gc: %v", err)
		}
		if branches, err := s.Branches(ctx); err != nil || branches["feature/x"] != first {
			t.Errorf("Branches() after gc (packed refs) = %v, %v", branches, err)
		}
	})
}

func TestLocalBareRepository(t *testing.T) {
	ctx := testCtx(t)
	bare, _, head := newRemote(t, definitions)
	s := openT(t, Options{Repo: bare})
	if got, err := s.Head(ctx, "main"); err != nil || got != head {
		t.Fatalf("Head(main) = %q, %v; want %q", got, err, head)
	}
	fsys, err := s.Tree(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fs.ReadFile(fsys, "stacks/db.hcl"); err != nil || string(b) != definitions["stacks/db.hcl"] {
		t.Errorf("ReadFile(stacks/db.hcl) = %q, %v", b, err)
	}
}

func TestLookupErrors(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	s := openT(t, Options{Repo: dir})

	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"unknown branch", func() error { _, err := s.Head(ctx, "nope"); return err }, ErrBranchNotFound},
		{"invalid branch name", func() error { _, err := s.Head(ctx, "a..b"); return err }, ErrBranchNotFound},
		{"unknown commit", func() error { _, err := s.Commit(ctx, strings.Repeat("ab", 20)); return err }, ErrCommitNotFound},
		{"unknown revision", func() error { _, err := s.Commit(ctx, "nope~3"); return err }, ErrCommitNotFound},
		{"tree of unknown commit", func() error { _, err := s.Tree(ctx, strings.Repeat("0f", 20)); return err }, ErrCommitNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got error %v, want %v", err, tc.want)
			}
			t.Logf("error reads: %v", err)
		})
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := testCtx(t)
	tmp := t.TempDir()
	notRepo := filepath.Join(tmp, "plain")
	writeFiles(t, notRepo, map[string]string{"file": "not a repository\n"})
	missingURL := "file://" + filepath.Join(tmp, "missing.git")

	tests := []struct {
		name     string
		opts     Options
		want     error  // checked with errors.Is when set
		contains string // the message must mention this
	}{
		{"missing local path", Options{Repo: filepath.Join(tmp, "missing")}, ErrRepositoryNotFound, "missing"},
		{"directory without a repository", Options{Repo: notRepo}, ErrRepositoryNotFound, notRepo},
		{"a file", Options{Repo: filepath.Join(notRepo, "file")}, ErrRepositoryNotFound, "not a directory"},
		{"unreachable URL", Options{Repo: missingURL, CacheDir: filepath.Join(tmp, "cache")}, nil, missingURL},
		{"empty repo", Options{}, ErrInvalidOptions, "repo is empty"},
		{"URL without cache", Options{Repo: "https://example.com/defs.git"}, ErrInvalidOptions, "cache directory"},
		{"bad branch", Options{Repo: tmp, Branch: "a..b"}, ErrInvalidOptions, "a..b"},
		{"bad status branch", Options{Repo: tmp, StatusBranch: "x.lock"}, ErrInvalidOptions, "x.lock"},
		{"negative timeout", Options{Repo: tmp, FetchTimeout: -time.Second}, ErrInvalidOptions, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(ctx, tc.opts)
			if err == nil {
				t.Fatalf("Open(%+v) = %v, nil; want an error", tc.opts, s)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("got error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("error %q does not mention %q", err, tc.contains)
			}
			t.Logf("error reads: %v", err)
		})
	}
	if _, err := os.Stat(filepath.Join(tmp, "cache")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("failed Open left its cache directory behind: %v", err)
	}
}

func TestValidateDefaults(t *testing.T) {
	o := Options{Repo: "/srv/defs"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Options{Repo: "/srv/defs", Branch: "main", StatusBranch: "stackd/status",
		AuthorName: "stackd", AuthorEmail: "stackd@localhost", FetchTimeout: time.Minute}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("Validate() defaults mismatch (-want +got):\n%s", diff)
	}
}

func TestIsURL(t *testing.T) {
	tests := []struct {
		repo string
		want bool
	}{
		{"/srv/defs", false},
		{"./defs", false},
		{"defs", false},
		{"../x:y", false},
		{"file:///srv/defs.git", true},
		{"git://example.com/defs.git", true},
		{"https://example.com/defs.git", true},
		{"ssh://git@example.com/defs.git", true},
		{"git@example.com:org/defs.git", true},
		{"example.com:defs.git", true},
	}
	for _, tc := range tests {
		if got := IsURL(tc.repo); got != tc.want {
			t.Errorf("IsURL(%q) = %v, want %v", tc.repo, got, tc.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://user:secret@example.com/x.git", "https://user:xxxxx@example.com/x.git"},
		{"https://ghp_token@example.com/x.git", "https://redacted@example.com/x.git"},
		{"ssh://git@example.com/x.git", "ssh://git@example.com/x.git"},
		{"git@example.com:x.git", "git@example.com:x.git"},
		{"/srv/x", "/srv/x"},
	}
	for _, tc := range tests {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTreeLinksAndSubmodules(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, map[string]string{"stacks/web.hcl": "web\n"})
	for link, target := range map[string]string{
		"escape":      "../outside",
		"absolute":    "/etc/passwd",
		"loop-a":      "loop-b",
		"loop-b":      "loop-a",
		"stacks/up":   "..",
		"stacks/self": "web.hcl",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, dir, "add", "-A")
	// A submodule is a gitlink entry: a commit hash in the tree.
	runGit(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("1", 40)+",vendor/mod")
	runGit(t, dir, "commit", "-q", "-m", "links")
	s := openT(t, Options{Repo: dir})
	fsys, err := s.Tree(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"escape", "absolute", "loop-a"} {
		if _, err := fs.ReadFile(fsys, name); err == nil {
			t.Errorf("ReadFile(%s) followed a link that leaves the tree or loops", name)
		}
	}
	if _, err := fs.ReadFile(fsys, "escape"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(escape) error = %v, want fs.ErrNotExist", err)
	}
	if b, err := fs.ReadFile(fsys, "stacks/up/stacks/self"); err != nil || string(b) != "web\n" {
		t.Errorf("ReadFile(stacks/up/stacks/self) = %q, %v; want the file through two links", b, err)
	}
	if target, err := fs.ReadLink(fsys, "absolute"); err != nil || target != "/etc/passwd" {
		t.Errorf("ReadLink(absolute) = %q, %v", target, err)
	}
	if fi, err := fs.Lstat(fsys, "escape"); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("Lstat(escape) = %v, %v; want a symlink", fi, err)
	}
	if _, err := fs.ReadLink(fsys, "stacks/web.hcl"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ReadLink of a regular file error = %v, want fs.ErrInvalid", err)
	}
	entries, err := fs.ReadDir(fsys, "vendor/mod")
	if err != nil || len(entries) != 0 {
		t.Errorf("ReadDir(vendor/mod) of a submodule = %v, %v; want an empty directory", entries, err)
	}
	if fi, err := fs.Stat(fsys, "vendor/mod"); err != nil || !fi.IsDir() {
		t.Errorf("Stat(vendor/mod) = %v, %v; want a directory", fi, err)
	}
	if _, err := fsys.Open("/abs"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Open(/abs) error = %v, want fs.ErrInvalid", err)
	}
}

package gitsource

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A LocalRepo's commits are what the git CLI sees: the work tree's files on
// the checked-out branch, a branch made without the work tree holding
// exactly its files, and the log newest first.
func TestLocalRepo(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.hcl": "a", "sub/b.hcl": "b"})
	r, err := InitLocal(dir, "main", Author{Name: "Demo User", Email: "demo@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.CommitAll("first")
	if err != nil {
		t.Fatal(err)
	}
	if got := runGit(t, dir, "rev-parse", "main"); got != first {
		t.Fatalf("main is %s, CommitAll returned %s", got, first)
	}
	if got := runGit(t, dir, "ls-tree", "-r", "--name-only", "main"); got != "a.hcl\nsub/b.hcl" {
		t.Errorf("main's files: %q", got)
	}
	if got := runGit(t, dir, "log", "-1", "--format=%an <%ae>"); got != "Demo User <demo@example.com>" {
		t.Errorf("author %q", got)
	}

	// A branch checked out, committed to, and left again.
	if err := r.Checkout("feature/x", true); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"a.hcl": "a2"})
	if err := os.Remove(filepath.Join(dir, "sub", "b.hcl")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CommitAll("feature"); err != nil {
		t.Fatal(err)
	}
	if err := r.Checkout("main", false); err != nil {
		t.Fatal(err)
	}
	if got := runGit(t, dir, "show", "feature/x:a.hcl"); got != "a2" {
		t.Errorf("feature/x:a.hcl = %q", got)
	}
	if got := runGit(t, dir, "ls-tree", "-r", "--name-only", "feature/x"); got != "a.hcl" {
		t.Errorf("feature/x's files: %q (the removed file committed as removed)", got)
	}
	if got := runGit(t, dir, "symbolic-ref", "--short", "HEAD"); got != "main" {
		t.Errorf("HEAD is %s after checking out main", got)
	}

	// CommitTree: exactly the files given, on top of the branch, work tree untouched.
	for i, files := range []map[string][]byte{
		{"x/y/z.hcl": []byte("1"), "top": []byte("t")},
		{"x/y/z.hcl": []byte("2")},
	} {
		h, err := r.CommitTree("busy", files, "bench: busy")
		if err != nil {
			t.Fatal(err)
		}
		if got := runGit(t, dir, "rev-parse", "busy"); got != h {
			t.Fatalf("commit %d: busy is %s, CommitTree returned %s", i, got, h)
		}
	}
	if got := runGit(t, dir, "ls-tree", "-r", "--name-only", "busy"); got != "x/y/z.hcl" {
		t.Errorf("busy's files: %q, want exactly the last commit's", got)
	}
	if got := runGit(t, dir, "rev-list", "--count", "busy"); got != "2" {
		t.Errorf("busy has %s commits, want 2 (the second on the first)", got)
	}
	runGit(t, dir, "fsck", "--strict")
	if got := runGit(t, dir, "status", "--porcelain"); got != "" {
		t.Errorf("work tree changed by CommitTree: %q", got)
	}

	log, err := r.Log("feature/x", 5)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, c := range log {
		msgs = append(msgs, c.Message)
		if c.Short != c.Hash[:7] || c.Author != "Demo User <demo@example.com>" {
			t.Errorf("log entry %+v", c)
		}
	}
	if strings.Join(msgs, ",") != "feature,first" {
		t.Errorf("log of feature/x: %v, want feature, first", msgs)
	}
	if log, err := r.Log("feature/x", 1); err != nil || len(log) != 1 {
		t.Errorf("log of 1: %v, %v", log, err)
	}

	for _, bad := range []string{"", "a..b", "-x"} {
		if _, err := r.CommitTree(bad, map[string][]byte{"f": nil}, "m"); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("CommitTree to branch %q: %v, want ErrInvalidOptions", bad, err)
		}
	}
	if _, err := r.CommitTree("ok", map[string][]byte{"../f": nil}, "m"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("CommitTree of ../f: %v, want ErrInvalidPath", err)
	}
}

package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/google/go-cmp/cmp"
)

func TestRemoteFileURL(t *testing.T) {
	ctx := testCtx(t)
	bare, work, head := newRemote(t, definitions)
	cache := filepath.Join(t.TempDir(), "cache")
	opts := Options{Repo: "file://" + bare, CacheDir: cache}
	s := openT(t, opts)
	if s.IsLocal() {
		t.Fatal("IsLocal() = true for a URL, want false")
	}
	if got, err := s.Head(ctx, "main"); err != nil || got != head {
		t.Fatalf("Head(main) after Open = %q, %v; want %q", got, err, head)
	}
	fsys, err := s.Tree(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fs.ReadFile(fsys, "stacks/web.hcl"); err != nil || string(b) != definitions["stacks/web.hcl"] {
		t.Errorf("ReadFile(stacks/web.hcl) = %q, %v", b, err)
	}

	fetch := func(t *testing.T) {
		t.Helper()
		if err := s.Fetch(ctx); err != nil {
			t.Fatalf("Fetch: %v", err)
		}
	}
	wantBranches := func(t *testing.T, want map[string]string) {
		t.Helper()
		got, err := s.Branches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Branches() mismatch (-want +got):\n%s", diff)
		}
	}

	t.Run("fetch after a push", func(t *testing.T) {
		writeFiles(t, work, map[string]string{"stacks/web.hcl": "v2\n"})
		head = commitAll(t, work, "web v2")
		runGit(t, work, "push", "-q", "origin", "main")
		fetch(t)
		fetch(t) // up to date is success
		if got, err := s.Head(ctx, "main"); err != nil || got != head {
			t.Fatalf("Head(main) = %q, %v; want %q", got, err, head)
		}
	})

	t.Run("force-push is followed", func(t *testing.T) {
		runGit(t, work, "reset", "-q", "--hard", "HEAD~1")
		writeFiles(t, work, map[string]string{"stacks/web.hcl": "v2 rewritten\n"})
		head = commitAll(t, work, "web v2, rewritten")
		runGit(t, work, "push", "-q", "--force", "origin", "main")
		fetch(t)
		if got, err := s.Head(ctx, "main"); err != nil || got != head {
			t.Fatalf("Head(main) after force-push = %q, %v; want %q", got, err, head)
		}
		fsys, err := s.Tree(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if b, err := fs.ReadFile(fsys, "stacks/web.hcl"); err != nil || string(b) != "v2 rewritten\n" {
			t.Errorf("ReadFile(stacks/web.hcl) = %q, %v", b, err)
		}
	})

	t.Run("branches come and go", func(t *testing.T) {
		runGit(t, work, "push", "-q", "origin", "HEAD:refs/heads/feature/x")
		fetch(t)
		wantBranches(t, map[string]string{"main": head, "feature/x": head})
		runGit(t, work, "push", "-q", "origin", "--delete", "feature/x")
		fetch(t)
		wantBranches(t, map[string]string{"main": head})
	})

	t.Run("status write is pushed", func(t *testing.T) {
		got, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte(`{"ok":true}`)}})
		if err != nil {
			t.Fatal(err)
		}
		if tip := runGit(t, bare, "rev-parse", "stackd/status"); tip != got {
			t.Errorf("remote stackd/status = %s, WriteStatus returned %s", tip, got)
		}
		if content := runGit(t, bare, "show", "stackd/status:status/web.json"); content != `{"ok":true}` {
			t.Errorf("remote status/web.json = %q", content)
		}
		wantBranches(t, map[string]string{"main": head, "stackd/status": got})
	})

	t.Run("reopen an existing cache", func(t *testing.T) {
		again := openT(t, opts)
		if got, err := again.Head(ctx, "main"); err != nil || got != head {
			t.Fatalf("Head(main) from a reused cache = %q, %v; want %q", got, err, head)
		}
	})
}

// TestRemoteStatusRace: another stackd (its own cache clone) pushes the status branch
// first; the push is rejected, rebuilt on the new tip and retried, and both changes land.
func TestRemoteStatusRace(t *testing.T) {
	ctx := testCtx(t)
	bare, _, _ := newRemote(t, definitions)
	url := "file://" + bare
	a := openT(t, Options{Repo: url, CacheDir: filepath.Join(t.TempDir(), "a")})
	b := openT(t, Options{Repo: url, CacheDir: filepath.Join(t.TempDir(), "b")})

	write := func(s *Source, files ...string) string {
		t.Helper()
		w := StatusWrite{Files: map[string][]byte{}}
		for _, f := range files {
			w.Files[f] = []byte(f)
		}
		h, err := s.WriteStatus(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	first := write(a, "status/a.json", "shared.json")
	// b has not fetched: it builds an orphan commit, is rejected, re-fetches, rebuilds.
	second := write(b, "status/b.json", "shared.json")
	if parent := runGit(t, bare, "rev-parse", second+"^"); parent != first {
		t.Errorf("b's status commit's parent = %s, want a's %s", parent, first)
	}
	// Now a is behind b.
	third := write(a, "status/a2.json")
	if parent := runGit(t, bare, "rev-parse", third+"^"); parent != second {
		t.Errorf("a's second status commit's parent = %s, want b's %s", parent, second)
	}
	want := []string{"shared.json", "status/a.json", "status/a2.json", "status/b.json"}
	if diff := cmp.Diff(want, lsTree(t, bare, "stackd/status")); diff != "" {
		t.Errorf("remote status tree mismatch (-want +got):\n%s", diff)
	}
	if n := runGit(t, bare, "rev-list", "--count", "stackd/status"); n != "3" {
		t.Errorf("remote status branch has %s commits, want 3", n)
	}
}

func TestRemoteUnreachable(t *testing.T) {
	ctx := testCtx(t)
	missing := "file://" + filepath.Join(t.TempDir(), "missing.git")
	_, err := Open(ctx, Options{Repo: missing, CacheDir: filepath.Join(t.TempDir(), "cache")})
	if !errors.Is(err, transport.ErrRepositoryNotFound) {
		t.Errorf("Open(%s) error = %v, want transport.ErrRepositoryNotFound", missing, err)
	}
}

// A remote down when the Source is opened again does not stop it: the
// cache clone holds the last revisions fetched, a fault says so, and the
// fetches after it fail until the remote is back.
func TestRemoteUnreachableAtOpenWithCache(t *testing.T) {
	ctx := testCtx(t)
	bare, _, head := newRemote(t, definitions)
	opts := Options{Repo: "file://" + bare, CacheDir: filepath.Join(t.TempDir(), "cache")}
	openT(t, opts) // the first clone
	moved := bare + ".away"
	if err := os.Rename(bare, moved); err != nil {
		t.Fatal(err)
	}
	s := openT(t, opts)
	if got, err := s.Head(ctx, "main"); err != nil || got != head {
		t.Errorf("Head(main) from the cache = %q, %v; want %q", got, err, head)
	}
	if faults := s.Faults(); len(faults) != 1 || faultKindOf(faults[0]) != FaultUnreachableAtOpen {
		t.Errorf("faults %v, want one %s", faults, FaultUnreachableAtOpen)
	}
	if err := s.Fetch(ctx); err == nil {
		t.Error("Fetch with the remote gone succeeded")
	}
	if err := os.Rename(moved, bare); err != nil {
		t.Fatal(err)
	}
	if err := s.Fetch(ctx); err != nil {
		t.Errorf("Fetch with the remote back: %v", err)
	}
}

func faultKindOf(err error) string {
	var f *Fault
	if errors.As(err, &f) {
		return f.Kind
	}
	return ""
}

func TestRemoteEmptyRepository(t *testing.T) {
	ctx := testCtx(t)
	bare := filepath.Join(t.TempDir(), "empty.git")
	runGit(t, t.TempDir(), "init", "-q", "--bare", bare)
	s := openT(t, Options{Repo: "file://" + bare, CacheDir: filepath.Join(t.TempDir(), "cache")})
	if got, err := s.Branches(ctx); err != nil || len(got) != 0 {
		t.Errorf("Branches() of an empty remote = %v, %v; want none", got, err)
	}
	if _, err := s.Head(ctx, "main"); !errors.Is(err, ErrBranchNotFound) {
		t.Errorf("Head(main) of an empty remote: %v, want ErrBranchNotFound", err)
	}
	// The first status write creates the status branch on the remote.
	h, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/x.json": []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	if tip := runGit(t, bare, "rev-parse", "stackd/status"); tip != h {
		t.Errorf("remote stackd/status = %s, want %s", tip, h)
	}
}

// TestRemoteGitDaemon runs clone, fetch and status push against a real git:// server.
func TestRemoteGitDaemon(t *testing.T) {
	ctx := testCtx(t)
	bare, work, head := newRemote(t, definitions)
	port := startGitDaemon(t, filepath.Dir(bare))
	url := fmt.Sprintf("git://127.0.0.1:%d/%s", port, filepath.Base(bare))

	s := openT(t, Options{Repo: url, CacheDir: filepath.Join(t.TempDir(), "cache"), FetchTimeout: 10 * time.Second})
	if got, err := s.Head(ctx, "main"); err != nil || got != head {
		t.Fatalf("Head(main) = %q, %v; want %q", got, err, head)
	}

	writeFiles(t, work, map[string]string{"stacks/db.hcl": "v2\n"})
	head = commitAll(t, work, "db v2")
	runGit(t, work, "push", "-q", "origin", "main")
	if err := s.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Head(ctx, "main"); err != nil || got != head {
		t.Fatalf("Head(main) after fetch = %q, %v; want %q", got, err, head)
	}

	h, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/db.json": []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	if tip := runGit(t, bare, "rev-parse", "stackd/status"); tip != h {
		t.Errorf("remote stackd/status = %s, want %s", tip, h)
	}
	if got := runGit(t, bare, "show", "stackd/status:status/db.json"); got != "{}" {
		t.Errorf("remote status/db.json = %q", got)
	}
}

// startGitDaemon serves base over git:// (push enabled) until the test ends.
func startGitDaemon(t testing.TB, base string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	cmd := exec.Command("git", "daemon", "--reuseaddr", "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port),
		"--base-path="+base, "--export-all", "--enable=receive-pack", base)
	cmd.Env = append(cmd.Environ(), gitEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return port
		}
		if ctx.Err() != nil {
			t.Fatalf("git daemon never accepted connections on port %d: %v", port, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

package gitsource

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// startWatch starts s.Watch with a fallback interval far beyond the test; the watch ends
// (and its channel is checked to close) when the test does.
func startWatch(t *testing.T, s *Source, interval time.Duration) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := s.Watch(ctx, interval)
	t.Cleanup(func() {
		cancel()
		timeout := time.After(2 * time.Second)
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					return
				}
			case <-timeout:
				t.Error("Watch channel still open 2s after its context ended")
				return
			}
		}
	})
	return ch
}

// waitSignal fails the test unless ch delivers a signal within d.
func waitSignal(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	start := time.Now()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: Watch channel closed", what)
		}
		t.Logf("%s: signalled after %v", what, time.Since(start).Round(time.Millisecond))
	case <-time.After(d):
		t.Fatalf("%s: no signal within %v", what, d)
	}
}

func TestWatchLocal(t *testing.T) {
	dir, _ := newWorkRepo(t, definitions)
	s := openT(t, Options{Repo: dir})

	t.Run("commit", func(t *testing.T) {
		ch := startWatch(t, s, time.Hour)
		writeFiles(t, dir, map[string]string{"stacks/web.hcl": "v2\n"})
		commitAll(t, dir, "web v2")
		waitSignal(t, ch, 2*time.Second, "git commit")
	})

	t.Run("branches with slashes", func(t *testing.T) {
		ch := startWatch(t, s, time.Hour)
		runGit(t, dir, "branch", "feature/x")
		waitSignal(t, ch, 2*time.Second, "new branch feature/x")
		// feature/ was created after the watch started: its new watch must see this.
		runGit(t, dir, "branch", "feature/y")
		waitSignal(t, ch, 2*time.Second, "new branch feature/y")
		runGit(t, dir, "update-ref", "refs/heads/feature/x", "HEAD~1")
		waitSignal(t, ch, 2*time.Second, "feature/x moved")
	})

	t.Run("packed refs", func(t *testing.T) {
		runGit(t, dir, "branch", "team/a/b")
		ch := startWatch(t, s, time.Hour)
		// Existing nested directories are watched from the start.
		runGit(t, dir, "branch", "team/a/c")
		waitSignal(t, ch, 2*time.Second, "new branch team/a/c")
		runGit(t, dir, "pack-refs", "--all")
		waitSignal(t, ch, 2*time.Second, "git pack-refs")
	})

	t.Run("bare repository", func(t *testing.T) {
		bare, work, _ := newRemote(t, definitions)
		s := openT(t, Options{Repo: bare})
		ch := startWatch(t, s, time.Hour)
		writeFiles(t, work, map[string]string{"x": "x"})
		commitAll(t, work, "x")
		runGit(t, work, "push", "-q", "origin", "main")
		waitSignal(t, ch, 2*time.Second, "push into the bare repository")
	})

	t.Run("fallback tick", func(t *testing.T) {
		ch := startWatch(t, s, 50*time.Millisecond)
		waitSignal(t, ch, 2*time.Second, "interval tick")
	})
}

func TestWatchRemoteTicks(t *testing.T) {
	bare, _, _ := newRemote(t, definitions)
	s := openT(t, Options{Repo: "file://" + bare, CacheDir: filepath.Join(t.TempDir(), "cache")})
	ch := startWatch(t, s, 20*time.Millisecond)
	waitSignal(t, ch, 2*time.Second, "first tick")
	waitSignal(t, ch, 2*time.Second, "second tick")
}

func TestWatchClosesWithContext(t *testing.T) {
	dir, _ := newWorkRepo(t, definitions)
	s := openT(t, Options{Repo: dir})
	ctx, cancel := context.WithCancel(context.Background())
	ch := s.Watch(ctx, time.Hour)
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			// A signal may be pending; the close must follow.
			<-ch
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Watch channel not closed 2s after cancel")
	}
}

func TestWatchIgnoresOwnStatusWrites(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, definitions)
	s := openT(t, Options{Repo: dir})
	// The first write creates refs/heads/stackd/, which does signal.
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	ch := startWatch(t, s, time.Hour)
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Error("a status write signalled")
	case <-time.After(3 * watchQuiet):
	}
	runGit(t, dir, "commit", "-q", "--allow-empty", "-m", "empty")
	waitSignal(t, ch, 2*time.Second, "git commit after a status write")
}

package gitsource

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/google/go-cmp/cmp"
)

// countingStorage counts the objects read from a cache clone's storage (go-git's object
// cache sits below it, so a cached object counts too).
type countingStorage struct {
	*filesystem.Storage
	reads atomic.Int64
}

func (c *countingStorage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	c.reads.Add(1)
	return c.Storage.EncodedObject(t, h)
}

// countReads makes s read its cache clone through a countingStorage.
func countReads(t *testing.T, s *Source) *countingStorage {
	t.Helper()
	st, ok := s.repo.Storer.(*filesystem.Storage)
	if !ok {
		t.Fatalf("cache clone storage is a %T", s.repo.Storer)
	}
	c := &countingStorage{Storage: st}
	r, err := git.Open(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.repo = r
	return c
}

func writeOne(t *testing.T, s *Source, path, content string) string {
	t.Helper()
	h, err := s.WriteStatus(testCtx(t), StatusWrite{Files: map[string][]byte{path: []byte(content)}})
	if err != nil {
		t.Fatalf("WriteStatus(%s): %v", path, err)
	}
	return h
}

// A status push reads what the commit changes, whatever the length of the remote's
// history: on a remote whose main has 3,000 commits it reads no more objects from the
// cache clone than on a one-commit remote with the same files (go-git's own push read
// every object of the history), over file:// and git://, to the status branch and to
// the deploy branch itself; and the remote ends up complete (git fsck).
func TestStatusPushReadsOnlyTheChange(t *testing.T) {
	const long = 3000
	for _, transport := range []string{"file", "git"} {
		for _, statusBranch := range []string{DefaultStatusBranch, "main"} {
			t.Run(transport+"/"+statusBranch, func(t *testing.T) {
				reads := map[int]int64{}
				for _, commits := range []int{1, long} {
					url, bare := historyRemote(t, transport, commits)
					s := openT(t, Options{Repo: url, CacheDir: filepath.Join(t.TempDir(), "cache"), StatusBranch: statusBranch})
					writeOne(t, s, "status/db.json", "{}") // starts the status branch
					c := countReads(t, s)
					h := writeOne(t, s, "status/web.json", fmt.Sprintf(`{"commits":%d}`, commits))
					reads[commits] = c.reads.Load()

					if tip := runGit(t, bare, "rev-parse", statusBranch); tip != h {
						t.Errorf("remote %s = %s, WriteStatus returned %s", statusBranch, tip, h)
					}
					if got := runGit(t, bare, "show", h+":status/db.json"); got != "{}" {
						t.Errorf("remote status/db.json = %q, want the first write kept", got)
					}
					runGit(t, bare, "fsck", "--no-dangling")
					if tip, err := s.Head(testCtx(t), statusBranch); err != nil || tip != h {
						t.Errorf("cache %s = %s, %v; want the pushed %s", statusBranch, tip, err, h)
					}
				}
				t.Logf("objects read by one status push: %v (by history length)", reads)
				if reads[long] > 2*reads[1] {
					t.Errorf("a status push read %d objects on a %d-commit remote, %d on a one-commit remote; want no more than twice as many",
						reads[long], long, reads[1])
				}
			})
		}
	}
}

// The remote lost the status branch since the last fetch (someone deleted it): the push
// creates it again with its history, so no stack set's status is lost.
func TestStatusPushRemoteLostBranch(t *testing.T) {
	bare, _, _ := newRemote(t, definitions)
	s := openT(t, Options{Repo: "file://" + bare, CacheDir: filepath.Join(t.TempDir(), "cache")})
	first := writeOne(t, s, "status/a.json", "a")
	runGit(t, bare, "branch", "-D", DefaultStatusBranch)

	second := writeOne(t, s, "status/b.json", "b")
	if parent := runGit(t, bare, "rev-parse", second+"^"); parent != first {
		t.Errorf("recreated status branch: parent %s, want the earlier status commit %s", parent, first)
	}
	if diff := cmp.Diff([]string{"status/a.json", "status/b.json"}, lsTree(t, bare, DefaultStatusBranch)); diff != "" {
		t.Errorf("remote status tree mismatch (-want +got):\n%s", diff)
	}
	runGit(t, bare, "fsck", "--no-dangling")
}

// The remote's status branch went back (reset to an older commit) since the last fetch:
// the commit, built on a tip the remote no longer has, is not a fast-forward of the
// remote's; it is rebuilt on the remote's tip and pushed.
func TestStatusPushRemoteWentBack(t *testing.T) {
	bare, _, _ := newRemote(t, definitions)
	s := openT(t, Options{Repo: "file://" + bare, CacheDir: filepath.Join(t.TempDir(), "cache")})
	first := writeOne(t, s, "status/a.json", "a")
	writeOne(t, s, "status/b.json", "b")
	runGit(t, bare, "update-ref", "refs/heads/"+DefaultStatusBranch, first)

	third := writeOne(t, s, "status/c.json", "c")
	if parent := runGit(t, bare, "rev-parse", third+"^"); parent != first {
		t.Errorf("status commit after the remote went back: parent %s, want the remote's tip %s", parent, first)
	}
	if diff := cmp.Diff([]string{"status/a.json", "status/c.json"}, lsTree(t, bare, DefaultStatusBranch)); diff != "" {
		t.Errorf("remote status tree mismatch (-want +got):\n%s", diff)
	}
}

// A push the remote refuses (a pre-receive hook) fails the write at once — the remote did
// not move, so it is no race — and leaves the cache clone's ref where it was.
func TestStatusPushRefused(t *testing.T) {
	ctx := testCtx(t)
	bare, _, _ := newRemote(t, definitions)
	s := openT(t, Options{Repo: "file://" + bare, CacheDir: filepath.Join(t.TempDir(), "cache")})
	first := writeOne(t, s, "status/a.json", "a")
	hook := filepath.Join(bare, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho no status today >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	_, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/b.json": []byte("b")}})
	if err == nil || errors.Is(err, ErrPushRejected) {
		t.Fatalf("WriteStatus refused by a hook: %v, want a push error, not a lost race", err)
	}
	if !strings.Contains(err.Error(), "pre-receive hook declined") {
		t.Errorf("WriteStatus refused by a hook: %v, want the remote's reason", err)
	}
	if tip := runGit(t, bare, "rev-parse", DefaultStatusBranch); tip != first {
		t.Errorf("remote status branch = %s, want %s", tip, first)
	}
	if tip, err := s.Head(ctx, DefaultStatusBranch); err != nil || tip != first {
		t.Errorf("cache status branch = %s, %v; want it left at %s", tip, err, first)
	}

	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}
	second := writeOne(t, s, "status/b.json", "b")
	if parent := runGit(t, bare, "rev-parse", second+"^"); parent != first {
		t.Errorf("status commit after the hook went: parent %s, want %s", parent, first)
	}
}

// A push of a commit the remote's branch already is succeeds without sending anything,
// and moves the cache clone's ref to it (the remote took an earlier push whose answer
// was lost).
func TestStatusPushAlreadyThere(t *testing.T) {
	ctx := testCtx(t)
	bare, _, _ := newRemote(t, definitions)
	s := openT(t, Options{Repo: "file://" + bare, CacheDir: filepath.Join(t.TempDir(), "cache")})
	first := writeOne(t, s, "status/a.json", "a")
	second := writeOne(t, s, "status/b.json", "b")
	ref := plumbing.NewBranchReferenceName(DefaultStatusBranch)
	if err := s.repo.Storer.SetReference(plumbing.NewHashReference(ref, plumbing.NewHash(first))); err != nil {
		t.Fatal(err)
	}

	if err := s.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	err := s.push(ctx, plumbing.NewHash(second), plumbing.NewHash(first), ref)
	s.release()
	if err != nil {
		t.Fatalf("push of the commit the remote already has: %v", err)
	}
	if tip, err := s.Head(ctx, DefaultStatusBranch); err != nil || tip != second {
		t.Errorf("cache status branch = %s, %v; want %s", tip, err, second)
	}
}

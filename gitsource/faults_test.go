package gitsource

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// takeFaults returns the faults s recorded since the last call as "kind branch".
func takeFaults(t *testing.T, s *Source) []string {
	t.Helper()
	var out []string
	for _, err := range s.Faults() {
		var f *Fault
		if !errors.As(err, &f) {
			t.Fatalf("fault %v (%T) is not a *Fault", err, err)
		}
		t.Logf("fault: %s", f.Detail)
		out = append(out, strings.TrimSpace(f.Kind+" "+f.Branch))
	}
	return out
}

func wantFaults(t *testing.T, s *Source, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, takeFaults(t, s)); diff != "" {
		t.Errorf("faults (-want +got):\n%s", diff)
	}
}

// A deploy branch that moves to a commit not descending from the head seen
// before is a FaultForcePush; fast-forwards, other branches rewritten, and a
// deploy branch deleted and pushed again on top of the old head are not.
func TestForcePushFault(t *testing.T) {
	for _, remote := range []bool{true, false} {
		name := "local"
		if remote {
			name = "remote"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			var s *Source
			var work string
			// publish makes the user's commits visible to s.
			var publish func(args ...string)
			if remote {
				var bare string
				bare, work, _ = newRemote(t, definitions)
				s = openT(t, Options{Repo: "file://" + bare, CacheDir: filepath.Join(t.TempDir(), "cache")})
				publish = func(args ...string) { runGit(t, work, append([]string{"push", "-q", "origin"}, args...)...) }
			} else {
				work, _ = newWorkRepo(t, definitions)
				s = openT(t, Options{Repo: work})
				publish = func(...string) {}
			}
			fetch := func() {
				t.Helper()
				if err := s.Fetch(ctx); err != nil {
					t.Fatal(err)
				}
			}
			commit := func(content string) string {
				writeFiles(t, work, map[string]string{"stacks/web.hcl": content})
				return commitAll(t, work, content)
			}
			base := runGit(t, work, "rev-parse", "HEAD")

			commit("v2")
			publish("main")
			fetch()
			wantFaults(t, s)

			// A pull-request branch rewritten: not a fault.
			runGit(t, work, "checkout", "-q", "-b", "feature")
			commit("feature v1")
			publish("feature")
			fetch()
			runGit(t, work, "reset", "-q", "--hard", "main")
			commit("feature v1 rewritten")
			publish("--force", "feature")
			fetch()
			runGit(t, work, "checkout", "-q", "main")
			wantFaults(t, s)

			// The deploy branch rewritten.
			runGit(t, work, "reset", "-q", "--hard", base)
			commit("v2 rewritten")
			publish("--force", "main")
			fetch()
			wantFaults(t, s, "force_push main")
			fetch()
			wantFaults(t, s)

			if remote {
				// Deleted, then pushed again on top of the last head: followed, no fault.
				runGit(t, strings.TrimPrefix(s.opts.Repo, "file://"), "update-ref", "-d", "refs/heads/main")
				fetch()
				commit("v3")
				publish("main")
				fetch()
				wantFaults(t, s)
			}
		})
	}
}

// A cache clone removed or damaged under a running Source is cloned again
// by the next Fetch (and a FaultCacheDamaged recorded), not reported as an
// unreachable remote forever.
func TestCacheDamagedIsClonedAgain(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, cache string)
		// intact: the fetch itself puts it right (a forced ref update), so
		// the cache is not cloned again.
		intact bool
	}{
		{"directory removed", func(t *testing.T, cache string) {
			if err := os.RemoveAll(cache); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"directory removed, Git leftovers written back", func(t *testing.T, cache string) {
			if err := os.RemoveAll(cache); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, cache, map[string]string{"objects/4b/825dc642cb6eb9a060e54bf8d69288fbee4904": "x", "refs/heads/stackd/status": ""})
		}, false},
		{"objects removed", func(t *testing.T, cache string) {
			if err := os.RemoveAll(filepath.Join(cache, "objects")); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"deploy branch ref emptied", func(t *testing.T, cache string) {
			if err := os.Truncate(filepath.Join(cache, "refs", "heads", "main"), 0); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"deploy branch at a missing commit", func(t *testing.T, cache string) {
			writeFiles(t, cache, map[string]string{"refs/heads/main": strings.Repeat("ab", 20) + "\n"})
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			bare, work, _ := newRemote(t, definitions)
			cache := filepath.Join(t.TempDir(), "cache")
			s := openT(t, Options{Repo: "file://" + bare, CacheDir: cache})
			if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/a.json": []byte("a")}}); err != nil {
				t.Fatal(err)
			}
			wantFaults(t, s)

			tc.damage(t, cache)
			writeFiles(t, work, map[string]string{"stacks/web.hcl": "v2\n"})
			head := commitAll(t, work, "v2")
			runGit(t, work, "push", "-q", "origin", "main")
			if err := s.Fetch(ctx); err != nil {
				t.Fatalf("Fetch after the damage: %v", err)
			}
			if got, err := s.Head(ctx, "main"); err != nil || got != head {
				t.Errorf("Head(main) = %s, %v; want %s", got, err, head)
			}
			if tc.intact {
				wantFaults(t, s)
			} else {
				wantFaults(t, s, FaultCacheDamaged)
			}
			if got := runGit(t, cache, "rev-parse", "--is-bare-repository"); got != "true" {
				t.Errorf("the cache is no bare repository after the Fetch: %s", got)
			}
			// The status branch's history on the remote is kept and extended.
			h, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/b.json": []byte("b")}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"status/a.json", "status/b.json"}, lsTree(t, bare, h)); diff != "" {
				t.Errorf("status tree on the remote (-want +got):\n%s", diff)
			}
			wantFaults(t, s)
		})
	}
}

// A status write into a removed cache clone clones it again first: nothing
// is written into the removed directory's path and lost.
func TestStatusWriteIntoRemovedCache(t *testing.T) {
	ctx := testCtx(t)
	bare, _, _ := newRemote(t, definitions)
	cache := filepath.Join(t.TempDir(), "cache")
	s := openT(t, Options{Repo: "file://" + bare, CacheDir: cache})
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/a.json": []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}
	h, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/b.json": []byte("b")}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"status/a.json", "status/b.json"}, lsTree(t, bare, h)); diff != "" {
		t.Errorf("status tree on the remote (-want +got):\n%s", diff)
	}
	wantFaults(t, s, FaultCacheDamaged)
}

// Open clears and clones again a cache directory that holds stackd's
// unusable cache (marked in its config) or only what Git writes into the
// path of a removed cache; it refuses, and leaves alone, anything that may
// be someone's data.
func TestOpenDamagedCacheDirectory(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, cache string, url string)
		cleared bool
	}{
		{"leftovers of a removed cache", func(t *testing.T, cache, _ string) {
			writeFiles(t, cache, map[string]string{
				"objects/4b/825dc642cb6eb9a060e54bf8d69288fbee4904": "x",
				"refs/heads/stackd/status":                          strings.Repeat("ab", 20) + "\n",
				"packed-refs.lock":                                  "",
			})
		}, true},
		{"stackd's cache without HEAD", func(t *testing.T, cache, url string) {
			openT(t, Options{Repo: url, CacheDir: cache})
			if err := os.Remove(filepath.Join(cache, "HEAD")); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"someone's files", func(t *testing.T, cache, _ string) {
			writeFiles(t, cache, map[string]string{"notes.txt": "mine\n", "objects/x": "x"})
		}, false},
		{"someone's bare repository without HEAD", func(t *testing.T, cache, _ string) {
			runGit(t, filepath.Dir(cache), "init", "-q", "--bare", cache)
			if err := os.Remove(filepath.Join(cache, "HEAD")); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"someone's work tree", func(t *testing.T, cache, _ string) {
			runGit(t, filepath.Dir(cache), "init", "-q", cache)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			bare, _, head := newRemote(t, definitions)
			url := "file://" + bare
			cache := filepath.Join(t.TempDir(), "cache")
			tc.prepare(t, cache, url)
			before := listDir(t, cache)
			s, err := Open(ctx, Options{Repo: url, CacheDir: cache})
			if !tc.cleared {
				if !errors.Is(err, ErrRepositoryNotFound) {
					t.Fatalf("Open: %v, want ErrRepositoryNotFound", err)
				}
				t.Logf("error reads: %v", err)
				if diff := cmp.Diff(before, listDir(t, cache)); diff != "" {
					t.Errorf("Open changed the directory it refused (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if got, err := s.Head(ctx, "main"); err != nil || got != head {
				t.Errorf("Head(main) = %s, %v; want %s", got, err, head)
			}
			wantFaults(t, s, FaultCacheDamaged)
		})
	}
}

// listDir lists the files below dir (slash paths) with their sizes.
func listDir(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = fi.Size()
		if fi.IsDir() {
			out[filepath.ToSlash(rel)] = -1
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A status branch ref that another writer left empty or garbled is pointed
// back at the branch's last head before the next status commit, which
// therefore keeps the other files and the history: found in the reflog
// (stackd writes one), in packed-refs, or among stackd's status commits.
func TestStatusRefDamaged(t *testing.T) {
	tests := []struct {
		name    string
		content string
		// before runs after the two status commits, before the damage.
		before func(t *testing.T, dir string)
	}{
		{name: "emptied", content: ""},
		{name: "garbled", content: "0123abc\n"},
		{name: "emptied, no reflog, packed", before: func(t *testing.T, dir string) {
			runGit(t, dir, "pack-refs", "--all")
			if err := os.RemoveAll(filepath.Join(dir, ".git", "logs", "refs", "heads", "stackd")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "emptied, no reflog", before: func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, ".git", "logs", "refs", "heads", "stackd")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			dir, _ := newWorkRepo(t, definitions)
			s := openT(t, Options{Repo: dir})
			write := func(name string) string {
				t.Helper()
				h, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{name: []byte(name)}, Message: "stackd: " + name})
				if err != nil {
					t.Fatalf("WriteStatus(%s): %v", name, err)
				}
				return h
			}
			write("status/a.json")
			tip := write("status/b.json")
			// git reads the reflog stackd wrote.
			if got := runGit(t, dir, "rev-parse", "stackd/status@{1}"); got == tip {
				t.Errorf("reflog: stackd/status@{1} = the tip %s", got)
			}
			if tc.before != nil {
				tc.before(t, dir)
			}
			ref := filepath.Join(dir, ".git", "refs", "heads", "stackd", "status")
			if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ref, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}

			// Fetch repairs it, so that listing branches works again.
			if err := s.Fetch(ctx); err != nil {
				t.Fatal(err)
			}
			wantFaults(t, s, "status_ref_damaged stackd/status")
			if b, err := s.Branches(ctx); err != nil || b["stackd/status"] != tip {
				t.Errorf("Branches() after the repair: %v, %v; want stackd/status at %s", b, err, tip)
			}
			if err := os.WriteFile(ref, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			// And so does a status write without a Fetch.
			h := write("status/c.json")
			if parent := runGit(t, dir, "rev-parse", h+"^"); parent != tip {
				t.Errorf("parent of the status commit after the damage = %s, want the last tip %s", parent, tip)
			}
			if diff := cmp.Diff([]string{"status/a.json", "status/b.json", "status/c.json"}, lsTree(t, dir, h)); diff != "" {
				t.Errorf("status tree (-want +got):\n%s", diff)
			}
			wantFaults(t, s, "status_ref_damaged stackd/status")
		})
	}
}

// When the status branch is the deploy branch, a damaged ref is the user's
// branch: it is never rewritten, the status write fails, and Head reports
// the damage instead of reading an older value from packed-refs.
func TestDamagedDeployBranchIsNotRewritten(t *testing.T) {
	ctx := testCtx(t)
	dir, head := newWorkRepo(t, definitions)
	runGit(t, dir, "pack-refs", "--all")
	writeFiles(t, dir, map[string]string{"stacks/web.hcl": "v2\n"})
	commitAll(t, dir, "v2")
	runGit(t, dir, "checkout", "-q", "-b", "work") // main, the status branch, is not checked out
	s := openT(t, Options{Repo: dir, StatusBranch: "main"})
	ref := filepath.Join(dir, ".git", "refs", "heads", "main")
	if err := os.Truncate(ref, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Head(ctx, "main"); !errors.Is(err, ErrRefDamaged) {
		t.Errorf("Head(main) of a damaged ref = %s, %v; want ErrRefDamaged (packed-refs holds the older %s)", got, err, head[:7])
	}
	if err := s.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/a.json": []byte("a")}})
	if !errors.Is(err, ErrRefDamaged) {
		t.Errorf("WriteStatus to the damaged deploy branch: %v, want ErrRefDamaged", err)
	}
	if fi, err := os.Stat(ref); err != nil || fi.Size() != 0 {
		t.Errorf("the damaged deploy branch ref was changed: %v, %v", fi, err)
	}
	wantFaults(t, s)
}

package gitsource

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stackd/stackd/internal/testkit"
)

// longHistory is the length of the long history the benchmarks compare with a
// one-commit remote (the figure: 20,000 commits on main).
const longHistory = 20000

// historyRemote is a bare remote whose main has commits commits and whose head tree is
// definitions, served over transport ("file" or "git": git daemon on 127.0.0.1). It
// returns the remote's URL and path.
func historyRemote(tb testing.TB, transport string, commits int) (url, bare string) {
	tb.Helper()
	root := tb.TempDir()
	bare = filepath.Join(root, "remote.git")
	testkit.LongHistoryRemote(tb, bare, commits, definitions)
	switch transport {
	case "file":
		return "file://" + bare, bare
	case "git":
		port := startGitDaemon(tb, root)
		return fmt.Sprintf("git://127.0.0.1:%d/remote.git", port), bare
	}
	tb.Fatalf("unknown transport %q", transport)
	return "", ""
}

// BenchmarkStatusPush measures one status write (one file changed, one commit pushed) on
// a remote whose main has 1 or 20,000 commits, over file:// and git://. A push sends only
// what the new commit adds, so both cost the same.
func BenchmarkStatusPush(b *testing.B) {
	for _, transport := range []string{"file", "git"} {
		for _, commits := range []int{1, longHistory} {
			b.Run(fmt.Sprintf("%s/commits=%d", transport, commits), func(b *testing.B) {
				ctx := testCtx(b)
				url, _ := historyRemote(b, transport, commits)
				s := openT(b, Options{Repo: url, CacheDir: filepath.Join(b.TempDir(), "cache")})
				// The status branch exists before the loop: each write is an update.
				if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte("{}")}}); err != nil {
					b.Fatal(err)
				}
				for n := 0; b.Loop(); n++ {
					w := StatusWrite{Files: map[string][]byte{"status/web.json": fmt.Appendf(nil, `{"n":%d}`, n)}}
					if _, err := s.WriteStatus(ctx, w); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFetchNewCommit measures a fetch that brings one new commit of main on a remote
// whose main has 1 or 20,000 commits.
func BenchmarkFetchNewCommit(b *testing.B) {
	for _, transport := range []string{"file", "git"} {
		for _, commits := range []int{1, longHistory} {
			b.Run(fmt.Sprintf("%s/commits=%d", transport, commits), func(b *testing.B) {
				ctx := testCtx(b)
				url, bare := historyRemote(b, transport, commits)
				s := openT(b, Options{Repo: url, CacheDir: filepath.Join(b.TempDir(), "cache")})
				work := filepath.Join(b.TempDir(), "work")
				runGit(b, filepath.Dir(work), "clone", "-q", bare, work)
				for n := 0; b.Loop(); n++ {
					b.StopTimer()
					writeFiles(b, work, map[string]string{"stacks/web.hcl": fmt.Sprintf("v%d\n", n)})
					commitAll(b, work, fmt.Sprintf("web v%d", n))
					runGit(b, work, "push", "-q", "origin", "main")
					b.StartTimer()
					if err := s.Fetch(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

package gitsource

import (
	"errors"
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

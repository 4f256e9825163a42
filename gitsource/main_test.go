package gitsource

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stackd/stackd/internal/testkit"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(memoryScenarioEnv); spec != "" {
		os.Exit(runMemoryScenario(spec)) // see memory_test.go
	}
	goleak.VerifyTestMain(m)
}

// The git CLI plays the user in these tests.

// gitEnv isolates the CLI from the machine's configuration.
var gitEnv = testkit.GitEnv

// git runs the git CLI in dir and returns its trimmed standard output.
func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return testkit.MustGit(t, dir, args...)
}

func gitErr(dir string, args ...string) (string, error) { return testkit.Git(dir, args...) }

// writeFiles writes files (slash paths relative to dir) into the work tree dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// commitAll commits everything in the work tree dir and returns the new HEAD hash.
func commitAll(t testing.TB, dir, msg string) string {
	t.Helper()
	runGit(t, dir, "add", "-A")
	runGit(t, dir, "commit", "-q", "-m", msg)
	return runGit(t, dir, "rev-parse", "HEAD")
}

// newWorkRepo creates a non-bare repository on main with files committed.
func newWorkRepo(t testing.TB, files map[string]string) (dir, head string) {
	t.Helper()
	dir = t.TempDir()
	runGit(t, dir, "init", "-q")
	writeFiles(t, dir, files)
	return dir, commitAll(t, dir, "initial commit")
}

// newRemote creates a bare repository and a work clone of it whose main is pushed.
func newRemote(t testing.TB, files map[string]string) (bare, work, head string) {
	t.Helper()
	root := t.TempDir()
	bare = filepath.Join(root, "remote.git")
	runGit(t, root, "init", "-q", "--bare", bare)
	work = filepath.Join(root, "work")
	runGit(t, root, "clone", "-q", bare, work)
	writeFiles(t, work, files)
	head = commitAll(t, work, "initial commit")
	runGit(t, work, "push", "-q", "origin", "main")
	return bare, work, head
}

// lsTree lists the files of rev in the repository at dir.
func lsTree(t testing.TB, dir, rev string) []string {
	t.Helper()
	out := runGit(t, dir, "ls-tree", "-r", "--name-only", rev)
	if out == "" {
		return nil
	}
	files := strings.Split(out, "\n")
	slices.Sort(files)
	return files
}

// openT opens a Source or fails the test.
func openT(t testing.TB, opts Options) *Source {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open(%+v): %v", opts, err)
	}
	return s
}

// testCtx is a context for one test, cancelled when it ends.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

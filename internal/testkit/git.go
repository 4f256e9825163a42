package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GitEnv makes the git CLI play a user, isolated from the machine's
// configuration.
var GitEnv = []string{
	"GIT_AUTHOR_NAME=Test User", "GIT_AUTHOR_EMAIL=user@example.com",
	"GIT_COMMITTER_NAME=Test User", "GIT_COMMITTER_EMAIL=user@example.com",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
}

// Git runs the git CLI in dir (main as the default branch, no signing, no
// background gc) and returns its trimmed combined output.
func Git(dir string, args ...string) (string, error) {
	full := append([]string{
		"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false",
		"-c", "gc.auto=0", "-c", "maintenance.auto=false",
	}, args...)
	cmd := exec.Command("git", full...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), GitEnv...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// MustGit is Git failing the test on an error.
func MustGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := Git(dir, args...)
	if err != nil {
		t.Fatalf("git %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

// CommitFiles writes files (slash paths relative to dir) and commits
// everything in dir; it returns the new commit's hash.
func CommitFiles(t testing.TB, dir string, files map[string]string, msg string) string {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	MustGit(t, dir, "add", "-A")
	MustGit(t, dir, "commit", "-q", "-m", msg)
	return MustGit(t, dir, "rev-parse", "HEAD")
}

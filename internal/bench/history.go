package bench

// Remotes with a long history for the Git-at-scale scenarios, made with the
// git CLI (git fast-import writes 20,000 commits in a few seconds), and
// git daemon serving them on 127.0.0.1. The history has the shape of
// internal/testkit's LongHistoryRemote (which only tests may import): every
// commit but the last rewrites one of 100 churn files under history/, the
// last removes history/ and writes the definitions, so the head's tree is
// the same as a one-commit repository's of the same files.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// gitEnv isolates the git CLI from the machine's configuration.
var gitEnv = []string{
	"GIT_AUTHOR_NAME=Bench User", "GIT_AUTHOR_EMAIL=bench@example.com",
	"GIT_COMMITTER_NAME=Bench User", "GIT_COMMITTER_EMAIL=bench@example.com",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
}

// gitCmd is the git CLI in dir, fed stdin, returning its trimmed output.
func gitCmd(dir string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "gc.auto=0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// historyStart is the committer time of the first commit of a history.
const historyStart = 1700000000

// makeHistory creates a repository at dir (bare unless worktree) whose main
// has commits commits, the last with exactly files; it returns the head.
func makeHistory(dir string, commits int, files map[string]string, bare bool) (string, error) {
	if commits < 1 {
		return "", fmt.Errorf("a history of %d commits", commits)
	}
	args := []string{"init", "-q", dir}
	if bare {
		args = []string{"init", "-q", "--bare", dir}
	}
	if _, err := gitCmd(filepath.Dir(dir), nil, args...); err != nil {
		return "", err
	}
	var in bytes.Buffer
	for i := 1; i < commits; i++ {
		fmt.Fprintf(&in, "commit refs/heads/main\ncommitter Bench User <bench@example.com> %d +0000\n", historyStart+i)
		// Later commits of a branch in one stream follow its tip there.
		fastData(&in, fmt.Sprintf("change %d\n", i))
		fmt.Fprintf(&in, "M 100644 inline history/%03d.txt\n", i%100)
		fastData(&in, fmt.Sprintf("revision %d of churn file %d\n", i, i%100))
	}
	if err := fastImport(dir, &in); err != nil {
		return "", err
	}
	head, err := commitFiles(dir, files, "head\n", commits > 1)
	if err != nil {
		return "", err
	}
	if n, err := gitCmd(dir, nil, "rev-list", "--count", head); err != nil || n != strconv.Itoa(commits) {
		return "", fmt.Errorf("main has %s commits, want %d (%v)", n, commits, err)
	}
	return head, nil
}

// commitFiles adds a commit to main of the repository at dir (on top of
// its head, if it has one) that writes files, with history/ removed when
// dropHistory; it returns the commit's hash. It is a push to that
// repository as far as a reader of it can tell.
func commitFiles(dir string, files map[string]string, msg string, dropHistory bool) (string, error) {
	var in bytes.Buffer
	fmt.Fprintf(&in, "commit refs/heads/main\ncommitter Bench User <bench@example.com> %d +0000\n", time.Now().Unix())
	fastData(&in, msg)
	if _, err := gitCmd(dir, nil, "rev-parse", "-q", "--verify", "refs/heads/main"); err == nil {
		in.WriteString("from refs/heads/main^0\n")
	}
	if dropHistory {
		in.WriteString("D history\n")
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&in, "M 100644 inline %s\n", name)
		fastData(&in, files[name])
	}
	if err := fastImport(dir, &in); err != nil {
		return "", err
	}
	return gitCmd(dir, nil, "rev-parse", "refs/heads/main")
}

func fastData(w *bytes.Buffer, s string) { fmt.Fprintf(w, "data %d\n%s\n", len(s), s) }

func fastImport(dir string, in *bytes.Buffer) error {
	in.WriteString("done\n")
	_, err := gitCmd(dir, in.Bytes(), "fast-import", "--quiet", "--done")
	return err
}

// commitCount is the number of commits reachable from ref in the
// repository at dir (0 if ref does not exist).
func commitCount(dir, ref string) (int, error) {
	if _, err := gitCmd(dir, nil, "rev-parse", "-q", "--verify", ref); err != nil {
		return 0, nil
	}
	out, err := gitCmd(dir, nil, "rev-list", "--count", ref)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(out)
}

// gitDaemon serves the repositories under root on git://127.0.0.1 with
// pushes allowed; stop ends it.
func gitDaemon(ctx context.Context, root string) (port int, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port),
		"--base-path="+root, "--export-all", "--enable=receive-pack", root)
	cmd.Env = append(os.Environ(), gitEnv...)
	// git daemon forks a child per connection: its own process group, so
	// that stop ends them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	stop = func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	}
	// Ready when it accepts connections.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return port, stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return 0, nil, errors.Join(errors.New("git daemon did not start listening"), err, ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

package testkit

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// LongHistoryRemote creates a bare repository at dir whose main branch has commits
// commits, made with git fast-import in one go (20,000 take a few seconds). The first
// commits-1 each rewrite one of 100 churn files under history/ (so the history holds
// about four objects per commit: a commit, two trees, a blob); the last one removes
// history/ and writes files, so the head's tree is exactly files — the same tree a
// one-commit repository of files has. It returns the head commit's hash.
func LongHistoryRemote(t testing.TB, dir string, commits int, files map[string]string) string {
	t.Helper()
	if commits < 1 {
		t.Fatalf("LongHistoryRemote: %d commits, want at least 1", commits)
	}
	MustGit(t, filepath.Dir(dir), "init", "-q", "--bare", dir)

	var in bytes.Buffer
	data := func(s string) { fmt.Fprintf(&in, "data %d\n%s\n", len(s), s) }
	const when = 1700000000
	for i := 1; i <= commits; i++ {
		fmt.Fprintf(&in, "commit refs/heads/main\nmark :%d\n", i)
		fmt.Fprintf(&in, "committer Test User <user@example.com> %d +0000\n", when+i)
		last := i == commits
		if last {
			data("head\n")
		} else {
			data(fmt.Sprintf("change %d\n", i))
		}
		if i > 1 {
			fmt.Fprintf(&in, "from :%d\n", i-1)
		}
		if !last {
			fmt.Fprintf(&in, "M 100644 inline history/%03d.txt\n", i%100)
			data(fmt.Sprintf("revision %d of churn file %d\n", i, i%100))
			continue
		}
		if commits > 1 {
			in.WriteString("D history\n")
		}
		for _, name := range slices.Sorted(maps.Keys(files)) {
			fmt.Fprintf(&in, "M 100644 inline %s\n", name)
			data(files[name])
		}
	}
	in.WriteString("done\n")

	cmd := exec.Command("git", "fast-import", "--quiet", "--done")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), GitEnv...)
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import (%d commits) in %s: %v\n%s", commits, dir, err, out)
	}
	head := MustGit(t, dir, "rev-parse", "refs/heads/main")
	if n := MustGit(t, dir, "rev-list", "--count", head); n != fmt.Sprint(commits) {
		t.Fatalf("LongHistoryRemote: main has %s commits, want %d", n, commits)
	}
	return strings.TrimSpace(head)
}

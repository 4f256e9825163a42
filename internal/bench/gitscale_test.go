package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// makeHistory makes a remote of the asked length whose head tree is exactly
// the files; commitFiles adds a commit on top, as a push would.
func TestMakeHistory(t *testing.T) {
	files := setsDefs(2, allAt("v1"))
	for _, commits := range []int{1, 300} {
		bare := filepath.Join(t.TempDir(), "remote.git")
		head, err := makeHistory(bare, commits, files, true)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := commitCount(bare, "refs/heads/main"); err != nil || n != commits {
			t.Fatalf("%d commits asked: %d (%v)", commits, n, err)
		}
		tree, err := gitCmd(bare, nil, "ls-tree", "-r", "--name-only", head)
		if err != nil || tree != "sets.hcl\ntemplate/main.hcl" {
			t.Fatalf("%d commits: the head's tree is %q (%v), want the definitions alone", commits, tree, err)
		}
		next, err := commitFiles(bare, setsDefs(2, allAt("v2")), "v2\n", false)
		if err != nil {
			t.Fatal(err)
		}
		if parent, err := gitCmd(bare, nil, "rev-parse", next+"^"); err != nil || parent != head {
			t.Fatalf("the next commit's parent is %s (%v), want %s", parent, err, head)
		}
		if sets, _ := gitCmd(bare, nil, "show", next+":sets.hcl"); !strings.Contains(sets, `version = "v2"`) || strings.Contains(sets, `"v1"`) {
			t.Fatalf("the next commit's definitions:\n%s", sets)
		}
	}
	if _, err := makeHistory(filepath.Join(t.TempDir(), "r.git"), 0, nil, true); err == nil {
		t.Fatal("a history of 0 commits was made")
	}
}

// git daemon serves the remotes under its root on 127.0.0.1 and stops.
func TestGitDaemon(t *testing.T) {
	root := t.TempDir()
	bare := filepath.Join(root, "r.git")
	head, err := makeHistory(bare, 3, setsDefs(1, allAt("v1")), true)
	if err != nil {
		t.Fatal(err)
	}
	port, stop, err := gitDaemon(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	out, err := gitCmd(root, nil, "ls-remote", fmt.Sprintf("git://127.0.0.1:%d/r.git", port), "refs/heads/main")
	if err != nil || !strings.HasPrefix(out, head) {
		t.Fatalf("ls-remote over git://: %q (%v), want %s", out, err, head)
	}
}

// The log watcher reads "operation finished" lines, split across writes
// or not, and waits for every stack set at a revision.
func TestOpWatcher(t *testing.T) {
	w := newOpWatcher()
	rev := "0123456789abcdef0123456789abcdef01234567"
	line := func(set, status string) string {
		return fmt.Sprintf(`{"level":"info","stack_set":%q,"revision":"0123456","status":%q,"message":"operation finished"}`+"\n", set, status)
	}
	ctx := context.Background()
	// Other lines, and other revisions, count for nothing.
	w.Write([]byte(`{"level":"info","stack_set":"s000","revision":"0123456","message":"operation started"}` + "\n"))
	w.Write([]byte(strings.Replace(line("s000", "SUCCEEDED"), "0123456", "fedcba9", 1)))
	if _, err := w.wait(ctx, rev, []string{"s000"}, time.Millisecond); err == nil {
		t.Fatal("no operation at the revision finished, yet wait returned")
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.wait(ctx, rev, []string{"s000", "s001"}, time.Minute)
		done <- err
	}()
	l := line("s000", "SUCCEEDED") + line("s001", "SUCCEEDED")
	w.Write([]byte(l[:10]))
	w.Write([]byte(l[10:]))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(line("s002", "FAILED")))
	if _, err := w.wait(ctx, rev, []string{"s002"}, time.Minute); err == nil || !strings.Contains(err.Error(), "FAILED") {
		t.Fatalf("a failed operation: %v", err)
	}
}

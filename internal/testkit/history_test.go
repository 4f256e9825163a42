package testkit

import (
	"path/filepath"
	"testing"
)

func TestLongHistoryRemote(t *testing.T) {
	files := map[string]string{"stacks/web.hcl": "web\n", "README.md": "hi\n"}
	long := filepath.Join(t.TempDir(), "long.git")
	short := filepath.Join(t.TempDir(), "short.git")
	LongHistoryRemote(t, long, 500, files) // checks the commit count itself
	LongHistoryRemote(t, short, 1, files)
	lt := MustGit(t, long, "rev-parse", "main^{tree}")
	st := MustGit(t, short, "rev-parse", "main^{tree}")
	if lt != st {
		t.Errorf("head tree of the long history %s, of the one-commit one %s; want the same", lt, st)
	}
	if got := MustGit(t, long, "show", "main:stacks/web.hcl"); got != "web" {
		t.Errorf("stacks/web.hcl = %q, want web", got)
	}
	if got := MustGit(t, long, "show", "main~1:history/099.txt"); got != "revision 499 of churn file 99" {
		t.Errorf("history/099.txt one commit before the head = %q", got)
	}
}

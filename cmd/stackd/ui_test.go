package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommitURLFor(t *testing.T) {
	rev := strings.Repeat("ab", 20)
	for _, tc := range []struct{ forge, repo, want string }{
		{"https://api.github.com", "o/r", "https://github.com/o/r/commit/" + rev},
		{"https://ghe.example/api/v3", "o/r", "https://ghe.example/o/r/commit/" + rev},
		{"https://gitea.example/api/v1/", "o/r", "https://gitea.example/o/r/commit/" + rev},
		{"https://gitlab.example/api/v4", "group/r", "https://gitlab.example/group/r/-/commit/" + rev},
		{"https://user:secret@api.github.com", "o/r", "https://github.com/o/r/commit/" + rev},
		{"", "o/r", ""},
		{"https://api.github.com", "", ""},
		{"javascript:alert(1)", "o/r", ""},
	} {
		f := commitURLFor(tc.forge, tc.repo)
		got := ""
		if f != nil {
			got = f(rev)
		}
		if got != tc.want {
			t.Errorf("commitURLFor(%q, %q) = %q, want %q", tc.forge, tc.repo, got, tc.want)
		}
	}
}

// stackd ui prints the console's URL of the daemon found from --state-dir.
func TestUICommandFindsTheDaemon(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.MkdirAll(filepath.Dir(f.state), 0o755); err != nil {
		t.Fatal(err)
	}
	c := repoConfig{repo: f.repo, branch: "main", path: "."}
	remove, err := writeDaemonFile(f.state, ln.Addr(), false, "", "", &c)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	res := mustStackd(t, "ui", "--no-open", "--state-dir", f.state)
	if want := "http://" + ln.Addr().String() + "/ui/\n"; res.stdout != want {
		t.Errorf("stackd ui printed %q, want %q", res.stdout, want)
	}
	if res := stackd(t, "ui", "--no-open", "--state-dir", t.TempDir()); res.code() == 0 {
		t.Error("stackd ui without a daemon succeeded")
	}
}

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/gitsource/forge"
	"github.com/stackd/stackd/reconciler"
)

// TestForgeReviewsGitea is TestForgeReviews against a real Gitea on
// 127.0.0.1 (SQLite, an admin and a token made with its CLI): a pull
// request pushed, planned, commented and statused; a second push editing
// the comment in place; the merge deploying with stackd/deploy; the
// merged pull request planned no more; a restart posting nothing again.
// Gitea comes from STACKD_GITEA_BIN or PATH (.ci/gitea.sh builds it from
// its Go module); without one the test is skipped.
func TestForgeReviewsGitea(t *testing.T) {
	t.Parallel()
	g := startGitea(t)
	const owner, name = "stackd-admin", "defs"
	g.api(t, "POST", "/user/repos", map[string]any{"name": name, "default_branch": "main", "private": true}, nil)
	repoAPI := "/repos/" + owner + "/" + name
	remote := fmt.Sprintf("http://%s:%s@%s/%s/%s.git", owner, g.token, g.addr, owner, name)

	f := newFixture(t)
	runGit(t, f.repo, "push", "-q", remote, "main")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(g.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := func() cliResult {
		t.Helper()
		// The forge's web address, as a user copies it: the API path is
		// added.
		res := mustStackd(t, append([]string{"apply"}, f.flags("--forge", "gitea", "--forge-url", "http://"+g.addr+"/",
			"--forge-repo", owner+"/"+name, "--forge-token-file", tok)...)...)
		if strings.Contains(res.stdout+res.stderr, g.token) {
			t.Fatal("the token is in the output")
		}
		return res
	}
	type status struct {
		ID          int64  `json:"id"`
		State       string `json:"status"`
		Context     string `json:"context"`
		Description string `json:"description"`
		TargetURL   string `json:"target_url"`
	}
	// statuses are every status of sha, oldest first.
	statuses := func(sha string) []status {
		t.Helper()
		var out []status
		g.api(t, "GET", repoAPI+"/statuses/"+sha+"?sort=oldest&limit=50", nil, &out)
		return out
	}
	last := func(sha, context string) status {
		t.Helper()
		var s status
		for _, x := range statuses(sha) {
			if x.Context == context {
				s = x
			}
		}
		return s
	}
	type comment struct {
		ID      int64  `json:"id"`
		Body    string `json:"body"`
		HTMLURL string `json:"html_url"`
	}
	comments := func(pr int) []comment {
		t.Helper()
		var out []comment
		g.api(t, "GET", repoAPI+"/issues/"+strconv.Itoa(pr)+"/comments", nil, &out)
		return out
	}

	main1 := runGit(t, f.repo, "rev-parse", "HEAD")
	apply()
	if s := last(main1, reconciler.StatusDeploy); s.State != "success" || !strings.Contains(s.Description, "deployed") {
		t.Errorf("stackd/deploy of the first commit: %+v (all: %+v)", s, statuses(main1))
	}

	// A pull request with a new image.
	runGit(t, f.repo, "checkout", "-q", "-b", "feature/new-image")
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	head1 := f.commit(t, "new image")
	runGit(t, f.repo, "push", "-q", remote, "feature/new-image")
	runGit(t, f.repo, "checkout", "-q", "main")
	var pull struct {
		Number int `json:"number"`
	}
	g.api(t, "POST", repoAPI+"/pulls", map[string]any{"head": "feature/new-image", "base": "main", "title": "New image"}, &pull)
	apply()
	cs := comments(pull.Number)
	if len(cs) != 1 || !strings.HasPrefix(cs[0].Body, forge.Marker("web")) || !strings.Contains(cs[0].Body, "file.config") {
		t.Fatalf("comments after the first push: %+v", cs)
	}
	first := cs[0]
	plan := last(head1, reconciler.StatusPlan)
	if plan.State != "success" || !strings.HasPrefix(plan.Description, "1 stack set: ") || !strings.Contains(plan.Description, "to change") ||
		plan.TargetURL != first.HTMLURL {
		t.Errorf("stackd/plan of the first push: %+v, want it linked to %s", plan, first.HTMLURL)
	}

	// A second push: the same comment, edited.
	runGit(t, f.repo, "checkout", "-q", "feature/new-image")
	replaceIn(t, f.repo, "web.hcl", "replicas = 2", "replicas = 4")
	head2 := f.commit(t, "more replicas")
	runGit(t, f.repo, "push", "-q", remote, "feature/new-image")
	runGit(t, f.repo, "checkout", "-q", "main")
	apply()
	if cs := comments(pull.Number); len(cs) != 1 || cs[0].ID != first.ID || !strings.Contains(cs[0].Body, "file.replica[3]") {
		t.Errorf("comment not edited in place: %+v", cs)
	}
	if s := last(head2, reconciler.StatusPlan); s.State != "success" {
		t.Errorf("stackd/plan of the second push: %+v", s)
	}

	// Gitea merges; the merge deploys; the merged pull request is planned
	// no more.
	// Gitea checks a pull request's mergeability in the background: until
	// it has, a merge is refused with 405.
	eventually(t, 60*time.Second, func() bool {
		return g.try(t, "POST", fmt.Sprintf("%s/pulls/%d/merge", repoAPI, pull.Number), map[string]any{"Do": "merge"}) != http.StatusMethodNotAllowed
	}, "gitea never let the pull request be merged")
	runGit(t, f.repo, "fetch", "-q", remote, "main")
	runGit(t, f.repo, "merge", "-q", "--ff-only", "FETCH_HEAD")
	merge := runGit(t, f.repo, "rev-parse", "HEAD")
	apply()
	if s := last(merge, reconciler.StatusDeploy); s.State != "success" || !strings.Contains(s.Description, "1 stack set deployed") {
		t.Errorf("stackd/deploy of the merge: %+v (all: %+v)", s, statuses(merge))
	}
	for p := range statusHead(t, f.repo).Files {
		if strings.HasPrefix(p, "changesets/feature/new-image/") {
			t.Errorf("%s kept after its pull request was merged", p)
		}
	}

	// stackd reads back what Gitea holds (it names a listed status's
	// state "status"): a status owed again after a restart is not posted
	// twice.
	fc, err := forge.Open(forge.Options{Kind: forge.Gitea, BaseURL: "http://" + g.addr + "/api/v1", Repo: owner + "/" + name, Token: g.token})
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := fc.CommitStatus(t.Context(), merge, reconciler.StatusDeploy)
	if want := last(merge, reconciler.StatusDeploy); err != nil || !found || got.State != forge.Success || got.Description != want.Description || got.TargetURL != want.TargetURL {
		t.Errorf("stackd/deploy of the merge read back: %+v, %v, %v; Gitea has %+v", got, found, err, want)
	}

	// A restart with nothing new posts nothing.
	before := map[string]int{}
	for _, sha := range []string{main1, head1, head2, merge} {
		before[sha] = len(statuses(sha))
	}
	apply()
	for sha, n := range before {
		all := statuses(sha)
		if len(all) != n {
			t.Errorf("statuses of %s: %d after a restart, %d before: %+v", sha[:7], len(all), n, all)
		}
		for i := 1; i < len(all); i++ {
			a, b := all[i-1], all[i]
			if a.Context == b.Context && a.State == b.State && a.Description == b.Description && a.TargetURL == b.TargetURL {
				t.Errorf("status of %s posted twice: %+v", sha[:7], b)
			}
		}
		for _, s := range all {
			if strings.Contains(s.Description+s.TargetURL, g.token) {
				t.Errorf("a status carries the token: %+v", s)
			}
		}
	}
	if cs := comments(pull.Number); len(cs) != 1 {
		t.Errorf("comments after the merge: %+v", cs)
	}
}

// giteaServer is a real Gitea on 127.0.0.1 with an admin, stackd-admin,
// and its token.
type giteaServer struct {
	addr, token string
}

// startGitea starts Gitea (STACKD_GITEA_BIN, or gitea on PATH) in a
// temporary directory; the test's cleanup stops it. Without a binary the
// test is skipped.
func startGitea(t *testing.T) *giteaServer {
	t.Helper()
	bin := os.Getenv("STACKD_GITEA_BIN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("gitea"); err != nil {
			t.Skip("no Gitea: set STACKD_GITEA_BIN or put gitea on PATH (bash .ci/gitea.sh builds it from its Go module)")
		}
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("STACKD_GITEA_BIN: %v", err)
	}
	dir := t.TempDir()
	port := freeTCPPort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	// A binary built without bindata (.ci/gitea.sh) reads its locales
	// and templates beside it.
	static := ""
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		if st, err := os.Stat(filepath.Join(filepath.Dir(real), "options")); err == nil && st.IsDir() {
			static = "STATIC_ROOT_PATH = " + filepath.Dir(real) + "\n"
		}
	}
	ini := fmt.Sprintf(`APP_NAME = stackd test
RUN_MODE = prod
RUN_USER = %[4]s
WORK_PATH = %[1]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[2]d
ROOT_URL = http://127.0.0.1:%[2]d/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
APP_DATA_PATH = %[1]s/data
%[5]s
[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db

[repository]
ROOT = %[1]s/repos

[security]
INSTALL_LOCK = true
SECRET_KEY = %[3]s

[service]
DISABLE_REGISTRATION = true

[mailer]
ENABLED = false

[actions]
ENABLED = false

[indexer]
REPO_INDEXER_ENABLED = false

[log]
MODE = console
LEVEL = warn
ROOT_PATH = %[1]s/log
`, dir, port, hex.EncodeToString(secret), currentUser(t), static)
	conf := filepath.Join(dir, "custom", "conf", "app.ini")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	gitea := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--config", conf, "--work-path", dir}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "GITEA_WORK_DIR="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("gitea %s: %v\n%s%s", args[0], err, out.String(), errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	gitea("migrate")
	password := hex.EncodeToString(secret[:12])
	gitea("admin", "user", "create", "--username", "stackd-admin", "--password", password, "--email", "admin@stackd.invalid",
		"--admin", "--must-change-password=false")
	token := gitea("admin", "user", "generate-access-token", "--username", "stackd-admin", "--token-name", "stackd",
		"--scopes", "all", "--raw")
	if fields := strings.Fields(token); len(fields) > 0 {
		token = fields[len(fields)-1] // the token is the last line
	}

	web := exec.Command(bin, "--config", conf, "--work-path", dir, "web")
	web.Env = append(os.Environ(), "HOME="+dir, "GITEA_WORK_DIR="+dir)
	log := &syncBuffer{}
	web.Stdout, web.Stderr = log, log
	if err := web.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = web.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = web.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("gitea's log:\n%s", log.String())
		}
	})
	g := &giteaServer{addr: addr, token: token}
	eventually(t, 60*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("gitea exited:\n%s", log.String())
		default:
		}
		resp, err := httpClient.Get("http://" + addr + "/api/v1/version")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "gitea did not answer on %s", addr)
	return g
}

// try calls Gitea's API as the admin and returns the status code; it
// fails the test on an answer other than 2xx and 405.
func (g *giteaServer) try(t *testing.T, method, path string, in any) int {
	t.Helper()
	code, b := g.call(t, method, path, in)
	if code/100 != 2 && code != http.StatusMethodNotAllowed {
		t.Fatalf("%s %s: %d: %s", method, path, code, b)
	}
	return code
}

// api calls Gitea's API as the admin; out, if set, gets the JSON answer.
func (g *giteaServer) api(t *testing.T, method, path string, in, out any) {
	t.Helper()
	code, b := g.call(t, method, path, in)
	if code/100 != 2 {
		t.Fatalf("%s %s: %d: %s", method, path, code, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

func (g *giteaServer) call(t *testing.T, method, path string, in any) (int, []byte) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+g.addr+"/api/v1"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+g.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// currentUser is the user Gitea runs as (it checks RUN_USER).
func currentUser(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Skipf("gitea needs the current user's name: %v", err)
	}
	return u.Username
}

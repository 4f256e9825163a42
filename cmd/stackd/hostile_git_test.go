package main

// Hostile Git: what a branch commits and what a repository URL holds, against a real
// `stackd run` process. A branch whose *.hcl, vars_file or accounts_file is a symbolic
// link to a 200 MB blob gets a diagnostic without the daemon reading the blob; credentials
// in the repository URL reach no log line, status commit, error or file of the cache.

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hugeBlob is the size of the file a hostile branch commits: 200 MB.
const hugeBlob = 200 << 20

// peakRSS returns the peak resident set size of process pid, in bytes (VmHWM of
// /proc/<pid>/status).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the status of process %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest) // "123456 kB"
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || len(f) != 2 || f[1] != "kB" {
				t.Fatalf("VmHWM line %q", line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// hostileBranch commits, on a new branch off main, a 200 MB file of zeros (sparse on disk,
// 200 KB in Git) and the links and edits edit makes, then goes back to main. It returns
// the branch's head.
func hostileBranch(t *testing.T, f *fixture, name string, links map[string]string, edit func()) string {
	t.Helper()
	runGit(t, f.repo, "checkout", "-q", "-b", name, "main")
	if err := os.MkdirAll(filepath.Join(f.repo, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(f.repo, "data", "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(hugeBlob); err != nil {
		t.Fatal(err)
	}
	big.Close()
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(f.repo, link)); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit()
	}
	head := f.commit(t, "hostile: "+name)
	runGit(t, f.repo, "checkout", "-q", "main")
	return head
}

// TestHostileGitHugeSymlinks: branches whose *.hcl file, vars_file and accounts_file are
// symbolic links to a 200 MB blob each get a diagnostic naming the file and its size; the
// daemon never reads the blob (its peak RSS stays far below 200 MB), stays up, and keeps
// deploying the deploy branch.
func TestHostileGitHugeSymlinks(t *testing.T) {
	t.Parallel()
	f, p := deployedDaemon(t)
	addr := p.addr(t)
	base := peakRSS(t, p.cmd.Process.Pid)

	branches := []struct {
		name  string
		links map[string]string
		edit  func()
		want  []string
	}{
		{
			name:  "hostile/hcl",
			links: map[string]string{"big.hcl": "data/huge.bin"},
			want:  []string{"big.hcl", "big.hcl is 209715200 bytes", "File too large"},
		},
		{
			name:  "hostile/vars",
			links: map[string]string{"web.tfvars": "data/huge.bin"},
			edit: func() {
				replaceIn(t, f.repo, "web.hcl", `template    = "./templates/web"`, "template    = \"./templates/web\"\n  vars_file   = \"./web.tfvars\"")
			},
			want: []string{"web.tfvars", "too large: 209715200 bytes"},
		},
		{
			name:  "hostile/accounts",
			links: map[string]string{"accounts.csv": "data/huge.bin"},
			edit: func() {
				replaceIn(t, f.repo, "web.hcl", `accounts = ["111111111111", "222222222222"]`, `accounts_file = "./accounts.csv"`)
			},
			want: []string{"accounts.csv", "too large: 209715200 bytes"},
		},
	}
	heads := map[string]string{}
	for _, b := range branches {
		heads[b.name] = hostileBranch(t, f, b.name, b.links, b.edit)
	}
	for _, b := range branches {
		diags := waitBranchDiagnostics(t, p, f.repo, b.name, heads[b.name])
		wantDiagnostic(t, diags, b.want...)
	}

	// The deploy branch deploys on: a new image reaches every target.
	deployImage(t, f, p, "nginx:1.25", "nginx:1.26")

	if p.done() {
		t.Fatalf("the daemon exited; logs:\n%s", p.log)
	}
	if code, _, err := readyz(addr); err != nil || code != http.StatusOK {
		t.Errorf("/readyz: %d, %v", code, err)
	}
	peak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("peak RSS of the daemon: %d MiB after deploying main, %d MiB after planning 3 branches linking a %d MiB blob and deploying again",
		base>>20, peak>>20, hugeBlob>>20)
	if peak > 100<<20 {
		t.Errorf("peak RSS %d MiB, want far below the %d MiB blob (under 100 MiB)", peak>>20, hugeBlob>>20)
	}
	for _, l := range p.log.all() {
		if l["level"] == "panic" || l["level"] == "fatal" {
			t.Errorf("log line %v", l)
		}
	}
}

// gitHTTPServer serves the bare repositories below root with git http-backend (smart
// HTTP, pushes enabled per repository by http.receivepack) on 127.0.0.1, behind basic
// auth with user and password.
func gitHTTPServer(t *testing.T, root, user, password string) *httptest.Server {
	t.Helper()
	backend := &cgi.Handler{
		Path:   filepath.Join(runGit(t, root, "--exec-path"), "git-http-backend"),
		Env:    append([]string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, gitEnv...),
		Stderr: io.Discard,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// filesHolding returns the files under dir whose content holds secret.
func filesHolding(t *testing.T, dir, secret string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHostileGitCredentialsInURL: the daemon runs against a repository served over HTTP
// behind basic auth, with the credentials in --repo. It deploys and pushes status; the
// remote then vanishes (errors every poll) and comes back; daemons started with a wrong
// path and a wrong password fail. The password is in no log line, no error, no status
// commit, no API answer, no file of the state or the cache clone (whose config names the
// URL without it), and the cache clone's directories are 0700, its files private.
func TestHostileGitCredentialsInURL(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	const user, password = "stackd", "Sup3r-s3cret-Pa55"
	f := newFixture(t)
	root := t.TempDir()
	bare := filepath.Join(root, "defs.git")
	runGit(t, root, "clone", "-q", "--bare", f.repo, bare)
	runGit(t, bare, "config", "http.receivepack", "true")
	runGit(t, f.repo, "remote", "add", "origin", bare)
	srv := gitHTTPServer(t, root, user, password)
	host := strings.TrimPrefix(srv.URL, "http://")
	repoURL := func(pw, repo string) string { return fmt.Sprintf("http://%s:%s@%s/%s", user, pw, host, repo) }

	work := t.TempDir()
	stateDir, cache := filepath.Join(work, "state"), filepath.Join(work, "git-cache")
	args := func(repo, state, cache string) []string {
		return []string{"run", "--repo", repo, "--state-dir", state, "--cache-dir", cache, "--targets-root", f.targets,
			"--log-format", "json", "--listen", "127.0.0.1:0", "--interval", "300ms", "--git-timeout", "10s"}
	}
	rev1 := runGit(t, f.repo, "rev-parse", "HEAD")
	p := startProc(t, binary, nil, args(repoURL(password, "defs.git"), stateDir, cache)...)
	addr := p.addr(t)
	waitSucceeded(t, p, bare, "web", rev1)

	// The remote vanishes: every poll fails.
	if err := os.Rename(bare, bare+".gone"); err != nil {
		t.Fatal(err)
	}
	from := len(p.log.all())
	i := p.waitLine(t, 30*time.Second, from, `"reconcile failed"`, message("reconcile failed"))
	failed, _ := p.log.since(i)
	t.Logf("with the remote gone: %v", failed[0]["error"])
	if e, _ := failed[0]["error"].(string); !strings.Contains(e, "repository not found") || !strings.Contains(e, host+"/defs.git") {
		t.Errorf("reconcile failed with %q, want the URL (without credentials) and \"repository not found\"", e)
	}
	var api bytes.Buffer
	for _, path := range []string{"/metrics", "/readyz", "/healthz", "/v1/status"} {
		resp, err := httpClient.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(&api, resp.Body)
		resp.Body.Close()
	}

	// It comes back with a new commit: deploying and pushing status work again.
	if err := os.Rename(bare+".gone", bare); err != nil {
		t.Fatal(err)
	}
	replaceIn(t, f.repo, "web.hcl", "replicas = 2", "replicas = 3")
	rev2 := f.commit(t, "three replicas")
	runGit(t, f.repo, "push", "-q", "origin", "main")
	waitSucceeded(t, p, bare, "web", rev2)

	// Daemons with a wrong path and a wrong password do not start, and say why.
	for _, tc := range []struct{ name, url, want string }{
		{"wrong path", repoURL(password, "nope.git"), "repository not found"},
		{"wrong password", repoURL(password+"-wrong", "defs.git"), "authentication required"},
	} {
		dir := t.TempDir()
		res := runBinary(t, binary, args(tc.url, filepath.Join(dir, "state"), filepath.Join(dir, "cache"))...)
		if res.err == nil || !strings.Contains(res.stdout+res.stderr, tc.want) {
			t.Errorf("%s: %s; want a failure saying %q", tc.name, res, tc.want)
		}
		if strings.Contains(res.stdout+res.stderr, password) {
			t.Errorf("%s: the password is in the output:\n%s", tc.name, res)
		}
	}

	if strings.Contains(p.log.String(), password) {
		t.Errorf("the password is in the daemon's logs:\n%s", p.log)
	}
	if strings.Contains(api.String(), password) {
		t.Errorf("the password is in an API answer")
	}
	history, _, err := readStatusHistory(bare)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range history {
		if strings.Contains(c.Message, password) {
			t.Errorf("status commit %s: the password is in its message", c.Hash[:7])
		}
		for name, b := range c.Files {
			if bytes.Contains(b, []byte(password)) {
				t.Errorf("status commit %s: the password is in %s", c.Hash[:7], name)
			}
		}
	}
	cfg := readFile(t, filepath.Join(cache, "config"))
	if !strings.Contains(cfg, "url = http://"+host+"/defs.git") {
		t.Errorf("cache config does not name the URL without credentials:\n%s", cfg)
	}
	for _, dir := range []string{cache, stateDir} {
		if files := filesHolding(t, dir, password); len(files) > 0 {
			t.Errorf("the password is in %v", files)
		}
	}
	n := 0
	err = filepath.WalkDir(cache, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n++
		switch perm := fi.Mode().Perm(); {
		case d.IsDir() && perm != 0o700:
			t.Errorf("cache directory %s is %o, want 0700", path, perm)
		case !d.IsDir() && perm&0o077 != 0:
			t.Errorf("cache file %s is %o, want 0600 or stricter", path, perm)
		}
		return nil
	})
	if err != nil || n < 10 {
		t.Errorf("walked %d entries of the cache: %v", n, err)
	}
}

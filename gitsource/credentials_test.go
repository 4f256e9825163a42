package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/google/go-cmp/cmp"
)

func TestSplitCredentials(t *testing.T) {
	tests := []struct {
		in, remote string
		auth       transport.AuthMethod
		secrets    []string
	}{
		{"https://example.com/x.git", "https://example.com/x.git", nil, nil},
		{"https://user:s3cret@example.com/x.git", "https://example.com/x.git",
			&githttp.BasicAuth{Username: "user", Password: "s3cret"}, []string{"s3cret"}},
		{"https://user:p%40ss%2Fw0rd@example.com:8443/x.git", "https://example.com:8443/x.git",
			&githttp.BasicAuth{Username: "user", Password: "p@ss/w0rd"},
			[]string{"p@ss/w0rd", "p@ss%2Fw0rd", "p%40ss%2Fw0rd"}},
		{"http://ghp_token123@127.0.0.1:3000/x.git", "http://127.0.0.1:3000/x.git",
			&githttp.BasicAuth{Username: "ghp_token123"}, []string{"ghp_token123"}},
		{"ssh://git@example.com/x.git", "ssh://git@example.com/x.git", nil, nil},
		{"ssh://git:hunter22@example.com/x.git", "ssh://git@example.com/x.git",
			&gitssh.Password{User: "git", Password: "hunter22"}, []string{"hunter22"}},
		{"git@example.com:x.git", "git@example.com:x.git", nil, nil},
		{"git:hunter22@example.com:x.git", "git@example.com:x.git",
			&gitssh.Password{User: "git", Password: "hunter22"}, []string{"hunter22"}},
		{"git://user:pw12@example.com/x.git", "git://user@example.com/x.git", nil, []string{"pw12"}},
		{"https://u:ab@example.com/x.git", "https://example.com/x.git", &githttp.BasicAuth{Username: "u", Password: "ab"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			c := splitCredentials(tc.in)
			if c.remote != tc.remote {
				t.Errorf("remote = %q, want %q", c.remote, tc.remote)
			}
			if got, want := describeAuth(c.auth), describeAuth(tc.auth); got != want {
				t.Errorf("auth = %s, want %s", got, want)
			}
			if diff := cmp.Diff(tc.secrets, c.secrets); diff != "" {
				t.Errorf("secrets (-want +got):\n%s", diff)
			}
			if got := redactURL(tc.in); strings.Contains(got, "s3cret") || strings.Contains(got, "hunter22") || strings.Contains(got, "token123") {
				t.Errorf("redactURL(%q) = %q", tc.in, got)
			}
		})
	}
}

// describeAuth spells out an auth method, password included.
func describeAuth(a transport.AuthMethod) string {
	switch a := a.(type) {
	case nil:
		return "none"
	case *githttp.BasicAuth:
		return fmt.Sprintf("basic %q %q", a.Username, a.Password)
	case *gitssh.Password:
		return fmt.Sprintf("ssh password %q %q", a.User, a.Password)
	}
	return fmt.Sprintf("%T", a)
}

func TestScrub(t *testing.T) {
	s := &Source{creds: splitCredentials("https://user:s3cret-pw@example.com/x.git")}
	err := fmt.Errorf("fetch https://user:s3cret-pw@example.com/x.git: %w (%w)", transport.ErrAuthenticationRequired, context.DeadlineExceeded)
	got := s.scrub(err)
	if strings.Contains(got.Error(), "s3cret") || !strings.Contains(got.Error(), "https://user:xxxxx@example.com") {
		t.Errorf("scrub: %q", got)
	}
	if !errors.Is(got, transport.ErrAuthenticationRequired) || !errors.Is(got, context.DeadlineExceeded) || errors.Is(got, ErrStraggler) {
		t.Errorf("scrubbed error matches the wrong sentinels: %v", got)
	}
	var pe *fs.PathError
	if errors.As(got, &pe) {
		t.Errorf("scrubbed error still unwraps to its original")
	}
	clean := errors.New("nothing to hide")
	if s.scrub(clean) != clean {
		t.Errorf("an error without credentials was replaced")
	}
}

// gitHTTPServer serves the bare repositories below root with git http-backend (smart
// HTTP, push enabled) on 127.0.0.1, behind basic auth with user and password.
func gitHTTPServer(t *testing.T, root, user, password string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(gitHTTPHandler(t, root, user, password))
	t.Cleanup(srv.Close)
	return srv
}

// gitHTTPHandler is git http-backend for the bare repositories below root, behind basic
// auth with user and password.
func gitHTTPHandler(t *testing.T, root, user, password string) http.Handler {
	t.Helper()
	execPath := runGit(t, root, "--exec-path")
	backend := &cgi.Handler{
		Path:   filepath.Join(execPath, "git-http-backend"),
		Env:    append([]string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, gitEnv...),
		Stderr: io.Discard,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})
}

// checkPrivateTree fails unless every directory under dir is 0700 and no file is readable
// by group or others.
func checkPrivateTree(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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
			t.Errorf("directory %s is %o, want 0700", p, perm)
		case !d.IsDir() && perm&0o077 != 0:
			t.Errorf("file %s is %o, want no group or other bits", p, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Errorf("only %d entries under %s", n, dir)
	}
}

// TestCredentialsInURL: a repository served over HTTP behind basic auth, opened with the
// credentials in its URL, is fetched and pushed to; the password reaches no error (the
// remote's path wrong, the password wrong, the remote gone) and no file of the cache
// clone, whose directories are 0700 and files private.
func TestCredentialsInURL(t *testing.T) {
	ctx := testCtx(t)
	const user, password = "stackd", "Pa55-w0rd-s3cret"
	bare, _, head := newRemote(t, map[string]string{"web.hcl": "web\n"})
	runGit(t, bare, "config", "http.receivepack", "true")
	srv := gitHTTPServer(t, filepath.Dir(bare), user, password)
	host := strings.TrimPrefix(srv.URL, "http://")
	repoURL := fmt.Sprintf("http://%s:%s@%s/remote.git", user, password, host)
	cache := filepath.Join(t.TempDir(), "cache")

	s := openT(t, Options{Repo: repoURL, CacheDir: cache})
	if got, err := s.Head(ctx, "main"); err != nil || got != head {
		t.Fatalf("Head(main) = %q, %v; want %q", got, err, head)
	}
	if _, err := s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte("{}\n")}}); err != nil {
		t.Fatalf("WriteStatus: %v", err)
	}
	if got := runGit(t, bare, "show", "stackd/status:status/web.json"); got != "{}" {
		t.Errorf("status pushed: %q", got)
	}
	if err := s.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(cache, "config"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfg), password) || strings.Contains(string(cfg), user+":") ||
		!strings.Contains(string(cfg), "url = http://"+host+"/remote.git") {
		t.Errorf("cache config:\n%s", cfg)
	}
	checkPrivateTree(t, cache)
	noPassword := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		t.Logf("%s: %v", what, err)
		if strings.Contains(err.Error(), password) || strings.Contains(fmt.Sprintf("%+v", err), password) {
			t.Errorf("%s: the password is in the error: %v", what, err)
		}
	}

	// Failures: a wrong path, a wrong password, the remote gone.
	_, err = Open(ctx, Options{Repo: fmt.Sprintf("http://%s:%s@%s/nope.git", user, password, host), CacheDir: t.TempDir()})
	noPassword("wrong path", err)
	if !errors.Is(err, transport.ErrRepositoryNotFound) {
		t.Errorf("wrong path: %v, want transport.ErrRepositoryNotFound", err)
	}
	_, err = Open(ctx, Options{Repo: fmt.Sprintf("http://%s:%s-wrong@%s/remote.git", user, password, host), CacheDir: t.TempDir()})
	noPassword("wrong password", err)
	if !errors.Is(err, transport.ErrAuthenticationRequired) && !errors.Is(err, transport.ErrAuthorizationFailed) {
		t.Errorf("wrong password: %v, want an authentication error", err)
	}
	if err := os.Rename(bare, bare+".gone"); err != nil {
		t.Fatal(err)
	}
	noPassword("remote gone: fetch", s.Fetch(ctx))
	_, err = s.WriteStatus(ctx, StatusWrite{Files: map[string][]byte{"status/web.json": []byte("{\"x\":1}\n")}})
	noPassword("remote gone: status write", err)
	for _, f := range s.Faults() {
		if strings.Contains(f.Error(), password) {
			t.Errorf("fault holds the password: %v", f)
		}
	}
	// Nothing under the cache holds it either.
	filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), password) {
				t.Errorf("%s holds the password", p)
			}
		}
		return nil
	})
	checkPrivateTree(t, cache)
}

// TestCacheWithCredentialsRewritten: a cache clone an older stackd left with the
// credentials in its config and loose modes is re-pointed at the URL without them and
// made private when opened.
func TestCacheWithCredentialsRewritten(t *testing.T) {
	const password = "old-Pa55word"
	bare, _, head := newRemote(t, map[string]string{"web.hcl": "web\n"})
	srv := gitHTTPServer(t, filepath.Dir(bare), "u", password)
	repoURL := fmt.Sprintf("http://u:%s@%s/remote.git", password, strings.TrimPrefix(srv.URL, "http://"))
	cache := filepath.Join(t.TempDir(), "cache")
	runGit(t, filepath.Dir(cache), "clone", "-q", "--bare", repoURL, cache)
	runGit(t, cache, "config", "stackd.cache", "true")
	if err := os.Chmod(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(cache, "config")); !strings.Contains(string(b), password) {
		t.Fatalf("the old cache config does not hold the password:\n%s", b)
	}
	s := openT(t, Options{Repo: repoURL, CacheDir: cache})
	if got, err := s.Head(testCtx(t), "main"); err != nil || got != head {
		t.Fatalf("Head(main) = %q, %v", got, err)
	}
	b, err := os.ReadFile(filepath.Join(cache, "config"))
	if err != nil || strings.Contains(string(b), password) {
		t.Errorf("config after Open (%v):\n%s", err, b)
	}
	for _, p := range []string{cache, filepath.Join(cache, "config")} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v, %v; want private", p, fi.Mode(), err)
		}
	}
}

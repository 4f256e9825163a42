package gitsource

import (
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"net/http"
)

// TestModulesFetchPinAndCache: a module repository served by git
// http-backend over HTTPS behind basic auth. A tag resolves to its commit
// (annotated tags to the commit they tag); the pinned commit is read
// again without the network even after the tag moves; an untrusted fetch
// gets only what a trusted one brought; a wrong ref is an error; the token
// is only sent to its host and reaches no error.
func TestModulesFetchPinAndCache(t *testing.T) {
	ctx := testCtx(t)
	const user, token = "stackd", "ghp_m0dule-t0ken"
	bare, work, v1 := newRemote(t, map[string]string{"net/main.tf": "output \"v\" { value = 1 }\n", "README.md": "net\n"})
	runGit(t, work, "tag", "-a", "-m", "v1.0.0", "v1.0.0")
	runGit(t, work, "push", "-q", "origin", "v1.0.0")
	var requests atomic.Int64
	h := gitHTTPHandler(t, filepath.Dir(bare), user, token)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	repoURL := srv.URL + "/remote.git"
	host := strings.TrimPrefix(srv.URL, "https://")

	m, err := NewModules(ModulesOptions{CacheDir: t.TempDir(), FetchTimeout: 20 * time.Second, Auth: Auth{Username: user, Password: token, CABundle: ca}, AuthHost: host})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Fetch(ctx, repoURL, "v1.0.0", "", true); !errors.Is(err, ErrModuleNotCached) {
		t.Fatalf("untrusted fetch of an unfetched module: %v, want ErrModuleNotCached", err)
	}
	if requests.Load() != 0 {
		t.Fatalf("an untrusted fetch made %d requests", requests.Load())
	}
	tree, commit, err := m.Fetch(ctx, repoURL, "v1.0.0", "", false)
	if err != nil || commit != v1 {
		t.Fatalf("Fetch(v1.0.0) = %s, %v; want the tagged commit %s", commit, err, v1)
	}
	if b, err := fs.ReadFile(tree, "net/main.tf"); err != nil || !strings.Contains(string(b), "value = 1") {
		t.Fatalf("net/main.tf at v1.0.0: %q, %v", b, err)
	}

	// The tag moves: the pin still reads v1, from the cache alone.
	writeFiles(t, work, map[string]string{"net/main.tf": "output \"v\" { value = 2 }\n"})
	v2 := commitAll(t, work, "v2")
	runGit(t, work, "tag", "-f", "-a", "-m", "moved", "v1.0.0")
	runGit(t, work, "push", "-q", "-f", "origin", "main", "v1.0.0")
	before := requests.Load()
	for _, cachedOnly := range []bool{false, true} {
		tree, commit, err = m.Fetch(ctx, repoURL, "v1.0.0", v1, cachedOnly)
		if err != nil || commit != v1 {
			t.Fatalf("Fetch at the pin (cachedOnly %v) = %s, %v; want %s", cachedOnly, commit, err, v1)
		}
		if b, _ := fs.ReadFile(tree, "net/main.tf"); !strings.Contains(string(b), "value = 1") {
			t.Errorf("the pinned tree reads %q", b)
		}
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("reading a pinned module made %d requests, want none", n)
	}
	// Resolving again (stackd modules lock --upgrade) follows the tag.
	if _, commit, err = m.Fetch(ctx, repoURL, "v1.0.0", "", false); err != nil || commit != v2 {
		t.Errorf("Fetch(v1.0.0) after the tag moved = %s, %v; want %s", commit, err, v2)
	}
	if _, commit, err = m.Fetch(ctx, repoURL, "", "", false); err != nil || commit != v2 {
		t.Errorf("Fetch of the default branch = %s, %v; want %s", commit, err, v2)
	}
	if _, commit, err = m.Fetch(ctx, repoURL, v1, "", false); err != nil || commit != v1 {
		t.Errorf("Fetch of a commit hash = %s, %v; want %s", commit, err, v1)
	}
	if _, _, err := m.Fetch(ctx, repoURL, "v9", "", false); !errors.Is(err, ErrRefNotFound) || strings.Contains(err.Error(), token) {
		t.Errorf("Fetch(v9) = %v, want ErrRefNotFound without the token", err)
	}

	// Another host is never sent the token: its requests are anonymous.
	other := httptest.NewTLSServer(gitHTTPHandler(t, filepath.Dir(bare), user, token))
	defer other.Close()
	m2, err := NewModules(ModulesOptions{CacheDir: t.TempDir(), FetchTimeout: 20 * time.Second, Auth: Auth{Username: user, Password: token, CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: other.Certificate().Raw})}, AuthHost: host})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m2.Fetch(ctx, other.URL+"/remote.git", "", "", false); err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("a host other than AuthHost: %v, want an authentication error without the token", err)
	}
}

// TestModulesCacheBounded: beyond MaxRepositories the least recently used
// repository is removed, and fetched again when asked for.
func TestModulesCacheBounded(t *testing.T) {
	ctx := testCtx(t)
	var urls []string
	port := 0
	root := t.TempDir()
	for i := range 3 {
		bare := filepath.Join(root, fmt.Sprintf("m%d.git", i))
		runGit(t, root, "init", "-q", "--bare", bare)
		work := filepath.Join(root, fmt.Sprintf("w%d", i))
		runGit(t, root, "clone", "-q", bare, work)
		writeFiles(t, work, map[string]string{"main.tf": fmt.Sprintf("# %d\n", i)})
		commitAll(t, work, "m")
		runGit(t, work, "push", "-q", "origin", "main")
	}
	port = startGitDaemon(t, root)
	for i := range 3 {
		urls = append(urls, fmt.Sprintf("git://127.0.0.1:%d/m%d.git", port, i))
	}
	cache := t.TempDir()
	m, err := NewModules(ModulesOptions{CacheDir: cache, MaxRepositories: 2, FetchTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]string{}
	for i, u := range urls {
		_, c, err := m.Fetch(ctx, u, "main", "", false)
		if err != nil {
			t.Fatal(err)
		}
		pins[u] = c
		// Distinct use times, whatever the file system's resolution.
		past := time.Now().Add(time.Duration(i-10) * time.Minute)
		dirs, _ := os.ReadDir(filepath.Join(cache, "git"))
		for _, d := range dirs {
			if info, _ := d.Info(); info != nil && time.Since(info.ModTime()) < time.Minute {
				_ = os.Chtimes(filepath.Join(cache, "git", d.Name()), past, past)
			}
		}
	}
	if dirs, _ := os.ReadDir(filepath.Join(cache, "git")); len(dirs) != 2 {
		t.Fatalf("%d repositories cached, want 2", len(dirs))
	}
	if _, _, err := m.Fetch(ctx, urls[0], "main", pins[urls[0]], true); !errors.Is(err, ErrModuleNotCached) {
		t.Errorf("the evicted repository, cached only: %v, want ErrModuleNotCached", err)
	}
	if _, c, err := m.Fetch(ctx, urls[0], "main", pins[urls[0]], false); err != nil || c != pins[urls[0]] {
		t.Errorf("the evicted repository fetched again: %s, %v", c, err)
	}
}

// BenchmarkModulesFetchPinned: what a plan pays per load for a module
// already pinned and cached (no network): open the cached repository,
// check the pin, and read the package's tree and one file.
func BenchmarkModulesFetchPinned(b *testing.B) {
	ctx := testCtx(b)
	bare, _, head := newRemote(b, map[string]string{"net/main.tf": "output \"v\" { value = 1 }\n", "net/vars.tf": "variable \"x\" {}\n"})
	port := startGitDaemon(b, filepath.Dir(bare))
	url := fmt.Sprintf("git://127.0.0.1:%d/%s", port, filepath.Base(bare))
	m, err := NewModules(ModulesOptions{CacheDir: b.TempDir(), FetchTimeout: 20 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := m.Fetch(ctx, url, "main", "", false); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		tree, _, err := m.Fetch(ctx, url, "main", head, true)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fs.ReadFile(tree, "net/main.tf"); err != nil {
			b.Fatal(err)
		}
	}
}

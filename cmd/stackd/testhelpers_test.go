package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/stackd/stackd/examples"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/internal/testkit"
	"github.com/stackd/stackd/reconciler"
)

// The quickstart's targets: 3 regions × 2 accounts, in scheduling order.
var (
	qsRegions  = []string{"eu-west-1", "us-east-1", "ap-south-1"}
	qsAccounts = []string{"111111111111", "222222222222"}
)

// qsSecret is the quickstart's sensitive api_key value.
const qsSecret = "demo-secret-key"

const statusRef = plumbing.ReferenceName("refs/heads/stackd/status")

// ---- the CLI -------------------------------------------------------------

// cliResult is what one stackd invocation printed and returned.
type cliResult struct {
	stdout, stderr string
	err            error
}

// code is the process exit code main would use.
func (r cliResult) code() int {
	var ee exitError
	switch {
	case r.err == nil:
		return 0
	case errors.As(r.err, &ee):
		return ee.code
	default:
		return 1
	}
}

func (r cliResult) String() string {
	return fmt.Sprintf("err=%v\n--- stdout ---\n%s\n--- stderr ---\n%s", r.err, r.stdout, r.stderr)
}

// runCLI runs the real command tree in-process.
func runCLI(ctx context.Context, stdout, stderr io.Writer, args ...string) error {
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	return cmd.ExecuteContext(ctx)
}

// stackd runs one command to completion.
func stackd(t *testing.T, args ...string) cliResult {
	t.Helper()
	// Synchronised: operations of several stack sets log concurrently.
	var out, errb syncBuffer
	err := runCLI(t.Context(), &out, &errb, args...)
	return cliResult{stdout: out.String(), stderr: errb.String(), err: err}
}

// mustStackd runs one command and fails the test unless it exits 0.
func mustStackd(t *testing.T, args ...string) cliResult {
	t.Helper()
	res := stackd(t, args...)
	if res.err != nil {
		t.Fatalf("stackd %s: %s", strings.Join(args, " "), res)
	}
	return res
}

// syncBuffer is a bytes.Buffer safe for a daemon writing and a test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// daemon is a `stackd run` running in a goroutine.
type daemon struct {
	cancel context.CancelFunc
	done   chan error
	logs   *syncBuffer
}

// startDaemon starts `stackd run args...`; the test's cleanup stops it if the
// test did not.
func startDaemon(t *testing.T, args ...string) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	d := &daemon{cancel: cancel, done: make(chan error, 1), logs: &syncBuffer{}}
	go func() { d.done <- runCLI(ctx, io.Discard, d.logs, append([]string{"run"}, args...)...) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			t.Errorf("stackd run did not stop within 30s of its context ending")
		}
	})
	return d
}

// stop cancels the daemon's context and returns what the command returned.
func (d *daemon) stop(t *testing.T) error {
	t.Helper()
	d.cancel()
	select {
	case err := <-d.done:
		d.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("stackd run did not stop within 30s; logs:\n%s", d.logs)
		return nil
	}
}

// addr waits for the "stackd running" log line and returns its listen address.
func (d *daemon) addr(t *testing.T) string {
	t.Helper()
	var addr string
	eventually(t, 10*time.Second, func() bool {
		for _, line := range logLines(d.logs.String()) {
			if line["message"] == "stackd running" {
				addr, _ = line["listen"].(string)
				return addr != ""
			}
		}
		return false
	}, "stackd run never logged its listen address; logs:\n%s", d.logs)
	return addr
}

// httpClient keeps no idle connections, so no goroutine outlives a request.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

// readyz asks the daemon's readiness endpoint; it returns the HTTP status
// and the reconcile health it reports.
func readyz(addr string) (int, reconciler.Health, error) {
	var doc struct {
		Reconcile reconciler.Health `json:"reconcile"`
	}
	resp, err := httpClient.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, doc.Reconcile, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&doc)
	return resp.StatusCode, doc.Reconcile, err
}

// logLines parses JSON log output; lines that are not JSON objects are
// returned as {"unparsable": line}.
func logLines(s string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			m = map[string]any{"unparsable": sc.Text()}
		}
		out = append(out, m)
	}
	return out
}

// checkJSONLogs fails unless every log line is a JSON object with a level and
// a message.
func checkJSONLogs(t *testing.T, logs string) {
	t.Helper()
	for _, l := range logLines(logs) {
		if l["unparsable"] != nil || l["level"] == nil || l["message"] == nil {
			t.Errorf("log line is not a zerolog JSON object: %v", l)
		}
	}
}

// eventually polls cond every 20ms until it holds; it fails the test after
// timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("after %s: "+format, append([]any{timeout}, args...)...)
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("test ended while waiting: "+format, args...)
		}
	}
}

// ---- the user's Git repository -------------------------------------------

// gitEnv makes the git CLI play a user, isolated from the machine's config.
var gitEnv = testkit.GitEnv

// runGit runs the git CLI in dir and returns its trimmed output.
func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return testkit.MustGit(t, dir, args...)
}

// copyQuickstart writes examples/quickstart into dir.
func copyQuickstart(t *testing.T, dir string) {
	t.Helper()
	sub, err := fs.Sub(examples.Quickstart, "quickstart")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, sub); err != nil {
		t.Fatal(err)
	}
}

// fixture is a user's definitions repository plus stackd's state and targets
// directories, all in one temporary directory.
type fixture struct {
	repo, state, targets string
}

// newFixture makes a repository on main whose first commit is the quickstart.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{
		repo:    filepath.Join(dir, "repo"),
		state:   filepath.Join(dir, "stackd", "state"),
		targets: filepath.Join(dir, "targets"),
	}
	copyQuickstart(t, f.repo)
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "Add the web stack set")
	return f
}

// flags are the repository, state and target flags of run/apply/plan.
func (f *fixture) flags(extra ...string) []string {
	return append([]string{"--repo", f.repo, "--state-dir", f.state, "--targets-root", f.targets, "--log-format", "json"}, extra...)
}

func (f *fixture) apply(t *testing.T) cliResult {
	t.Helper()
	return stackd(t, append([]string{"apply"}, f.flags()...)...)
}

func (f *fixture) mustApply(t *testing.T) cliResult {
	t.Helper()
	return mustStackd(t, append([]string{"apply"}, f.flags()...)...)
}

// commit commits every change of the work tree and returns the new HEAD.
func (f *fixture) commit(t *testing.T, msg string) string {
	t.Helper()
	return commitAllIn(t, f.repo, msg)
}

func commitAllIn(t *testing.T, dir, msg string) string {
	t.Helper()
	runGit(t, dir, "add", "-A")
	runGit(t, dir, "commit", "-q", "-m", msg)
	return runGit(t, dir, "rev-parse", "HEAD")
}

// replaceIn replaces exactly one occurrence of old by new in dir/rel.
func replaceIn(t *testing.T, dir, rel, old, new string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), old); n != 1 {
		t.Fatalf("%s holds %q %d times, want once", rel, old, n)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lineOf returns the 1-based line of dir/rel that contains s.
func lineOf(t *testing.T, dir, rel, s string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%s does not contain %q", rel, s)
	return 0
}

// ---- the status branch, read with go-git ----------------------------------

// statusCommit is one commit of the status branch with every file of its tree.
type statusCommit struct {
	Hash, Message string
	Files         map[string][]byte
}

// readStatusHistory returns the status branch's commits, newest first; ok is
// false when the branch does not exist.
func readStatusHistory(repoPath string) (commits []statusCommit, ok bool, err error) {
	repo, err := git.PlainOpen(repoPath)
	if err != nil {
		return nil, false, err
	}
	ref, err := repo.Reference(statusRef, true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	iter, err := repo.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		return nil, false, err
	}
	err = iter.ForEach(func(c *object.Commit) error {
		sc := statusCommit{Hash: c.Hash.String(), Message: strings.TrimSpace(c.Message), Files: map[string][]byte{}}
		files, err := c.Files()
		if err != nil {
			return err
		}
		err = files.ForEach(func(f *object.File) error {
			s, err := f.Contents()
			sc.Files[f.Name] = []byte(s)
			return err
		})
		commits = append(commits, sc)
		return err
	})
	return commits, true, err
}

// statusHead returns the tip of the status branch ("" if it does not exist).
func statusHead(t *testing.T, repoPath string) statusCommit {
	t.Helper()
	h, ok, err := readStatusHistory(repoPath)
	if err != nil {
		t.Fatalf("read %s of %s: %v", statusRef, repoPath, err)
	}
	if !ok {
		return statusCommit{}
	}
	return h[0]
}

// stackSetStatus decodes status/<name>.json of a status commit.
func (c statusCommit) stackSetStatus(t *testing.T, name string) reconciler.StackSetStatus {
	t.Helper()
	var doc reconciler.StackSetStatus
	b, ok := c.Files[reconciler.StatusPath(name)]
	if !ok {
		t.Fatalf("status commit %s has no %s; files: %v", c.Hash, reconciler.StatusPath(name), keys(c.Files))
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", reconciler.StatusPath(name), err)
	}
	return doc
}

// index decodes status/stackd.json of a status commit.
func (c statusCommit) index(t *testing.T) reconciler.IndexStatus {
	t.Helper()
	var doc reconciler.IndexStatus
	b, ok := c.Files["status/stackd.json"]
	if !ok {
		t.Fatalf("status commit %s has no status/stackd.json; files: %v", c.Hash, keys(c.Files))
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("status/stackd.json: %v", err)
	}
	return doc
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ---- targets on disk ------------------------------------------------------

// fileState is what a test compares of a file or directory.
type fileState struct {
	Content string
	Mode    fs.FileMode
	ModTime time.Time // files only
}

// snapshot records every file and directory under root.
func snapshot(t *testing.T, root string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := fileState{Mode: info.Mode()}
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			st.Content, st.ModTime = string(b), info.ModTime()
		}
		out[filepath.ToSlash(rel)] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// instanceDir is where the file provider puts an instance's files.
func (f *fixture) instanceDir(region, account string) string {
	return filepath.Join(f.targets, account, region)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// eventHook is a webhook on 127.0.0.1 that collects the notifications
// stackd sends it (--notify-webhook-url-file file).
type eventHook struct {
	file   string
	mu     sync.Mutex
	events []notify.Event
}

func newEventHook(t *testing.T) *eventHook {
	t.Helper()
	h := &eventHook{file: filepath.Join(t.TempDir(), "hook-url")}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e notify.Event
		if err := json.NewDecoder(r.Body).Decode(&e); err == nil {
			h.mu.Lock()
			h.events = append(h.events, e)
			h.mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	if err := os.WriteFile(h.file, []byte(srv.URL+"/events"), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// received returns the events received so far.
func (h *eventHook) received() []notify.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

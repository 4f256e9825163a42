package main

// Helpers of the reliability tests (chaos_test.go, graceful_test.go,
// gitfaults_test.go, hostile_test.go): the real stackd binary run as a
// process, a git daemon serving git:// remotes, a recording custom-resource
// provider, and small readers of the daemon's HTTP API.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/state"
)

// ---- the stackd binary -----------------------------------------------------

// The binary is built once and shared by the tests that run it at the same
// time; the last of them to finish removes it (a later test builds it again).
var bin struct {
	mu    sync.Mutex
	dir   string
	users int
}

// stackdBinary builds ./cmd/stackd with `go build` (no -race: the daemon is
// the subject, the test binary the observer) and returns its path.
func stackdBinary(t *testing.T) string {
	t.Helper()
	bin.mu.Lock()
	defer bin.mu.Unlock()
	if bin.dir == "" {
		dir, err := os.MkdirTemp("", "stackd-bin-")
		if err != nil {
			t.Fatal(err)
		}
		goCmd, err := exec.LookPath("go")
		if err != nil {
			goCmd = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		start := time.Now()
		cmd := exec.Command(goCmd, "build", "-o", filepath.Join(dir, "stackd"), ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			t.Fatalf("go build ./cmd/stackd: %v\n%s", err, out)
		}
		t.Logf("built the stackd binary in %s", time.Since(start).Round(time.Millisecond))
		bin.dir = dir
	}
	bin.users++
	t.Cleanup(func() {
		bin.mu.Lock()
		defer bin.mu.Unlock()
		if bin.users--; bin.users == 0 {
			os.RemoveAll(bin.dir)
			bin.dir = ""
		}
	})
	return filepath.Join(bin.dir, "stackd")
}

// ---- log lines of a process ------------------------------------------------

// lineLog collects a process's JSON log output line by line and wakes
// waiters on every new line.
type lineLog struct {
	mu      sync.Mutex
	raw     bytes.Buffer
	partial []byte
	lines   []map[string]any
	changed chan struct{}
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.raw.Write(p)
	l.partial = append(l.partial, p...)
	added := false
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSpace(l.partial[:i])
		l.partial = l.partial[i+1:]
		if len(line) == 0 {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal(line, &m); err != nil {
			m = map[string]any{"unparsable": string(line)}
		}
		l.lines = append(l.lines, m)
		added = true
	}
	if added {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.raw.String()
}

// since returns the lines from index from on, and a channel closed when
// another line arrives.
func (l *lineLog) since(from int) ([]map[string]any, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from > len(l.lines) {
		from = len(l.lines)
	}
	return append([]map[string]any(nil), l.lines[from:]...), l.changed
}

// all returns every line so far.
func (l *lineLog) all() []map[string]any {
	lines, _ := l.since(0)
	return lines
}

// messages counts the lines whose message is msg.
func (l *lineLog) count(msg string) int {
	n := 0
	for _, line := range l.all() {
		if line["message"] == msg {
			n++
		}
	}
	return n
}

// ---- stackd as a process ---------------------------------------------------

// proc is a stackd process in its own process group.
type proc struct {
	cmd    *exec.Cmd
	log    *lineLog
	exited chan struct{}
	err    error // what Wait returned; read after exited is closed
}

// startProc starts the binary with args; env is added to the test's
// environment. The test's cleanup kills the process group if it still runs.
func startProc(t *testing.T, binary string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary, args...), log: newLineLog(), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = p.log
	p.cmd.Stderr = p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	})
	return p
}

// waitLine waits until a line from index from on satisfies match and
// returns its index; it fails the test after timeout or if the process
// exits first.
func (p *proc) waitLine(t *testing.T, timeout time.Duration, from int, what string, match func(map[string]any) bool) int {
	t.Helper()
	i, ok := p.tryWaitLine(timeout, from, match, nil)
	if !ok {
		t.Fatalf("no log line %s within %s (process exited: %v); logs:\n%s", what, timeout, p.done(), p.log)
	}
	return i
}

// tryWaitLine is waitLine that reports failure instead, and also gives up
// when stop is closed.
func (p *proc) tryWaitLine(timeout time.Duration, from int, match func(map[string]any) bool, stop <-chan struct{}) (int, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		lines, changed := p.log.since(from)
		for i, l := range lines {
			if match(l) {
				return from + i, true
			}
		}
		from += len(lines)
		select {
		case <-changed:
		case <-p.exited:
			lines, _ := p.log.since(from)
			for i, l := range lines {
				if match(l) {
					return from + i, true
				}
			}
			return 0, false
		case <-stop:
			return 0, false
		case <-deadline.C:
			return 0, false
		}
	}
}

func message(msgs ...string) func(map[string]any) bool {
	return func(l map[string]any) bool {
		for _, m := range msgs {
			if l["message"] == m {
				return true
			}
		}
		return false
	}
}

// addr waits for "stackd running" and returns the API's listen address.
func (p *proc) addr(t *testing.T) string {
	t.Helper()
	i := p.waitLine(t, 20*time.Second, 0, `"stackd running"`, message("stackd running"))
	lines, _ := p.log.since(i)
	addr, _ := lines[0]["listen"].(string)
	if addr == "" {
		t.Fatalf("stackd running without a listen address: %v", lines[0])
	}
	return addr
}

func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL to the process group and waits for the exit.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("stackd (pid %d) did not die of SIGKILL within 10s", p.cmd.Process.Pid)
	}
}

// signal sends sig to the process only (not its group).
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to exit and returns its exit code (-1 when a
// signal ended it).
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("stackd did not exit within %s; logs:\n%s", timeout, p.log)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	default:
		t.Fatalf("wait: %v", p.err)
		return 0
	}
}

// runBinary runs a short stackd command to completion.
func runBinary(t *testing.T, binary string, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	res := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.err = exitError{ee.ExitCode()}
	case err != nil:
		t.Fatalf("run %s %v: %v", binary, args, err)
	}
	return res
}

// ---- git daemon --------------------------------------------------------------

// gitDaemon serves the bare repositories below base over git:// on
// 127.0.0.1 (clone, fetch and push).
type gitDaemon struct {
	base string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// startGitDaemon starts `git daemon` on port (0: a free one) and waits
// until it accepts connections.
func startGitDaemon(t *testing.T, base string, port int) *gitDaemon {
	t.Helper()
	for attempt := 0; ; attempt++ {
		p := port
		if p == 0 {
			p = freeTCPPort(t)
		}
		g := &gitDaemon{base: base, port: p, done: make(chan struct{})}
		g.cmd = exec.Command("git", "daemon", "--reuseaddr", "--listen=127.0.0.1", "--port="+strconv.Itoa(p),
			"--base-path="+base, "--export-all", "--enable=receive-pack", "--informative-errors", base)
		g.cmd.Env = append(os.Environ(), gitEnv...)
		g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		g.cmd.WaitDelay = 5 * time.Second
		if err := g.cmd.Start(); err != nil {
			t.Fatalf("start git daemon: %v", err)
		}
		go func() {
			_ = g.cmd.Wait()
			close(g.done)
		}()
		t.Cleanup(func() { g.stop(t) })
		if g.waitListening() {
			return g
		}
		g.stop(t)
		if port != 0 || attempt == 4 {
			t.Fatalf("git daemon did not listen on 127.0.0.1:%d", p)
		}
	}
}

// waitListening dials until the daemon accepts a connection; false if it
// exited (port taken) or 10s passed.
func (g *gitDaemon) waitListening() bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", g.addr(), time.Second)
		if err == nil {
			c.Close()
			return true
		}
		select {
		case <-g.done:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return false
}

func (g *gitDaemon) addr() string { return fmt.Sprintf("127.0.0.1:%d", g.port) }

// url is the git:// URL of the bare repository base/name.
func (g *gitDaemon) url(name string) string { return "git://" + g.addr() + "/" + name }

// stop kills the daemon and the children it forked; afterwards nothing
// listens on its port.
func (g *gitDaemon) stop(t *testing.T) {
	select {
	case <-g.done:
		return
	default:
	}
	_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Errorf("git daemon did not stop")
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ---- repositories -----------------------------------------------------------

// writeTree writes files (slash paths relative to dir); an empty content
// with a name ending in "!" removes the file named without the "!".
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if rm, ok := strings.CutSuffix(name, "!"); ok {
			if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(rm))); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ---- a recording custom-resource provider ------------------------------------

// crRequest is one request a custom-resource provider received.
type crRequest struct {
	RequestType        string          `json:"RequestType"`
	RequestID          string          `json:"RequestId"`
	ResponseURL        string          `json:"ResponseURL"`
	StackID            string          `json:"StackId"`
	StackName          string          `json:"StackName"`
	LogicalResourceID  string          `json:"LogicalResourceId"`
	RegionID           string          `json:"RegionId"`
	ResourceOwnerID    string          `json:"ResourceOwnerId"`
	PhysicalResourceID string          `json:"PhysicalResourceId"`
	ResourceProperties json.RawMessage `json:"ResourceProperties"`
}

// key is what identifies the resource in the world: stack and logical id.
func (r crRequest) key() string { return r.StackID + " " + r.LogicalResourceID }

// where names the resource by stack set name and target.
func (r crRequest) where() string {
	return r.StackName + "/" + r.RegionID + "/" + r.ResourceOwnerID + "/" + r.LogicalResourceID
}

// success is the synchronous SUCCESS answer to req.
func (r crRequest) success() map[string]any {
	phys := r.PhysicalResourceID
	if r.RequestType == "Create" {
		phys = "phys-" + r.RequestID // the same for a repeated request id: create-or-verify
	}
	return map[string]any{
		"Status": "SUCCESS", "RequestId": r.RequestID, "StackId": r.StackID,
		"LogicalResourceId": r.LogicalResourceID, "PhysicalResourceId": phys,
		"Data": map[string]any{"name": r.where()},
	}
}

// recordingProvider is a custom-resource provider on 127.0.0.1 that records
// every request; answer decides the reply (nil: a synchronous SUCCESS).
type recordingProvider struct {
	mu       sync.Mutex
	requests []crRequest
	// answer, if set, writes the reply itself. It runs without mu held.
	answer func(w http.ResponseWriter, r *http.Request, req crRequest)
	// received is signalled (non-blocking) on every request.
	received chan crRequest
}

func newRecordingProvider() *recordingProvider {
	return &recordingProvider{received: make(chan crRequest, 1024)}
}

func (p *recordingProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req crRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.requests = append(p.requests, req)
	answer := p.answer
	p.mu.Unlock()
	select {
	case p.received <- req:
	default:
	}
	if answer != nil {
		answer(w, r, req)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(req.success())
}

// all returns the requests so far.
func (p *recordingProvider) all() []crRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]crRequest(nil), p.requests...)
}

// ---- the daemon's HTTP API --------------------------------------------------

// getJSON GETs http://addr+path into v and returns the status code.
func getJSON(addr, path string, v any) (int, error) {
	resp, err := httpClient.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if v == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
}

// metric returns the sum of the samples of a Prometheus metric whose label
// set contains every label in match (`name{a="b"}` lines of /metrics).
func metric(t *testing.T, addr, name string, match ...string) float64 {
	t.Helper()
	resp, err := httpClient.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest != "" && rest[0] != '{' && rest[0] != ' ' {
			continue // another metric with this prefix
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(rest, m)
		}
		if !ok {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// ---- the state's directory lock ----------------------------------------------

// Badger releases its directory lock by closing the lock file, so a process
// that another goroutine of this test binary forks (git, the stackd binary)
// holds the lock until it execs. A command run right after another on the
// same state directory can then fail with "Cannot acquire directory lock";
// these helpers retry that for a few seconds.

func lockedErr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// whileLocked calls try every 10ms while it reports the lock taken, for at
// most 5s.
func whileLocked(try func() (locked bool)) {
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for try() && time.Now().Before(deadline) {
		<-tick.C
	}
}

// stackdRetry is stackd, retried while the state directory is locked. Its
// output buffers are safe for the several goroutines (one per stack set's
// operation) that log at once.
func stackdRetry(t *testing.T, args ...string) cliResult {
	t.Helper()
	var res cliResult
	whileLocked(func() bool {
		var out, errb syncBuffer
		err := runCLI(t.Context(), &out, &errb, args...)
		res = cliResult{stdout: out.String(), stderr: errb.String(), err: err}
		return lockedErr(res.err)
	})
	return res
}

func mustStackdRetry(t *testing.T, args ...string) cliResult {
	t.Helper()
	res := stackdRetry(t, args...)
	if res.err != nil {
		t.Fatalf("stackd %s: %s", strings.Join(args, " "), res)
	}
	return res
}

func applyRetry(t *testing.T, f *fixture) cliResult {
	t.Helper()
	return stackdRetry(t, append([]string{"apply"}, f.flags()...)...)
}

func mustApplyRetry(t *testing.T, f *fixture) cliResult {
	t.Helper()
	return mustStackdRetry(t, append([]string{"apply"}, f.flags()...)...)
}

// openState opens a state directory, retrying while it is locked.
func openState(t *testing.T, dir string) *state.Store {
	t.Helper()
	var (
		st  *state.Store
		err error
	)
	whileLocked(func() bool {
		st, err = state.Open(dir)
		return lockedErr(err)
	})
	if err != nil {
		t.Fatalf("open state %s: %v", dir, err)
	}
	return st
}

// startDaemonRetry is startDaemon, started again while the state directory
// is locked (see lockedErr); it returns once the daemon serves.
func startDaemonRetry(t *testing.T, args ...string) *daemon {
	t.Helper()
	var d *daemon
	whileLocked(func() bool {
		d = startDaemon(t, args...)
		deadline := time.NewTimer(20 * time.Second)
		defer deadline.Stop()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if strings.Contains(d.logs.String(), `"message":"stackd running"`) {
				return false
			}
			select {
			case err := <-d.done:
				d.done <- err // for the cleanup
				if lockedErr(err) {
					return true
				}
				t.Fatalf("stackd run exited at once: %v; logs:\n%s", err, d.logs)
			case <-deadline.C:
				t.Fatalf("stackd run did not start within 20s; logs:\n%s", d.logs)
			case <-tick.C:
			}
		}
	})
	return d
}

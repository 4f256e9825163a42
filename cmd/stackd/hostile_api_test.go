package main

// Hostile requests to the HTTP API of a real `stackd run` process (issue 13
// §3): an empty token file does not switch authentication off, the
// external URL follows the listener, oversized bodies are refused unread,
// and a flood of slow 1 MiB webhooks with bad signatures neither takes the
// daemon's memory nor its probes.

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// An empty or white-space-only --api-token-file is a start-up error of
// `stackd run` and `stackd apply --listen`, even on loopback where no file
// at all means no authentication; so is an empty --webhook-secret-file.
func TestHostileAPIEmptyTokenFile(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := newFixture(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		args          func(file string) []string
		flag          string
	}{
		{"run, empty", "", func(p string) []string {
			return append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--api-token-file", p)...)
		}, "--api-token-file"},
		{"run, white space", " \n\t\r\n", func(p string) []string {
			return append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--api-token-file", p)...)
		}, "--api-token-file"},
		{"apply --listen, white space", "\n\n", func(p string) []string {
			return append([]string{"apply"}, f.flags("--listen", "127.0.0.1:0", "--api-token-file", p)...)
		}, "--api-token-file"},
		{"run, empty webhook secret", "  ", func(p string) []string {
			return append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--webhook-secret-file", p)...)
		}, "--webhook-secret-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startProc(t, binary, nil, tc.args(file)...)
			if code := p.wait(t, 60*time.Second); code == 0 {
				t.Fatalf("exit code 0, want an error; output:\n%s", p.log)
			}
			out := p.log.String()
			for _, want := range []string{tc.flag + " " + file + " is empty or only white space", "omit " + tc.flag} {
				if !strings.Contains(out, want) {
					t.Errorf("output does not say %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "stackd running") || strings.Contains(out, "API serving") {
				t.Errorf("the API served:\n%s", out)
			}
		})
	}
	// Nothing was applied: the checks come before the state is opened.
	if _, err := os.Stat(f.state); err == nil {
		t.Errorf("the state directory %s was created", f.state)
	}
}

// waitConditionRepo is a repository whose one instance writes its
// wait-condition handle URL to the file signal_url and waits for a signal.
func waitConditionRepo(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	writeTree(t, f.repo, map[string]string{
		"app.hcl": `stack_set "app" {
  template = "./template"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`,
		"template/main.hcl": `resource "wait_condition" "ready" {
  count   = 1
  timeout = "5m"
}

resource "file" "boot" {
  path    = "signal_url"
  content = wait_condition.ready.handle_url
}
`,
	})
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "app with a wait condition")
	return f
}

// Without --external-url, handle URLs point at the API as bound: https with
// TLS and the real port of --listen 127.0.0.1:0. The URL works: the signal
// sent to it over TLS completes the deployment. An explicit --external-url
// that contradicts the listener is a start-up warning.
func TestHostileAPIExternalURL(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	certFile, keyFile, pool := selfSigned(t)
	f := waitConditionRepo(t)
	p := startProc(t, binary, nil, append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h",
		"--tls-cert", certFile, "--tls-key", keyFile)...)...)
	addr := p.addr(t)
	lines := p.log.all()
	for _, l := range lines {
		if l["message"] == "stackd running" && l["external_url"] != "https://"+addr {
			t.Errorf("stackd running with external_url %v, want https://%s", l["external_url"], addr)
		}
		if msg, _ := l["message"].(string); l["level"] == "warn" && strings.Contains(msg, "external") {
			t.Errorf("warning with a derived external URL: %v", l)
		}
	}
	urlFile := filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "signal_url")
	var handle string
	eventually(t, 30*time.Second, func() bool {
		b, err := os.ReadFile(urlFile)
		handle = string(b)
		return err == nil && handle != ""
	}, "no handle URL was written; logs:\n%s", p.log)
	if want := "https://" + addr + "/v1/signals/"; !strings.HasPrefix(handle, want) {
		t.Fatalf("handle URL %q, want it under %s", handle, want)
	}
	t.Logf("--listen 127.0.0.1:0 with TLS bound %s; handle URL %s…", addr, handle[:len("https://"+addr+"/v1/signals/")])
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	res, err := client.Post(handle, "application/json", strings.NewReader(`{"status":"SUCCESS","id":"web","reason":"up"}`))
	if err != nil {
		t.Fatalf("POST the handle URL: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("signal answered %d, want 200", res.StatusCode)
	}
	eventually(t, 30*time.Second, func() bool {
		return strings.Contains(statusHead(t, f.repo).Message, "SUCCEEDED")
	}, "the signalled deployment never succeeded; logs:\n%s", p.log)
	p.signal(t, syscall.SIGTERM)
	p.wait(t, 30*time.Second)

	// An explicit URL that is http while TLS is on, on another port of
	// this machine: two warnings, and the URL is used as given.
	g := waitConditionRepo(t)
	q := startProc(t, binary, nil, append([]string{"run"}, g.flags("--listen", "127.0.0.1:0", "--interval", "1h",
		"--tls-cert", certFile, "--tls-key", keyFile, "--external-url", "http://127.0.0.1:9")...)...)
	q.addr(t)
	for _, want := range []string{"is http but the API serves only TLS", "names port 9 on this machine but the API listens on port"} {
		q.waitLine(t, 10*time.Second, 0, "warning "+want, func(l map[string]any) bool {
			msg, _ := l["message"].(string)
			return l["level"] == "warn" && strings.Contains(msg, want)
		})
	}
	urlFile = filepath.Join(g.instanceDir("eu-west-1", "111111111111"), "signal_url")
	eventually(t, 30*time.Second, func() bool {
		b, err := os.ReadFile(urlFile)
		handle = string(b)
		return err == nil && handle != ""
	}, "no handle URL was written; logs:\n%s", q.log)
	if !strings.HasPrefix(handle, "http://127.0.0.1:9/v1/signals/") {
		t.Errorf("handle URL %q, want it under the explicit --external-url", handle)
	}
}

// rawRequest sends a request line and headers to addr, and no body, and
// returns the status the daemon answers.
func rawRequest(t *testing.T, addr, method, path string, header map[string]string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: stackd\r\n", method, path)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	res.Body.Close()
	return res.StatusCode
}

// An oversized body is a 413 before it is read: the test announces more
// than each route's limit and sends none of it.
func TestHostileAPIOversizedBodies(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := newFixture(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("hook-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, binary, nil, append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h",
		"--webhook-secret-file", secret)...)...)
	addr := p.addr(t)
	sig := "sha256=" + hmacHex("hook-secret", "x")
	for _, tc := range []struct {
		method, path string
		length       int64
		header       map[string]string
	}{
		{http.MethodPost, "/v1/hooks/git", 25<<20 + 1, map[string]string{"X-Hub-Signature-256": sig}},
		{http.MethodPost, "/v1/hooks/git", 1 << 40, map[string]string{"X-Hub-Signature-256": sig}},
		{http.MethodPut, "/v1/responses/tok", 64<<10 + 1, nil},
		{http.MethodPost, "/v1/signals/tok", 64<<10 + 1, nil},
		{http.MethodPost, "/v1/stack_sets/web/abort", 64<<10 + 1, nil},
	} {
		h := map[string]string{"Content-Length": strconv.FormatInt(tc.length, 10)}
		for k, v := range tc.header {
			h[k] = v
		}
		if got := rawRequest(t, addr, tc.method, tc.path, h); got != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s with Content-Length %d: %d, want 413", tc.method, tc.path, tc.length, got)
		}
	}
	healthz(t, addr)
}

// vmHWM is the peak resident set size of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// floodStats counts what the attackers of the webhook flood got.
type floodStats struct {
	attempts     atomic.Int64 // connections that sent their headers
	unauthorized atomic.Int64 // 401: the whole 1 MiB was read and hashed
	unavailable  atomic.Int64 // 503: refused unread (class full)
	other        atomic.Int64 // another status
	dropped      atomic.Int64 // the connection failed before an answer
}

// slowBadWebhook is one attacker's request: a 1 MiB push webhook with a
// well-formed but wrong signature, its body sent 64 KiB per tick. It stops
// sending as soon as the daemon answers.
func slowBadWebhook(addr string, chunk []byte, tick <-chan time.Time, st *floodStats) {
	const size = 1 << 20
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		st.dropped.Add(1)
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	head := "POST /v1/hooks/git HTTP/1.1\r\nHost: stackd\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n" +
		"X-Hub-Signature-256: sha256=" + strings.Repeat("0f", 32) + "\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		st.dropped.Add(1)
		return
	}
	st.attempts.Add(1)
	answered := make(chan int, 1)
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- 0
			return
		}
		res.Body.Close()
		answered <- res.StatusCode
	}()
	code := -1
send:
	for sent := 0; sent < size; sent += len(chunk) {
		select {
		case code = <-answered:
			break send
		case <-tick:
		}
		if _, err := conn.Write(chunk); err != nil {
			break
		}
	}
	if code == -1 {
		code = <-answered
	}
	switch code {
	case http.StatusUnauthorized:
		st.unauthorized.Add(1)
	case http.StatusServiceUnavailable:
		st.unavailable.Add(1)
	case 0:
		st.dropped.Add(1)
	default:
		st.other.Add(1)
	}
}

// 800 concurrent slow 1 MiB webhooks with a bad signature, sent again and
// again, do not take the daemon past 200 MB of resident memory (its peak,
// VmHWM), while /healthz, the bearer API and a legitimate webhook still
// answer; once the flood stops a legitimate webhook triggers a fetch.
func TestHostileAPISlowWebhookFlood(t *testing.T) {
	t.Parallel()
	const (
		attackers = 800
		peakLimit = 200 << 20
	)
	binary := stackdBinary(t)
	f := newFixture(t)
	dir := t.TempDir()
	secret, token := filepath.Join(dir, "secret"), filepath.Join(dir, "token")
	if err := os.WriteFile(secret, []byte("hook-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte("api-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, binary, nil, append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h",
		"--webhook-secret-file", secret, "--api-token-file", token)...)...)
	addr := p.addr(t)
	get := func(path string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer api-token")
		res, err := httpClient.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, nil
	}
	eventually(t, 30*time.Second, func() bool {
		code, err := get("/v1/stack_sets/web")
		return err == nil && code == http.StatusOK
	}, "the quickstart was never deployed; logs:\n%s", p.log)
	const push = `{"ref":"refs/heads/main"}`
	signedHook := func() (int, string, error) {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/hooks/git", strings.NewReader(push))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-Hub-Signature-256", "sha256="+hmacHex("hook-secret", push))
		res, err := httpClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, res.Header.Get("Retry-After"), nil
	}
	pid := p.cmd.Process.Pid
	before := vmHWM(t, pid)

	var (
		st    floodStats
		wg    sync.WaitGroup
		stop  = make(chan struct{})
		chunk = []byte(strings.Repeat("x", 64<<10))
	)
	for range attackers {
		wg.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				default:
				}
				slowBadWebhook(addr, chunk, tick.C, &st)
			}
		})
	}
	stopFlood := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopFlood)

	// While every attacker is connected: the probes, the bearer API and a
	// legitimate webhook answer.
	eventually(t, 60*time.Second, func() bool { return st.attempts.Load() >= attackers },
		"the attackers never all connected: %d", st.attempts.Load())
	for i := range 5 {
		if code, err := getJSON(addr, "/healthz", nil); err != nil || code != http.StatusOK {
			t.Errorf("GET /healthz #%d during the flood: %d %v", i, code, err)
		}
	}
	if code, err := get("/v1/stack_sets/web"); err != nil || code != http.StatusOK {
		t.Errorf("GET /v1/stack_sets/web during the flood: %d %v", code, err)
	}
	switch code, retry, err := signedHook(); {
	case err != nil:
		t.Errorf("a legitimate webhook during the flood: %v", err)
	case code == http.StatusServiceUnavailable && retry == "":
		t.Errorf("a legitimate webhook during the flood: 503 without Retry-After")
	case code != http.StatusAccepted && code != http.StatusServiceUnavailable:
		t.Errorf("a legitimate webhook during the flood: %d, want 202 or 503", code)
	}
	// Keep it up until many whole bodies were hashed and refused, and
	// every attacker came back at least once.
	eventually(t, 120*time.Second, func() bool {
		return st.attempts.Load() >= 2*attackers && st.unauthorized.Load() >= 64
	}, "the flood did not get going: %d attempts, %d answered 401", st.attempts.Load(), st.unauthorized.Load())
	if code, err := getJSON(addr, "/healthz", nil); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz late in the flood: %d %v", code, err)
	}
	stopFlood()
	peak := vmHWM(t, pid)
	t.Logf("flood: %d requests of 1 MiB, %d read whole and refused (401), %d refused unread (503), %d dropped, %d other; "+
		"daemon VmHWM %.1f MiB before, %.1f MiB after",
		st.attempts.Load(), st.unauthorized.Load(), st.unavailable.Load(), st.dropped.Load(), st.other.Load(),
		float64(before)/(1<<20), float64(peak)/(1<<20))
	if peak > peakLimit {
		t.Errorf("the daemon's peak RSS is %d MiB, over %d MiB", peak>>20, peakLimit>>20)
	}
	if n := st.other.Load(); n > 0 {
		t.Errorf("%d attack requests answered neither 401 nor 503", n)
	}
	if st.unavailable.Load() == 0 {
		t.Errorf("no attack request was refused with 503: the webhook's bound never engaged")
	}

	// After the flood a legitimate webhook is taken and the daemon lives.
	eventually(t, 30*time.Second, func() bool {
		code, _, err := signedHook()
		return err == nil && code == http.StatusAccepted
	}, "a legitimate webhook after the flood was never accepted")
	healthz(t, addr)
	if p.done() {
		t.Fatalf("the daemon exited; logs:\n%s", p.log)
	}
}

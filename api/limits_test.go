package api

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// rawConn is a TCP connection to the test server, for requests net/http's
// client would not send: a Content-Length with no body behind it, a body
// that stops half-way.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func (e *env) dial() *rawConn {
	e.t.Helper()
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return &rawConn{t: e.t, conn: c, br: bufio.NewReader(c)}
}

// head sends a request line and headers (no body).
func (c *rawConn) head(method, path string, header map[string]string) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: stackd\r\n", method, path)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		c.t.Fatal(err)
	}
}

// write sends body bytes; an error (the server closed) is returned, not fatal.
func (c *rawConn) write(p []byte) error {
	_, err := c.conn.Write(p)
	return err
}

// response reads the response to the request sent.
func (c *rawConn) response() resp {
	c.t.Helper()
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	return readResp(c.t, res)
}

// A Content-Length over the route's cap is refused before a byte of the
// body is read: the test sends the headers only and gets the 413. A body
// without Content-Length is cut off at the cap. Each route has its own cap
// and the defaults are the documented ones.
func TestBodyLimitedBeforeRead(t *testing.T) {
	sink := &fakeSink{}
	e := newEnv(t, func(o *Options) {
		o.Responses, o.Signals = sink, sink
		o.Controller = &fakeController{}
	})
	hookSig := map[string]string{SignatureHeader: sign("hook-secret", "x")}
	tests := []struct {
		name, method, path string
		max                int64
		header             map[string]string
	}{
		{"webhook", http.MethodPost, "/v1/hooks/git", 25 << 20, hookSig},
		{"custom-resource response", http.MethodPut, "/v1/responses/tok", 64 << 10, nil},
		{"wait-condition signal", http.MethodPost, "/v1/signals/tok", 64 << 10, nil},
		{"promote", http.MethodPost, "/v1/stack_sets/web/promote", 64 << 10, map[string]string{"Authorization": "Bearer " + testToken}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range []int64{tc.max + 1, 1 << 40} {
				c := e.dial()
				h := map[string]string{"Content-Length": strconv.FormatInt(n, 10)}
				for k, v := range tc.header {
					h[k] = v
				}
				c.head(tc.method, tc.path, h)
				r := c.response()
				r.wantStatus(t, fmt.Sprintf("Content-Length %d", n), http.StatusRequestEntityTooLarge)
				if got := r.apiErr(t).Code; got != CodeTooLarge {
					t.Errorf("code = %q, want %q", got, CodeTooLarge)
				}
				if !strings.Contains(r.apiErr(t).Detail, strconv.FormatInt(tc.max, 10)) {
					t.Errorf("detail %q does not name the limit %d", r.apiErr(t).Detail, tc.max)
				}
				if !r.close {
					t.Error("the connection stays open: the rest of the body would be read")
				}
			}
		})
	}
	if len(sink.delivered()) != 0 || e.triggers.Load() != 0 {
		t.Errorf("an oversized request reached a sink or the trigger")
	}
}

// A chunked body (no Content-Length) is read up to the cap and refused at
// the first byte over it; one at the cap is accepted.
func TestChunkedBodyCutAtLimit(t *testing.T) {
	sink := &fakeSink{}
	e := newEnv(t, func(o *Options) { o.Signals, o.SignedLimits.MaxBodyBytes = sink, 1000 })
	send := func(n int) resp {
		t.Helper()
		hr, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/signals/tok", io.MultiReader(strings.NewReader(strings.Repeat("x", n))))
		if err != nil {
			t.Fatal(err)
		}
		hr.ContentLength = -1 // chunked
		res, err := e.srv.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		return readResp(t, res)
	}
	send(1001).wantStatus(t, "1001 bytes chunked", http.StatusRequestEntityTooLarge)
	if len(sink.delivered()) != 0 {
		t.Fatal("an oversized chunked body reached the sink")
	}
	send(1000).wantStatus(t, "1000 bytes chunked", http.StatusOK)
	if got := sink.delivered(); len(got) != 1 || len(got[0].body) != 1000 {
		t.Errorf("deliveries = %d, want one of 1000 bytes", len(got))
	}
}

// A missing or malformed signature is refused before the body is read:
// the test announces a body and never sends it.
func TestGitHookRefusesUnsignedUnread(t *testing.T) {
	e := newEnv(t, nil)
	for _, sig := range []string{"", "sha256=zz", "sha1=" + strings.Repeat("ab", 20)} {
		c := e.dial()
		h := map[string]string{"Content-Length": "100000", "X-GitHub-Event": "push"}
		if sig != "" {
			h[SignatureHeader] = sig
		}
		c.head(http.MethodPost, "/v1/hooks/git", h)
		r := c.response()
		r.wantStatus(t, fmt.Sprintf("signature %q", sig), http.StatusUnauthorized)
		if !r.close {
			t.Errorf("signature %q: the connection stays open: the body would be read", sig)
		}
	}
	if got := e.triggers.Load(); got != 0 {
		t.Errorf("triggers = %d, want 0", got)
	}
}

// The webhook's HMAC is computed while the body streams: a 16 MiB body
// with a well-formed but wrong signature, and then a right one, cost the
// process far less memory than the body (reading it whole would allocate
// at least 16 MiB).
func TestGitHookStreamsBody(t *testing.T) {
	e := newEnv(t, nil)
	const size = 16 << 20
	chunk := []byte(strings.Repeat("0123456789abcdef", 4096)) // 64 KiB
	body := strings.Repeat(string(chunk), size/len(chunk))
	for _, tc := range []struct {
		name, sig string
		want      int
	}{
		{"wrong signature", sign("guess", body), http.StatusUnauthorized},
		{"right signature", sign("hook-secret", body), http.StatusAccepted},
	} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c := e.dial()
		c.head(http.MethodPost, "/v1/hooks/git", map[string]string{
			"Content-Length": strconv.Itoa(size), SignatureHeader: tc.sig, "X-GitHub-Event": "push"})
		for sent := 0; sent < size; sent += len(chunk) {
			if err := c.write(chunk); err != nil {
				t.Fatalf("%s: write: %v", tc.name, err)
			}
		}
		r := c.response()
		runtime.ReadMemStats(&after)
		r.wantStatus(t, tc.name, tc.want)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
			t.Errorf("%s: a %d MiB webhook allocated %d KiB; the body must stream through the HMAC", tc.name, size>>20, alloc>>10)
		}
	}
	if got := e.triggers.Load(); got != 1 {
		t.Errorf("triggers = %d, want 1 (the signed one)", got)
	}
}

// A body slower than BodyTimeout is a 408 and the connection closes.
func TestBodyTimeout(t *testing.T) {
	sink := &fakeSink{}
	e := newEnv(t, func(o *Options) { o.Signals, o.BodyTimeout = sink, 50*time.Millisecond })
	c := e.dial()
	c.head(http.MethodPost, "/v1/signals/tok", map[string]string{"Content-Length": "100"})
	if err := c.write([]byte(`{"status":`)); err != nil {
		t.Fatal(err)
	}
	// The rest never comes; the server answers when the deadline passes.
	r := c.response()
	r.wantStatus(t, "stalled body", http.StatusRequestTimeout)
	if got := r.apiErr(t).Code; got != CodeRequestTimeout {
		t.Errorf("code = %q, want %q", got, CodeRequestTimeout)
	}
	if !r.close {
		t.Error("the connection stays open after a stalled body")
	}
	if len(sink.delivered()) != 0 {
		t.Error("a partial body reached the sink")
	}
}

// blockingSink holds each delivery until released, and says when one
// entered.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingSink) Deliver(string, []byte, string) error {
	b.entered <- struct{}{}
	<-b.release
	return nil
}

// A class of routes serves at most MaxInFlight requests at once; the next
// gets 503 with Retry-After at once, while the other classes and the
// probes still answer.
func TestConcurrencyBoundedPerClass(t *testing.T) {
	sink := &blockingSink{entered: make(chan struct{}, 8), release: make(chan struct{})}
	var logs lockedBuffer
	e := newEnv(t, func(o *Options) {
		o.Signals, o.SignedLimits.MaxInFlight = sink, 2
		o.HookLimits.MaxInFlight = 1
		o.Log = zerolog.New(&logs)
	})
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			res, err := e.srv.Client().Post(e.srv.URL+"/v1/signals/tok", "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Error(err)
				return
			}
			codes <- readResp(t, res).status
		})
		<-sink.entered
	}
	// Both slots of the pre-signed class are taken.
	for i := range 3 {
		r := e.do(req{method: http.MethodPost, path: "/v1/signals/tok", body: "{}", noAuth: true})
		r.wantStatus(t, fmt.Sprintf("signal beyond the bound #%d", i), http.StatusServiceUnavailable)
		if got := r.apiErr(t).Code; got != CodeUnavailable {
			t.Errorf("code = %q, want %q", got, CodeUnavailable)
		}
		if got := r.header.Get("Retry-After"); got != "1" {
			t.Errorf("Retry-After = %q, want 1", got)
		}
	}
	// Three refusals, one warning, and no error line per request.
	if got := strings.Count(logs.String(), `"message":"api requests refused: too many of this class at once"`); got != 1 {
		t.Errorf("refusal warnings = %d, want 1; log:\n%s", got, logs.String())
	}
	if strings.Contains(logs.String(), `"level":"error"`) {
		t.Errorf("a refusal was logged as an error:\n%s", logs.String())
	}
	// Other classes and the probes are not affected.
	e.do(req{path: "/healthz", noAuth: true}).wantStatus(t, "healthz", http.StatusOK)
	e.do(req{path: "/readyz", noAuth: true}).wantStatus(t, "readyz", http.StatusOK)
	e.do(req{path: "/v1/stack_sets"}).wantStatus(t, "bearer API", http.StatusOK)
	const push = `{"ref":"refs/heads/main"}`
	e.do(req{method: http.MethodPost, path: "/v1/hooks/git", body: push, noAuth: true,
		header: map[string]string{SignatureHeader: sign("hook-secret", push)}}).wantStatus(t, "webhook", http.StatusAccepted)

	close(sink.release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("a held signal answered %d, want 200", code)
		}
	}
	// The slots are free again.
	r := e.do(req{method: http.MethodPost, path: "/v1/signals/tok", body: "{}", noAuth: true})
	r.wantStatus(t, "signal after release", http.StatusOK)
}

// A slow webhook body holds a webhook slot (MaxInFlight 1 here) until it
// is in; meanwhile another webhook is a 503 and the probes answer.
func TestSlowWebhookHoldsOnlyItsClass(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.HookLimits.MaxInFlight = 1 })
	const push = `{"ref":"refs/heads/main"}`
	signed := map[string]string{SignatureHeader: sign("hook-secret", push)}
	slow := e.dial()
	slow.head(http.MethodPost, "/v1/hooks/git", map[string]string{
		"Content-Length": "1000", SignatureHeader: sign("guess", strings.Repeat("x", 1000))})
	if err := slow.write([]byte("xxxxxxxxxx")); err != nil {
		t.Fatal(err)
	}
	// The slow request takes the slot once its headers are read. Wait for
	// that without sending webhooks meanwhile: one holding the slot when the
	// slow one arrives would get the slow one refused instead.
	deadline := time.Now().Add(10 * time.Second)
	for len(e.api.slots[classHook]) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow webhook never took the webhook slot")
		}
		time.Sleep(time.Millisecond)
	}
	r := e.do(req{method: http.MethodPost, path: "/v1/hooks/git", body: push, noAuth: true, header: signed})
	r.wantStatus(t, "webhook while a slow one holds the slot", http.StatusServiceUnavailable)
	e.do(req{path: "/healthz", noAuth: true}).wantStatus(t, "healthz", http.StatusOK)
	if err := slow.write([]byte(strings.Repeat("x", 990))); err != nil {
		t.Fatal(err)
	}
	slow.response().wantStatus(t, "slow webhook with a bad signature", http.StatusUnauthorized)
	e.do(req{method: http.MethodPost, path: "/v1/hooks/git", body: push, noAuth: true, header: signed}).
		wantStatus(t, "webhook after the slow one", http.StatusAccepted)
}

func TestNewHTTPServer(t *testing.T) {
	srv := NewHTTPServer(http.NotFoundHandler(), nil)
	for name, got := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		if got <= 0 {
			t.Errorf("%s is not set", name)
		}
	}
	if srv.ReadTimeout < srv.ReadHeaderTimeout+DefaultBodyTimeout {
		t.Errorf("ReadTimeout %s cuts off a body that keeps within DefaultBodyTimeout", srv.ReadTimeout)
	}
	if srv.WriteTimeout <= DefaultPlanTimeout {
		t.Errorf("WriteTimeout %s is shorter than a plan", srv.WriteTimeout)
	}
	if srv.MaxHeaderBytes != MaxHeaderBytes || srv.HTTP2 == nil || srv.HTTP2.MaxReceiveBufferPerConnection != http2ConnBuffer {
		t.Errorf("header or HTTP/2 limits not set: %d, %+v", srv.MaxHeaderBytes, srv.HTTP2)
	}
}

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

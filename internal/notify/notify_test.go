package notify

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/internal/backoff"
	"github.com/stackd/stackd/internal/testkit"
)

// hook is a webhook on 127.0.0.1 that answers the statuses in fail first,
// then 200, and keeps the bodies of the requests it accepted.
type hook struct {
	srv    *httptest.Server
	mu     sync.Mutex
	fail   []int
	tries  int
	bodies [][]byte
	agents []string
	got    chan struct{}
}

func newHook(t *testing.T, fail ...int) *hook {
	h := &hook{fail: fail, got: make(chan struct{}, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.tries++
		if len(h.fail) > 0 {
			code := h.fail[0]
			h.fail = h.fail[1:]
			h.mu.Unlock()
			w.WriteHeader(code)
			return
		}
		h.bodies = append(h.bodies, b)
		h.agents = append(h.agents, r.Header.Get("User-Agent"))
		h.mu.Unlock()
		h.got <- struct{}{}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) wait(t *testing.T) []byte {
	t.Helper()
	select {
	case <-h.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook got nothing")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bodies[len(h.bodies)-1]
}

var failed = Event{Type: TypeOperationFailed, StackSet: "web", Operation: "op-1", Kind: "DeployStackSet", Revision: "1a2b3c4d5e6f",
	Status: "FAILED", Reason: "1 instance failed", Instances: 4, Succeeded: 3, Failed: 1}

// TestSinks: the generic webhook gets the event as JSON, Slack a text
// message; both with stackd's User-Agent.
func TestSinks(t *testing.T) {
	web, slack := newHook(t), newHook(t)
	n, err := New(Options{Sinks: []Sink{Webhook(web.srv.URL + "/hook"), Slack(slack.srv.URL + "/services/T0/B0/secret")}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Send(failed)
	var got Event
	if err := json.Unmarshal(web.wait(t), &got); err != nil {
		t.Fatal(err)
	}
	if got.Time.IsZero() || got.Type != TypeOperationFailed || got.Failed != 1 || got.Reason != "1 instance failed" {
		t.Errorf("webhook event %+v", got)
	}
	var msg map[string]string
	if err := json.Unmarshal(slack.wait(t), &msg); err != nil {
		t.Fatal(err)
	}
	if want := "stackd: web DeployStackSet at 1a2b3c4 FAILED (3/4 succeeded, 1 failed): 1 instance failed"; msg["text"] != want {
		t.Errorf("slack text %q, want %q", msg["text"], want)
	}
	if ua := web.agents[0]; !strings.HasPrefix(ua, "stackd/") {
		t.Errorf("User-Agent %q", ua)
	}
}

// TestRetries: a 503 or 429 is retried after the backoff, on the clock; a
// 400 is not; the log names the host, never the URL (a secret).
func TestRetries(t *testing.T) {
	clk := testkit.NewClock(false)
	retrying := newHook(t, http.StatusServiceUnavailable, http.StatusTooManyRequests)
	var logs bytes.Buffer
	n, err := New(Options{Sinks: []Sink{Webhook(retrying.srv.URL + "/secret-path")}, Clock: clk,
		Retry: backoff.Policy{Min: time.Second, Max: time.Minute}, Log: zerolog.New(&syncWriter{w: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Send(failed)
	clk.WaitForWaiter(t, time.Second, 10*time.Second)
	clk.Advance(time.Second)
	clk.WaitForWaiter(t, 2*time.Second, 10*time.Second)
	clk.Advance(2 * time.Second)
	retrying.wait(t)
	if retrying.tries != 3 {
		t.Errorf("%d attempts, want 3 (two failures, then success)", retrying.tries)
	}

	refusing := newHook(t, http.StatusBadRequest)
	n2, err := New(Options{Sinks: []Sink{Webhook(refusing.srv.URL + "/secret-path")}, Clock: clk, Log: zerolog.New(&syncWriter{w: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	n2.Send(failed)
	n2.Close() // drains: the one attempt is made before Close returns
	if refusing.tries != 1 {
		t.Errorf("a 400 was tried %d times, want once", refusing.tries)
	}
	out := logs.String()
	if strings.Contains(out, "secret-path") || !strings.Contains(out, "127.0.0.1") || !strings.Contains(out, "HTTP 400") {
		t.Errorf("logs:\n%s\nwant the host and the status, never the URL's path", out)
	}
}

// TestCloseDrains: events queued when Close is called are delivered.
func TestCloseDrains(t *testing.T) {
	h := newHook(t)
	n, err := New(Options{Sinks: []Sink{Webhook(h.srv.URL)}})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		n.Send(failed)
	}
	n.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bodies) != 5 {
		t.Errorf("%d of 5 events delivered by Close", len(h.bodies))
	}
}

// TestBadURL: a URL that is not http(s) is refused without being quoted.
func TestBadURL(t *testing.T) {
	_, err := New(Options{Sinks: []Sink{Slack("ftp://hooks.example/T0/secret")}})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("New with an ftp URL: %v", err)
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

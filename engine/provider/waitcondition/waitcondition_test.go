package waitcondition

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/presign"
)

var epoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

var target = provider.Target{StackSetName: "web", StackSetID: "8d0c3f0e", Region: "eu-west-1", Account: "111111111111"}

// memStore is the Store: the daemon backs it with its Badger state; here
// a map shared by the providers of one test plays a state that survives a
// restart of the provider.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Get(k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k], nil
}

func (s *memStore) Put(k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = append([]byte(nil), v...)
	return nil
}

func (s *memStore) Delete(k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

// fakeClock fires timers when Advance passes them; armed tells how many
// timers are waiting, so a test advances only once Wait is blocked.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	armed  chan struct{} // receives one value per After call
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newClock() *fakeClock { return &fakeClock{now: epoch, armed: make(chan struct{}, 100)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	c.armed <- struct{}{}
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !c.now.Before(t.at) {
			t.ch <- c.now
			continue
		}
		kept = append(kept, t)
	}
	c.timers = kept
}

// blocked waits until a Wait call armed a timer (it is about to block).
func (c *fakeClock) blocked(t *testing.T) {
	t.Helper()
	select {
	case <-c.armed:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait never blocked")
	}
}

var key = []byte("0123456789abcdef0123456789abcdef")

type env struct {
	t     *testing.T
	clk   *fakeClock
	store *memStore
	p     *Provider
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, clk: newClock(), store: &memStore{m: map[string][]byte{}}}
	e.p = e.restart()
	return e
}

// restart makes a new provider on the same store and key, as the daemon
// does after a restart.
func (e *env) restart() *Provider {
	p, err := New(Options{Key: key, ExternalURL: "https://stackd.example:7070/", Store: e.store, Clock: e.clk})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func props(count int, timeout string) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"count": cty.NumberIntVal(int64(count)), "timeout": cty.StringVal(timeout), "triggers": cty.NullVal(cty.DynamicPseudoType),
	})
}

func (e *env) create(reqID string, count int, timeout string) (provider.Request, provider.Result, string) {
	e.t.Helper()
	req := provider.Request{Target: target, LogicalID: "wait_condition.ready", RequestID: reqID, Properties: props(count, timeout)}
	res, err := e.p.Create(context.Background(), req)
	if err != nil {
		e.t.Fatal(err)
	}
	req.PhysicalID = res.PhysicalID
	u := res.Attributes["handle_url"].AsString()
	if !strings.HasPrefix(u, "https://stackd.example:7070"+SignalsPath) {
		e.t.Fatalf("handle_url %q", u)
	}
	return req, res, strings.TrimPrefix(u, "https://stackd.example:7070"+SignalsPath)
}

func (e *env) signal(p *Provider, token, body string) {
	e.t.Helper()
	if err := p.Deliver(token, []byte(body), "application/json"); err != nil {
		e.t.Fatalf("signal %s: %v", body, err)
	}
}

func wantRefusal(t *testing.T, err error, status int, code string) {
	t.Helper()
	var se *SignalError
	if !errors.As(err, &se) || se.Status != status || se.Code != code {
		t.Fatalf("got %v, want %d %s", err, status, code)
	}
}

type waitResult struct {
	res provider.Result
	err error
}

func (e *env) waitAsync(p *Provider, req provider.Request, res provider.Result) chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		r, err := p.Wait(context.Background(), req, res)
		ch <- waitResult{r, err}
	}()
	return ch
}

func TestCountedSuccessSignalsCompleteWithData(t *testing.T) {
	e := newEnv(t)
	req, res, tok := e.create("req-1", 2, "5m")
	if got := res.Attributes["status"].AsString(); got != StatusWaiting {
		t.Fatalf("status after create %q", got)
	}
	if len(res.SensitiveAttributes) != 1 || res.SensitiveAttributes[0] != "handle_url" {
		t.Errorf("sensitive attributes %v, want handle_url: whoever holds it completes the condition", res.SensitiveAttributes)
	}
	done := e.waitAsync(e.p, req, res)
	e.clk.blocked(t)
	// Heat's body, then the same id again (replaces, does not count twice).
	e.signal(e.p, tok, `{"status": "SUCCESS", "reason": "booted", "data": "10.0.0.1", "id": "web-1"}`)
	e.signal(e.p, tok, `{"status": "SUCCESS", "data": "10.0.0.9", "id": "web-1"}`)
	e.clk.blocked(t) // woke, counted 1 of 2, blocked again
	select {
	case r := <-done:
		t.Fatalf("completed after one distinct signal: %+v", r)
	default:
	}
	// CloudFormation's body (status in any ASCII case).
	e.signal(e.p, tok, `{"Status": "Success", "Reason": "ok", "UniqueId": "web-2", "Data": {"port": 80}}`)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.res.Attributes["status"].AsString(); got != StatusSuccess {
		t.Errorf("status %q", got)
	}
	data := r.res.Attributes["data"].AsValueMap()
	if data["web-1"].AsString() != "10.0.0.9" || data["web-2"].AsString() != `{"port":80}` || len(data) != 2 {
		t.Errorf("data %#v", data)
	}
	// Completed: more signals are refused, and nothing changes.
	wantRefusal(t, e.p.Deliver(tok, []byte(`{"status": "SUCCESS", "id": "web-3"}`), ""), http.StatusConflict, CodeComplete)
	// Waiting again on a completed resource returns at once.
	if again, err := e.p.Wait(context.Background(), req, r.res); err != nil || again.Attributes["status"].AsString() != StatusSuccess {
		t.Fatalf("wait on a completed condition: %v %v", again, err)
	}
}

func TestSignalsWithoutIDsAreNumbered(t *testing.T) {
	e := newEnv(t)
	req, res, tok := e.create("req-1", 3, "5m")
	e.signal(e.p, tok, ``) // an empty body is a SUCCESS (curl -X POST)
	e.signal(e.p, tok, `{"status": "SUCCESS", "data": "b"}`)
	e.signal(e.p, tok, `{"status": "SUCCESS", "data": 3}`)
	r, err := e.p.Wait(context.Background(), req, res)
	if err != nil {
		t.Fatal(err)
	}
	data := r.Attributes["data"].AsValueMap()
	if data["1"].AsString() != "" || data["2"].AsString() != "b" || data["3"].AsString() != "3" {
		t.Errorf("data %#v", data)
	}
}

func TestFailureSignalFails(t *testing.T) {
	e := newEnv(t)
	req, res, tok := e.create("req-1", 2, "5m")
	done := e.waitAsync(e.p, req, res)
	e.clk.blocked(t)
	e.signal(e.p, tok, `{"status": "SUCCESS", "id": "a"}`)
	e.signal(e.p, tok, `{"status": "FAILURE", "reason": "migration failed:\nduplicate key", "id": "b"}`)
	r := <-done
	var we *WaitError
	if !errors.As(r.err, &we) || we.Status != StatusFailure || !strings.Contains(we.Reason, `FAILURE signal "b": migration failed: duplicate key`) {
		t.Fatalf("got %v, want the FAILURE signal's reason on one line", r.err)
	}
	wantRefusal(t, e.p.Deliver(tok, nil, ""), http.StatusConflict, CodeComplete)
}

func TestTimeoutCountsFromCreate(t *testing.T) {
	e := newEnv(t)
	req, res, tok := e.create("req-1", 2, "90s")
	e.signal(e.p, tok, `{"id": "a"}`)
	e.clk.Advance(60 * time.Second) // a minute passes before the engine waits
	done := e.waitAsync(e.p, req, res)
	e.clk.blocked(t)
	e.clk.Advance(29 * time.Second)
	select {
	case r := <-done:
		t.Fatalf("ended before the timeout: %+v", r)
	default:
	}
	e.clk.Advance(time.Second)
	r := <-done
	var we *WaitError
	if !errors.As(r.err, &we) || we.Status != "TIMEOUT" || !strings.Contains(we.Reason, "timed out after 1m30s with 1 of 2 SUCCESS signals") {
		t.Fatalf("got %v", r.err)
	}
	// The handle expired with the timeout: a late signal is refused.
	wantRefusal(t, e.p.Deliver(tok, []byte(`{"id": "b"}`), ""), http.StatusGone, CodeExpired)
}

func TestRestartKeepsHandleSignalsAndDeadline(t *testing.T) {
	e := newEnv(t)
	req, res, tok := e.create("req-1", 2, "10m")
	e.signal(e.p, tok, `{"id": "a", "data": "x"}`)
	// The daemon restarts; the resumed Create (same request id) returns
	// the same handle, not a new one with no signals.
	e.p = e.restart()
	again, err := e.p.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.Attributes["handle_url"].AsString() != res.Attributes["handle_url"].AsString() {
		t.Fatal("a repeated Create issued a different handle")
	}
	e.clk.Advance(5 * time.Minute)
	done := e.waitAsync(e.p, req, again)
	e.clk.blocked(t)
	e.signal(e.p, tok, `{"id": "b", "data": "y"}`)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.res.Attributes["data"].AsValueMap(); d["a"].AsString() != "x" || d["b"].AsString() != "y" {
		t.Errorf("data %#v", d)
	}
}

func TestContextEndsWaitWithoutFailingIt(t *testing.T) {
	e := newEnv(t)
	req, res, tok := e.create("req-1", 1, "5m")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.p.Wait(ctx, req, res)
		done <- err
	}()
	e.clk.blocked(t)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	// The handle still takes its signal; the resumed wait completes.
	e.signal(e.p, tok, `{}`)
	if _, err := e.p.Wait(context.Background(), req, res); err != nil {
		t.Fatal(err)
	}
}

func TestRefusals(t *testing.T) {
	e := newEnv(t)
	req, _, tok := e.create("req-1", 1, "5m")
	payload, mac, _ := strings.Cut(tok, ".")
	other, _ := New(Options{Key: []byte("another key of 32 bytes........."), ExternalURL: "http://x", Store: e.store, Clock: e.clk})
	responseTok, err := presign.Sign(key, "stackd/v1/responses\x00", presign.Claims{RequestID: "req-1", StackID: StackID(target), LogicalResourceID: "wait_condition.ready", Expires: epoch.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		p      *Provider
		token  string
		body   string
		status int
		code   string
	}{
		{"not a token", e.p, "abc", `{}`, 404, CodeUnknownToken},
		{"tampered payload", e.p, payload[:len(payload)-2] + "AA." + mac, `{}`, 401, CodeInvalidSignature},
		{"another key", other, tok, `{}`, 401, CodeInvalidSignature},
		{"a custom-resource response token", e.p, responseTok, `{}`, 401, CodeInvalidSignature},
		{"too large", e.p, tok, `{"data": "` + strings.Repeat("x", MaxSignalBytes) + `"}`, 413, CodeTooLarge},
		{"not an object", e.p, tok, `["SUCCESS"]`, 400, CodeMalformed},
		{"not JSON", e.p, tok, `status=SUCCESS`, 400, CodeMalformed},
		{"status not a string", e.p, tok, `{"status": 1}`, 400, CodeMalformed},
		{"unknown status", e.p, tok, `{"status": "DONE"}`, 400, CodeInvalidStatus},
		{"a long s is no s", e.p, tok, `{"status": "\u017fuccess"}`, 400, CodeInvalidStatus},
		{"status twice", e.p, tok, `{"status": "SUCCESS", "Status": "FAILURE"}`, 400, CodeMalformed},
		{"id and UniqueId", e.p, tok, `{"id": "a", "UniqueId": "b"}`, 400, CodeMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantRefusal(t, c.p.Deliver(c.token, []byte(c.body), ""), c.status, c.code)
		})
	}
	// Nothing was recorded by the refusals.
	if r, _ := e.p.load("req-1"); len(r.Signals) != 0 {
		t.Fatalf("refused signals were recorded: %+v", r.Signals)
	}
	// A deleted (replaced) handle takes no signals.
	if err := e.p.Delete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, e.p.Deliver(tok, nil, ""), http.StatusNotFound, CodeNoHandle)
	if _, err := e.p.Read(context.Background(), req); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("read after delete: %v", err)
	}
}

func TestValidateProperties(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		count   int
		timeout string
		want    string
	}{
		{1, "1s", ""}, {1000, "12h", ""},
		{0, "5m", "count must be a whole number from 1 to 1000"},
		{1001, "5m", "count must be a whole number from 1 to 1000"},
		{1, "500ms", "timeout \"500ms\" must be a duration from 1s to 12h"},
		{1, "13h", "timeout \"13h\" must be a duration"},
		{1, "soon", "timeout \"soon\" must be a duration"},
	} {
		err := e.p.ValidateProperties(target, props(c.count, c.timeout))
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("count %d timeout %q: got %v, want %q", c.count, c.timeout, err, c.want)
		}
	}
	half := cty.ObjectVal(map[string]cty.Value{"count": cty.NumberFloatVal(1.5), "timeout": cty.NullVal(cty.String), "triggers": cty.NullVal(cty.DynamicPseudoType)})
	if err := e.p.ValidateProperties(target, half); err == nil {
		t.Error("count 1.5 accepted")
	}
}

func FuzzParseSignal(f *testing.F) {
	f.Add([]byte(`{"status": "SUCCESS", "reason": "r", "data": "d", "id": "1"}`))
	f.Add([]byte(`{"Status": "FAILURE", "UniqueId": 7, "Data": {"a": [1, 2]}}`))
	f.Add([]byte(``))
	f.Add([]byte(`{"status": null, "id": null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sig, err := parseSignal(body)
		// Deterministic: member order (Go's map order) never matters.
		for range 4 {
			again, err2 := parseSignal(body)
			if again != sig || (err == nil) != (err2 == nil) || err != nil && *err != *err2 {
				t.Fatalf("two parses differ: %+v %v, then %+v %v", sig, err, again, err2)
			}
		}
		if err != nil {
			if err.Status != http.StatusBadRequest || err.Code == "" {
				t.Fatalf("refusal %+v", err)
			}
			return
		}
		if sig.Status != StatusSuccess && sig.Status != StatusFailure {
			t.Fatalf("accepted status %q", sig.Status)
		}
		if len(sig.ID) > 256 {
			t.Fatalf("accepted id of %d bytes", len(sig.ID))
		}
	})
}

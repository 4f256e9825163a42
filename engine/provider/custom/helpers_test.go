package custom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
	"go.uber.org/goleak"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/custom"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var target = provider.Target{
	StackSetName: "web",
	StackSetID:   "8d0c3f0e-0000-0000-0000-000000000000",
	Region:       "eu-west-1",
	Account:      "111111111111",
}

const stackID = "8d0c3f0e-0000-0000-0000-000000000000/eu-west-1/111111111111"

var epoch = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// fakeClock is the provider's and broker's clock. Timers fire when Advance
// passes them; Sleep records the backoff and advances.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []fakeTimer
	sleeps  []time.Duration
	onSleep func(n int) // called after the n-th sleep (1-based), if set
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newClock() *fakeClock { return &fakeClock{now: epoch} }

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
	c.fireLocked()
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

func (c *fakeClock) fireLocked() {
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

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	n, hook := len(c.sleeps), c.onSleep
	c.mu.Unlock()
	c.Advance(d)
	if hook != nil {
		hook(n)
	}
	return ctx.Err()
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// env is a broker behind a real response endpoint, and a provider.
type env struct {
	t        *testing.T
	clk      *fakeClock
	broker   *custom.Broker
	prov     *custom.Provider
	respSrv  *httptest.Server
	mu       sync.Mutex
	registry map[string]string // registered type → default service token
}

type envOption func(*custom.Options)

// withClient makes the provider send with c.
func withClient(c *http.Client) envOption { return func(o *custom.Options) { o.Client = c } }

// newEnv starts the response endpoint and builds the broker and provider
// on a fake clock. Custom::Thing is registered without a default token,
// Custom::DNSRecord with the default token def (if not "").
func newEnv(t *testing.T, def string, opts ...envOption) *env {
	return newEnvWith(t, def, false, opts...)
}

// newEnvWith is newEnv with the response endpoint on TLS when tlsResponses.
func newEnvWith(t *testing.T, def string, tlsResponses bool, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, clk: newClock(), registry: map[string]string{"Custom::Thing": "", "Custom::DNSRecord": def}}
	e.respSrv = httptest.NewUnstartedServer(nil)
	scheme := "http://"
	if tlsResponses {
		scheme = "https://"
	}
	b, err := custom.NewBroker(custom.BrokerOptions{
		Key:         []byte("0123456789abcdef0123456789abcdef"),
		ExternalURL: scheme + e.respSrv.Listener.Addr().String(),
		Now:         e.clk.Now,
	})
	if err != nil {
		t.Fatalf("NewBroker: %v", err)
	}
	e.broker = b
	e.respSrv.Config.Handler = responsesHandler(b)
	if tlsResponses {
		e.respSrv.StartTLS()
	} else {
		e.respSrv.Start()
	}
	t.Cleanup(e.respSrv.Close)
	o := custom.Options{
		Broker: b,
		TypeToken: func(typ string) (string, bool) {
			e.mu.Lock()
			defer e.mu.Unlock()
			tok, ok := e.registry[typ]
			return tok, ok
		},
		Now:   e.clk.Now,
		After: e.clk.After,
		Sleep: e.clk.Sleep,
	}
	for _, f := range opts {
		f(&o)
	}
	if e.prov, err = custom.New(o); err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// responsesHandler routes PUT|POST /v1/responses/{token} to Deliver the way
// the HTTP API does.
func responsesHandler(b *custom.Broker) http.Handler {
	mux := http.NewServeMux()
	h := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, custom.MaxResponseBytes+1))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		err = b.Deliver(r.PathValue("token"), body, r.Header.Get("Content-Type"))
		var de *custom.DeliveryError
		switch {
		case errors.As(err, &de):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(de.Status)
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []any{map[string]any{"status": de.Status, "code": de.Code, "detail": de.Detail}}})
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}
	mux.HandleFunc("PUT /v1/responses/{token}", h)
	mux.HandleFunc("POST /v1/responses/{token}", h)
	return mux
}

// service is a custom resource provider's endpoint: it records every
// request and answers with answer (n counts requests from 1).
type service struct {
	srv  *httptest.Server
	reqs chan custom.Request

	mu     sync.Mutex
	all    []custom.Request
	answer func(w http.ResponseWriter, req custom.Request, n int)
}

func newService(t *testing.T, tls bool, answer func(w http.ResponseWriter, req custom.Request, n int)) *service {
	t.Helper()
	s := &service{reqs: make(chan custom.Request, 64), answer: answer}
	h := http.HandlerFunc(s.handle(t))
	if tls {
		s.srv = httptest.NewTLSServer(h)
	} else {
		s.srv = httptest.NewServer(h)
	}
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) handle(t *testing.T) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("service got %s with Content-Type %q, want POST application/json", r.Method, r.Header.Get("Content-Type"))
		}
		var req custom.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("service: decode request: %v", err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.all = append(s.all, req)
		n := s.all
		s.mu.Unlock()
		s.reqs <- req
		s.answer(w, req, len(n))
	}
}

func (s *service) requests() []custom.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]custom.Request(nil), s.all...)
}

// token is the service token URL of the service.
func (s *service) token() string { return s.srv.URL + "/hook" }

// ack answers 200 with an empty body: the response comes on the URL.
func ack(w http.ResponseWriter, _ custom.Request, _ int) { w.WriteHeader(http.StatusOK) }

// answerWith answers synchronously with the response object.
func answerWith(status int, resp map[string]any) func(http.ResponseWriter, custom.Request, int) {
	return func(w http.ResponseWriter, req custom.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(respFor(req, resp))
	}
}

// respFor is a response object for req: the ids copied from it, then resp.
func respFor(req custom.Request, resp map[string]any) map[string]any {
	m := map[string]any{"RequestId": req.RequestID, "StackId": req.StackID, "LogicalResourceId": req.LogicalResourceID}
	for k, v := range resp {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return m
}

// cfnBody is the body AWS's Python cfnresponse.send builds (json.dumps with
// its default separators, keys in its order).
func cfnBody(req custom.Request, status, physicalID string, data map[string]any, noEcho bool) []byte {
	q := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	var d []string
	for k, v := range data {
		d = append(d, q(k)+": "+q(v))
	}
	return fmt.Appendf(nil, `{"Status": %s, "Reason": %s, "PhysicalResourceId": %s, "StackId": %s, "RequestId": %s, "LogicalResourceId": %s, "NoEcho": %t, "Data": {%s}}`,
		q(status), q("See the details in CloudWatch Log Stream: 2025/03/04/[$LATEST]0123"), q(physicalID),
		q(req.StackID), q(req.RequestID), q(req.LogicalResourceID), noEcho, strings.Join(d, ", "))
}

// cfnPut sends body to url the way cfnresponse does: PUT with an empty
// Content-Type and an explicit Content-Length. It returns the HTTP status
// and the error code, if any.
func cfnPut(t *testing.T, client *http.Client, url string, body []byte) (int, string) {
	t.Helper()
	return deliver(t, client, http.MethodPut, url, "", body)
}

func deliver(t *testing.T, client *http.Client, method, url, contentType string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header["Content-Type"] = []string{contentType}
	req.Header.Set("Content-Length", fmt.Sprint(len(body)))
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s response: %v", method, err)
	}
	defer res.Body.Close()
	var e struct {
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	_ = json.NewDecoder(res.Body).Decode(&e)
	code := ""
	if len(e.Errors) > 0 {
		code = e.Errors[0].Code
	}
	return res.StatusCode, code
}

// props builds the properties object as the engine hands it over: every
// schema property present, null when unset.
func props(set map[string]cty.Value) cty.Value {
	obj := map[string]cty.Value{
		"type":                 cty.NullVal(cty.String),
		"service_token":        cty.NullVal(cty.String),
		"properties":           cty.NullVal(cty.DynamicPseudoType),
		"timeout":              cty.NullVal(cty.String),
		"stringify_properties": cty.NullVal(cty.Bool),
	}
	for k, v := range set {
		obj[k] = v
	}
	return cty.ObjectVal(obj)
}

// thing is a Custom::Thing resource sending to token with the given
// properties object.
func thing(token string, properties cty.Value) cty.Value {
	return props(map[string]cty.Value{
		"type":          cty.StringVal("Custom::Thing"),
		"service_token": cty.StringVal(token),
		"properties":    properties,
	})
}

type outcome struct {
	res provider.Result
	err error
}

// start runs fn in a goroutine; its outcome arrives on the channel.
func start(fn func() (provider.Result, error)) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := fn()
		ch <- outcome{res, err}
	}()
	return ch
}

// recv returns the next value of ch, failing the test if none arrives in
// a generous real-time bound (a guard against hangs, not a sleep).
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("nothing arrived within 30s")
		panic("unreachable")
	}
}

// pending fails the test if ch already holds an outcome.
func pending(t *testing.T, ch <-chan outcome) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("call returned early: %+v", o)
	default:
	}
}

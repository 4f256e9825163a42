package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackd/stackd/state"
)

const testToken = "test-token-0123456789"

// t0 is a fixed time for records.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// env is one API server on 127.0.0.1 over a real state in t.TempDir().
type env struct {
	t        *testing.T
	store    *state.Store
	api      *Server
	srv      *httptest.Server
	triggers atomic.Int32
}

// newEnv starts a server with a bearer token, a webhook secret and a
// trigger counter; mod changes the options before New.
func newEnv(t *testing.T, mod func(*Options)) *env {
	t.Helper()
	st, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatalf("state.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("state Close: %v", err)
		}
	})
	e := &env{t: t, store: st}
	opts := Options{
		Store:         st,
		Token:         testToken + "\n", // as read from a file
		WebhookSecret: "hook-secret",
		Trigger:       func() { e.triggers.Add(1) },
		Now:           func() time.Time { return t0 },
	}
	if mod != nil {
		mod(&opts)
	}
	e.api, err = New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

// req is one request; the bearer token is sent unless noAuth is set.
type req struct {
	method, path string
	body         string
	header       map[string]string
	noAuth       bool
}

// resp is a response read completely.
type resp struct {
	status int
	header http.Header
	body   []byte
	close  bool // the server closes the connection (Connection: close)
}

func (e *env) do(r req) resp {
	e.t.Helper()
	return doOn(e.t, e.srv, r)
}

func doOn(t testing.TB, srv *httptest.Server, r req) resp {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	method := r.method
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequest(method, srv.URL+r.path, body)
	if err != nil {
		t.Fatalf("NewRequest %s %s: %v", method, r.path, err)
	}
	if !r.noAuth {
		hr.Header.Set("Authorization", "Bearer "+testToken)
	}
	if _, ok := r.header[VersionHeader]; !ok && routeSince(r.path) != (Version{}) {
		// A route added after 1.0 does not exist without its version.
		hr.Header.Set(VersionHeader, "latest")
	}
	for k, v := range r.header {
		if v == "" {
			hr.Header.Del(k) // an empty value: the header left out
			continue
		}
		hr.Header.Set(k, v)
	}
	res, err := srv.Client().Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", method, r.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, r.path, err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b, close: res.Close}
}

// decode unmarshals the body into v, failing the test on error.
func (r resp) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

// apiErr returns the single error of an error document and checks its
// shape: JSON content type, status equal to the response's.
func (r resp) apiErr(t testing.TB) apiError {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	var doc errorDoc
	r.decode(t, &doc)
	if len(doc.Errors) != 1 {
		t.Fatalf("errors = %d in %s, want 1", len(doc.Errors), r.body)
	}
	if doc.Errors[0].Status != r.status {
		t.Errorf("error status = %d, want the response's %d", doc.Errors[0].Status, r.status)
	}
	return doc.Errors[0]
}

// wantStatus fails unless r has status.
func (r resp) wantStatus(t testing.TB, what string, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status = %d, want %d; body %s", what, r.status, status, r.body)
	}
}

// fakeSink records deliveries and answers err.
type fakeSink struct {
	mu    sync.Mutex
	calls []delivery
	err   error
}

type delivery struct {
	token, body, contentType string
}

func (f *fakeSink) Deliver(token string, body []byte, contentType string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, delivery{token, string(body), contentType})
	return f.err
}

func (f *fakeSink) delivered() []delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]delivery(nil), f.calls...)
}

var _ ResponseSink = (*fakeSink)(nil)

// statusErr is a StatusError like custom.DeliveryError.
type statusErr struct {
	status       int
	code, detail string
}

func (e *statusErr) Error() string     { return e.detail }
func (e *statusErr) HTTPStatus() int   { return e.status }
func (e *statusErr) ErrorCode() string { return e.code }

var _ StatusError = (*statusErr)(nil)

// readResp reads and closes res.
func readResp(t testing.TB, res *http.Response) resp {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b, close: res.Close}
}

// routeSince is the microversion that added the route of path (zero: 1.0).
func routeSince(path string) Version {
	path, _, _ = strings.Cut(path, "?")
	switch {
	case path == "/v1/owners":
		return Version{1, 4}
	case strings.HasSuffix(path, "/drift"):
		return Version{1, 3}
	case path == "/v1/reconcile", path == "/v1/state/backup":
		return Version{1, 2}
	}
	return Version{}
}

package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stackd/stackd/reconciler"
)

func TestClientSteersRollouts(t *testing.T) {
	ctl := &fakeController{errs: map[string]error{
		"promote idle": fmt.Errorf("stack set idle: %w", reconciler.ErrNoRollout),
		"promote busy": fmt.Errorf("stack set busy: %w", reconciler.ErrNotWaiting),
		"abort broken": fmt.Errorf("disk on fire"),
	}}
	e := newEnv(t, func(o *Options) { o.Controller = ctl })
	c, err := NewClient(ClientOptions{URL: e.srv.URL + "/", Token: testToken})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	anonymous, err := NewClient(ClientOptions{URL: e.srv.URL})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	for _, tc := range []struct {
		name     string
		client   *Client
		abort    bool
		stackSet string
		status   int // 0: no error
		code     string
		detail   string
	}{
		{name: "promote", client: c, stackSet: "web"},
		{name: "abort", client: c, abort: true, stackSet: "web"},
		{name: "name is escaped", client: c, stackSet: "a b/c"},
		{name: "no rollout", client: c, stackSet: "idle", status: http.StatusNotFound, code: CodeNoRollout,
			detail: `No rollout of stack set "idle" is running.`},
		{name: "not waiting", client: c, stackSet: "busy", status: http.StatusConflict, code: CodeNotWaiting},
		{name: "controller failure", client: c, abort: true, stackSet: "broken", status: http.StatusInternalServerError, code: CodeInternal,
			detail: "The rollout abort failed; see the daemon's log."},
		{name: "no token", client: anonymous, stackSet: "web", status: http.StatusUnauthorized, code: CodeUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := tc.client.Promote
			if tc.abort {
				call = tc.client.Abort
			}
			err := call(context.Background(), tc.stackSet)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var re *ResponseError
			if !errors.As(err, &re) {
				t.Fatalf("got %v (%T), want a *ResponseError", err, err)
			}
			if re.StatusCode != tc.status || re.Code != tc.code {
				t.Errorf("got HTTP %d %q, want HTTP %d %q", re.StatusCode, re.Code, tc.status, tc.code)
			}
			if tc.detail != "" {
				if want := fmt.Sprintf("%s (HTTP %d)", tc.detail, tc.status); err.Error() != want {
					t.Errorf("got %q, want %q", err.Error(), want)
				}
			}
		})
	}
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	want := []string{"promote web", "abort web", "promote a b/c", "promote idle", "promote busy", "abort broken"}
	if fmt.Sprint(ctl.calls) != fmt.Sprint(want) {
		t.Errorf("controller calls %q, want %q", ctl.calls, want)
	}
}

// TestClientNotAnErrorDocument: a body that is not an error document (a
// proxy's page) is the detail.
func TestClientNotAnErrorDocument(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream is down", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(ClientOptions{URL: srv.URL})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	err = c.Abort(context.Background(), "web")
	if want := "upstream is down (HTTP 502)"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func TestClientTLS(t *testing.T) {
	var got string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Method + " " + r.URL.EscapedPath() + " " + r.Header.Get("Authorization")
		w.WriteHeader(http.StatusAccepted)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)
	untrusting, err := NewClient(ClientOptions{URL: srv.URL})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if err := untrusting.Promote(context.Background(), "web"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: got %v, want a certificate error", err)
	}
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c, err := NewClient(ClientOptions{URL: srv.URL, Token: "tok", RootCAs: pool})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if err := c.Promote(context.Background(), "web"); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	if want := "POST /v1/stack_sets/web/promote Bearer tok"; got != want {
		t.Errorf("request %q, want %q", got, want)
	}
}

func TestClientErrors(t *testing.T) {
	if _, err := NewClient(ClientOptions{URL: "http://[::1"}); err == nil {
		t.Error("NewClient of a malformed URL: got nil, want an error")
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	c, err := NewClient(ClientOptions{URL: srv.URL})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	srv.Close()
	err = c.Promote(context.Background(), "web")
	var re *ResponseError
	if err == nil || errors.As(err, &re) {
		t.Errorf("server gone: got %v, want a transport error", err)
	}
}

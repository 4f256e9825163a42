package api

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stackd/stackd/reconciler"
)

// fakeController records calls and answers by stack set name.
type fakeController struct {
	mu    sync.Mutex
	calls []string
	errs  map[string]error
}

func (f *fakeController) call(verb, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, verb+" "+name)
	return f.errs[verb+" "+name]
}

func (f *fakeController) Promote(name string) error { return f.call("promote", name) }
func (f *fakeController) Abort(name string) error   { return f.call("abort", name) }

var _ Controller = (*fakeController)(nil)

func TestRolloutControl(t *testing.T) {
	ctl := &fakeController{errs: map[string]error{
		"promote idle": fmt.Errorf("stack set idle: %w", reconciler.ErrNoRollout),
		"abort idle":   fmt.Errorf("stack set idle: %w", reconciler.ErrNoRollout),
		"promote busy": fmt.Errorf("stack set busy: %w", reconciler.ErrNotWaiting),
		"abort broken": fmt.Errorf("disk on fire"),
	}}
	e := newEnv(t, func(o *Options) { o.Controller = ctl })
	for _, tc := range []struct {
		name, path string
		noAuth     bool
		status     int
		code       string
	}{
		{"promote", "/v1/stack_sets/web/promote", false, http.StatusAccepted, ""},
		{"abort", "/v1/stack_sets/web/abort", false, http.StatusAccepted, ""},
		{"promote without a rollout", "/v1/stack_sets/idle/promote", false, http.StatusNotFound, CodeNoRollout},
		{"abort without a rollout", "/v1/stack_sets/idle/abort", false, http.StatusNotFound, CodeNoRollout},
		{"promote while not waiting", "/v1/stack_sets/busy/promote", false, http.StatusConflict, CodeNotWaiting},
		{"controller failure", "/v1/stack_sets/broken/abort", false, http.StatusInternalServerError, CodeInternal},
		{"no token", "/v1/stack_sets/web/promote", true, http.StatusUnauthorized, CodeUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(req{method: http.MethodPost, path: tc.path, noAuth: tc.noAuth})
			r.wantStatus(t, tc.path, tc.status)
			if tc.code != "" {
				if got := r.apiErr(t).Code; got != tc.code {
					t.Errorf("code %q, want %q", got, tc.code)
				}
				return
			}
			var ack rolloutAck
			r.decode(t, &ack)
			if ack.Status != "accepted" || ack.StackSet != "web" {
				t.Errorf("body %s, want accepted for web", r.body)
			}
		})
	}
	if r := e.do(req{method: http.MethodGet, path: "/v1/stack_sets/web/promote"}); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "POST" {
		t.Errorf("GET promote: %d Allow %q, want 405 Allow POST", r.status, r.header.Get("Allow"))
	}
	ctl.mu.Lock()
	want := []string{"promote web", "abort web", "promote idle", "abort idle", "promote busy", "abort broken"}
	if fmt.Sprint(ctl.calls) != fmt.Sprint(want) {
		t.Errorf("controller calls %v, want %v", ctl.calls, want)
	}
	ctl.mu.Unlock()

	off := newEnv(t, nil)
	r := off.do(req{method: http.MethodPost, path: "/v1/stack_sets/web/abort"})
	r.wantStatus(t, "abort without a controller", http.StatusNotFound)
	if got := r.apiErr(t).Code; got != CodeNotConfigured {
		t.Errorf("code %q, want %q", got, CodeNotConfigured)
	}
}

package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stackd/stackd/state"
)

func TestBearerAuth(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		name     string
		path     string
		auth     *string // nil: no Authorization header
		want     int
		wantAuth string // WWW-Authenticate on a 401
	}{
		{name: "missing", path: "/v1/stack_sets", want: http.StatusUnauthorized, wantAuth: `Bearer realm="stackd"`},
		{name: "empty bearer", path: "/v1/stack_sets", auth: ptr("Bearer "), want: http.StatusUnauthorized, wantAuth: `Bearer realm="stackd"`},
		{name: "basic", path: "/v1/stack_sets", auth: ptr("Basic " + testToken), want: http.StatusUnauthorized, wantAuth: `Bearer realm="stackd"`},
		{name: "wrong", path: "/v1/stack_sets", auth: ptr("Bearer nope"), want: http.StatusUnauthorized, wantAuth: `Bearer realm="stackd", error="invalid_token"`},
		{name: "prefix", path: "/v1/stack_sets", auth: ptr("Bearer " + testToken[:5]), want: http.StatusUnauthorized, wantAuth: `Bearer realm="stackd", error="invalid_token"`},
		{name: "longer", path: "/v1/stack_sets", auth: ptr("Bearer " + testToken + "x"), want: http.StatusUnauthorized, wantAuth: `Bearer realm="stackd", error="invalid_token"`},
		{name: "right", path: "/v1/stack_sets", auth: ptr("Bearer " + testToken), want: http.StatusOK},
		{name: "lower-case scheme", path: "/v1/stack_sets", auth: ptr("bearer " + testToken), want: http.StatusOK},
		{name: "metrics need it", path: "/metrics", want: http.StatusUnauthorized, wantAuth: `Bearer realm="stackd"`},
		{name: "resource types need it", path: "/v1/resource_types", want: http.StatusUnauthorized, wantAuth: `Bearer realm="stackd"`},
		{name: "unknown operation needs it", path: "/v1/operations/x", want: http.StatusUnauthorized, wantAuth: `Bearer realm="stackd"`},
		{name: "healthz exempt", path: "/healthz", want: http.StatusOK},
		{name: "readyz exempt", path: "/readyz", want: http.StatusOK},
		{name: "versions exempt", path: "/", want: http.StatusOK},
		{name: "openapi exempt", path: "/openapi.json", want: http.StatusOK},
		{name: "wrong token on exempt path", path: "/healthz", auth: ptr("Bearer nope"), want: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := req{path: tc.path, noAuth: true}
			if tc.auth != nil {
				r.header = map[string]string{"Authorization": *tc.auth}
			}
			got := e.do(r)
			got.wantStatus(t, tc.path, tc.want)
			if tc.want != http.StatusUnauthorized {
				return
			}
			if h := got.header.Get("WWW-Authenticate"); h != tc.wantAuth {
				t.Errorf("WWW-Authenticate = %q, want %q", h, tc.wantAuth)
			}
			if code := got.apiErr(t).Code; code != CodeUnauthorized {
				t.Errorf("code = %q, want %q", code, CodeUnauthorized)
			}
		})
	}
}

// An unauthenticated PUT registers nothing.
func TestUnauthenticatedWriteChangesNothing(t *testing.T) {
	e := newEnv(t, nil)
	e.do(req{method: http.MethodPut, path: rtPath + "Custom::X", noAuth: true}).wantStatus(t, "PUT", http.StatusUnauthorized)
	if _, err := e.store.ResourceType("Custom::X"); err == nil {
		t.Error("an unauthenticated PUT registered the type")
	}
}

func TestAllowUnauthenticated(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Token, o.AllowUnauthenticated = "", true })
	e.do(req{path: "/v1/stack_sets", noAuth: true}).wantStatus(t, "no token configured", http.StatusOK)
}

func TestOptionsValidate(t *testing.T) {
	st := &state.Store{} // never used: Validate fails first or New is not served
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "no store", opts: Options{Token: "t"}, wantErr: "Store is required"},
		{name: "no token", opts: Options{Store: st}, wantErr: "bearer Token is required"},
		{name: "blank token", opts: Options{Store: st, Token: " \n"}, wantErr: "bearer Token is required"},
		{name: "secret without trigger", opts: Options{Store: st, Token: "t", WebhookSecret: "s"}, wantErr: "Trigger is nil"},
		{name: "minimal", opts: Options{Store: st, Token: "t"}},
		{name: "unauthenticated", opts: Options{Store: st, AllowUnauthenticated: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if tc.opts.Metrics == nil || tc.opts.HookLimits != DefaultHookLimits || tc.opts.SignedLimits != DefaultSignedLimits || tc.opts.APILimits != DefaultAPILimits || tc.opts.BodyTimeout != DefaultBodyTimeout || tc.opts.PlanTimeout != DefaultPlanTimeout || tc.opts.Now == nil {
					t.Errorf("defaults not filled: %+v", tc.opts)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

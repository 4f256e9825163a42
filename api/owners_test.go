package api

import (
	"net/http"
	"testing"
)

// GET /v1/owners on a daemon whose state is not shared (no Owners): 404
// stackd.not_configured, saying why, behind the bearer token.
func TestOwnersNotShared(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do(req{path: "/v1/owners"})
	r.wantStatus(t, "GET /v1/owners", http.StatusNotFound)
	if got := r.apiErr(t).Code; got != CodeNotConfigured {
		t.Errorf("code = %s, want %s", got, CodeNotConfigured)
	}
	r = e.do(req{path: "/v1/owners", noAuth: true})
	r.wantStatus(t, "GET /v1/owners without a token", http.StatusUnauthorized)
}

package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMicroversionNegotiation(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		name        string
		header      *string // nil: no header
		wantStatus  int
		wantVersion string
		wantCode    string
	}{
		{name: "absent", wantStatus: http.StatusOK, wantVersion: "1.0"},
		{name: "1.0", header: ptr("1.0"), wantStatus: http.StatusOK, wantVersion: "1.0"},
		{name: "1.1", header: ptr("1.1"), wantStatus: http.StatusOK, wantVersion: "1.1"},
		{name: "1.2", header: ptr("1.2"), wantStatus: http.StatusOK, wantVersion: "1.2"},
		{name: "1.3", header: ptr("1.3"), wantStatus: http.StatusOK, wantVersion: "1.3"},
		{name: "1.4", header: ptr("1.4"), wantStatus: http.StatusOK, wantVersion: "1.4"},
		{name: "latest", header: ptr("latest"), wantStatus: http.StatusOK, wantVersion: "1.4"},
		{name: "Latest", header: ptr("Latest"), wantStatus: http.StatusOK, wantVersion: "1.4"},
		{name: "spaces", header: ptr(" 1.1 "), wantStatus: http.StatusOK, wantVersion: "1.1"},
		{name: "1.99", header: ptr("1.99"), wantStatus: http.StatusNotAcceptable, wantVersion: "1.0", wantCode: CodeVersionNotAcceptable},
		{name: "2.0", header: ptr("2.0"), wantStatus: http.StatusNotAcceptable, wantVersion: "1.0", wantCode: CodeVersionNotAcceptable},
		{name: "0.9", header: ptr("0.9"), wantStatus: http.StatusNotAcceptable, wantVersion: "1.0", wantCode: CodeVersionNotAcceptable},
		{name: "abc", header: ptr("abc"), wantStatus: http.StatusBadRequest, wantVersion: "1.0", wantCode: CodeInvalidVersion},
		{name: "empty", header: ptr(""), wantStatus: http.StatusBadRequest, wantVersion: "1.0", wantCode: CodeInvalidVersion},
		{name: "1", header: ptr("1"), wantStatus: http.StatusBadRequest, wantVersion: "1.0", wantCode: CodeInvalidVersion},
		{name: "1.", header: ptr("1."), wantStatus: http.StatusBadRequest, wantVersion: "1.0", wantCode: CodeInvalidVersion},
		{name: "1.01", header: ptr("1.01"), wantStatus: http.StatusBadRequest, wantVersion: "1.0", wantCode: CodeInvalidVersion},
		{name: "-1.0", header: ptr("-1.0"), wantStatus: http.StatusBadRequest, wantVersion: "1.0", wantCode: CodeInvalidVersion},
		{name: "1.1.1", header: ptr("1.1.1"), wantStatus: http.StatusBadRequest, wantVersion: "1.0", wantCode: CodeInvalidVersion},
		{name: "service prefix", header: ptr("stackd 1.1"), wantStatus: http.StatusBadRequest, wantVersion: "1.0", wantCode: CodeInvalidVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hr, err := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/stack_sets", nil)
			if err != nil {
				t.Fatal(err)
			}
			hr.Header.Set("Authorization", "Bearer "+testToken)
			if tc.header != nil {
				hr.Header[VersionHeader] = []string{*tc.header}
			}
			res, err := e.srv.Client().Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			r := readResp(t, res)
			r.wantStatus(t, "GET", tc.wantStatus)
			if got := r.header.Get(VersionHeader); got != tc.wantVersion {
				t.Errorf("%s = %q, want %q", VersionHeader, got, tc.wantVersion)
			}
			if got := r.header.Get("Vary"); got != VersionHeader {
				t.Errorf("Vary = %q, want %q", got, VersionHeader)
			}
			if tc.wantCode == "" {
				return
			}
			ae := r.apiErr(t)
			if ae.Code != tc.wantCode {
				t.Errorf("code = %q, want %q", ae.Code, tc.wantCode)
			}
			if ae.MinVersion != "1.0" || ae.MaxVersion != "1.4" {
				t.Errorf("min_version, max_version = %q, %q, want 1.0, 1.1", ae.MinVersion, ae.MaxVersion)
			}
		})
	}
}

func TestTwoVersionHeadersAreMalformed(t *testing.T) {
	e := newEnv(t, nil)
	hr, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/healthz", nil)
	hr.Header.Add(VersionHeader, "1.0")
	hr.Header.Add(VersionHeader, "1.1")
	res, err := e.srv.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	r := readResp(t, res)
	r.wantStatus(t, "two headers", http.StatusBadRequest)
}

// Every response carries the version served and Vary, errors included.
func TestVersionHeadersOnEveryResponse(t *testing.T) {
	e := newEnv(t, nil)
	v11 := map[string]string{VersionHeader: "1.1"}
	tests := []struct {
		name string
		r    req
		want int
		ver  string
	}{
		{"health", req{path: "/healthz", noAuth: true}, http.StatusOK, "1.0"},
		{"health 1.1", req{path: "/healthz", noAuth: true, header: v11}, http.StatusOK, "1.1"},
		{"metrics", req{path: "/metrics", header: v11}, http.StatusOK, "1.1"},
		{"versions", req{path: "/", noAuth: true}, http.StatusOK, "1.0"},
		{"201", req{method: http.MethodPut, path: rtPath + "Custom::H", header: v11}, http.StatusCreated, "1.1"},
		{"204", req{method: http.MethodPut, path: rtPath + "Custom::H", header: v11}, http.StatusNoContent, "1.1"},
		{"unknown route", req{path: "/v2/nothing", header: v11}, http.StatusNotFound, "1.1"},
		{"not found", req{path: "/v1/stack_sets/nope", header: v11}, http.StatusNotFound, "1.1"},
		{"unauthorized", req{path: "/v1/stack_sets", noAuth: true, header: v11}, http.StatusUnauthorized, "1.1"},
		{"method not allowed", req{method: http.MethodDelete, path: "/v1/stack_sets", header: v11}, http.StatusMethodNotAllowed, "1.1"},
		{"bad request", req{path: "/v1/changesets", header: v11}, http.StatusBadRequest, "1.1"},
		{"not acceptable", req{path: "/healthz", header: map[string]string{VersionHeader: "1.5"}}, http.StatusNotAcceptable, "1.0"},
		{"malformed", req{path: "/healthz", header: map[string]string{VersionHeader: "x"}}, http.StatusBadRequest, "1.0"},
		{"bad signature", req{method: http.MethodPost, path: "/v1/hooks/git", body: "{}", noAuth: true, header: v11}, http.StatusUnauthorized, "1.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.r)
			r.wantStatus(t, tc.name, tc.want)
			if got := r.header.Get(VersionHeader); got != tc.ver {
				t.Errorf("%s = %q, want %q", VersionHeader, got, tc.ver)
			}
			if got := r.header.Values("Vary"); !varies(got) {
				t.Errorf("Vary = %q, want it to include %s", got, VersionHeader)
			}
			if tc.want >= 400 {
				r.apiErr(t)
			}
		})
	}
}

func TestVersionsDocument(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do(req{path: "/", noAuth: true})
	r.wantStatus(t, "GET /", http.StatusOK)
	var doc struct {
		Versions []versionDoc `json:"versions"`
	}
	r.decode(t, &doc)
	want := []versionDoc{{
		ID: "v1", MinVersion: "1.0", MaxVersion: "1.4", Status: "CURRENT",
		Links: []link{
			{Rel: "self", Href: "/"},
			{Rel: "describedby", Href: "/openapi.json", Type: "application/vnd.oai.openapi+json"},
		},
	}}
	if diff := cmp.Diff(want, doc.Versions); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}

// FuzzNegotiate: no header value panics, and every accepted one is in
// range.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"1.0", "1.1", "latest", "1.99", "abc", "", "1.01", " 2.0", "1.1\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, status, detail := negotiate([]string{s})
		switch status {
		case 0:
			if !v.AtLeast(1, 0) || !maxVersion.AtLeast(v.Major, v.Minor) {
				t.Errorf("negotiate(%q) = %v, out of range", s, v)
			}
			if strings.TrimSpace(s) != v.String() && !strings.EqualFold(strings.TrimSpace(s), "latest") {
				t.Errorf("negotiate(%q) = %v", s, v)
			}
		case http.StatusBadRequest, http.StatusNotAcceptable:
			if detail == "" {
				t.Errorf("negotiate(%q): status %d without detail", s, status)
			}
		default:
			t.Errorf("negotiate(%q): status %d", s, status)
		}
	})
}

// varies reports whether Vary header values name VersionHeader.
func varies(values []string) bool {
	for _, v := range values {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), VersionHeader) {
				return true
			}
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// A route added in a later microversion does not exist at an earlier one
// (Placement): 404 stackd.route_not_found, saying which version to ask.
func TestRoutesExistFromTheirVersion(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Passes = &fakePasses{} })
	for _, tc := range []struct {
		method, path, since string
	}{
		{http.MethodPost, "/v1/reconcile", "1.2"},
		{http.MethodGet, "/v1/state/backup", "1.2"},
		{http.MethodGet, "/v1/stack_sets/web/drift", "1.3"},
		{http.MethodGet, "/v1/owners", "1.4"},
	} {
		for _, v := range []string{"", "1.0", "1.1"} {
			r := e.do(req{method: tc.method, path: tc.path, header: map[string]string{VersionHeader: v}})
			r.wantStatus(t, tc.method+" "+tc.path+" at "+v, http.StatusNotFound)
			if !strings.Contains(string(r.body), CodeRouteNotFound) || !strings.Contains(string(r.body), "added in "+tc.since) {
				t.Errorf("%s %s at %q: %s", tc.method, tc.path, v, r.body)
			}
		}
		if r := e.do(req{method: tc.method, path: tc.path, header: map[string]string{VersionHeader: tc.since}}); r.status == http.StatusNotFound && strings.Contains(string(r.body), CodeRouteNotFound) {
			t.Errorf("%s %s at %s: %s", tc.method, tc.path, tc.since, r.body)
		}
	}
}

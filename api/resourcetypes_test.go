package api

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/state"
)

const rtPath = "/v1/resource_types/"

func TestPutResourceTypeCreateOrVerify(t *testing.T) {
	e := newEnv(t, nil)
	steps := []struct {
		name       string
		wantStatus int
		wantLoc    string
	}{
		{"new", http.StatusCreated, "/v1/resource_types/Custom::DNSRecord"},
		{"exists", http.StatusNoContent, ""},
		{"exists again", http.StatusNoContent, ""},
	}
	for _, s := range steps {
		r := e.do(req{method: http.MethodPut, path: rtPath + "Custom::DNSRecord"})
		r.wantStatus(t, s.name, s.wantStatus)
		if got := r.header.Get("Location"); got != s.wantLoc {
			t.Errorf("%s: Location = %q, want %q", s.name, got, s.wantLoc)
		}
		if len(r.body) != 0 {
			t.Errorf("%s: body = %q, want none", s.name, r.body)
		}
	}
	rt, err := e.store.ResourceType("Custom::DNSRecord")
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	if !rt.Created.Equal(t0) {
		t.Errorf("created = %v, want %v", rt.Created, t0)
	}
	// The Location answers.
	r := e.do(req{path: "/v1/resource_types/Custom::DNSRecord"})
	r.wantStatus(t, "GET Location", http.StatusOK)
	var got resourceTypeView
	r.decode(t, &got)
	want := resourceTypeView{Name: "Custom::DNSRecord", Source: "api", Created: &t0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET (-want +got):\n%s", diff)
	}
}

func TestPutResourceTypeLongestName(t *testing.T) {
	e := newEnv(t, nil)
	name := "Custom::" + strings.Repeat("A", MaxResourceTypeName-len("Custom::"))
	e.do(req{method: http.MethodPut, path: rtPath + name}).wantStatus(t, "255 characters", http.StatusCreated)
}

func TestPutResourceTypeBadRequest(t *testing.T) {
	e := newEnv(t, nil)
	long := "Custom::" + strings.Repeat("A", 256-len("Custom::"))
	tests := []struct {
		name, rt, body string
		header         map[string]string
	}{
		{name: "no type name", rt: "Custom::"},
		{name: "starts with a digit", rt: "Custom::1abc"},
		{name: "lower-case prefix", rt: "custom::X"},
		{name: "256 characters", rt: long},
		{name: "hyphen", rt: "Custom::A-b"},
		{name: "no prefix", rt: "DNSRecord"},
		{name: "single colon", rt: "Custom:X"},
		{name: "JSON body", rt: "Custom::X", body: `{"name":"Custom::X"}`, header: map[string]string{"Content-Type": "application/json"}},
		{name: "rename body", rt: "Custom::X", body: `{"name":"Custom::Y"}`},
		{name: "one byte", rt: "Custom::X", body: " "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(req{method: http.MethodPut, path: rtPath + tc.rt, body: tc.body, header: tc.header})
			r.wantStatus(t, "PUT", http.StatusBadRequest)
			if got := r.apiErr(t).Code; got != CodeBadRequest {
				t.Errorf("code = %q, want %q", got, CodeBadRequest)
			}
			if _, err := e.store.ResourceType(tc.rt); !errors.Is(err, state.ErrNotFound) && !errors.Is(err, state.ErrInvalidKey) {
				t.Errorf("after a 400, state has %q (err %v)", tc.rt, err)
			}
		})
	}
}

// A chunked body (no Content-Length) is a body too.
func TestPutResourceTypeChunkedBody(t *testing.T) {
	e := newEnv(t, nil)
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`{"name":"Custom::Y"}`))
		_ = pw.Close()
	}()
	hr, err := http.NewRequest(http.MethodPut, e.srv.URL+rtPath+"Custom::X", pr)
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+testToken)
	res, err := e.srv.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("chunked body: status = %d, want 400", res.StatusCode)
	}
}

func TestResourceTypeNoRenamePath(t *testing.T) {
	e := newEnv(t, nil)
	e.do(req{method: http.MethodPut, path: rtPath + "Custom::X"}).wantStatus(t, "PUT", http.StatusCreated)
	tests := []struct {
		method, path, allow string
	}{
		{http.MethodPatch, rtPath + "Custom::X", "DELETE, GET, PUT"},
		{http.MethodPost, rtPath + "Custom::X", "DELETE, GET, PUT"},
		{http.MethodPost, "/v1/resource_types", "GET"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := e.do(req{method: tc.method, path: tc.path, body: `{"name":"Custom::Y"}`})
			r.wantStatus(t, tc.method, http.StatusMethodNotAllowed)
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow = %q, want %q", got, tc.allow)
			}
			if got := r.apiErr(t).Code; got != CodeMethodNotAllowed {
				t.Errorf("code = %q, want %q", got, CodeMethodNotAllowed)
			}
		})
	}
	e.do(req{path: rtPath + "Custom::Y"}).wantStatus(t, "renamed type", http.StatusNotFound)
	e.do(req{path: rtPath + "Custom::X"}).wantStatus(t, "original type", http.StatusOK)
}

func TestGetResourceTypeNotFound(t *testing.T) {
	e := newEnv(t, nil)
	for _, name := range []string{"Custom::Missing", "custom::bad", "Custom::A-b"} {
		r := e.do(req{path: rtPath + name})
		r.wantStatus(t, name, http.StatusNotFound)
		if got := r.apiErr(t).Code; got != CodeNotFound {
			t.Errorf("%s: code = %q, want %q", name, got, CodeNotFound)
		}
	}
}

func TestDeleteResourceType(t *testing.T) {
	tests := []struct {
		name     string
		register bool
		inUse    bool
		inUseErr error
		want     int
		wantCode string
		stays    bool
	}{
		{name: "registered", register: true, want: http.StatusNoContent},
		{name: "unknown", want: http.StatusNotFound, wantCode: CodeNotFound},
		{name: "in use", register: true, inUse: true, want: http.StatusConflict, wantCode: CodeInUse, stays: true},
		{name: "use check fails", register: true, inUseErr: errors.New("boom"), want: http.StatusInternalServerError, wantCode: CodeInternal, stays: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			e := newEnv(t, func(o *Options) {
				o.InUse = func(name string) (bool, error) {
					asked = append(asked, name)
					return tc.inUse, tc.inUseErr
				}
			})
			if tc.register {
				e.do(req{method: http.MethodPut, path: rtPath + "Custom::X"}).wantStatus(t, "PUT", http.StatusCreated)
			}
			r := e.do(req{method: http.MethodDelete, path: rtPath + "Custom::X"})
			r.wantStatus(t, "DELETE", tc.want)
			if tc.wantCode != "" {
				if got := r.apiErr(t).Code; got != tc.wantCode {
					t.Errorf("code = %q, want %q", got, tc.wantCode)
				}
			}
			if tc.register && !slicesEqual(asked, []string{"Custom::X"}) {
				t.Errorf("InUse asked for %q, want [Custom::X]", asked)
			}
			_, err := e.store.ResourceType("Custom::X")
			if tc.stays != (err == nil) {
				t.Errorf("after DELETE: stays = %v, want %v", err == nil, tc.stays)
			}
			if tc.want == http.StatusNoContent {
				e.do(req{method: http.MethodDelete, path: rtPath + "Custom::X"}).wantStatus(t, "second DELETE", http.StatusNotFound)
			}
		})
	}
}

func TestGitDeclaredResourceTypes(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.GitTypes = func() map[string]string {
			return map[string]string{"Custom::DNSRecord": "https://hookuser:hookP4ss@dns.internal/hook?key=SECRETKEY", "Custom::Bucket": ""}
		}
		o.InUse = func(string) (bool, error) { return false, nil }
	})
	e.do(req{method: http.MethodPut, path: rtPath + "Custom::Queue"}).wantStatus(t, "PUT api type", http.StatusCreated)

	r := e.do(req{path: "/v1/resource_types"})
	r.wantStatus(t, "list", http.StatusOK)
	var list struct {
		ResourceTypes []resourceTypeView `json:"resource_types"`
	}
	r.decode(t, &list)
	want := []resourceTypeView{
		{Name: "Custom::Bucket", Source: "git"},
		{Name: "Custom::DNSRecord", Source: "git", ServiceToken: "https://dns.internal/…"}, // its user info, path and query may be secrets
		{Name: "Custom::Queue", Source: "api", Created: &t0},
	}
	if diff := cmp.Diff(want, list.ResourceTypes); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}

	// Declared in Git: registered already; PUT verifies without writing.
	e.do(req{method: http.MethodPut, path: rtPath + "Custom::DNSRecord"}).wantStatus(t, "PUT git type", http.StatusNoContent)
	if _, err := e.store.ResourceType("Custom::DNSRecord"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("PUT of a Git type wrote the registry (err %v)", err)
	}
	r = e.do(req{path: rtPath + "Custom::DNSRecord"})
	r.wantStatus(t, "GET git type", http.StatusOK)
	var one resourceTypeView
	r.decode(t, &one)
	if one.Source != "git" || one.ServiceToken != "https://dns.internal/…" || strings.Contains(string(r.body), "SECRETKEY") || strings.Contains(string(r.body), "hookP4ss") {
		t.Errorf("GET git type = %+v", one)
	}

	// Not deletable through the API.
	r = e.do(req{method: http.MethodDelete, path: rtPath + "Custom::DNSRecord"})
	r.wantStatus(t, "DELETE git type", http.StatusConflict)
	if got := r.apiErr(t).Code; got != CodeDeclaredInGit {
		t.Errorf("code = %q, want %q", got, CodeDeclaredInGit)
	}
	e.do(req{path: rtPath + "Custom::DNSRecord"}).wantStatus(t, "GET after DELETE", http.StatusOK)
}

// Of 100 concurrent PUTs of one name exactly one creates it (the API's
// bound on requests at once is raised to let all of them in).
func TestConcurrentPutResourceType(t *testing.T) {
	const n = 100
	e := newEnv(t, func(o *Options) { o.APILimits.MaxInFlight = n })
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		count = map[int]int{}
		start = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			hr, err := http.NewRequest(http.MethodPut, e.srv.URL+rtPath+"Custom::Race", nil)
			if err != nil {
				t.Error(err)
				return
			}
			hr.Header.Set("Authorization", "Bearer "+testToken)
			res, err := e.srv.Client().Do(hr)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			mu.Lock()
			count[res.StatusCode]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	want := map[int]int{http.StatusCreated: 1, http.StatusNoContent: n - 1}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("status counts (-want +got):\n%s", diff)
	}
}

// Registrations live in the state and survive a restart.
func TestResourceTypeSurvivesRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	serve := func(f func(e *env)) {
		st, err := state.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		s, err := New(Options{Store: st, Token: testToken, Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		e := &env{t: t, store: st, api: s, srv: httptest.NewServer(s)}
		defer e.srv.Close()
		f(e)
	}
	serve(func(e *env) {
		e.do(req{method: http.MethodPut, path: rtPath + "Custom::Kept"}).wantStatus(t, "PUT", http.StatusCreated)
	})
	serve(func(e *env) {
		e.do(req{method: http.MethodPut, path: rtPath + "Custom::Kept"}).wantStatus(t, "PUT after restart", http.StatusNoContent)
		e.do(req{path: rtPath + "Custom::Kept"}).wantStatus(t, "GET after restart", http.StatusOK)
	})
}

func slicesEqual(a, b []string) bool { return cmp.Equal(a, b) }

package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testToken = "ghp_TESTTOKEN_do_not_print_0123456789"

// request is one request the fake forge received.
type request struct {
	Method, Path, Query string
	Auth, Accept        string
	Body                string // the "body" field of a JSON payload
}

func (r request) String() string {
	s := r.Method + " " + r.Path
	if r.Query != "" {
		s += "?" + r.Query
	}
	return s
}

type fakeComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

type fakePull struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Head   struct {
		Ref   string `json:"ref"`
		Label string `json:"label"`
	} `json:"head"`
}

// failure is a canned answer for the next request matching method ("" any).
type failure struct {
	method string
	status int
	header map[string]string
	body   string
	hang   bool // wait until the client gives up
}

// fakeForge emulates the few endpoints of GitHub's REST API that the client
// uses, over httptest, and records every request.
type fakeForge struct {
	t        *testing.T
	srv      *httptest.Server
	pageSize int
	linkBase string // host for Link headers; default the server itself

	mu       sync.Mutex
	requests []request
	comments map[int][]*fakeComment
	pulls    []fakePull
	nextID   int64
	failures []failure
	// auth is the Authorization header expected (default "Bearer <token>").
	auth string
}

func newFakeForge(t *testing.T) *fakeForge {
	f := &fakeForge{t: t, pageSize: 100, comments: map[int][]*fakeComment{}, nextID: 1000}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/acme/defs/issues/{n}/comments", f.listComments)
	mux.HandleFunc("POST /repos/acme/defs/issues/{n}/comments", f.createComment)
	mux.HandleFunc("PATCH /repos/acme/defs/issues/comments/{id}", f.updateComment)
	mux.HandleFunc("GET /repos/acme/defs/pulls", f.listPulls)
	f.srv = httptest.NewServer(f.record(mux))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeForge) client(t *testing.T, mod func(*Options)) (*Client, *[]time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var slept []time.Duration
	o := Options{
		BaseURL: f.srv.URL, Token: testToken, Repo: "acme/defs", Client: f.srv.Client(),
		Sleep: func(_ context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			slept = append(slept, d)
			return nil
		},
	}
	if mod != nil {
		mod(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, &slept
}

func (f *fakeForge) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var payload struct {
			Body string `json:"body"`
		}
		if r.Body != nil {
			_ = json.NewDecoder(r.Body).Decode(&payload)
		}
		f.mu.Lock()
		f.requests = append(f.requests, request{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), Accept: r.Header.Get("Accept"), Body: payload.Body,
		})
		var fail *failure
		for i, fl := range f.failures {
			if fl.method == "" || fl.method == r.Method {
				fail = &fl
				f.failures = append(f.failures[:i:i], f.failures[i+1:]...)
				break
			}
		}
		f.mu.Unlock()
		want := "Bearer " + testToken
		if f.auth != "" {
			want = f.auth
		}
		if r.Header.Get("Authorization") != want {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
			return
		}
		if fail != nil {
			if fail.hang {
				<-r.Context().Done()
				return
			}
			for k, v := range fail.header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(fail.status)
			_, _ = w.Write([]byte(fail.body))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeForge) listComments(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 || per > f.pageSize {
		per = f.pageSize
	}
	f.mu.Lock()
	all := f.comments[n]
	from, to := min((page-1)*per, len(all)), min(page*per, len(all))
	out := make([]fakeComment, 0, to-from)
	for _, c := range all[from:to] {
		out = append(out, *c)
	}
	f.mu.Unlock()
	if to < len(all) {
		base := f.srv.URL
		if f.linkBase != "" {
			base = f.linkBase
		}
		last := (len(all) + per - 1) / per
		w.Header().Set("Link", fmt.Sprintf(`<%s%s?per_page=%d&page=%d>; rel="next", <%s%s?per_page=%d&page=%d>; rel="last"`,
			base, r.URL.Path, per, page+1, base, r.URL.Path, per, last))
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeForge) createComment(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("n"))
	f.mu.Lock()
	body := f.requests[len(f.requests)-1].Body
	f.nextID++
	c := &fakeComment{ID: f.nextID, Body: body}
	f.comments[n] = append(f.comments[n], c)
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, c)
}

func (f *fakeForge) updateComment(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cs := range f.comments {
		for _, c := range cs {
			if c.ID == id {
				c.Body = f.requests[len(f.requests)-1].Body
				writeJSON(w, http.StatusOK, c)
				return
			}
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

func (f *fakeForge) listPulls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	out := []fakePull{}
	f.mu.Lock()
	for _, p := range f.pulls {
		if (q.Get("head") == "" || q.Get("head") == p.Head.Label) && (q.Get("state") == "" || q.Get("state") == p.State) {
			out = append(out, p)
		}
	}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeForge) addComment(pr int, body string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.comments[pr] = append(f.comments[pr], &fakeComment{ID: f.nextID, Body: body})
	return f.nextID
}

func (f *fakeForge) bodies(pr int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.comments[pr] {
		out = append(out, c.Body)
	}
	return out
}

func (f *fakeForge) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		out = append(out, r.String())
	}
	return out
}

func (f *fakeForge) fail(fl ...failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, fl...)
}

const (
	listPR7 = "GET /repos/acme/defs/issues/7/comments?per_page=100"
	postPR7 = "POST /repos/acme/defs/issues/7/comments"
)

func TestUpsertCreatesWhenNoMarkerComment(t *testing.T) {
	f := newFakeForge(t)
	f.addComment(7, "LGTM")
	f.addComment(7, "> <!-- stackd:changeset:web -->\nquoted by a human, not ours")
	c, slept := f.client(t, nil)

	if err := c.Upsert(context.Background(), 7, "web", "### plan\n"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{listPR7, postPR7}, f.calls()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	want := []string{"LGTM", "> <!-- stackd:changeset:web -->\nquoted by a human, not ours", "<!-- stackd:changeset:web -->\n### plan\n"}
	if diff := cmp.Diff(want, f.bodies(7)); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	for _, r := range f.requests {
		if r.Auth != "Bearer "+testToken || r.Accept != "application/vnd.github+json" {
			t.Errorf("%s: Authorization %q, Accept %q", r, r.Auth, r.Accept)
		}
	}
	if len(*slept) != 0 {
		t.Errorf("slept %v without a failure", *slept)
	}
}

func TestUpsertUpdatesMarkerCommentOnLaterPage(t *testing.T) {
	f := newFakeForge(t)
	f.pageSize = 2
	f.addComment(7, "first")
	otherID := f.addComment(7, "<!-- stackd:changeset:api -->\napi plan")
	f.addComment(7, "third")
	id := f.addComment(7, "<!-- stackd:changeset:web -->\nold plan")
	f.addComment(7, "<!-- stackd:changeset:web -->\na duplicate is left alone")
	c, _ := f.client(t, nil)

	if err := c.Upsert(context.Background(), 7, "web", "new plan"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"GET /repos/acme/defs/issues/7/comments?per_page=100",
		"GET /repos/acme/defs/issues/7/comments?per_page=2&page=2",
		fmt.Sprintf("PATCH /repos/acme/defs/issues/comments/%d", id),
	}
	if diff := cmp.Diff(want, f.calls()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	wantBodies := []string{"first", "<!-- stackd:changeset:api -->\napi plan", "third",
		"<!-- stackd:changeset:web -->\nnew plan", "<!-- stackd:changeset:web -->\na duplicate is left alone"}
	if diff := cmp.Diff(wantBodies, f.bodies(7)); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	_ = otherID

	// The same body again: nothing to edit.
	f.requests = nil
	if err := c.Upsert(context.Background(), 7, "web", "new plan"); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.calls() {
		if !strings.HasPrefix(r, "GET ") {
			t.Errorf("unchanged body sent %s", r)
		}
	}
}

func TestUpsertLeavesOtherStackSetsComment(t *testing.T) {
	f := newFakeForge(t)
	f.addComment(7, "<!-- stackd:changeset:api -->\napi plan")
	f.addComment(7, "<!-- stackd:changeset:web-canary -->\nprefix of another name")
	c, _ := f.client(t, nil)
	if err := c.Upsert(context.Background(), 7, "web", "web plan"); err != nil {
		t.Fatal(err)
	}
	if err := c.Upsert(context.Background(), 7, "web", "web plan 2"); err != nil {
		t.Fatal(err)
	}
	want := []string{"<!-- stackd:changeset:api -->\napi plan", "<!-- stackd:changeset:web-canary -->\nprefix of another name",
		"<!-- stackd:changeset:web -->\nweb plan 2"}
	if diff := cmp.Diff(want, f.bodies(7)); diff != "" {
		t.Errorf("comments (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{listPR7, postPR7, listPR7, "PATCH /repos/acme/defs/issues/comments/1003"}, f.calls()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failures  []failure
		wantCalls []string
		wantSlept []time.Duration
		wantErr   string // "" for success
		comments  int    // comments on the pull request afterwards
	}{
		{
			name:      "list 500 then success",
			failures:  []failure{{method: "GET", status: 500, body: `{"message":"Server Error"}`}},
			wantCalls: []string{listPR7, listPR7, postPR7},
			wantSlept: []time.Duration{time.Second},
			comments:  1,
		},
		{
			name:      "create 502 is not repeated blindly: list again, then create",
			failures:  []failure{{method: "POST", status: 502, body: "bad gateway"}},
			wantCalls: []string{listPR7, postPR7, listPR7, postPR7},
			wantSlept: []time.Duration{time.Second},
			comments:  1,
		},
		{
			name: "429 honours Retry-After seconds, then backoff doubles",
			failures: []failure{
				{method: "GET", status: 429, header: map[string]string{"Retry-After": "7"}},
				{method: "GET", status: 503},
			},
			wantCalls: []string{listPR7, listPR7, listPR7, postPR7},
			wantSlept: []time.Duration{7 * time.Second, 2 * time.Second},
			comments:  1,
		},
		{
			name: "rate-limited 403 waits for the reset",
			failures: []failure{{method: "GET", status: 403, body: `{"message":"API rate limit exceeded"}`,
				header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1700000030"}}},
			wantCalls: []string{listPR7, listPR7, postPR7},
			wantSlept: []time.Duration{30 * time.Second},
			comments:  1,
		},
		{
			name:      "Retry-After beyond MaxBackoff fails at once",
			failures:  []failure{{method: "GET", status: 429, header: map[string]string{"Retry-After": "3600"}, body: `{"message":"slow down"}`}},
			wantCalls: []string{listPR7},
			wantErr:   "429 Too Many Requests: slow down (rate limited, retry after 1h0m0s)",
		},
		{
			name: "attempts run out",
			failures: []failure{
				{method: "GET", status: 500}, {method: "GET", status: 500}, {method: "GET", status: 500}, {method: "GET", status: 500},
			},
			wantCalls: []string{listPR7, listPR7, listPR7, listPR7},
			wantSlept: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
			wantErr:   "find comment of web on pull request 7: GET /repos/acme/defs/issues/7/comments: 500 Internal Server Error",
		},
		{
			name:      "a 422 is not retried",
			failures:  []failure{{method: "POST", status: 422, body: `{"message":"Validation Failed"}`}},
			wantCalls: []string{listPR7, postPR7},
			wantErr:   "create comment of web on pull request 7: POST /repos/acme/defs/issues/7/comments: 422 Unprocessable Entity: Validation Failed",
		},
		{
			name:      "a request that hangs times out and is retried",
			failures:  []failure{{method: "GET", hang: true}},
			wantCalls: []string{listPR7, listPR7, postPR7},
			wantSlept: []time.Duration{time.Second},
			comments:  1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeForge(t)
			f.fail(tc.failures...)
			c, slept := f.client(t, func(o *Options) {
				o.Now = func() time.Time { return time.Unix(1700000000, 0) }
				o.RequestTimeout = 500 * time.Millisecond
			})
			err := c.Upsert(context.Background(), 7, "web", "plan")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("got error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantCalls, f.calls()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSlept, *slept); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			if got := len(f.bodies(7)); got != tc.comments {
				t.Errorf("got %d comments, want %d", got, tc.comments)
			}
		})
	}
}

func TestUnauthorized(t *testing.T) {
	f := newFakeForge(t)
	c, slept := f.client(t, func(o *Options) { o.Token = "ghp_WRONG_secret_value" })
	err := c.Upsert(context.Background(), 7, "web", "plan")
	if err == nil {
		t.Fatal("no error with a wrong token")
	}
	want := "find comment of web on pull request 7: GET /repos/acme/defs/issues/7/comments: 401 Unauthorized: Bad credentials (the token was refused: check that it is valid and not expired)"
	if err.Error() != want {
		t.Errorf("got error\n%s\nwant\n%s", err, want)
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
		t.Errorf("got %#v, want an *APIError with status 401", err)
	}
	if strings.Contains(err.Error(), "WRONG") {
		t.Error("the token is in the error message")
	}
	if len(*slept) != 0 || len(f.calls()) != 1 {
		t.Errorf("a 401 was retried: %v", f.calls())
	}
	if got := fmt.Sprintf("%v %+v %#v %s", c.o, c.o, c.o, c.o); strings.Contains(got, "WRONG") {
		t.Errorf("printed options hold the token: %s", got)
	}
}

func TestPullRequestForBranch(t *testing.T) {
	f := newFakeForge(t)
	pull := func(n int, state, ref string) fakePull {
		p := fakePull{Number: n, State: state}
		p.Head.Ref, p.Head.Label = ref, "acme:"+ref
		return p
	}
	f.pulls = []fakePull{pull(3, "closed", "feature/x"), pull(9, "open", "feature/x"), pull(4, "open", "main-fix")}
	c, _ := f.client(t, nil)
	for _, tc := range []struct {
		branch string
		want   int
		found  bool
	}{
		{"feature/x", 9, true},
		{"main-fix", 4, true},
		{"gone", 0, false},
	} {
		t.Run(tc.branch, func(t *testing.T) {
			f.requests = nil
			n, found, err := c.PullRequestForBranch(context.Background(), tc.branch)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want || found != tc.found {
				t.Errorf("got %d, %v, want %d, %v", n, found, tc.want, tc.found)
			}
			q := f.requests[0]
			wantQ := "head=acme%3A" + strings.ReplaceAll(tc.branch, "/", "%2F") + "&per_page=100&state=open"
			if q.Path != "/repos/acme/defs/pulls" || q.Query != wantQ {
				t.Errorf("got request %s, want GET /repos/acme/defs/pulls?%s", q, wantQ)
			}
		})
	}
}

func TestPaginationLinkToAnotherHostIsRefused(t *testing.T) {
	f := newFakeForge(t)
	f.pageSize = 1
	f.linkBase = "http://evil.example"
	f.addComment(7, "one")
	f.addComment(7, "two")
	c, _ := f.client(t, nil)
	err := c.Upsert(context.Background(), 7, "web", "plan")
	if !errors.Is(err, ErrForeignLink) {
		t.Fatalf("got %v, want ErrForeignLink", err)
	}
}

func TestUpsertTooLargeIsCutWithALink(t *testing.T) {
	for _, kind := range []Kind{GitHub, Gitea} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFakeForge(t)
			c, _ := f.client(t, func(o *Options) { o.Kind = kind })
			if kind == Gitea {
				f.auth = "token " + testToken
			}
			md := "```diff\n" + strings.Repeat("é", MaxCommentChars) + "\n```\n"
			_, err := c.UpsertComment(context.Background(), PullRequest{Number: 7}, Comment{StackSet: "web", Markdown: md, FullURL: "https://example.test/full.md"})
			if err != nil {
				t.Fatal(err)
			}
			bodies := f.bodies(7)
			if len(bodies) != 1 {
				t.Fatalf("got %d comments, want 1", len(bodies))
			}
			b := bodies[0]
			if n := utf8.RuneCountInString(b); n > c.MaxCommentChars() {
				t.Errorf("comment has %d characters, the limit is %d", n, c.MaxCommentChars())
			}
			if !strings.HasPrefix(b, Marker("web")+"\n") || !strings.Contains(b, "(https://example.test/full.md)") || !strings.Contains(b, "cut here") {
				t.Errorf("cut comment lacks the marker, the note or the link: ...%s", b[len(b)-300:])
			}
			if strings.Count(b, "```")%2 != 0 {
				t.Errorf("cut comment leaves a code fence open")
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"github", Options{BaseURL: "https://api.github.com", Token: "t", Repo: "a/b"}, true},
		{"enterprise with trailing slash", Options{BaseURL: "https://ghe.example.com/api/v3/", Token: "t", Repo: "a/b"}, true},
		{"no scheme", Options{BaseURL: "api.github.com", Token: "t", Repo: "a/b"}, false},
		{"credentials in URL", Options{BaseURL: "https://u:p@api.github.com", Token: "t", Repo: "a/b"}, false},
		{"repo without owner", Options{BaseURL: "https://api.github.com", Token: "t", Repo: "b"}, false},
		{"repo with three parts", Options{BaseURL: "https://api.github.com", Token: "t", Repo: "a/b/c"}, false},
		{"no token", Options{BaseURL: "https://api.github.com", Repo: "a/b"}, false},
		{"gitlab subgroup", Options{Kind: GitLab, BaseURL: "https://gitlab.com/api/v4", Token: "t", Repo: "g/sub/b"}, true},
		{"gitlab numeric project id", Options{Kind: GitLab, BaseURL: "https://gitlab.com/api/v4", Token: "t", Repo: "27182818"}, true},
		{"gitlab name without group", Options{Kind: GitLab, BaseURL: "https://gitlab.com/api/v4", Token: "t", Repo: "b"}, false},
		{"numeric repo on github", Options{BaseURL: "https://api.github.com", Token: "t", Repo: "27182818"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.o)
			if tc.ok != (err == nil) {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("got %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestEnterpriseBasePath(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Path
		writeJSON(w, http.StatusOK, []fakePull{})
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL + "/api/v3/", Token: "t", Repo: "acme/defs", Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PullRequestForBranch(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if got != "/api/v3/repos/acme/defs/pulls" {
		t.Errorf("got path %s", got)
	}
}

package console

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

const token = "console-test-token-42"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type env struct {
	t     *testing.T
	store *state.Store
	c     *Console
	srv   *httptest.Server
}

func newEnv(t *testing.T, tok string, planner Planner) *env {
	t.Helper()
	st, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := New(Options{Store: st, Token: tok, Planner: planner, CommitURL: func(rev string) string { return "https://forge.example/o/r/commit/" + rev }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return &env{t: t, store: st, c: c, srv: srv}
}

// client is a browser-like client: a cookie jar, no redirects followed.
func (e *env) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *env) get(c *http.Client, path string, header map[string]string) (*http.Response, string) {
	e.t.Helper()
	rq, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	for k, v := range header {
		rq.Header.Set(k, v)
	}
	res, err := c.Do(rq)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

var csrfRe = regexp.MustCompile(`name="stackd-csrf" content="([^"]+)"`)

// login posts the token as the login form does and returns the CSRF token
// of the session.
func (e *env) login(c *http.Client) string {
	e.t.Helper()
	rq, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	rq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rq.Header.Set("Origin", e.srv.URL)
	res, err := c.Do(rq)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/" {
		e.t.Fatalf("login: %d to %q, want 303 to /ui/", res.StatusCode, res.Header.Get("Location"))
	}
	ck := res.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(ck, want) {
			e.t.Errorf("Set-Cookie %q lacks %s", ck, want)
		}
	}
	if strings.Contains(ck, token) {
		e.t.Error("the cookie holds the token")
	}
	_, body := e.get(c, "/ui/", nil)
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		e.t.Fatalf("no CSRF token in the page")
	}
	return m[1]
}

func TestLoginSessionAndCSRF(t *testing.T) {
	e := newEnv(t, token, nil)
	c := e.client()
	res, _ := e.get(c, "/ui/", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/login" {
		t.Fatalf("GET /ui/ without a session: %d to %q, want 303 to /ui/login", res.StatusCode, res.Header.Get("Location"))
	}
	// A wrong token, and a login posted from another origin, are refused.
	for _, tc := range []struct{ name, tok, origin string }{{"wrong token", "nope", e.srv.URL}, {"foreign origin", token, "https://evil.example"}} {
		rq, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {tc.tok}}.Encode()))
		rq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rq.Header.Set("Origin", tc.origin)
		res, err := c.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode/100 != 4 || res.Header.Get("Set-Cookie") != "" {
			t.Errorf("%s: %d, cookie %q; want a 4xx and no cookie", tc.name, res.StatusCode, res.Header.Get("Set-Cookie"))
		}
	}
	csrf := e.login(c)
	// The data need the CSRF token besides the cookie.
	if res, _ := e.get(c, "/ui/data/fleet", nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("cookie without CSRF: %d, want 401", res.StatusCode)
	}
	if res, _ := e.get(c, "/ui/data/fleet", map[string]string{CSRFHeader: csrf + "x"}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong CSRF: %d, want 401", res.StatusCode)
	}
	if res, _ := e.get(c, "/ui/data/fleet", map[string]string{CSRFHeader: csrf, "Origin": "https://evil.example"}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("foreign Origin: %d, want 401", res.StatusCode)
	}
	if res, body := e.get(c, "/ui/data/fleet", map[string]string{CSRFHeader: csrf}); res.StatusCode != http.StatusOK {
		t.Errorf("session + CSRF: %d %s, want 200", res.StatusCode, body)
	}
	// Authenticated, as the API asks it: a POST needs the header.
	post := func(h map[string]string) bool {
		rq, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/stack_sets/web/abort", nil)
		for _, ck := range c.Jar.Cookies(rq.URL) {
			rq.AddCookie(ck)
		}
		for k, v := range h {
			rq.Header.Set(k, v)
		}
		return e.c.Authenticated(rq)
	}
	if post(nil) || post(map[string]string{"Origin": e.srv.URL}) {
		t.Error("a POST without the CSRF header is authenticated")
	}
	if !post(map[string]string{CSRFHeader: csrf, "Origin": e.srv.URL}) {
		t.Error("a POST with cookie, CSRF and own Origin is not authenticated")
	}
	// Another process's cookie (another key) is nothing.
	other := newEnv(t, token, nil)
	rq, _ := http.NewRequest(http.MethodGet, other.srv.URL+"/ui/data/fleet", nil)
	for _, ck := range c.Jar.Cookies(mustURL(e.srv.URL)) {
		rq.AddCookie(ck)
	}
	rq.Header.Set(CSRFHeader, csrf)
	if other.c.Authenticated(rq) {
		t.Error("a session of another console is accepted")
	}
}

func mustURL(s string) *url.URL { u, _ := url.Parse(s); return u }

func TestHeadersAndAssets(t *testing.T) {
	e := newEnv(t, "", nil) // open (loopback): a session on the first visit
	c := e.client()
	res, body := e.get(c, "/ui/", nil)
	if res.StatusCode != http.StatusOK || !csrfRe.MatchString(body) {
		t.Fatalf("GET /ui/ open: %d, csrf in page %v", res.StatusCode, csrfRe.MatchString(body))
	}
	for _, p := range []string{"/ui/", "/ui/login", "/ui/static/app.js", "/ui/static/style.css", "/ui/data/fleet", "/ui/nope"} {
		res, _ := e.get(c, p, nil)
		h := res.Header
		if h.Get("Content-Security-Policy") != CSP || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: CSP %q, nosniff %q, frame %q", p, h.Get("Content-Security-Policy"), h.Get("X-Content-Type-Options"), h.Get("X-Frame-Options"))
		}
	}
	if !strings.Contains(CSP, "frame-ancestors 'none'") || strings.Contains(CSP, "unsafe") {
		t.Errorf("CSP %q", CSP)
	}
	// No asset names another origin, and none has inline script or style.
	ext := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?https?:`)
	inline := regexp.MustCompile(`(?i)<script>|<script [^>]*>[^<]|\son[a-z]+=|style=`)
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(assets, p)
		if ext.Match(b) {
			t.Errorf("%s loads from another origin: %s", p, ext.Find(b))
		}
		if strings.HasSuffix(p, ".html") && inline.Match(b) {
			t.Errorf("%s has inline script or style: %s", p, inline.Find(b))
		}
		if strings.HasSuffix(p, ".js") && regexp.MustCompile(`\beval\(|new Function\(`).Match(b) {
			t.Errorf("%s uses eval", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// planner is a Planner at the edge the console test cannot run (a Git
// source and the engine): it answers one change set.
type planner struct{ cs *changeset.StackSetChangeSet }

func (p planner) PlanWith(context.Context, string, reconciler.PlanOptions) (*reconciler.PlanResult, error) {
	return &reconciler.PlanResult{Revision: strings.Repeat("b", 40), ChangeSets: []*changeset.StackSetChangeSet{p.cs}}, nil
}

func TestDataPages(t *testing.T) {
	cs := &changeset.StackSetChangeSet{StackSetName: "web<script>alert(1)</script>"}
	e := newEnv(t, token, planner{cs})
	ss, err := e.store.CreateStackSet("web", t0)
	if err != nil {
		t.Fatal(err)
	}
	ss.Revision = strings.Repeat("c", 40)
	var ins []state.Instance
	for a := range 50 {
		for _, r := range []string{"eu-west-1", "us-east-1"} {
			st := state.InstanceOperationComplete
			if a == 7 && r == "us-east-1" {
				st = state.InstanceOperationFailed
			}
			ins = append(ins, state.Instance{StackSetID: ss.ID, Region: r, Account: "acct-" + string(rune('A'+a%26)) + string(rune('a'+a/26)), Status: st, StatusReason: "boom", Outputs: json.RawMessage(`{"url":"x","password":"<sensitive>"}`)})
		}
	}
	if err := e.store.PutInstances(ins); err != nil {
		t.Fatal(err)
	}
	if err := e.store.PutStackSet(ss); err != nil {
		t.Fatal(err)
	}
	if err := e.store.PutResource(ss.ID, ins[0].Region, ins[0].Account, state.Resource{Address: "file.config", Type: "file", PhysicalID: "/t/config", Status: state.ResourceApplied,
		Inputs: json.RawMessage(`{"content":"hunter2"}`), Sensitive: []string{"content"}}); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	h := map[string]string{CSRFHeader: e.login(c)}
	var fleet struct {
		StackSets []fleetEntry `json:"stack_sets"`
	}
	_, body := e.get(c, "/ui/data/fleet", h)
	if err := json.Unmarshal([]byte(body), &fleet); err != nil || len(fleet.StackSets) != 1 {
		t.Fatalf("fleet: %v %s", err, body)
	}
	f := fleet.StackSets[0]
	if f.Instances != 100 || f.Counts[state.InstanceOperationFailed] != 1 || f.RevisionURL != "https://forge.example/o/r/commit/"+ss.Revision {
		t.Errorf("fleet entry = %+v", f)
	}
	var g gridDoc
	_, body = e.get(c, "/ui/data/grid?stack_set=web", h)
	if err := json.Unmarshal([]byte(body), &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Regions) != 2 || len(g.Accounts) != 50 || len(g.Cells) != 400 {
		t.Errorf("grid: %d regions, %d accounts, %d cells", len(g.Regions), len(g.Accounts), len(g.Cells))
	}
	res, body := e.get(c, "/ui/data/instance?stack_set=web&region="+ins[0].Region+"&account="+ins[0].Account, h)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `"physical_id":"/t/config"`) || strings.Contains(body, "hunter2") {
		t.Errorf("instance: %d %s", res.StatusCode, body)
	}
	if res, _ := e.get(c, "/ui/data/instance?stack_set=web&region=nope&account=x", h); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown instance: %d", res.StatusCode)
	}
	if res, _ := e.get(c, "/ui/data/grid?stack_set="+strings.Repeat("x", 2000), h); res.StatusCode != http.StatusBadRequest {
		t.Errorf("oversized name: %d", res.StatusCode)
	}
	res, body = e.get(c, "/ui/data/changes?ref=main", h)
	var cd changesDoc
	if err := json.Unmarshal([]byte(body), &cd); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("changes: %d %v", res.StatusCode, err)
	}
	if strings.Contains(cd.HTML, "<script>") || !strings.Contains(cd.HTML, "web") {
		t.Errorf("change set HTML not escaped: %s", cd.HTML)
	}
}

// The grid groups accounts by the organizational unit their instances
// record: OUs in order, the accounts without one last, each OU's accounts
// contiguous and sorted; the instance page names the OU.
func TestGridGroupsAccountsByOU(t *testing.T) {
	e := newEnv(t, token, nil)
	ss, err := e.store.CreateStackSet("baseline", t0)
	if err != nil {
		t.Fatal(err)
	}
	ouOf := map[string]string{
		"300000000002": "ou-prod", "300000000001": "ou-prod", "100000000001": "ou-dev",
		"200000000001": "ou-dev", "900000000001": "", "000000000009": "ou-prod",
	}
	var ins []state.Instance
	for a, ou := range ouOf {
		for _, r := range []string{"us-east-1", "eu-west-1"} {
			in := state.Instance{StackSetID: ss.ID, Region: r, Account: a, OU: ou, Status: state.InstanceOperationComplete}
			if a == "000000000009" && r == "eu-west-1" {
				in.OU = "" // written before OUs were recorded
			}
			ins = append(ins, in)
		}
	}
	if err := e.store.PutInstances(ins); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	h := map[string]string{CSRFHeader: e.login(c)}
	var g gridDoc
	res, body := e.get(c, "/ui/data/grid?stack_set=baseline", h)
	if err := json.Unmarshal([]byte(body), &g); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("grid: %d %v %s", res.StatusCode, err, body)
	}
	if diff := cmp.Diff([]string{"ou-dev", "ou-prod", ""}, g.OUs); diff != "" {
		t.Errorf("OUs (-want +got):\n%s", diff)
	}
	wantAccounts := []string{"100000000001", "200000000001", "000000000009", "300000000001", "300000000002", "900000000001"}
	if diff := cmp.Diff(wantAccounts, g.Accounts); diff != "" {
		t.Errorf("accounts (-want +got):\n%s", diff)
	}
	if len(g.AccountOUs) != len(g.Accounts) {
		t.Fatalf("%d account OUs for %d accounts", len(g.AccountOUs), len(g.Accounts))
	}
	for i, a := range g.Accounts {
		if got := g.OUs[g.AccountOUs[i]]; got != ouOf[a] {
			t.Errorf("account %s in OU %q, want %q", a, got, ouOf[a])
		}
	}
	if len(g.Cells) != 4*len(ins) {
		t.Errorf("%d cells for %d instances", len(g.Cells)/4, len(ins))
	}
	var d instanceDoc
	_, body = e.get(c, "/ui/data/instance?stack_set=baseline&region=us-east-1&account=300000000001", h)
	if err := json.Unmarshal([]byte(body), &d); err != nil || d.OU != "ou-prod" {
		t.Errorf("instance: OU %q (%v), want ou-prod: %s", d.OU, err, body)
	}

	// A stack set without OUs (SELF_MANAGED) has no groups.
	other, err := e.store.CreateStackSet("web", t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.PutInstance(state.Instance{StackSetID: other.ID, Region: "r", Account: "a", Status: state.InstanceOperationComplete}); err != nil {
		t.Fatal(err)
	}
	_, body = e.get(c, "/ui/data/grid?stack_set=web", h)
	if strings.Contains(body, `"ous"`) || strings.Contains(body, `"account_ous"`) {
		t.Errorf("grid without OUs: %s", body)
	}
}

// A session outlives the console (a daemon's restart on the same state)
// while the token stays; a new token ends it. The secret is made once.
func TestSessionSurvivesRestartUntilTheTokenChanges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	open := func(tok string) (*Console, *state.Store) {
		t.Helper()
		st, err := state.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{Store: st, Token: tok})
		if err != nil {
			st.Close()
			t.Fatal(err)
		}
		return c, st
	}
	c1, st := open(token)
	v, err := c1.newSession()
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c1.sessionFromValue(v)
	if !ok {
		t.Fatal("a fresh session does not verify")
	}
	csrf := c1.csrf(s)
	secret, err := st.Meta(sessionSecretKey)
	if err != nil || len(secret) != 32 {
		t.Fatalf("session secret in the state: %d bytes, %v", len(secret), err)
	}
	st.Close()
	request := func() *http.Request {
		rq := httptest.NewRequest(http.MethodGet, "/ui/data/fleet", nil)
		rq.AddCookie(&http.Cookie{Name: CookieName, Value: v})
		rq.Header.Set(CSRFHeader, csrf)
		return rq
	}
	for _, tc := range []struct {
		name, token string
		want        bool
	}{
		{"restarted, same token", token, true},
		{"same token with a newline", token + "\n", true},
		{"restarted, new token", "another-token", false},
		{"restarted, no token", "", false},
	} {
		c, st := open(tc.token)
		if got := c.Authenticated(request()); got != tc.want {
			t.Errorf("%s: authenticated %v, want %v", tc.name, got, tc.want)
		}
		if again, err := st.Meta(sessionSecretKey); err != nil || !bytes.Equal(again, secret) {
			t.Errorf("%s: the session secret changed (%v)", tc.name, err)
		}
		st.Close()
	}
}

package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/state"
)

// fuzzConsole is a console over a real state holding stack set "web"
// (two regions, three accounts, an OU, a running operation with events)
// and a session of it.
func fuzzConsole(f *testing.F) (c *Console, cookie, csrf string) {
	f.Helper()
	st, err := state.Open(filepath.Join(f.TempDir(), "state"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	ss, err := st.CreateStackSet("web", t0)
	if err != nil {
		f.Fatal(err)
	}
	op := state.Operation{ID: state.NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: state.KindDeployStackSet,
		Revision: strings.Repeat("c", 40), Status: state.OperationRunning, Created: t0, Started: t0,
		Rollout: &state.RolloutProgress{Pattern: "canary", Batch: 1, Batches: 2, Phase: state.RolloutWaitingForPromotion}}
	if err := st.PutOperation(op); err != nil {
		f.Fatal(err)
	}
	ss.Revision, ss.LastOperation = op.Revision, op.ID
	if err := st.PutStackSet(ss); err != nil {
		f.Fatal(err)
	}
	for _, r := range []string{"eu-west-1", "us-east-1"} {
		for _, a := range []string{"111111111111", "222222222222", "acct with spaces"} {
			if err := st.PutInstance(state.Instance{StackSetID: ss.ID, Region: r, Account: a, OU: "ou-prod", Status: state.InstanceOperationComplete,
				Outputs: json.RawMessage(`{"url":"x"}`), Drift: &state.Drift{Status: "DRIFTED", Checked: t0}}); err != nil {
				f.Fatal(err)
			}
			if _, err := st.AppendEvent(state.Event{OperationID: op.ID, Time: t0, Region: r, Account: a, Status: "OPERATION_COMPLETE"}); err != nil {
				f.Fatal(err)
			}
		}
	}
	if err := st.PutResource(ss.ID, "eu-west-1", "111111111111", state.Resource{Address: "file.f", Type: "file", PhysicalID: "/t/f", Status: state.ResourceApplied}); err != nil {
		f.Fatal(err)
	}
	c, err = New(Options{Store: st, Token: token, Planner: planner{&changeset.StackSetChangeSet{StackSetName: "web"}}})
	if err != nil {
		f.Fatal(err)
	}
	cookie, err = c.newSession()
	if err != nil {
		f.Fatal(err)
	}
	s, _ := c.sessionFromValue(cookie)
	return c, cookie, c.csrf(s)
}

// Whatever a page's path and query parameters hold — stack set names,
// regions, accounts, refs, bytes that are not UTF-8, oversized values —
// the data handlers answer a JSON document with 200, 400, 404 or 405
// (never 500: a panic would be recovered into one), and no answer holds a
// session's secrets.
func FuzzConsoleData(f *testing.F) {
	for _, seed := range [][2]string{
		{"fleet", ""},
		{"grid", "stack_set=web"},
		{"grid", "stack_set=nope"},
		{"grid", "stack_set="},
		{"grid", "stack_set=%00%ff"},
		{"grid", "stack_set=web&stack_set=other"},
		{"instance", "stack_set=web&region=eu-west-1&account=111111111111"},
		{"instance", "stack_set=web&region=eu-west-1&account=acct+with+spaces"},
		{"instance", "stack_set=web&region=eu-west-1&account=111111111111%00"},
		{"instance", "stack_set=web&region=../../etc&account=passwd"},
		{"instance", "stack_set=web&region=%zz&account=1"},
		{"history", "stack_set=web"},
		{"history", "stack_set=" + strings.Repeat("w", 1025)},
		{"changes", "ref=main"},
		{"changes", "ref=main%20branch"},
		{"changes", "ref=main&stack_set=web"},
		{"changes", "ref=-x&stack_set=%E2%80%AE"},
		{"nope", "x=1"},
		{"grid/../fleet", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	c, cookie, csrf := fuzzConsole(f)
	f.Fuzz(func(t *testing.T, path, query string) {
		r := httptest.NewRequest(http.MethodGet, "/ui/data/fleet", nil)
		r.URL.Path = "/ui/data/" + path
		r.URL.RawQuery = query
		r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
		r.Header.Set(CSRFHeader, csrf)
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
		default:
			t.Fatalf("GET /ui/data/%q?%q: %d %s", path, query, w.Code, w.Body)
		}
		if w.Code != http.StatusNotFound && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("GET /ui/data/%q?%q: %d, not JSON: %s", path, query, w.Code, w.Body)
		}
		if b := w.Body.String(); strings.Contains(b, cookie) || strings.Contains(b, csrf) {
			t.Fatalf("GET /ui/data/%q?%q echoes the session", path, query)
		}
	})
}

// Whatever the session cookie, the CSRF header or query parameter and the
// Origin hold, Authenticated does not panic and accepts only the
// session's own pair; the pages answer without a 500.
func FuzzConsoleSession(f *testing.F) {
	c, cookie, csrf := fuzzConsole(f)
	f.Add(cookie, csrf, "", "")
	f.Add(cookie, "", "csrf="+csrf, "")
	f.Add(cookie, csrf, "", "http://evil.example")
	f.Add(cookie, csrf, "", "null")
	f.Add("1.2.3", "x", "", "")
	f.Add("99999999999999999999999."+strings.Repeat("A", 24)+".sig", "", "csrf=%zz", "")
	f.Add("..", "", "", "http://[::1")
	f.Add(strings.Repeat(".", 300), "", "", "")
	f.Fuzz(func(t *testing.T, ck, header, query, origin string) {
		for _, path := range []string{"/ui/data/fleet", "/ui/", "/ui/login"} {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.URL.RawQuery = query
			r.Header.Set("Cookie", CookieName+"="+ck)
			if header != "" {
				r.Header.Set(CSRFHeader, header)
			}
			if origin != "" {
				r.Header.Set("Origin", origin)
			}
			auth := c.Authenticated(r)
			sent, err := r.Cookie(CookieName)
			own := err == nil && sent.Value == cookie && (header == csrf || (header == "" && r.URL.Query().Get(CSRFParam) == csrf))
			if auth && !own {
				t.Fatalf("cookie %q, CSRF %q, query %q, Origin %q: authenticated", ck, header, query, origin)
			}
			w := httptest.NewRecorder()
			c.ServeHTTP(w, r)
			if w.Code >= 500 {
				t.Fatalf("GET %s with cookie %q, CSRF %q, query %q, Origin %q: %d %s", path, ck, header, query, origin, w.Code, w.Body)
			}
		}
	})
}

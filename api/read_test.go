package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

const rev = "1a2b3c4d5e6f708192a3b4c5d6e7f80912a3b4c5"

// populate records a stack set "web" with two instances and a finished
// operation with three events, through the state's own API.
func populate(t *testing.T, st *state.Store) (state.StackSet, state.Operation) {
	t.Helper()
	ss, err := st.CreateStackSet("web", t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateStackSet("api", t0); err != nil {
		t.Fatal(err)
	}
	err = st.PutInstances([]state.Instance{
		{StackSetID: ss.ID, Region: "us-east-1", Account: "111111111111", Status: state.InstanceOperationComplete,
			Revision: rev, Outputs: json.RawMessage(`{"url":"http://us"}`), Updated: t0},
		{StackSetID: ss.ID, Region: "eu-west-1", Account: "222222222222", Status: state.InstanceOperationFailed,
			StatusReason: "command failed", Overrides: json.RawMessage(`{"replicas":5}`), Updated: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	op := state.Operation{
		ID: state.NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: reconciler.KindDeployStackSet,
		Revision: rev, Status: state.OperationFailed, Reason: "failure tolerance exceeded",
		Created: t0, Started: t0, Ended: t0.Add(time.Minute),
		Results: []state.InstanceResult{
			{Region: "eu-west-1", Account: "222222222222", Action: "update", Status: state.InstanceOperationFailed, Reason: "command failed"},
			{Region: "us-east-1", Account: "111111111111", Action: "update", Status: state.InstanceOperationComplete},
		},
	}
	if _, created, err := st.ClaimOperation(op); err != nil || !created {
		t.Fatalf("ClaimOperation = %v, %v", created, err)
	}
	ss.LastOperation, ss.Revision = op.ID, rev
	if err := st.PutStackSet(ss); err != nil {
		t.Fatal(err)
	}
	for i, msg := range []string{"operation started", "instance failed", "operation failed"} {
		if _, err := st.AppendEvent(state.Event{OperationID: op.ID, Time: t0.Add(time.Duration(i) * time.Second),
			Region: "eu-west-1", Account: "222222222222", Status: "INFO", Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	return ss, op
}

func TestListStackSets(t *testing.T) {
	e := newEnv(t, nil)
	ss, op := populate(t, e.store)
	r := e.do(req{path: "/v1/stack_sets"})
	r.wantStatus(t, "GET", http.StatusOK)
	var got struct {
		StackSets []stackSetSummary `json:"stack_sets"`
	}
	r.decode(t, &got)
	if len(got.StackSets) != 2 || got.StackSets[0].Name != "api" {
		t.Fatalf("stack sets = %+v, want api and web", got.StackSets)
	}
	want := stackSetSummary{Name: "web", ID: ss.ID, Created: t0, Revision: rev, Status: state.StackSetActive, LastOperation: op.ID}
	if diff := cmp.Diff(want, got.StackSets[1]); diff != "" {
		t.Errorf("web (-want +got):\n%s", diff)
	}
}

func TestListStackSetsEmpty(t *testing.T) {
	e := newEnv(t, nil)
	r := e.do(req{path: "/v1/stack_sets"})
	r.wantStatus(t, "GET", http.StatusOK)
	if got := strings.TrimSpace(string(r.body)); got != `{"stack_sets":[]}` {
		t.Errorf("body = %s, want an empty list", got)
	}
}

func TestGetStackSet(t *testing.T) {
	e := newEnv(t, nil)
	ss, _ := populate(t, e.store)
	r := e.do(req{path: "/v1/stack_sets/web"})
	r.wantStatus(t, "GET", http.StatusOK)
	var got reconciler.StackSetStatus
	r.decode(t, &got)
	want, err := reconciler.BuildStatus(e.store, &ss)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*want, got); diff != "" {
		t.Errorf("status document (-want +got):\n%s", diff)
	}
	if got.LastOperation == nil || got.LastOperation.Counts != (reconciler.OperationCounts{Total: 2, Succeeded: 1, Failed: 1}) {
		t.Errorf("last operation = %+v", got.LastOperation)
	}

	r = e.do(req{path: "/v1/stack_sets/nope"})
	r.wantStatus(t, "unknown", http.StatusNotFound)
	if ae := r.apiErr(t); ae.Code != CodeNotFound || !strings.Contains(ae.Detail, `"nope"`) {
		t.Errorf("error = %+v", ae)
	}
}

func TestListInstances(t *testing.T) {
	e := newEnv(t, nil)
	ss, _ := populate(t, e.store)
	r := e.do(req{path: "/v1/stack_sets/web/instances"})
	r.wantStatus(t, "GET", http.StatusOK)
	var got struct {
		StackSet   string         `json:"stack_set"`
		StackSetID string         `json:"stack_set_id"`
		Instances  []instanceView `json:"instances"`
	}
	r.decode(t, &got)
	want := []instanceView{
		{Region: "eu-west-1", Account: "222222222222", Status: state.InstanceOperationFailed, Reason: "command failed",
			Overrides: json.RawMessage(`{"replicas":5}`), Updated: &t0},
		{Region: "us-east-1", Account: "111111111111", Status: state.InstanceOperationComplete, Revision: rev,
			Outputs: json.RawMessage(`{"url":"http://us"}`), Updated: &t0},
	}
	if got.StackSet != "web" || got.StackSetID != ss.ID {
		t.Errorf("stack set = %q %q, want web %s", got.StackSet, got.StackSetID, ss.ID)
	}
	if diff := cmp.Diff(want, got.Instances); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	e.do(req{path: "/v1/stack_sets/nope/instances"}).wantStatus(t, "unknown", http.StatusNotFound)
}

func TestGetOperation(t *testing.T) {
	e := newEnv(t, nil)
	ss, op := populate(t, e.store)
	r := e.do(req{path: "/v1/operations/" + op.ID})
	r.wantStatus(t, "GET", http.StatusOK)
	var got operationView
	r.decode(t, &got)
	ended := t0.Add(time.Minute)
	want := operationView{
		ID: op.ID, StackSetID: ss.ID, StackSet: "web", Kind: reconciler.KindDeployStackSet, Revision: rev,
		Status: state.OperationFailed, Reason: "failure tolerance exceeded", Created: &t0, Started: &t0, Ended: &ended,
		Counts: reconciler.OperationCounts{Total: 2, Succeeded: 1, Failed: 1}, Results: op.Results,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operation (-want +got):\n%s", diff)
	}
	for _, id := range []string{"nope", "a%2Fb"} {
		r := e.do(req{path: "/v1/operations/" + id})
		r.wantStatus(t, id, http.StatusNotFound)
		if code := r.apiErr(t).Code; code != CodeNotFound {
			t.Errorf("%s: code = %q", id, code)
		}
	}
}

// A queued operation has no start or end; the view leaves them out.
func TestGetOperationQueued(t *testing.T) {
	e := newEnv(t, nil)
	ss, err := e.store.CreateStackSet("q", t0)
	if err != nil {
		t.Fatal(err)
	}
	op := state.Operation{ID: state.NewOperationID(), StackSetID: ss.ID, StackSet: "q", Kind: reconciler.KindCreateStackInstances,
		Revision: rev, Status: state.OperationQueued, Created: t0}
	if err := e.store.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	r := e.do(req{path: "/v1/operations/" + op.ID})
	r.wantStatus(t, "GET", http.StatusOK)
	var raw map[string]any
	r.decode(t, &raw)
	for _, k := range []string{"started", "ended"} {
		if _, has := raw[k]; has {
			t.Errorf("queued operation has %q: %s", k, r.body)
		}
	}
	if res, ok := raw["results"].([]any); !ok || len(res) != 0 {
		t.Errorf("results = %v, want []", raw["results"])
	}
}

func TestEvents(t *testing.T) {
	e := newEnv(t, nil)
	_, op := populate(t, e.store)
	path := "/v1/operations/" + op.ID + "/events"
	tests := []struct {
		name        string
		query       string
		version     string
		want        int
		wantSeqs    []uint64
		wantLastSeq *uint64
	}{
		{name: "1.0", want: http.StatusOK, wantSeqs: []uint64{1, 2, 3}},
		{name: "1.1", version: "1.1", want: http.StatusOK, wantSeqs: []uint64{1, 2, 3}, wantLastSeq: ptr[uint64](3)},
		{name: "1.1 since", version: "1.1", query: "?since=1", want: http.StatusOK, wantSeqs: []uint64{2, 3}, wantLastSeq: ptr[uint64](3)},
		{name: "latest since all", version: "latest", query: "?since=3", want: http.StatusOK, wantSeqs: []uint64{}, wantLastSeq: ptr[uint64](3)},
		{name: "1.0 since", query: "?since=1", want: http.StatusBadRequest},
		{name: "1.1 since not a number", version: "1.1", query: "?since=x", want: http.StatusBadRequest},
		{name: "1.1 since negative", version: "1.1", query: "?since=-1", want: http.StatusBadRequest},
		{name: "1.1 since twice", version: "1.1", query: "?since=1&since=2", want: http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.version != "" {
				h[VersionHeader] = tc.version
			}
			r := e.do(req{path: path + tc.query, header: h})
			r.wantStatus(t, "GET", tc.want)
			if tc.want != http.StatusOK {
				if code := r.apiErr(t).Code; code != CodeBadRequest {
					t.Errorf("code = %q", code)
				}
				return
			}
			var doc eventsDoc
			r.decode(t, &doc)
			seqs := []uint64{}
			for _, ev := range doc.Events {
				seqs = append(seqs, ev.Seq)
				if ev.OperationID != op.ID || ev.Region != "eu-west-1" {
					t.Errorf("event = %+v", ev)
				}
			}
			if diff := cmp.Diff(tc.wantSeqs, seqs); diff != "" {
				t.Errorf("seqs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLastSeq, doc.LastSeq); diff != "" {
				t.Errorf("last_seq (-want +got):\n%s", diff)
			}
			if tc.wantLastSeq == nil && strings.Contains(string(r.body), "last_seq") {
				t.Errorf("1.0 response has last_seq: %s", r.body)
			}
		})
	}
	e.do(req{path: "/v1/operations/nope/events"}).wantStatus(t, "unknown operation", http.StatusNotFound)
}

// fakePlanner records the refs it plans and answers res or err; block
// makes it wait for its context.
type fakePlanner struct {
	mu    sync.Mutex
	refs  []string
	res   *reconciler.PlanResult
	err   error
	block bool
}

func (p *fakePlanner) PlanWith(ctx context.Context, ref string, _ reconciler.PlanOptions) (*reconciler.PlanResult, error) {
	p.mu.Lock()
	p.refs = append(p.refs, ref)
	p.mu.Unlock()
	if p.block {
		<-ctx.Done()
		return nil, fmt.Errorf("fetch: %w", ctx.Err())
	}
	return p.res, p.err
}

var _ Planner = (*fakePlanner)(nil)

// notFoundErr is a Source's "no such branch or commit" (gitsource's have a
// NotFound method).
type notFoundErr struct{}

func (notFoundErr) Error() string  { return "branch not found" }
func (notFoundErr) NotFound() bool { return true }

func TestChangeSets(t *testing.T) {
	cs := &changeset.StackSetChangeSet{StackSetName: "web", Revision: rev, Action: changeset.InstanceUpdate,
		Instances: []changeset.InstanceChangeSet{}}
	cs.Add(changeset.InstanceChangeSet{Region: "eu-west-1", Account: "1", Action: changeset.InstanceCreate})
	tests := []struct {
		name       string
		planner    *fakePlanner
		noPlanner  bool
		query      string
		want       int
		wantCode   string
		wantDetail string
		wantRefs   []string
		check      func(t *testing.T, doc changeSetsDoc)
	}{
		{name: "branch", planner: &fakePlanner{res: &reconciler.PlanResult{Revision: rev, ChangeSets: []*changeset.StackSetChangeSet{cs}}},
			query: "?ref=feature/x", want: http.StatusOK, wantRefs: []string{"feature/x"},
			check: func(t *testing.T, doc changeSetsDoc) {
				if doc.Ref != "feature/x" || doc.Revision != rev || !doc.Valid || len(doc.ChangeSets) != 1 ||
					doc.ChangeSets[0].Summary.InstancesToCreate != 1 || doc.Diagnostics == nil {
					t.Errorf("doc = %+v", doc)
				}
			}},
		{name: "invalid revision", planner: &fakePlanner{res: &reconciler.PlanResult{Revision: rev,
			Diagnostics: []engine.Diagnostic{{Severity: "error", Summary: "Unsupported argument", File: "web.hcl", Line: 3}}}},
			query: "?ref=" + rev, want: http.StatusOK, wantRefs: []string{rev},
			check: func(t *testing.T, doc changeSetsDoc) {
				if doc.Valid || len(doc.Diagnostics) != 1 || doc.ChangeSets == nil || len(doc.ChangeSets) != 0 {
					t.Errorf("doc = %+v", doc)
				}
			}},
		{name: "no ref", planner: &fakePlanner{}, want: http.StatusBadRequest, wantCode: CodeBadRequest},
		{name: "empty ref", planner: &fakePlanner{}, query: "?ref=", want: http.StatusBadRequest, wantCode: CodeBadRequest},
		{name: "ref with a space", planner: &fakePlanner{}, query: "?ref=" + url.QueryEscape("a b"), want: http.StatusBadRequest, wantCode: CodeBadRequest},
		{name: "ref too long", planner: &fakePlanner{}, query: "?ref=" + strings.Repeat("a", maxRefLen+1), want: http.StatusBadRequest, wantCode: CodeBadRequest},
		{name: "no planner", noPlanner: true, query: "?ref=main", want: http.StatusServiceUnavailable, wantCode: CodeUnavailable},
		{name: "plan fails", planner: &fakePlanner{err: errors.New("fetch https://bot:ghp_secret@git.example/r.git: connection refused")},
			query: "?ref=main", want: http.StatusInternalServerError, wantCode: CodePlanFailed, wantRefs: []string{"main"},
			wantDetail: "Cannot plan main: fetch https://***@git.example/r.git: connection refused."},
		{name: "planner status error", planner: &fakePlanner{err: fmt.Errorf("resolve: %w", &statusErr{http.StatusNotFound, "stackd.unknown_ref", "no branch nope"})},
			query: "?ref=nope", want: http.StatusNotFound, wantCode: "stackd.unknown_ref", wantRefs: []string{"nope"}},
		{name: "unknown ref", planner: &fakePlanner{err: fmt.Errorf("resolve nope: %w", notFoundErr{})},
			query: "?ref=nope", want: http.StatusNotFound, wantCode: CodeNotFound, wantRefs: []string{"nope"}},
		{name: "timeout", planner: &fakePlanner{block: true}, query: "?ref=main", want: http.StatusGatewayTimeout, wantCode: CodeTimeout, wantRefs: []string{"main"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *Options) {
				if !tc.noPlanner {
					o.Planner = tc.planner
				}
				o.PlanTimeout = 200 * time.Millisecond
			})
			r := e.do(req{path: "/v1/changesets" + tc.query})
			r.wantStatus(t, "GET", tc.want)
			if tc.planner != nil {
				if diff := cmp.Diff(tc.wantRefs, tc.planner.refs); diff != "" {
					t.Errorf("planned refs (-want +got):\n%s", diff)
				}
			}
			if tc.want != http.StatusOK {
				ae := r.apiErr(t)
				if ae.Code != tc.wantCode {
					t.Errorf("code = %q, want %q", ae.Code, tc.wantCode)
				}
				if tc.wantDetail != "" && ae.Detail != tc.wantDetail {
					t.Errorf("detail = %q, want %q", ae.Detail, tc.wantDetail)
				}
				return
			}
			var doc changeSetsDoc
			r.decode(t, &doc)
			tc.check(t, doc)
		})
	}
}

func TestHealthAndReadiness(t *testing.T) {
	var (
		mu     sync.Mutex
		ready  bool
		detail = "waiting for the first fetch"
	)
	e := newEnv(t, func(o *Options) {
		o.Readiness = func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return ready, detail
		}
	})
	e.do(req{path: "/healthz", noAuth: true}).wantStatus(t, "healthz", http.StatusOK)

	r := e.do(req{path: "/readyz", noAuth: true})
	r.wantStatus(t, "readyz before", http.StatusServiceUnavailable)
	var doc readiness
	r.decode(t, &doc)
	want := readiness{Detail: detail, Errors: []apiError{{Status: 503, Code: CodeNotReady, Detail: detail}}}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("not ready (-want +got):\n%s", diff)
	}

	mu.Lock()
	ready, detail = true, "revision "+rev[:7]
	mu.Unlock()
	r = e.do(req{path: "/readyz", noAuth: true})
	r.wantStatus(t, "readyz after", http.StatusOK)
	doc = readiness{}
	r.decode(t, &doc)
	if diff := cmp.Diff(readiness{Ready: true, Detail: "revision " + rev[:7]}, doc); diff != "" {
		t.Errorf("ready (-want +got):\n%s", diff)
	}
}

// A panicking dependency is a JSON 500, and the server keeps serving.
func TestPanicIsInternalError(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Readiness = func() (bool, string) { panic("boom") } })
	r := e.do(req{path: "/readyz", noAuth: true})
	r.wantStatus(t, "panicking readiness", http.StatusInternalServerError)
	if code := r.apiErr(t).Code; code != CodeInternal {
		t.Errorf("code = %q", code)
	}
	e.do(req{path: "/healthz", noAuth: true}).wantStatus(t, "after the panic", http.StatusOK)
}

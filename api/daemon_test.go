package api

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// fakePasses is a reconciler's pass log: a trigger ends the next pass
// with res once release is closed.
type fakePasses struct {
	mu      sync.Mutex
	started uint64
	waited  []uint64
	res     *reconciler.Result
	release chan struct{}
}

// Busy: the fake runs no operation.
func (p *fakePasses) Busy() bool { return false }

func (p *fakePasses) PassesStarted() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

func (p *fakePasses) WaitPass(ctx context.Context, n uint64) (*reconciler.Result, error) {
	p.mu.Lock()
	p.waited = append(p.waited, n)
	p.mu.Unlock()
	select {
	case <-p.release:
		return p.res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestReconcileEndpoint(t *testing.T) {
	passes := &fakePasses{started: 7, release: make(chan struct{}), res: &reconciler.Result{
		Revision:   "abc123",
		Operations: []state.Operation{{ID: "op-1", StackSet: "web", Kind: state.KindDeployStackSet, Revision: "abc123", Status: state.OperationRunning}},
	}}
	close(passes.release)
	var triggers int
	var mu sync.Mutex
	e := newEnv(t, func(o *Options) {
		o.Passes = passes
		o.Trigger = func() { mu.Lock(); triggers++; mu.Unlock() }
	})

	r := e.do(req{method: http.MethodPost, path: "/v1/reconcile"})
	r.wantStatus(t, "POST /v1/reconcile", http.StatusAccepted)

	// The state: web's last operation is at the pass's revision, api's at
	// an older one (not reported).
	for name, rev := range map[string]string{"web": "abc123", "api": "old"} {
		ss, err := e.store.CreateStackSet(name, t0)
		if err != nil {
			t.Fatal(err)
		}
		op := state.Operation{ID: state.NewOperationID(), StackSetID: ss.ID, StackSet: name, Kind: state.KindDeployStackSet, Revision: rev, Status: state.OperationSucceeded,
			Results: []state.InstanceResult{{Region: "eu", Account: "1", Status: state.InstanceOperationComplete}}}
		ss.LastOperation = op.ID
		if err := e.store.EndOperation(op, ss); err != nil {
			t.Fatal(err)
		}
	}
	r = e.do(req{method: http.MethodPost, path: "/v1/reconcile?wait=true"})
	r.wantStatus(t, "POST /v1/reconcile?wait=true", http.StatusOK)
	var doc reconcileDoc
	r.decode(t, &doc)
	if len(doc.Operations) != 1 {
		t.Fatalf("operations %+v, want web's", doc.Operations)
	}
	want := reconcileDoc{Revision: "abc123", Diagnostics: doc.Diagnostics, Operations: []operationRef{{ID: doc.Operations[0].ID, StackSet: "web", Kind: "DeployStackSet", Revision: "abc123", Status: "SUCCEEDED",
		Counts: reconciler.OperationCounts{Total: 1, Succeeded: 1}}}}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("reconcile document (-want +got):\n%s", diff)
	}
	if triggers != 2 {
		t.Errorf("%d triggers for two requests, want 2", triggers)
	}
	if len(passes.waited) != 1 || passes.waited[0] != 7 {
		t.Errorf("waited for passes after %v, want after 7 (the passes started before the request)", passes.waited)
	}

	r = e.do(req{method: http.MethodPost, path: "/v1/reconcile?wait=maybe"})
	r.wantStatus(t, "wait=maybe", http.StatusBadRequest)

	off := newEnv(t, nil)
	r = off.do(req{method: http.MethodPost, path: "/v1/reconcile"})
	r.wantStatus(t, "no Passes", http.StatusNotFound)
}

// TestStateBackupEndpoint: the stream is a backup that verifies and holds
// the state's records.
func TestStateBackupEndpoint(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.store.CreateStackSet("web", t0); err != nil {
		t.Fatal(err)
	}
	r := e.do(req{path: "/v1/state/backup"})
	r.wantStatus(t, "GET /v1/state/backup", http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	info, err := state.Verify(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("the streamed backup does not verify: %v", err)
	}
	if info.Records == 0 {
		t.Errorf("backup info %+v: no records", info)
	}
	cut := r.body[:len(r.body)-10]
	if _, err := state.Verify(bytes.NewReader(cut)); err == nil {
		t.Error("a backup cut short verifies")
	}
	r = e.do(req{path: "/v1/state/backup", noAuth: true})
	r.wantStatus(t, "without the token", http.StatusUnauthorized)
}

// TestChangeSetsWithoutRef: from 1.2 on, no ref plans the deploy branch.
func TestChangeSetsWithoutRef(t *testing.T) {
	p := &fakePlanner{res: &reconciler.PlanResult{Revision: "abc"}}
	e := newEnv(t, func(o *Options) { o.Planner = p })
	r := e.do(req{path: "/v1/changesets", header: map[string]string{VersionHeader: "1.1"}})
	r.wantStatus(t, "1.1 without ref", http.StatusBadRequest)
	r = e.do(req{path: "/v1/changesets", header: map[string]string{VersionHeader: "1.2"}})
	r.wantStatus(t, "1.2 without ref", http.StatusOK)
	if diff := cmp.Diff([]string{""}, p.refs); diff != "" {
		t.Errorf("planned refs (-want +got):\n%s", diff)
	}
}

// TestStateBackupNeverOpen: without a Token the API is open (loopback),
// but the backup, which holds sensitive values, needs the run's
// LocalToken, and is refused outright when there is none.
func TestStateBackupNeverOpen(t *testing.T) {
	for _, local := range []string{"", "local-run-token"} {
		e := newEnv(t, func(o *Options) { o.Token, o.AllowUnauthenticated, o.LocalToken = "", true, local })
		e.do(req{path: "/v1/stack_sets", noAuth: true}).wantStatus(t, "an open route", http.StatusOK)
		e.do(req{path: "/v1/state/backup", noAuth: true}).wantStatus(t, "the backup without a token", http.StatusUnauthorized)
		e.do(req{path: "/v1/state/backup", noAuth: true, header: map[string]string{"Authorization": "Bearer wrong"}}).
			wantStatus(t, "the backup with a wrong token", http.StatusUnauthorized)
		if local == "" {
			continue
		}
		r := e.do(req{path: "/v1/state/backup", noAuth: true, header: map[string]string{"Authorization": "Bearer " + local}})
		r.wantStatus(t, "the backup with the local token", http.StatusOK)
		if _, err := state.Verify(bytes.NewReader(r.body)); err != nil {
			t.Fatalf("the backup does not verify: %v", err)
		}
	}
}

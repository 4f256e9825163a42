package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/waitcondition"
)

// The engine with the real wait_condition provider: its handles are kept
// in a map store (the daemon keeps them in Badger), its signals delivered
// as the HTTP API would deliver them.

type mapStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mapStore) Get(k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k], nil
}

func (s *mapStore) Put(k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = v
	return nil
}

func (s *mapStore) Delete(k string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	return nil
}

// testClock is a fake clock: timers fire when Advance passes them, and
// armed receives one value per After call (something is about to block).
type testClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []testTimer
	armed  chan time.Duration
}

type testTimer struct {
	at time.Time
	ch chan time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), armed: make(chan time.Duration, 1000)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.timers = append(c.timers, testTimer{at: c.now.Add(d), ch: ch})
	c.armed <- d
	return ch
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !c.now.Before(t.at) {
			t.ch <- c.now
			continue
		}
		kept = append(kept, t)
	}
	c.timers = kept
}

// blocked waits until something armed a timer and returns its duration.
func (c *testClock) blocked(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.armed:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("nothing blocked on the clock")
		return 0
	}
}

// signaler is a resource that, when created, POSTs its body to url: a
// server that boots and signals its wait condition.
type signaler struct {
	*recorder
	wp *waitcondition.Provider
}

func (s *signaler) Schema() provider.Schema {
	return provider.Schema{Properties: map[string]provider.Property{
		"url":  {Type: cty.String, Required: true, Sensitive: true},
		"body": {Type: cty.String},
	}}
}

func (s *signaler) Create(_ context.Context, req provider.Request) (provider.Result, error) {
	s.log("create %s", req.LogicalID)
	u := req.Properties.GetAttr("url").AsString()
	_, token, _ := strings.Cut(u, waitcondition.SignalsPath)
	body := ""
	if b := req.Properties.GetAttr("body"); !b.IsNull() {
		body = b.AsString()
	}
	if err := s.wp.Deliver(token, []byte(body), "application/json"); err != nil {
		return provider.Result{}, err
	}
	return provider.Result{PhysicalID: "sig-" + req.RequestID}, nil
}

type waitEnv struct {
	clk *testClock
	wp  *waitcondition.Provider
	rec *recorder
	e   *Engine
	reg provider.Registry
}

func newWaitEnv(t *testing.T) *waitEnv {
	t.Helper()
	clk := newTestClock()
	wp, err := waitcondition.New(waitcondition.Options{Key: []byte("0123456789abcdef0123456789abcdef"), ExternalURL: "http://127.0.0.1:7070", Store: &mapStore{m: map[string][]byte{}}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	reg := provider.Registry{"rec": rec, "wait_condition": wp, "signal": &signaler{recorder: rec, wp: wp}}
	e := New(reg)
	e.SetClock(clk)
	return &waitEnv{clk: clk, wp: wp, rec: rec, e: e, reg: reg}
}

func (w *waitEnv) instance(t *testing.T, tmpl string) *Instance {
	t.Helper()
	defs := mustLoad(t, map[string]string{"defs.hcl": `
stack_set "web" {
  template = "./t"
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`, "t/main.hcl": tmpl}, w.reg)
	return &Instance{StackSet: defs.StackSets[0], StackSetID: "ss-1", Target: config.Target{Region: "eu", Account: "111"}}
}

// applyAsync plans and applies in a goroutine.
func (w *waitEnv) applyAsync(t *testing.T, ctx context.Context, inst *Instance, j *memJournal) chan error {
	t.Helper()
	p, diags := w.e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatalf("plan: %s", diags.Error())
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.e.Apply(ctx, p, j, nil)
		done <- err
	}()
	return done
}

func handleToken(t *testing.T, j *memJournal, addr string) string {
	t.Helper()
	for _, r := range j.list() {
		if r.Address == addr {
			var attrs map[string]any
			if err := json.Unmarshal(r.Attributes, &attrs); err != nil {
				t.Fatal(err)
			}
			u, _ := attrs["handle_url"].(string)
			_, tok, ok := strings.Cut(u, waitcondition.SignalsPath)
			if !ok {
				t.Fatalf("%s has no handle_url: %s", addr, r.Attributes)
			}
			return tok
		}
	}
	t.Fatalf("%s is not recorded", addr)
	return ""
}

func attr(t *testing.T, j *memJournal, addr, name string) any {
	t.Helper()
	for _, r := range j.list() {
		if r.Address == addr {
			var attrs map[string]any
			if err := json.Unmarshal(r.Attributes, &attrs); err != nil {
				t.Fatal(err)
			}
			return attrs[name]
		}
	}
	return nil
}

// Signalers reference handle_url and run before the wait; a resource that
// reads the data runs after the signals arrived, with them.
func TestWaitConditionSignalledBySignalers(t *testing.T) {
	w := newWaitEnv(t)
	inst := w.instance(t, `
resource "wait_condition" "ready" {
  count   = 2
  timeout = "5m"
}
resource "signal" "boot" {
  count = 2
  url   = wait_condition.ready.handle_url
  body  = jsonencode({ id = "web-${count.index}", data = "10.0.0.${count.index}" })
}
resource "rec" "lb" {
  name    = "lb"
  content = jsonencode(wait_condition.ready.data)
}
output "status" { value = wait_condition.ready.status }
`)
	j := newJournal()
	p, diags := w.e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	res, err := w.e.Apply(context.Background(), p, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Outputs["status"]; got.Type() != cty.String || got.AsString() != "SUCCESS" {
		t.Errorf("output status = %#v", got)
	}
	if got := w.rec.world["phys-lb"].GetAttr("content").AsString(); got != `{"web-0":"10.0.0.0","web-1":"10.0.0.1"}` {
		t.Errorf("lb content = %s, want the signals' data", got)
	}
	if got := attr(t, j, "wait_condition.ready", "status"); got != "SUCCESS" {
		t.Errorf("recorded status %v", got)
	}
	want := []string{"create signal.boot[0]", "create signal.boot[1]"}
	if len(w.rec.calls) < 3 || w.rec.calls[0] != want[0] || w.rec.calls[1] != want[1] || !strings.HasPrefix(w.rec.calls[2], "create rec.lb ") {
		t.Errorf("calls %v, want the signalers before the lb", w.rec.calls)
	}
	// Nothing changes: the next plan is a no-op and the apply does not wait.
	p2, diags := w.e.Plan(inst, j.list())
	if diags.HasErrors() || p2.HasChanges() {
		t.Fatalf("re-plan: %v %v", diags, actions(p2))
	}
	if _, err := w.e.Apply(context.Background(), p2, j, nil); err != nil {
		t.Fatal(err)
	}
}

// A resource that depends_on the wait condition, and the end of the
// instance's apply, wait for signals sent from outside.
func TestWaitConditionBlocksDependentsUntilSignalled(t *testing.T) {
	w := newWaitEnv(t)
	inst := w.instance(t, `
resource "wait_condition" "ready" { timeout = "10m" }
resource "rec" "before" {
  name    = "before"
  content = wait_condition.ready.id
}
resource "rec" "after" {
  name       = "after"
  depends_on = [wait_condition.ready, rec.before]
}
`)
	j := newJournal()
	done := w.applyAsync(t, context.Background(), inst, j)
	if d := w.clk.blocked(t); d != 10*time.Minute {
		t.Fatalf("waiting for %s, want the 10m timeout", d)
	}
	calls := strings.Join(w.rec.calls, "\n")
	if !strings.Contains(calls, "create rec.before") || strings.Contains(calls, "create rec.after") {
		t.Fatalf("calls while waiting:\n%s", calls)
	}
	w.clk.Advance(9 * time.Minute)
	if err := w.wp.Deliver(handleToken(t, j, "wait_condition.ready"), []byte(`{"status":"SUCCESS","data":"migrated"}`), ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(w.rec.calls, "\n"), "create rec.after") {
		t.Errorf("rec.after was not created after the signal: %v", w.rec.calls)
	}
	if got := attr(t, j, "wait_condition.ready", "data"); got.(map[string]any)["1"] != "migrated" {
		t.Errorf("data %v", got)
	}
}

// No signal within the timeout: the instance fails, nothing that needs
// the condition is applied, and the handle is gone, so the next apply
// makes a new one (and re-runs what signals it) instead of waiting on a
// dead handle.
func TestWaitConditionTimesOut(t *testing.T) {
	w := newWaitEnv(t)
	inst := w.instance(t, `
resource "wait_condition" "ready" { timeout = "2m" }
resource "rec" "boot" {
  name    = "boot"
  content = wait_condition.ready.handle_url
}
resource "rec" "lb" {
  name    = "lb"
  content = wait_condition.ready.status
}
`)
	j := newJournal()
	done := w.applyAsync(t, context.Background(), inst, j)
	w.clk.blocked(t)
	first := handleToken(t, j, "wait_condition.ready")
	w.clk.Advance(2 * time.Minute)
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "wait condition wait_condition.ready: timed out after 2m0s with 0 of 1 SUCCESS signals") {
		t.Fatalf("apply: %v", err)
	}
	if strings.Contains(strings.Join(w.rec.calls, "\n"), "create rec.lb") {
		t.Errorf("rec.lb was applied although its wait condition timed out: %v", w.rec.calls)
	}
	for _, r := range j.list() {
		if r.Address == "wait_condition.ready" {
			t.Fatalf("the timed-out wait condition is still recorded: %+v", r)
		}
	}
	p, diags := w.e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	a := actions(p)
	if a["wait_condition.ready"] != "Create" || a["rec.boot"] != "Update" {
		t.Errorf("next plan %v, want a new wait condition and its signaler updated with the new handle", a)
	}
	done = w.applyAsync(t, context.Background(), inst, j)
	w.clk.blocked(t)
	second := handleToken(t, j, "wait_condition.ready")
	if second == first {
		t.Fatal("the next apply reused the dead handle")
	}
	if err := w.wp.Deliver(second, nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestWaitConditionFailureSignalFails(t *testing.T) {
	w := newWaitEnv(t)
	inst := w.instance(t, `
resource "wait_condition" "ready" {}
resource "signal" "boot" {
  url  = wait_condition.ready.handle_url
  body = jsonencode({ status = "FAILURE", reason = "disk full" })
}
`)
	j := newJournal()
	p, _ := w.e.Plan(inst, j.list())
	_, err := w.e.Apply(context.Background(), p, j, nil)
	if err == nil || !strings.Contains(err.Error(), `FAILURE signal "1": disk full`) {
		t.Fatalf("apply: %v", err)
	}
}

// A wait interrupted by a stop resumes on the same handle with the
// signals that arrived meanwhile.
func TestWaitConditionResumesAfterInterruption(t *testing.T) {
	w := newWaitEnv(t)
	inst := w.instance(t, `
resource "wait_condition" "ready" {
  count   = 2
  timeout = "1h"
}
`)
	j := newJournal()
	ctx, cancel := context.WithCancel(context.Background())
	done := w.applyAsync(t, ctx, inst, j)
	w.clk.blocked(t)
	tok := handleToken(t, j, "wait_condition.ready")
	if err := w.wp.Deliver(tok, []byte(`{"id":"a"}`), ""); err != nil {
		t.Fatal(err)
	}
	w.clk.blocked(t) // woke with 1 of 2, waits again
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("apply: %v", err)
	}
	if got := attr(t, j, "wait_condition.ready", "status"); got != "WAITING" {
		t.Fatalf("after the stop the condition is %v, want WAITING and recorded", got)
	}
	// The signal that arrives while stackd is down is kept.
	if err := w.wp.Deliver(tok, []byte(`{"id":"b"}`), ""); err != nil {
		t.Fatal(err)
	}
	done = w.applyAsync(t, context.Background(), inst, j)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if handleToken(t, j, "wait_condition.ready") != tok {
		t.Error("the resumed apply issued a new handle")
	}
	if got := attr(t, j, "wait_condition.ready", "status"); got != "SUCCESS" {
		t.Errorf("status %v", got)
	}
}

// A signaler that depends on something needing the wait condition
// complete can never signal: a diagnostic at load, not a hang at apply.
func TestWaitConditionDeadlockIsACycle(t *testing.T) {
	w := newWaitEnv(t)
	_, diags := load(t, map[string]string{"defs.hcl": `
stack_set "web" {
  template = "./t"
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`, "t/main.hcl": `
resource "wait_condition" "ready" {}
resource "rec" "lb" {
  name    = "lb"
  content = wait_condition.ready.status
}
resource "signal" "boot" {
  url        = wait_condition.ready.handle_url
  depends_on = [rec.lb]
}
`}, w.reg)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "rec.lb needs wait_condition.ready complete, so it must run after signal.boot") {
		t.Fatalf("diagnostics: %v", diags)
	}
}

package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/state"
)

// sseMsg is one Server-Sent Event as a client parses it.
type sseMsg struct {
	id, typ string
	data    map[string]any
}

// sseClient reads a stream in a goroutine and hands its events over.
type sseClient struct {
	res    *http.Response
	cancel context.CancelFunc
	msgs   chan sseMsg
	ended  chan struct{}
}

func openSSE(t *testing.T, e *env, header map[string]string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rq, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	rq.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range header {
		rq.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(rq)
	if err != nil {
		cancel()
		t.Fatalf("GET /v1/events: %v", err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		res.Body.Close()
		t.Fatalf("GET /v1/events: status %d, want 200", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	c := &sseClient{res: res, cancel: cancel, msgs: make(chan sseMsg, 1024), ended: make(chan struct{})}
	go func() {
		defer close(c.ended)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var m sseMsg
		var data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.typ != "" {
					_ = json.Unmarshal([]byte(data), &m.data)
					c.msgs <- m
				}
				m, data = sseMsg{}, ""
			case strings.HasPrefix(line, "id: "):
				m.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				m.typ = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *sseClient) close() {
	c.cancel()
	c.res.Body.Close()
	<-c.ended
}

// next returns the next event, failing after a generous deadline (the
// events are published before next is called: this only bounds a bug).
func (c *sseClient) next(t *testing.T) sseMsg {
	t.Helper()
	select {
	case m := <-c.msgs:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no event arrived")
	}
	return sseMsg{}
}

// seedOperation records a stack set with a running rollout operation.
func seedOperation(t *testing.T, st *state.Store) (state.StackSet, state.Operation) {
	t.Helper()
	ss, err := st.CreateStackSet("web", t0)
	if err != nil {
		t.Fatal(err)
	}
	op := state.Operation{ID: state.NewOperationID(), StackSetID: ss.ID, StackSet: ss.Name, Kind: state.KindDeployStackSet,
		Revision: strings.Repeat("a", 40), Status: state.OperationRunning, Created: t0, Started: t0, Instances: 2,
		Rollout: &state.RolloutProgress{Pattern: "canary", Batch: 1, Batches: 2, Phase: state.RolloutDeploying,
			Plan: []state.RolloutBatch{{Size: 1, Members: []state.RolloutMember{{Region: "r1", Account: "a1"}}}, {Size: 1, Members: []state.RolloutMember{{Region: "r1", Account: "a2"}}}}}}
	if err := st.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	ss.LastOperation = op.ID
	if err := st.PutStackSet(ss); err != nil {
		t.Fatal(err)
	}
	return ss, op
}

func TestEventsStreamResumeAndReset(t *testing.T) {
	hub := NewEventHub(nil, HubOptions{})
	e := newEnv(t, func(o *Options) { o.Events = hub })
	hub.store = e.store
	_, op := seedOperation(t, e.store)
	if err := hub.Poll(); err != nil { // the baseline: nothing published
		t.Fatal(err)
	}
	c := openSSE(t, e, nil)

	if _, err := e.store.AppendEvent(state.Event{OperationID: op.ID, Region: "r1", Account: "a1", Status: string(state.InstanceOperationInProgress)}); err != nil {
		t.Fatal(err)
	}
	op.Rollout.Phase = state.RolloutWaitingForPromotion
	if err := e.store.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	if err := hub.Poll(); err != nil {
		t.Fatal(err)
	}
	m := c.next(t)
	if m.typ != EventEvents || m.data["operation"] != op.ID || m.data["stack_set"] != "web" {
		t.Fatalf("first event = %s %v, want events of %s", m.typ, m.data, op.ID)
	}
	evs, _ := m.data["events"].([]any)
	if len(evs) != 1 || evs[0].(map[string]any)["account"] != "a1" {
		t.Errorf("events = %v, want the one of a1", evs)
	}
	m = c.next(t)
	ro, _ := m.data["rollout"].(map[string]any)
	if m.typ != EventOperation || ro["phase"] != string(state.RolloutWaitingForPromotion) {
		t.Fatalf("second event = %s %v, want the operation waiting for promotion", m.typ, m.data)
	}
	lastID := m.id
	c.close()

	// While the client is away: the operation ends.
	op.Status, op.Ended = state.OperationSucceeded, t0.Add(time.Minute)
	op.Rollout.Phase = state.RolloutDone
	if err := e.store.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	if err := hub.Poll(); err != nil {
		t.Fatal(err)
	}
	c2 := openSSE(t, e, map[string]string{"Last-Event-ID": lastID})
	m = c2.next(t)
	if m.typ != EventOperation || m.data["status"] != string(state.OperationSucceeded) {
		t.Fatalf("after resuming: %s %v, want the operation SUCCEEDED", m.typ, m.data)
	}
	select {
	case extra := <-c2.msgs:
		t.Errorf("replayed %s %v after the last missed event", extra.typ, extra.data)
	default:
	}

	// An id of another daemon run: reset.
	c3 := openSSE(t, e, map[string]string{"Last-Event-ID": "0123-7"})
	if m := c3.next(t); m.typ != EventReset {
		t.Fatalf("foreign id: %s, want reset", m.typ)
	}
}

func TestEventsSlowClientNeverBlocksPublisher(t *testing.T) {
	hub := NewEventHub(nil, HubOptions{ClientBuffer: 4, History: 16})
	slow, _, _, ok := hub.subscribe("")
	if !ok {
		t.Fatal("subscribe refused")
	}
	fast, _, _, _ := hub.subscribe("")
	got := 0
	for i := range 100 {
		hub.Publish(EventStackSet, map[string]int{"i": i}) // never blocks: the test would hang
		select {
		case <-fast.ch:
			got++
		default:
		}
	}
	if got != 100 {
		t.Errorf("fast client got %d of 100", got)
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("the slow client was not dropped")
	}
	if hub.Dropped() != 1 || hub.Clients() != 1 {
		t.Errorf("dropped %d, clients %d; want 1, 1", hub.Dropped(), hub.Clients())
	}
	// History keeps the last 16: resuming from an id older than that is
	// a reset, from one inside it a replay of what follows.
	if _, _, reset, _ := hub.subscribe(hub.id(10)); !reset {
		t.Error("resume from an id the history lost: no reset")
	}
	_, replay, reset, _ := hub.subscribe(hub.id(95))
	if reset || len(replay) != 5 || replay[0].n != 96 {
		t.Errorf("resume from 95: reset %v, %d replayed; want 5 from 96", reset, len(replay))
	}
}

func TestEventsLimitsAndAuth(t *testing.T) {
	hub := NewEventHub(nil, HubOptions{MaxClients: 1})
	console := func(r *http.Request) bool { return r.Header.Get("Cookie") == "session=ok" }
	e := newEnv(t, func(o *Options) { o.Events = hub; o.Console = console })
	hub.store = e.store
	if r := e.do(req{method: http.MethodGet, path: "/v1/events", noAuth: true}); r.status != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", r.status)
	}
	_ = openSSE(t, e, nil)
	if r := e.do(req{method: http.MethodGet, path: "/v1/events"}); r.status != http.StatusServiceUnavailable {
		t.Errorf("over MaxClients: %d, want 503", r.status)
	}
	// The console's session is taken instead of the token on the bearer
	// routes, never on the secret ones.
	if r := e.do(req{method: http.MethodGet, path: "/v1/stack_sets", noAuth: true, header: map[string]string{"Cookie": "session=ok"}}); r.status != http.StatusOK {
		t.Errorf("console session: %d, want 200", r.status)
	}
	if r := e.do(req{method: http.MethodGet, path: "/v1/state/backup", noAuth: true, header: map[string]string{"Cookie": "session=ok", VersionHeader: "latest"}}); r.status != http.StatusUnauthorized {
		t.Errorf("console session on the backup: %d, want 401", r.status)
	}
	if r := e.do(req{method: http.MethodGet, path: "/v1/events?last_event_id=" + strings.Repeat("x", 65)}); r.status != http.StatusBadRequest {
		t.Errorf("long last_event_id: %d", r.status)
	}
}

// BenchmarkEventsFanOut100 publishes events of 50 instance results (what a
// rollout batch produces) to 100 browsers reading real streams on
// 127.0.0.1: ns/op is what one publish costs the hub's poller (a rollout
// never waits for it at all: the hub reads the state beside it), dropped/op
// how many clients fell behind their 256-message buffer and were dropped.
func BenchmarkEventsFanOut100(b *testing.B) {
	hub := NewEventHub(nil, HubOptions{MaxClients: 200})
	st, err := state.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	srv, err := New(Options{Store: st, Token: testToken, Events: hub})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 100 {
		rq, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/v1/events", nil)
		rq.Header.Set("Authorization", "Bearer "+testToken)
		res, err := ts.Client().Do(rq)
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("stream: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer res.Body.Close()
			_, _ = io.Copy(io.Discard, res.Body)
		}()
	}
	for hub.Clients() < 100 {
		runtime.Gosched()
	}
	evs := make([]state.Event, 50)
	for i := range evs {
		evs[i] = state.Event{OperationID: "op", Seq: uint64(i), Region: "eu-west-1", Account: fmt.Sprintf("%012d", i), Status: string(state.InstanceOperationComplete)}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hub.Publish(EventEvents, eventsEvent{StackSet: "web", Operation: "op", Events: evs})
	}
	b.StopTimer()
	b.ReportMetric(float64(hub.Dropped())/float64(b.N), "dropped/op")
	cancel()
	ts.CloseClientConnections()
	wg.Wait()
}

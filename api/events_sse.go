package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stackd/stackd/internal/clock"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// Live events (GET /v1/events, Server-Sent Events). The daemon's state is
// the only source of truth: an EventHub watches it (one reader for every
// client, Poll at HubOptions.Interval) and fans what changed out to its
// subscribers. A rollout never waits for the hub or for a client: the hub
// reads the state beside it (Badger's reads do not block writes), and a
// publish hands each client its event without blocking: a client whose
// buffer is full is dropped (its stream ends) and reconnects with
// Last-Event-ID, replayed from the hub's history while it still holds
// the ids that client missed, or told to "reset" (reload what it shows
// through the read API) when it does not.
//
// Event types (the "event:" field), each with a JSON "data:" object:
//
//	stack_set  {name, id, revision, status, last_operation}: a stack set
//	           appeared or its revision, status or last operation changed.
//	operation  {stack_set, id, kind, status, reason, revision, counts,
//	           rollout}: an operation started or changed status, counts or
//	           rollout progress (batch, phase).
//	events     {stack_set, operation, events: [...]}: new entries of an
//	           operation's event log (state.Event: instance status
//	           changes with region and account, resource phases, gate
//	           results and health-check answers, promotions), in order, at
//	           most MaxEventsPerMessage per message.
//	drift      {stack_set, status, drifted_instances, checked_instances}:
//	           the stack set's drift summary changed.
//	reset      {reason}: the ids asked for are gone (another daemon run,
//	           or older than the history): reload, then follow on.
//
// Ids are "<run>-<n>": run names this daemon process, n counts its events.

// SSE event types.
const (
	EventStackSet  = "stack_set"
	EventOperation = "operation"
	EventEvents    = "events"
	EventDrift     = "drift"
	EventReset     = "reset"
)

// Defaults of HubOptions.
const (
	DefaultHubInterval     = 500 * time.Millisecond
	DefaultClientBuffer    = 256
	DefaultMaxClients      = 256
	DefaultHubHistory      = 4096
	DefaultHeartbeat       = 15 * time.Second
	DefaultWakeDelay       = 50 * time.Millisecond
	MaxEventsPerMessage    = 500
	defaultDriftEveryPolls = 10
	// sseWriteTimeout bounds one write to a client; the stream is long
	// lived, so it replaces the server's WriteTimeout.
	sseWriteTimeout = time.Minute
)

// HubOptions configure an EventHub. Zero fields take the defaults.
type HubOptions struct {
	// Interval between two reads of the state (DefaultHubInterval).
	Interval time.Duration
	// ClientBuffer is how many messages a client may lag behind before
	// it is dropped (DefaultClientBuffer).
	ClientBuffer int
	// MaxClients bounds the streams served at once; the next gets 503
	// (DefaultMaxClients).
	MaxClients int
	// History is how many messages are kept for Last-Event-ID
	// (DefaultHubHistory).
	History int
	// Heartbeat is the interval of the comment lines that keep idle
	// streams open through proxies (DefaultHeartbeat).
	Heartbeat time.Duration
	// DriftEvery: the drift summaries (a scan of every instance) are read
	// every DriftEvery polls (10).
	DriftEvery int
	// WakeDelay is how long Run waits after a Wake before it reads the
	// state, so that a burst of wakes (a rollout settling many instances)
	// costs one read (DefaultWakeDelay).
	WakeDelay time.Duration
	// Clock drives Run and the heartbeats (clock.Real).
	Clock clock.Clock
}

// hubMessage is one published event.
type hubMessage struct {
	n    uint64
	typ  string
	data []byte
}

// subscriber is one client's stream.
type subscriber struct {
	ch   chan hubMessage
	gone chan struct{} // closed when the hub drops the client
}

// setSnap and opSnap are what the hub last saw of a stack set and an
// operation.
type setSnap struct {
	name, revision, status, lastOp string
	drift                          string
}

type opSnap struct {
	key   string
	seq   uint64 // last event seq published
	ended bool
}

// EventHub watches the state and fans its changes out to SSE clients.
// Create it with NewEventHub, run Run in a goroutine, and hand it to the
// server (Options.Events). Safe for concurrent use.
type EventHub struct {
	store *state.Store
	opts  HubOptions
	run   string

	mu      sync.Mutex
	n       uint64
	ring    []hubMessage // the last History messages, oldest first
	clients map[*subscriber]struct{}

	// Poll's own state (pollMu).
	pollMu  sync.Mutex
	polls   int
	started bool
	sets    map[string]setSnap
	ops     map[string]opSnap

	dropped atomic.Int64
	wake    chan struct{}
}

// NewEventHub returns a hub watching store.
func NewEventHub(store *state.Store, opts HubOptions) *EventHub {
	if opts.Interval <= 0 {
		opts.Interval = DefaultHubInterval
	}
	if opts.ClientBuffer <= 0 {
		opts.ClientBuffer = DefaultClientBuffer
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = DefaultMaxClients
	}
	if opts.History <= 0 {
		opts.History = DefaultHubHistory
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.DriftEvery <= 0 {
		opts.DriftEvery = defaultDriftEveryPolls
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.WakeDelay <= 0 {
		opts.WakeDelay = DefaultWakeDelay
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &EventHub{
		store: store, opts: opts, run: hex.EncodeToString(b[:]),
		clients: map[*subscriber]struct{}{}, sets: map[string]setSnap{}, ops: map[string]opSnap{},
		wake: make(chan struct{}, 1),
	}
}

// Run polls the state every Interval, and WakeDelay after a Wake, until
// ctx ends. A failed read is retried at the next tick.
func (h *EventHub) Run(ctx context.Context) {
	for {
		_ = h.Poll()
		select {
		case <-ctx.Done():
			return
		case <-h.opts.Clock.After(h.opts.Interval):
		case <-h.wake:
			select {
			case <-ctx.Done():
				return
			case <-h.opts.Clock.After(h.opts.WakeDelay):
			}
		}
	}
}

// Wake tells Run that the state changed (the reconciler settled an
// instance, started or ended an operation): it reads it WakeDelay later
// instead of at its next tick, so the streams lag the controller by less
// than Interval. It never blocks; wakes before that read are one.
func (h *EventHub) Wake() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Dropped counts the clients dropped for lagging behind.
func (h *EventHub) Dropped() int64 { return h.dropped.Load() }

// Clients counts the streams open now.
func (h *EventHub) Clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// Publish sends one event of type typ to every client without blocking:
// a client whose buffer is full is dropped.
func (h *EventHub) Publish(typ string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	m := hubMessage{n: h.n, typ: typ, data: data}
	if len(h.ring) >= h.opts.History {
		copy(h.ring, h.ring[1:])
		h.ring = h.ring[:len(h.ring)-1]
	}
	h.ring = append(h.ring, m)
	for c := range h.clients {
		select {
		case c.ch <- m:
		default:
			delete(h.clients, c)
			close(c.gone)
			h.dropped.Add(1)
		}
	}
}

// subscribe registers a client and returns the messages after lastID it
// missed; reset when they are not all held any more.
func (h *EventHub) subscribe(lastID string) (c *subscriber, replay []hubMessage, reset bool, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.clients) >= h.opts.MaxClients {
		return nil, nil, false, false
	}
	if lastID != "" {
		run, num, found := strings.Cut(lastID, "-")
		n, err := strconv.ParseUint(num, 10, 64)
		switch {
		case !found || err != nil || run != h.run || n > h.n:
			reset = true
		case len(h.ring) > 0 && n+1 < h.ring[0].n:
			reset = true
		default:
			for _, m := range h.ring {
				if m.n > n {
					replay = append(replay, m)
				}
			}
		}
	}
	c = &subscriber{ch: make(chan hubMessage, h.opts.ClientBuffer), gone: make(chan struct{})}
	h.clients[c] = struct{}{}
	return c, replay, reset, true
}

func (h *EventHub) unsubscribe(c *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		close(c.gone)
	}
}

// id is the SSE id of message n.
func (h *EventHub) id(n uint64) string { return h.run + "-" + strconv.FormatUint(n, 10) }

// Poll reads the state once and publishes what changed since the last
// Poll. The first Poll only takes note of what is there.
func (h *EventHub) Poll() error {
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	sets, err := h.store.ListStackSets()
	if err != nil {
		return fmt.Errorf("events: list stack sets: %w", err)
	}
	h.polls++
	first := !h.started
	h.started = true
	driftNow := first || h.polls%h.opts.DriftEvery == 0
	live := map[string]bool{}
	var errs []error
	for _, ss := range sets {
		prev, had := h.sets[ss.ID]
		cur := setSnap{name: ss.Name, revision: ss.Revision, status: string(ss.Status), lastOp: ss.LastOperation, drift: prev.drift}
		if !first && (!had || cur.name != prev.name || cur.revision != prev.revision || cur.status != prev.status || cur.lastOp != prev.lastOp) {
			h.Publish(EventStackSet, map[string]any{
				"name": ss.Name, "id": ss.ID, "revision": ss.Revision, "status": ss.Status, "last_operation": ss.LastOperation,
			})
		}
		if ss.LastOperation != "" {
			live[ss.LastOperation] = true
			if err := h.pollOperation(ss.Name, ss.LastOperation, first); err != nil {
				errs = append(errs, err)
			}
		}
		if driftNow {
			d, doc, err := h.drift(ss)
			if err != nil {
				errs = append(errs, err)
			} else {
				if !first && d != prev.drift {
					h.Publish(EventDrift, doc)
				}
				cur.drift = d
			}
		}
		h.sets[ss.ID] = cur
	}
	for id := range h.ops {
		if !live[id] {
			delete(h.ops, id)
		}
	}
	for id := range h.sets {
		if !hasSet(sets, id) {
			delete(h.sets, id)
		}
	}
	return errors.Join(errs...)
}

func hasSet(sets []state.StackSet, id string) bool {
	for _, ss := range sets {
		if ss.ID == id {
			return true
		}
	}
	return false
}

// operationEvent is the data of an "operation" event.
type operationEvent struct {
	StackSet string                     `json:"stack_set"`
	ID       string                     `json:"id"`
	Kind     state.OperationKind        `json:"kind"`
	Status   state.OperationStatus      `json:"status"`
	Reason   string                     `json:"reason,omitempty"`
	Revision string                     `json:"revision"`
	Counts   reconciler.OperationCounts `json:"counts"`
	Ended    *time.Time                 `json:"ended,omitempty"`
	Rollout  *reconciler.RolloutStatus  `json:"rollout,omitempty"`
}

// eventsEvent is the data of an "events" event.
type eventsEvent struct {
	StackSet  string        `json:"stack_set"`
	Operation string        `json:"operation"`
	Events    []state.Event `json:"events"`
}

func (h *EventHub) pollOperation(name, id string, first bool) error {
	prev, had := h.ops[id]
	if had && prev.ended {
		return nil
	}
	op, err := h.store.Operation(id)
	if err != nil {
		return fmt.Errorf("events: operation %s: %w", id, err)
	}
	counts := reconciler.Counts(&op)
	key := fmt.Sprintf("%s|%s|%v", op.Status, op.Reason, counts)
	var ro *reconciler.RolloutStatus
	if p := op.Rollout; p != nil {
		ro = &reconciler.RolloutStatus{Pattern: p.Pattern, Batch: p.Batch, Batches: p.Batches, Phase: p.Phase,
			FailedBatch: p.FailedBatch, PreviousRevision: p.PreviousRevision, RollbackBatch: p.RollbackBatch}
		if len(p.Plan) > 0 {
			ro.Sizes = p.BatchSizes()
		}
		key += fmt.Sprintf("|%d|%d|%s|%d|%d", p.Batch, p.Batches, p.Phase, p.FailedBatch, p.RollbackBatch)
	}
	cur := opSnap{key: key, seq: prev.seq, ended: !op.Ended.IsZero()}
	// Events first, then the operation's new state: a client that sees
	// an operation end has its last events already.
	evs, err := h.store.Events(id)
	if err != nil {
		return fmt.Errorf("events: events of %s: %w", id, err)
	}
	var fresh []state.Event
	for _, ev := range evs {
		if ev.Seq > cur.seq {
			fresh = append(fresh, ev)
			cur.seq = ev.Seq
		}
	}
	if !first {
		for len(fresh) > 0 {
			k := min(len(fresh), MaxEventsPerMessage)
			h.Publish(EventEvents, eventsEvent{StackSet: name, Operation: id, Events: fresh[:k]})
			fresh = fresh[k:]
		}
		if !had || key != prev.key {
			var ended *time.Time
			if !op.Ended.IsZero() {
				ended = &op.Ended
			}
			h.Publish(EventOperation, operationEvent{
				StackSet: name, ID: op.ID, Kind: op.Kind, Status: op.Status, Reason: op.Reason, Revision: op.Revision,
				Counts: counts, Ended: ended, Rollout: ro,
			})
		}
	}
	h.ops[id] = cur
	return nil
}

// drift returns the stack set's drift summary and its event's data.
func (h *EventHub) drift(ss state.StackSet) (string, map[string]any, error) {
	ins, err := h.store.Instances(ss.ID)
	if err != nil {
		return "", nil, fmt.Errorf("events: instances of %s: %w", ss.Name, err)
	}
	var checked, drifted int
	for _, in := range ins {
		if in.Drift != nil {
			checked++
			if in.Drift.Status == "DRIFTED" {
				drifted++
			}
		}
	}
	status := "NOT_CHECKED"
	switch {
	case drifted > 0:
		status = "DRIFTED"
	case checked > 0:
		status = "IN_SYNC"
	}
	return fmt.Sprintf("%s/%d/%d", status, drifted, checked), map[string]any{
		"stack_set": ss.Name, "status": status, "drifted_instances": drifted, "checked_instances": checked,
	}, nil
}

// events serves GET /v1/events: the hub's messages as Server-Sent Events
// from the request's Last-Event-ID (header, or last_event_id query
// parameter) on.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	h := s.opts.Events
	if h == nil {
		writeError(w, http.StatusNotFound, CodeNotConfigured, "Live events are not configured.")
		return
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	if len(last) > 64 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "Last-Event-ID is at most 64 characters.")
		return
	}
	c, replay, reset, ok := h.subscribe(last)
	if !ok {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "Too many event streams are open; retry later.")
		return
	}
	defer h.unsubscribe(c)
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	frame := func(m hubMessage) []byte {
		return fmt.Appendf(nil, "id: %s\nevent: %s\ndata: %s\n\n", h.id(m.n), m.typ, m.data)
	}
	// retry: how long a browser waits before reconnecting.
	if !write([]byte("retry: 2000\n: stackd events\n\n")) {
		return
	}
	if reset {
		// The id of a reset is the newest the hub has, so the reconnect
		// after it resumes from there.
		h.mu.Lock()
		n := h.n
		h.mu.Unlock()
		if !write(fmt.Appendf(nil, "id: %s\nevent: %s\ndata: {\"reason\":\"the events after %s are not held any more: reload\"}\n\n",
			h.id(n), EventReset, jsonSafe(last))) {
			return
		}
	}
	for _, m := range replay {
		if !write(frame(m)) {
			return
		}
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.gone:
			// Dropped for lagging: end the stream; the browser reconnects
			// with the last id it got.
			return
		case m := <-c.ch:
			if !write(frame(m)) {
				return
			}
		case <-h.opts.Clock.After(h.opts.Heartbeat):
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		}
	}
}

// jsonSafe keeps s printable inside a JSON string without quotes or
// backslashes.
func jsonSafe(s string) string {
	return strings.Map(func(c rune) rune {
		if c < 0x20 || c == '"' || c == '\\' || c > 0x7e {
			return '?'
		}
		return c
	}, s)
}

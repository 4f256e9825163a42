package state

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Wake-ups across replicas (docs/design.md §13): a replica that records
// something another must act on (a webhook's trigger, a promote or abort,
// a custom-resource response, a wait-condition signal, a released lease)
// writes the row first and then notifies a channel; the replicas listening
// on it wake up and read the row. The row is the truth and a notification
// only wakes: notifications can be lost (a listener's connection cut), so
// a listener that is told "" re-reads everything it cares about, and
// listeners still re-read on their own timers.
//
// On PostgreSQL a notification is NOTIFY (pg_notify), delivered to every
// session that LISTENs on the channel once the sending transaction has
// committed; channels are per database, so a state in another schema of
// the same database gets channel names of its own. On Badger (one
// process) a notification goes to the Listen calls of the same Store, so
// callers need no special case.

// The notification channels. Payloads are ids, never a sensitive value.
const (
	ChannelTrigger  = "stackd_trigger"  // a webhook or push: every replica fetches
	ChannelRollout  = "stackd_rollout"  // promote/abort of an operation id: its owner acts
	ChannelResponse = "stackd_response" // a custom-resource response row for a request id
	ChannelSignal   = "stackd_signal"   // a wait-condition signal for a handle
	// ChannelLease: a lease released (payload: the stack set id) or a
	// member joined or left (payload: "member:" and its id): rebalance now.
	ChannelLease = "stackd_lease"
)

const (
	// MaxNotifyPayload is the longest payload Notify takes, in bytes
	// (PostgreSQL's limit is 8,000).
	MaxNotifyPayload = 7000
	// listenBuffer is how many payloads a slow listener is kept before
	// they are coalesced into one "".
	listenBuffer = 64
)

// channels are the channels Notify and Listen accept.
var channels = []string{ChannelTrigger, ChannelRollout, ChannelResponse, ChannelSignal, ChannelLease}

// notifier is a backend with its own notifications (PostgreSQL).
type notifier interface {
	notify(channel, payload string) error
	// listen starts delivering the notifications of channel to l (with
	// hub.goroutine) until ctx ends, and returns once it listens. On a
	// lost connection it reconnects and pushes "".
	listen(ctx context.Context, channel string, l *listener, h *notifyHub) error
}

func checkChannel(channel string) error {
	if !slices.Contains(channels, channel) {
		return fmt.Errorf("%w: %q is not a notification channel of stackd", ErrInvalidKey, channel)
	}
	return nil
}

// Notify sends payload (≤ 7,000 bytes, no secrets: ids only) to every
// replica listening on channel (PostgreSQL NOTIFY, delivered after the
// sender's transaction commits; a Badger state delivers in-process to
// Listen calls of the same Store). channel is one of the Channel…
// constants. It does not wait for any listener.
//
// Errors: ErrInvalidKey (an unknown channel, a payload with NUL or not
// UTF-8), ErrTooLarge, ErrClosed.
func (s *Store) Notify(channel, payload string) error {
	if err := checkChannel(channel); err != nil {
		return err
	}
	if len(payload) > MaxNotifyPayload {
		return fmt.Errorf("%w: a notification payload of %d bytes (at most %d)", ErrTooLarge, len(payload), MaxNotifyPayload)
	}
	if strings.ContainsRune(payload, 0) || !utf8.ValidString(payload) {
		return fmt.Errorf("%w: a notification payload must be UTF-8 text without NUL", ErrInvalidKey)
	}
	if s.kv.closed() {
		return ErrClosed
	}
	if n, ok := s.kv.(notifier); ok {
		if err := n.notify(channel, payload); err != nil {
			return fmt.Errorf("notify %s: %w", channel, err)
		}
		return nil
	}
	s.root().hub.deliver(channel, payload)
	return nil
}

// Listen delivers the payloads notified on channel until ctx ends, on a
// connection of its own (PostgreSQL LISTEN). When the connection is lost
// it reconnects (with backoff) and then delivers "" once: a listener must
// then re-read the rows it cares about, as notifications sent meanwhile
// are lost (the row is the truth, NOTIFY only wakes). Listen returns once
// it listens, or once its first connection failed; then it goes on
// trying, and delivers "" once it listens. So every notification sent
// after Listen returned is delivered, or followed by a "". The channel
// is buffered (64 payloads); when the listener is slow, payloads are
// coalesced (a payload already waiting is not queued again; on overflow
// all waiting ones become one "") and never block the sender. Closed
// when ctx ends or the Store is closed.
//
// Errors: ErrInvalidKey (an unknown channel), ErrClosed, or (on
// PostgreSQL, wrapped) a failure to learn the channel's name for the
// state's schema (a query, made once per Store; nothing was started).
func (s *Store) Listen(ctx context.Context, channel string) (<-chan string, error) {
	if err := checkChannel(channel); err != nil {
		return nil, err
	}
	if s.kv.closed() {
		return nil, ErrClosed
	}
	h := &s.root().hub
	lctx, cancel := context.WithCancel(ctx)
	l := &listener{wake: make(chan struct{}, 1)}
	out := make(chan string)
	pump := func() {
		defer close(out)
		defer h.remove(channel, l)
		defer cancel()
		l.pump(lctx, out)
	}
	if !h.add(channel, l, cancel, pump) {
		cancel()
		return nil, ErrClosed
	}
	if n, ok := s.kv.(notifier); ok {
		if err := n.listen(lctx, channel, l, h); err != nil {
			cancel()
			if ctx.Err() != nil {
				return out, nil // ended before it listened: out closes
			}
			return nil, fmt.Errorf("listen on %s: %w", channel, err)
		}
	}
	return out, nil
}

// root is the store that owns the backend (a fenced view's parent).
func (s *Store) root() *Store {
	if s.parent != nil {
		return s.parent
	}
	return s
}

// notifyHub holds a Store's listeners: it delivers in-process
// notifications (Badger), and Close ends every listener and waits for its
// goroutines. The zero value is ready.
type notifyHub struct {
	mu        sync.Mutex
	closed    bool
	listeners map[string]map[*listener]context.CancelFunc
	wg        sync.WaitGroup
}

// add registers l on channel and runs its pump in a goroutine, unless
// the hub is closed.
func (h *notifyHub) add(channel string, l *listener, cancel context.CancelFunc, pump func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	if h.listeners == nil {
		h.listeners = map[string]map[*listener]context.CancelFunc{}
	}
	if h.listeners[channel] == nil {
		h.listeners[channel] = map[*listener]context.CancelFunc{}
	}
	h.listeners[channel][l] = cancel
	h.startLocked(pump)
	return true
}

// goroutine runs fn in a goroutine that close waits for, unless the hub
// is closed.
func (h *notifyHub) goroutine(fn func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.startLocked(fn)
	return true
}

// startLocked: under h.mu, with h open, so no Add races close's Wait.
func (h *notifyHub) startLocked(fn func()) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		fn()
	}()
}

func (h *notifyHub) remove(channel string, l *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.listeners[channel], l)
}

// deliver pushes payload to the listeners of channel; it never blocks.
func (h *notifyHub) deliver(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listeners[channel] {
		l.push(payload)
	}
}

// close ends every listener and waits for their goroutines.
func (h *notifyHub) close() {
	h.mu.Lock()
	h.closed = true
	for _, ls := range h.listeners {
		for _, cancel := range ls {
			cancel()
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// listener is one Listen call's queue of payloads not yet delivered.
type listener struct {
	mu    sync.Mutex
	queue []string
	wake  chan struct{} // capacity 1: something was queued
}

// push queues payload without blocking: a payload already waiting is not
// queued twice, a waiting "" (re-read everything) covers every payload
// after it, and "" or a full queue replaces what waits with one "".
func (l *listener) push(payload string) {
	l.mu.Lock()
	switch {
	case len(l.queue) > 0 && l.queue[0] == "":
	case payload == "" || len(l.queue) >= listenBuffer:
		l.queue = append(l.queue[:0], "")
	case !slices.Contains(l.queue, payload):
		l.queue = append(l.queue, payload)
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// pump sends the queued payloads to out until ctx ends.
func (l *listener) pump(ctx context.Context, out chan<- string) {
	for {
		l.mu.Lock()
		var p string
		have := len(l.queue) > 0
		if have {
			p = l.queue[0]
			l.queue = slices.Delete(l.queue, 0, 1)
		}
		l.mu.Unlock()
		if !have {
			select {
			case <-l.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- p:
		case <-ctx.Done():
			return
		}
	}
}

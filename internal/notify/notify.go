// Package notify sends stackd's events — an operation started, succeeded,
// failed or rolled back, a revision rejected — to webhooks: a generic JSON
// webhook (the Event as JSON) and Slack-compatible incoming webhooks
// ({"text": ...}). Sending never blocks the caller: events queue (the
// oldest are dropped past QueueSize, and counted), one goroutine delivers
// them in order, each to every sink, retrying with capped exponential
// backoff. Webhook URLs are secrets (Slack's carry a token): they are
// never logged, only their host.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/internal/backoff"
	"github.com/stackd/stackd/internal/clock"
	"github.com/stackd/stackd/internal/version"
)

// Event is one thing that happened. It holds no secret: reasons come from
// the reconciler redacted.
type Event struct {
	// Type is one of the Type* constants.
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	StackSet  string    `json:"stack_set,omitempty"`
	Operation string    `json:"operation,omitempty"`
	Kind      string    `json:"kind,omitempty"`
	Revision  string    `json:"revision"`
	Status    string    `json:"status,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	// Instances counts the operation's instances; Succeeded and Failed
	// those that ended so (finished operations).
	Instances int `json:"instances,omitempty"`
	Succeeded int `json:"succeeded,omitempty"`
	Failed    int `json:"failed,omitempty"`
	// Errors counts a rejected revision's errors.
	Errors int `json:"errors,omitempty"`
	// DriftedResources counts the resources a drift check found drifted
	// (Instances: the instances holding them).
	DriftedResources int `json:"drifted_resources,omitempty"`
}

// Event types.
const (
	TypeOperationStarted    = "operation_started"
	TypeOperationSucceeded  = "operation_succeeded"
	TypeOperationFailed     = "operation_failed"
	TypeOperationRolledBack = "operation_rolled_back"
	TypeRevisionRejected    = "revision_rejected"
	// TypeDriftDetected: a drift check found drifted resources where the
	// previous check found none or others.
	TypeDriftDetected = "drift_detected"
	// TypeStackSetOwnerless: on a shared state (several replicas), a
	// stack set has had no live owner for more than twice the lease TTL:
	// none of its operations can run (Reason says why). Sent once per
	// episode.
	TypeStackSetOwnerless = "stack_set_ownerless"
	// TypeStackSetOwnerRestored: a stack set a TypeStackSetOwnerless was
	// sent for has a live owner again.
	TypeStackSetOwnerRestored = "stack_set_owner_restored"
)

// Text is the one-line human form of e (Slack's message).
func (e Event) Text() string {
	rev := e.Revision
	if len(rev) > 7 {
		rev = rev[:7]
	}
	switch e.Type {
	case TypeRevisionRejected:
		return fmt.Sprintf("stackd: revision %s rejected (%d errors): nothing applied, the last good revision stays deployed", rev, e.Errors)
	case TypeOperationStarted:
		return fmt.Sprintf("stackd: %s %s started at %s (%d instances)", e.StackSet, e.Kind, rev, e.Instances)
	case TypeDriftDetected:
		return fmt.Sprintf("stackd: %s drifted: %d resources in %d instances differ from revision %s (%s)", e.StackSet, e.DriftedResources, e.Instances, rev, e.Reason)
	case TypeStackSetOwnerless:
		return fmt.Sprintf("stackd: %s has no live owner: %s; none of its operations run", e.StackSet, e.Reason)
	case TypeStackSetOwnerRestored:
		return fmt.Sprintf("stackd: %s has a live owner again: %s", e.StackSet, e.Reason)
	}
	s := fmt.Sprintf("stackd: %s %s at %s %s (%d/%d succeeded, %d failed)", e.StackSet, e.Kind, rev, e.Status, e.Succeeded, e.Instances, e.Failed)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Sink is where events go.
type Sink struct {
	// Name says which sink in logs ("webhook", "slack").
	Name string
	// URL is the webhook's URL (a secret).
	URL string
	// Body renders an event as the request body.
	Body func(Event) ([]byte, error)
}

// Webhook is a generic JSON webhook: each event POSTed as JSON.
func Webhook(u string) Sink {
	return Sink{Name: "webhook", URL: u, Body: func(e Event) ([]byte, error) { return json.Marshal(e) }}
}

// Slack is a Slack-compatible incoming webhook ({"text": ...}; Mattermost,
// Rocket.Chat and Teams' Slack-compatible endpoints take the same).
func Slack(u string) Sink {
	return Sink{Name: "slack", URL: u, Body: func(e Event) ([]byte, error) {
		return json.Marshal(map[string]string{"text": e.Text()})
	}}
}

// Options configure a Notifier.
type Options struct {
	Sinks []Sink
	// QueueSize bounds the events waiting (default 1,000).
	QueueSize int
	// Attempts is how often one delivery is tried (default 5).
	Attempts int
	// Retry spaces the attempts (default 1 s doubling to 1 min, jittered).
	Retry backoff.Policy
	// Timeout bounds one attempt (default 10 s).
	Timeout time.Duration
	Clock   clock.Clock
	Log     zerolog.Logger
	// Client sends the requests (default: no keep-alive, proxies from the
	// environment).
	Client *http.Client
}

// Notifier delivers events to its sinks.
type Notifier struct {
	o       Options
	mu      sync.Mutex
	queue   []Event
	dropped int
	closing bool
	wake    chan struct{}
	done    chan struct{}
	stop    context.CancelFunc
}

// New starts a Notifier; Close stops it (events still queued are dropped).
func New(o Options) (*Notifier, error) {
	for _, s := range o.Sinks {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s: the URL must be an http or https URL with a host", s.Name) // never the URL itself
		}
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 1000
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Retry.Min <= 0 {
		o.Retry = backoff.Policy{Min: time.Second, Max: time.Minute, Jitter: true}
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{o: o, wake: make(chan struct{}, 1), done: make(chan struct{}), stop: cancel}
	go n.run(ctx)
	return n, nil
}

// Send queues e; it never blocks.
func (n *Notifier) Send(e Event) {
	if n == nil || len(n.o.Sinks) == 0 {
		return
	}
	if e.Time.IsZero() {
		e.Time = n.o.Clock.Now().UTC()
	}
	n.mu.Lock()
	if len(n.queue) >= n.o.QueueSize {
		n.queue = n.queue[1:]
		n.dropped++
	}
	n.queue = append(n.queue, e)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// DrainTimeout bounds how long Close delivers what is still queued.
const DrainTimeout = 10 * time.Second

// Close delivers the events still queued (for at most DrainTimeout: a
// command such as stackd apply ends right after its pass) and stops.
func (n *Notifier) Close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.closing = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(DrainTimeout)
	defer t.Stop()
	select {
	case <-n.done:
	case <-t.C:
	}
	n.stop()
	<-n.done
}

func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	for {
		n.mu.Lock()
		var e Event
		have := len(n.queue) > 0
		if have {
			e, n.queue = n.queue[0], n.queue[1:]
		}
		dropped, closing := n.dropped, n.closing
		n.dropped = 0
		n.mu.Unlock()
		if dropped > 0 {
			n.o.Log.Warn().Int("dropped", dropped).Msg("notification queue full: oldest events dropped")
		}
		if !have {
			if closing {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-n.wake:
			}
			continue
		}
		for _, s := range n.o.Sinks {
			n.deliver(ctx, s, e)
		}
	}
}

// deliver sends e to s, retrying a failed attempt (a transport error, a
// 429 or a 5xx); a 4xx other than 429 is not retried.
func (n *Notifier) deliver(ctx context.Context, s Sink, e Event) {
	body, err := s.Body(e)
	if err != nil {
		n.o.Log.Error().Err(err).Str("sink", s.Name).Msg("cannot render the notification")
		return
	}
	host := hostOf(s.URL)
	for attempt := 1; ; attempt++ {
		retry, err := n.post(ctx, s.URL, body)
		if err == nil {
			return
		}
		log := n.o.Log.Warn().Str("sink", s.Name).Str("host", host).Str("event", e.Type).Int("attempt", attempt).Str("error", err.Error())
		if !retry || attempt >= n.o.Attempts {
			log.Msg("notification not delivered")
			return
		}
		d := n.o.Retry.Delay(attempt)
		log.Str("retry_in", d.String()).Msg("notification failed; retrying")
		if clock.Sleep(ctx, n.o.Clock, d) != nil {
			return
		}
	}
}

// post sends one attempt; retry says whether a failure may pass.
func (n *Notifier) post(ctx context.Context, u string, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, n.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("bad request") // the URL is a secret: say nothing of it
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", version.UserAgent("stackd"))
	resp, err := n.o.Client.Do(req)
	if err != nil {
		// A *url.Error names the URL: keep only what went wrong.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return true, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("HTTP %d", resp.StatusCode)
	default:
		return false, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
}

// hostOf is the host of a URL, for logs.
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "?"
	}
	return strings.ToLower(p.Host)
}

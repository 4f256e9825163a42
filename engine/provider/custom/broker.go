package custom

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Broker errors.
var (
	// ErrAlreadyWaiting is returned by Expect when a waiter for the same
	// request id is registered and not closed.
	ErrAlreadyWaiting = errors.New("a response is already awaited for this request id")
	// ErrWaiterClosed is returned by Await on a closed waiter.
	ErrWaiterClosed = errors.New("waiter is closed")
)

// ResponsesPath is the path below BrokerOptions.ExternalURL that response
// URLs live under; the HTTP API routes PUT and POST on ResponsesPath+"{token}"
// to Broker.Deliver.
const ResponsesPath = "/v1/responses/"

// MinKeyLen is the shortest HMAC key BrokerOptions accepts.
const MinKeyLen = 16

// sweepInterval bounds how often expired tombstones are dropped.
const sweepInterval = time.Minute

// BrokerOptions configure a Broker.
type BrokerOptions struct {
	// Key signs response URLs (HMAC-SHA256). Empty: 32 random bytes, so URLs
	// issued before a restart no longer verify (401); the daemon should keep
	// a key in its state so a resumed call can accept a response to the URL
	// it sent before the restart. At least MinKeyLen bytes.
	Key []byte
	// ExternalURL is how custom resource providers reach stackd, e.g.
	// "https://stackd.example:7070" (a path prefix is allowed). Required.
	ExternalURL string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Forwarder, when set, carries responses between the replicas of a
	// shared state (docs/design.md §13): a response that no waiter of this
	// process awaits is recorded with Forward instead of refused, and the
	// process that awaits it takes it (Broker.Forwarded, and when Await
	// starts). Nil: such a response is refused with 404 not_awaited.
	Forwarder Forwarder
}

// Forwarder records the responses this process cannot deliver for the
// process whose call awaits them. The daemon implements it with its state
// (a row per request id, and a notification that wakes the replicas).
// Bodies are responses (they may hold sensitive Data): never log them.
type Forwarder interface {
	// Forward records body, a verified response to request reqID that no
	// waiter of this process awaits, until expires (its URL's expiry).
	// ErrAlreadyForwarded when a response is already recorded for reqID.
	Forward(reqID string, body []byte, expires time.Time) error
	// Take returns and removes the response recorded for reqID; ok is
	// false when none is.
	Take(reqID string) (body []byte, ok bool, err error)
}

// ErrAlreadyForwarded is the Forwarder's refusal of a second response to
// a request; Deliver answers it with 409 already_answered.
var ErrAlreadyForwarded = errors.New("a response to this request is already recorded")

// Validate checks the options and fills in defaults.
func (o *BrokerOptions) Validate() error {
	switch {
	case len(o.Key) == 0:
		o.Key = make([]byte, 32)
		_, _ = rand.Read(o.Key) // never fails (crypto/rand, Go 1.24+)
	case len(o.Key) < MinKeyLen:
		return fmt.Errorf("response URL key: must be at least %d bytes", MinKeyLen)
	}
	u, err := url.Parse(o.ExternalURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("external URL: must be an absolute http:// or https:// URL without user, query or fragment")
	}
	o.ExternalURL = strings.TrimRight(o.ExternalURL, "/")
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Broker issues pre-signed response URLs and hands each response that
// arrives on one to the provider call waiting for it. It is safe for
// concurrent use.
type Broker struct {
	key  []byte
	ext  string // ExternalURL
	base string // ExternalURL + ResponsesPath
	now  func() time.Time
	fwd  Forwarder

	mu        sync.Mutex
	waiters   map[string]*Waiter   // by request id
	done      map[string]tombstone // closed waiters, by request id, until their URL expires
	lastSweep time.Time
}

// tombstone remembers how a closed waiter ended, so that a late or repeated
// response gets a precise refusal until its URL expires.
type tombstone struct {
	answered bool
	until    time.Time
}

// NewBroker returns a broker; see BrokerOptions.Validate for the errors.
func NewBroker(opts BrokerOptions) (*Broker, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Broker{
		key:     append([]byte(nil), opts.Key...),
		ext:     opts.ExternalURL,
		base:    opts.ExternalURL + ResponsesPath,
		now:     opts.Now,
		fwd:     opts.Forwarder,
		waiters: map[string]*Waiter{},
		done:    map[string]tombstone{},
	}, nil
}

// Expect registers a waiter for the request id, before the request is sent,
// and signs a response URL for it that is valid until expires (rounded up to
// a whole second). The caller must Await or Close the waiter.
//
// Errors: ErrAlreadyWaiting; an error for an empty request id or identity
// fields over 512 bytes.
func (b *Broker) Expect(id Identity, expires time.Time) (*Waiter, error) {
	exp := expires.Truncate(time.Second)
	if exp.Before(expires) {
		exp = exp.Add(time.Second)
	}
	token, err := signToken(b.key, tokenClaims{Identity: id, Expires: exp})
	if err != nil {
		return nil, err
	}
	w := &Waiter{b: b, id: id, url: b.base + token, expires: exp, ready: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepLocked()
	if _, busy := b.waiters[id.RequestID]; busy {
		return nil, ErrAlreadyWaiting
	}
	delete(b.done, id.RequestID)
	b.waiters[id.RequestID] = w
	return w, nil
}

// ExternalURL is the base of the response URLs, without a trailing slash.
func (b *Broker) ExternalURL() string { return b.ext }

// Waiting is the number of registered waiters (for metrics and tests).
func (b *Broker) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// Deliver accepts a response that arrived on the response URL with this
// token. contentType is accepted and ignored: AWS's cfn-response helpers
// send an empty one. The error, when not nil, is always a *DeliveryError
// whose Status the HTTP handler answers with; a refused delivery changes
// nothing. The checks, in order:
//
//	token not of the issued shape                         404 unknown_token
//	signature does not verify                             401 invalid_signature
//	token expired                                         410 expired
//	body over MaxResponseBytes                            413 too_large
//	body not a JSON object, or members of the wrong type  400 malformed_response
//	Status not SUCCESS or FAILED                          400 invalid_status
//	RequestId, StackId or LogicalResourceId absent or
//	  different from the token's                          400 mismatched_request
//	request already answered (also synchronously)         409 already_answered
//	the waiting call gave up (timeout, cancelled)         410 no_longer_awaited
//	nobody in this process awaits the request             404 not_awaited
//	the waiter for this request id is another resource's  409 identity_conflict
//
// With a Forwarder, a response that nobody in this process awaits (and
// that this process did not see answered) is recorded with Forward for the
// replica that awaits it, and accepted (nil): a call given up here, as
// when its lease was lost, may be awaited again by the replica that took
// the stack set over. A second one for the same request is refused with
// 409 already_answered while the first is recorded.
func (b *Broker) Deliver(token string, body []byte, contentType string) error {
	_ = contentType
	claims, err := verifyToken(b.key, token, b.now())
	switch {
	case errors.Is(err, errTokenSignature):
		return refuse(http.StatusUnauthorized, CodeInvalidSignature, "The response URL's signature does not verify.")
	case errors.Is(err, errTokenExpired):
		return refuse(http.StatusGone, CodeExpired, "The response URL expired at %s.", claims.Expires.UTC().Format(time.RFC3339))
	case err != nil: // malformed
		return refuse(http.StatusNotFound, CodeUnknownToken, "The response URL is not one stackd issued.")
	}
	resp, derr := parseResponse(body)
	if derr != nil {
		return derr
	}
	if derr := resp.checkIdentity(claims.Identity, true); derr != nil {
		return derr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepLocked()
	w := b.waiters[claims.RequestID]
	if w == nil {
		if t, ok := b.done[claims.RequestID]; ok {
			if t.answered {
				return refuse(http.StatusConflict, CodeAlreadyAnswered, "The request was already answered.")
			}
			if b.fwd == nil {
				return refuse(http.StatusGone, CodeNoLongerAwaited, "The request is no longer awaited (it timed out or was cancelled).")
			}
			// Given up here, perhaps for a lost lease: the replica that
			// took the stack set over may await it again.
		}
		if b.fwd != nil {
			return b.forward(claims.RequestID, body, claims.Expires)
		}
		return refuse(http.StatusNotFound, CodeNotAwaited, "No request is awaiting this response.")
	}
	if w.id != claims.Identity {
		return refuse(http.StatusConflict, CodeIdentityConflict, "The request id is awaited for another resource.")
	}
	if w.answered {
		return refuse(http.StatusConflict, CodeAlreadyAnswered, "The request was already answered.")
	}
	w.answered, w.received, w.resp = true, true, resp
	close(w.ready)
	return nil
}

// forward records a verified response for the replica that awaits it.
// The error is a *DeliveryError, or the Forwarder's (a 500 of the API).
func (b *Broker) forward(reqID string, body []byte, expires time.Time) error {
	err := b.fwd.Forward(reqID, body, expires)
	if errors.Is(err, ErrAlreadyForwarded) {
		return refuse(http.StatusConflict, CodeAlreadyAnswered, "The request was already answered.")
	}
	return err
}

// Forwarded is told that a response to request reqID was recorded by
// another replica (Forwarder.Forward); "" means any request may have one
// (the wake-ups were lost). A waiter of this process for it takes the
// response (Forwarder.Take) and is answered; without one, nothing
// happens. The error is Take's.
func (b *Broker) Forwarded(reqID string) error {
	if b.fwd == nil {
		return nil
	}
	b.mu.Lock()
	var ws []*Waiter
	if reqID == "" {
		for _, w := range b.waiters {
			ws = append(ws, w)
		}
	} else if w := b.waiters[reqID]; w != nil {
		ws = append(ws, w)
	}
	b.mu.Unlock()
	var errs []error
	for _, w := range ws {
		errs = append(errs, b.collect(w))
	}
	return errors.Join(errs...)
}

// collect gives w the response recorded for its request, if any and w
// still waits for one. A recorded body that does not answer w's request
// (it cannot verify against w's identity) is dropped.
func (b *Broker) collect(w *Waiter) error {
	b.mu.Lock()
	idle := w.closed || w.answered
	b.mu.Unlock()
	if idle {
		return nil
	}
	body, ok, err := b.fwd.Take(w.id.RequestID)
	if err != nil || !ok {
		return err
	}
	resp, derr := parseResponse(body)
	if derr != nil || resp.checkIdentity(w.id, true) != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.closed || w.answered {
		return nil
	}
	w.answered, w.received, w.resp = true, true, resp
	close(w.ready)
	return nil
}

// sweepLocked drops expired tombstones, at most once per sweepInterval.
func (b *Broker) sweepLocked() {
	now := b.now()
	if now.Sub(b.lastSweep) < sweepInterval {
		return
	}
	b.lastSweep = now
	for id, t := range b.done {
		if !now.Before(t.until) {
			delete(b.done, id)
		}
	}
}

// Waiter is one registered request waiting for its response.
type Waiter struct {
	b       *Broker
	id      Identity
	url     string
	expires time.Time
	ready   chan struct{} // closed when resp is set

	// guarded by b.mu
	answered bool // answered by a delivery or synchronously: refuse more
	received bool // resp holds a delivered response
	resp     Response
	closed   bool
}

// URL is the pre-signed response URL to send as ResponseURL.
func (w *Waiter) URL() string { return w.url }

// Expires is when the response URL stops verifying.
func (w *Waiter) Expires() time.Time { return w.expires }

// Await waits for the response until ctx ends, then closes the waiter: a
// later response is refused (409 when this one was answered, 410 when it
// gave up). With a Forwarder, a response another replica recorded before
// Await started is taken at once (when the Forwarder fails, the waiter
// waits for Forwarded, which the daemon calls again on a timer). Errors:
// ctx's error, ErrWaiterClosed.
func (w *Waiter) Await(ctx context.Context) (Response, error) {
	defer w.Close()
	w.b.mu.Lock()
	closed := w.closed
	w.b.mu.Unlock()
	if closed {
		return Response{}, ErrWaiterClosed
	}
	if w.b.fwd != nil {
		_ = w.b.collect(w)
	}
	select {
	case <-w.ready: // a response already here wins over an ended ctx
	default:
		select {
		case <-w.ready:
		case <-ctx.Done():
			return Response{}, ctx.Err()
		}
	}
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	return w.resp, nil
}

// Poll returns the response if one has arrived, without waiting.
func (w *Waiter) Poll() (Response, bool) {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	return w.resp, w.received
}

// MarkAnswered records that the request was answered another way (in the
// body of the HTTP response to the request): later responses on the URL are
// refused with 409.
func (w *Waiter) MarkAnswered() {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	w.answered = true
}

// Close unregisters the waiter; it is idempotent. Until the URL expires a
// response is then refused with 409 (answered) or 410 (abandoned).
func (w *Waiter) Close() {
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if b.waiters[w.id.RequestID] == w {
		delete(b.waiters, w.id.RequestID)
	}
	if b.now().Before(w.expires) {
		b.done[w.id.RequestID] = tombstone{answered: w.answered, until: w.expires}
	}
}

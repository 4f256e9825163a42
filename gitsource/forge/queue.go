package forge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stackd/stackd/internal/backoff"
	"github.com/stackd/stackd/internal/clock"
)

// Results of the calls a Queue makes (QueueObserver.Call).
const (
	ResultOK        = "ok"        // the forge took the call
	ResultUnchanged = "unchanged" // nothing to send: the forge already says it
	ResultRetry     = "retry"     // failed, retried later (5xx, 429, rate limit, no answer)
	ResultError     = "error"     // refused (4xx other than rate limits): dropped
	ResultDropped   = "dropped"   // the queue was full: the oldest call was dropped
)

// QueueObserver is told the queue's depth and each call's result
// (stackd_forge_queue_depth, stackd_forge_calls_total).
type QueueObserver interface {
	QueueDepth(forge Kind, n int)
	Call(forge Kind, result string)
}

// QueueOptions configure a Queue; Forge is required.
type QueueOptions struct {
	Forge Forge
	// Clock times the backoffs and the rate-limit pauses (default real).
	Clock clock.Clock
	// MinBackoff is the wait after a call's first retryable failure,
	// doubled after each further one up to MaxBackoff (defaults 2s, 10m).
	MinBackoff, MaxBackoff time.Duration
	// CallTimeout bounds one call, all its requests included (default 2m).
	CallTimeout time.Duration
	// MaxDepth bounds the calls waiting (default 10,000): past it the
	// oldest is dropped.
	MaxDepth int
	// Observer, if set, gets the depth and the calls' results.
	Observer QueueObserver
	// OnError, if set, is told each failed call (what, the error). The
	// errors carry no token.
	OnError func(what string, err error, retrying bool)
}

// Queue runs a forge's calls off the caller's path: Enqueue returns at
// once, one worker (Run) makes the calls in order. Calls are coalesced by
// key (a pull request and stack set's comment, a commit and context's
// status): only the latest of a key is made. A call that fails with a
// retryable error is retried with a capped exponential backoff; a
// Retry-After or a rate limit the forge announced (X-RateLimit-*,
// RateLimit-*) pauses the whole queue until the forge's reset. So rate
// limits and outages of a forge delay its comments and statuses, never
// planning or deploying.
type Queue struct {
	o    QueueOptions
	wake chan struct{}

	mu      sync.Mutex
	items   map[string]*item
	order   []string // keys, oldest first
	running string   // key of the call in flight
	// pausedUntil: the forge asked for no calls before then.
	pausedUntil time.Time
	lastErr     string
	lastErrAt   time.Time
	calls       uint64
	// ended is closed (and replaced) each time a call ends (Drain).
	ended chan struct{}
}

type item struct {
	what string
	fn   func(ctx context.Context) (string, error)
	// refused, if set, is called when the forge refuses fn for good (not
	// retried): what was owed is settled then.
	refused   func()
	attempts  int
	notBefore time.Time
}

// NewQueue returns a Queue; Run makes its calls.
func NewQueue(o QueueOptions) *Queue {
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 2 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Minute
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 2 * time.Minute
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = 10000
	}
	return &Queue{o: o, wake: make(chan struct{}, 1), items: map[string]*item{}, ended: make(chan struct{})}
}

// Forge is the queue's forge.
func (q *Queue) Forge() Forge { return q.o.Forge }

// Enqueue queues fn under key, replacing a call of the same key that has
// not started. The replacement goes to the back of the line (a call
// backing off keeps its place and its wait): calls queued before it are
// made first, as they would be had it come alone. So a pull request's
// stackd/plan, pending since planning started and replaced by the
// outcome, is set after the comments queued meanwhile, and links to one.
// fn returns ResultOK or ResultUnchanged, or an error (Retryable says
// whether it is retried).
func (q *Queue) Enqueue(key, what string, fn func(ctx context.Context) (string, error)) {
	q.enqueue(key, what, fn, nil)
}

// enqueue is Enqueue with refused called if the forge refuses the call for
// good.
func (q *Queue) enqueue(key, what string, fn func(ctx context.Context) (string, error), refused func()) {
	q.mu.Lock()
	if it, ok := q.items[key]; ok {
		// A call backing off keeps its wait: the forge is no readier.
		it.fn, it.what, it.refused = fn, what, refused
		if it.attempts == 0 {
			q.order = append(slices.DeleteFunc(q.order, func(s string) bool { return s == key }), key)
		}
	} else {
		if len(q.order) >= q.o.MaxDepth {
			oldest := q.order[0]
			q.order = q.order[1:]
			delete(q.items, oldest)
			q.observeCall(ResultDropped)
		}
		q.items[key] = &item{what: what, fn: fn, refused: refused}
		q.order = append(q.order, key)
	}
	n := len(q.order)
	q.mu.Unlock()
	q.observeDepth(n)
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue) observeDepth(n int) {
	if q.o.Observer != nil {
		q.o.Observer.QueueDepth(q.o.Forge.Kind(), n)
	}
}

func (q *Queue) observeCall(result string) {
	if q.o.Observer != nil {
		q.o.Observer.Call(q.o.Forge.Kind(), result)
	}
}

// QueueStats describe the backlog (the /readyz detail).
type QueueStats struct {
	Forge Kind `json:"forge"`
	// Depth is the number of calls waiting.
	Depth int `json:"depth"`
	// PausedUntil is set while the forge's rate limit or Retry-After holds
	// the calls back.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// LastError is the latest failed call's error, with its time.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// Stats returns the backlog.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := QueueStats{Forge: q.o.Forge.Kind(), Depth: len(q.order), LastError: q.lastErr}
	if q.pausedUntil.After(q.o.Clock.Now()) {
		t := q.pausedUntil
		s.PausedUntil = &t
	}
	if !q.lastErrAt.IsZero() {
		t := q.lastErrAt
		s.LastErrorAt = &t
	}
	return s
}

// Drain waits until no call waits or runs, the forge's rate limit pauses
// the queue (waiting for it would be pointless), or ctx ends (its error).
// Run must be running.
func (q *Queue) Drain(ctx context.Context) error {
	for {
		q.mu.Lock()
		idle := len(q.order) == 0 && q.running == ""
		paused := q.pausedUntil.After(q.o.Clock.Now())
		ended := q.ended
		q.mu.Unlock()
		if idle || paused {
			return nil
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Depth is the number of calls waiting.
func (q *Queue) Depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// next returns the first call that may run now, or how long to wait for
// one (0: nothing waits).
func (q *Queue) next(now time.Time) (string, *item, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return "", nil, 0
	}
	if now.Before(q.pausedUntil) {
		return "", nil, q.pausedUntil.Sub(now)
	}
	var wait time.Duration
	for _, k := range q.order {
		it := q.items[k]
		if !now.Before(it.notBefore) {
			q.running = k
			// The call leaves the line; a new call of its key enqueued
			// while it runs is made after it.
			q.order = slices.DeleteFunc(q.order, func(s string) bool { return s == k })
			delete(q.items, k)
			return k, it, 0
		}
		if d := it.notBefore.Sub(now); wait == 0 || d < wait {
			wait = d
		}
	}
	return "", nil, wait
}

// Run makes the queued calls until ctx ends; calls still queued then are
// dropped (a restart sends what is owed again).
func (q *Queue) Run(ctx context.Context) {
	for {
		now := q.o.Clock.Now()
		key, it, wait := q.next(now)
		if it == nil {
			var timer <-chan time.Time
			if wait > 0 {
				timer = q.o.Clock.After(wait)
			}
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
			case <-timer:
			}
			continue
		}
		q.run(ctx, key, it)
		q.observeDepth(q.Depth())
		if ctx.Err() != nil {
			return
		}
	}
}

func (q *Queue) run(ctx context.Context, key string, it *item) {
	cctx, cancel := context.WithTimeout(ctx, q.o.CallTimeout)
	result, err := it.fn(cctx)
	cancel()
	now := q.o.Clock.Now()
	refused := false
	defer func() {
		// After the lock is released: the callback may use the queue.
		if refused && it.refused != nil {
			it.refused()
		}
	}()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running = ""
	q.calls++
	close(q.ended)
	q.ended = make(chan struct{})
	if rl, ok := q.o.Forge.(interface{ RateLimit() RateLimit }); ok {
		// The forge said no calls are left before its reset: wait for it
		// rather than be refused.
		if l := rl.RateLimit(); l.Known && l.Remaining == 0 && l.Reset.After(now) {
			q.pausedUntil = maxTime(q.pausedUntil, l.Reset)
		}
	}
	if err == nil {
		q.observeCall(result)
		return
	}
	if ctx.Err() != nil {
		return // stopping: not the forge's failure
	}
	q.lastErr, q.lastErrAt = err.Error(), now
	retryAfter, retry := Retryable(err)
	if errors.Is(err, context.DeadlineExceeded) {
		retry = true
	}
	if !retry {
		refused = true
		q.observeCall(ResultError)
		if q.o.OnError != nil {
			q.o.OnError(it.what, err, false)
		}
		return
	}
	q.observeCall(ResultRetry)
	if q.o.OnError != nil {
		q.o.OnError(it.what, err, true)
	}
	it.attempts++
	wait := backoff.Policy{Min: q.o.MinBackoff, Max: q.o.MaxBackoff}.Delay(it.attempts)
	if retryAfter > 0 {
		wait = retryAfter
		q.pausedUntil = maxTime(q.pausedUntil, now.Add(retryAfter))
	}
	if _, replaced := q.items[key]; replaced {
		return // a newer call of the key waits: it is the one that matters
	}
	it.notBefore = now.Add(wait)
	q.items[key] = it
	// Back at the head of the line: it was there first.
	q.order = append([]string{key}, q.order...)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Comment queues the comment of a pull request and stack set; done, if
// set, is told its URL once the forge has it ("" when OnlyIfExists found
// none, or when the forge refused the comment for good: it is not
// retried).
func (q *Queue) Comment(pr PullRequest, c Comment, done func(url string)) {
	key := fmt.Sprintf("comment/%d/%s", pr.Number, c.StackSet)
	what := fmt.Sprintf("comment of %s on pull request %d", c.StackSet, pr.Number)
	var refused func()
	if done != nil {
		refused = func() { done("") }
	}
	q.enqueue(key, what, func(ctx context.Context) (string, error) {
		u, err := q.o.Forge.UpsertComment(ctx, pr, c)
		if err != nil {
			return "", err
		}
		if done != nil {
			done(u)
		}
		return ResultOK, nil
	}, refused)
}

// Status queues a commit status. Before posting, the forge's current
// status of the commit and context is read: one that already says the
// same is not posted again (a restart re-sends what it owes without
// duplicating it). done, if set, is told once the forge has the status or
// refused it for good (it is not retried then).
func (q *Queue) Status(sha string, s Status, done func()) {
	q.StatusFunc(sha, s.Context, func() Status { return s }, done)
}

// StatusFunc is Status with the status made when the call is (a target
// URL known only once a comment is posted).
func (q *Queue) StatusFunc(sha, statusContext string, status func() Status, done func()) {
	key := "status/" + sha + "/" + statusContext
	what := fmt.Sprintf("status %s of %s", statusContext, short(sha))
	f := q.o.Forge
	q.enqueue(key, what, func(ctx context.Context) (string, error) {
		want := status().normalize()
		want.Context = statusContext
		cur, found, err := f.CommitStatus(ctx, sha, statusContext)
		if err != nil {
			return "", err
		}
		cmp := want
		if f.Kind() == GitLab && cmp.State == Error {
			cmp.State = Failure // GitLab has one failed state
		}
		if found && cmp.Same(cur) {
			if done != nil {
				done()
			}
			return ResultUnchanged, nil
		}
		if err := f.SetCommitStatus(ctx, sha, want); err != nil {
			return "", err
		}
		if done != nil {
			done()
		}
		return ResultOK, nil
	}, done)
}

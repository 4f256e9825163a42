package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// The server's limits (docs/design.md §9 "Untrusted input": bodies limited before
// they are read, concurrent requests bounded, read timeouts set). Every
// route belongs to a class; each class has its own body cap and its own
// bound on the requests served at once, so that a flood of one class (the
// unauthenticated webhook, say) never takes the slots of another (the
// bearer API, pre-signed responses), and the probes are never refused.

// class is a group of routes sharing Limits.
type class int

const (
	// classAPI: the bearer routes and discovery (/, /openapi.json).
	classAPI class = iota
	// classHook: POST /v1/hooks/git.
	classHook
	// classSigned: custom-resource responses and wait-condition signals.
	classSigned
	// classProbe: /healthz and /readyz, never bounded: they read no body
	// and do constant work, and a bound would let a flood of requests fail
	// the real probe and get the daemon restarted.
	classProbe
)

func (c class) String() string {
	switch c {
	case classHook:
		return "webhook"
	case classSigned:
		return "pre-signed"
	case classProbe:
		return "probe"
	}
	return "api"
}

// Limits bound the requests of one class of routes. A zero field takes
// the class's default.
type Limits struct {
	// MaxBodyBytes caps a request body. A Content-Length over it is a 413
	// before a byte of the body is read; a body without one is cut off
	// (413) when it crosses the cap.
	MaxBodyBytes int64
	// MaxInFlight bounds the requests of the class served at once. The
	// next one gets 503 stackd.unavailable with Retry-After at once: it
	// is never queued, and its body is never read.
	MaxInFlight int
}

// Default limits. A body is held in memory only on the pre-signed routes
// (the sink takes it whole); the webhook streams its body through the
// HMAC and the other routes discard theirs, so the worst case the bodies
// of in-flight requests hold is DefaultSignedLimits.MaxInFlight ×
// DefaultSignedLimits.MaxBodyBytes = 4 MiB.
var (
	// DefaultHookLimits: 25 MiB is GitHub's own cap on webhook payloads
	// (it delivers nothing larger), so no real delivery is refused for its
	// size; the body is hashed while it streams and never held, so the cap
	// costs reading time, not memory. 16 at once: forges send one delivery
	// per push and duplicate fetch triggers collapse into one anyway; the
	// bound is what keeps a flood of slow bodies with bad signatures from
	// holding an unbounded number of handlers (the webhook is a latency
	// optimisation: a legitimate delivery refused with 503 during such a
	// flood is caught up by the next poll, --interval).
	DefaultHookLimits = Limits{MaxBodyBytes: 25 << 20, MaxInFlight: 16}
	// DefaultSignedLimits: 64 KiB for custom-resource responses and
	// wait-condition signals. The sinks accept 4 KiB (CloudFormation's
	// limit for both) and refuse more with their own precise 413; the
	// margin keeps that message for a slightly oversized body while a
	// large one is refused unread. 64 at once: signals of a wide wait
	// condition arrive together, and each is handled in well under a
	// millisecond once its body is in.
	DefaultSignedLimits = Limits{MaxBodyBytes: 64 << 10, MaxInFlight: 64}
	// DefaultAPILimits: the bearer routes take no body (PUT
	// /v1/resource_types refuses one; promote and abort ignore theirs), so
	// 64 KiB is generous. 32 at once: the CLI, Prometheus and promote or
	// abort are a handful of clients; GET /v1/changesets may plan, and more
	// than a few plans at once only queue for the CPU.
	DefaultAPILimits = Limits{MaxBodyBytes: 64 << 10, MaxInFlight: 32}
)

const (
	// DefaultBodyTimeout is how long a handler waits for the rest of a
	// request body once it starts reading it: 10 s, GitHub's timeout for a
	// whole webhook delivery, and ample for a 4 KiB response or signal. It
	// is what a slow body can hold a slot of its class for; past it the
	// request is a 408 and the connection is closed.
	DefaultBodyTimeout = 10 * time.Second
	// RetryAfter is the Retry-After of a 503 for a full class: a slot
	// frees as soon as one body is in or DefaultBodyTimeout passes, so one
	// second is a fair wait, and the refusal itself costs the server
	// nothing (no body read).
	RetryAfter = time.Second
	// refusalLogEvery spaces the warnings about refused requests: one per
	// class a minute at most, with the running count.
	refusalLogEvery = time.Minute
)

// classes is the number of classes (the size of per-class arrays).
const classes = int(classProbe) + 1

// fill sets the zero fields of l from def.
func (l *Limits) fill(def Limits) {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = def.MaxBodyBytes
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = def.MaxInFlight
	}
}

// admit takes a slot of class c for the request, or answers 503 with
// Retry-After and returns false. release gives the slot back.
func (s *Server) admit(w http.ResponseWriter, c class) (release func(), ok bool) {
	sem := s.slots[c]
	if sem == nil {
		return func() {}, true
	}
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, true
	default:
	}
	s.refused[c].Add(1)
	if now := time.Now().UnixNano(); now-s.lastRefusalLog[c].Load() >= int64(refusalLogEvery) {
		if last := s.lastRefusalLog[c].Swap(now); now-last >= int64(refusalLogEvery) {
			s.log.Warn().Str("class", c.String()).Int("max_in_flight", cap(sem)).Int64("refused_total", s.refused[c].Load()).
				Msg("api requests refused: too many of this class at once")
		}
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
	writeError(w, http.StatusServiceUnavailable, CodeUnavailable,
		fmt.Sprintf("Too many %s requests are being served (at most %d at once); retry after %d s.",
			c, cap(sem), int(RetryAfter/time.Second)))
	return nil, false
}

// copyBody copies r's body into dst, at most max bytes and within
// Options.BodyTimeout. It answers 413 when the Content-Length or the body
// is over max (the former before a byte is read), 408 when the body does
// not arrive in time, 400 on another read error, and then returns false.
func (s *Server) copyBody(w http.ResponseWriter, r *http.Request, max int64, dst io.Writer) bool {
	if r.ContentLength > max {
		tooLarge(w, max)
		return false
	}
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	// The server's ReadTimeout is the backstop; this deadline is the
	// body's own. Once the body hits EOF, net/http clears the deadline
	// for its background read, so it never cuts a long handler short.
	// httptest recorders do not support deadlines: nothing to bound there.
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.log.Debug().Err(err).Msg("cannot set the request body's read deadline")
	}
	var buf [8 << 10]byte
	_, err := io.CopyBuffer(dst, http.MaxBytesReader(w, r.Body, max), buf[:])
	switch {
	case err == nil:
		return true
	case isMaxBytes(err):
		tooLarge(w, max)
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, http.StatusRequestTimeout, CodeRequestTimeout,
			fmt.Sprintf("The request body did not arrive within %s.", s.opts.BodyTimeout))
	default:
		writeError(w, http.StatusBadRequest, CodeBadRequest, "Cannot read the request body.")
	}
	return false
}

// readBody reads the whole body, at most max bytes (see copyBody).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, bool) {
	var b bodyBuffer
	if r.ContentLength > 0 && r.ContentLength <= max {
		b.buf = make([]byte, 0, r.ContentLength)
	}
	if !s.copyBody(w, r, max, &b) {
		return nil, false
	}
	return b.buf, true
}

// bodyBuffer collects a body. Unlike bytes.Buffer it is no
// io.ReaderFrom, so copyBody's buffer does the reading and a body grows
// the slice only by what arrived.
type bodyBuffer struct{ buf []byte }

func (b *bodyBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func isMaxBytes(err error) bool {
	_, ok := errors.AsType[*http.MaxBytesError](err)
	return ok
}

// tooLarge answers 413 (the recorder closes the connection: what is left
// of the body is never read).
func tooLarge(w http.ResponseWriter, max int64) {
	writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge,
		fmt.Sprintf("The body is larger than %d bytes, the limit of this route.", max))
}

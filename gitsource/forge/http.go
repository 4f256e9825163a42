package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/stackd/stackd/internal/backoff"
)

// transport sends the requests of every forge's client: JSON in and out,
// the token only to BaseURL's host, pagination links to another host
// refused, bounded responses, retries of what may succeed again, and the
// rate limit the forge announced remembered for the Queue.
type transport struct {
	o    Options
	base *url.URL

	mu sync.Mutex
	// limit is the latest rate limit the forge announced.
	limit RateLimit
}

// RateLimit is what a forge's latest answer said of its rate limit.
type RateLimit struct {
	// Known is set once an answer carried rate-limit headers.
	Known     bool
	Remaining int
	// Reset is when the limit is restored.
	Reset time.Time
}

// RateLimit returns the latest rate limit the forge announced.
func (t *transport) RateLimit() RateLimit {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limit
}

func newTransport(o Options) *transport {
	base, _ := url.Parse(strings.TrimRight(o.BaseURL, "/"))
	return &transport{o: o, base: base}
}

func (t *transport) endpoint(p string, q url.Values) string {
	u := *t.base
	u.Path = strings.TrimRight(t.base.Path, "/") + p
	u.RawPath = ""
	if strings.Contains(p, "%") {
		// GitLab's project ids are "group%2Fname": keep the escaping.
		u.RawPath = strings.TrimRight(t.base.EscapedPath(), "/") + p
		if up, err := url.PathUnescape(u.RawPath); err == nil {
			u.Path = up
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// nextPage returns the rel="next" link of a response's Link header, ""
// without one. A link to another scheme or host is refused.
func (t *transport) nextPage(h http.Header) (string, error) {
	for _, v := range h.Values("Link") {
		for part := range strings.SplitSeq(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if !ok || !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			isNext := false
			for p := range strings.SplitSeq(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "rel") && slices.Contains(strings.Fields(strings.Trim(val, `"`)), "next") {
					isNext = true
				}
			}
			if !isNext {
				continue
			}
			u, err := t.base.Parse(strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">"))
			if err != nil {
				return "", fmt.Errorf("pagination link %q: %w", target, err)
			}
			if u.Scheme != t.base.Scheme || u.Host != t.base.Host {
				return "", fmt.Errorf("%w: %s://%s", ErrForeignLink, u.Scheme, u.Host)
			}
			return u.String(), nil
		}
	}
	return "", nil
}

// call sends one request (JSON in, JSON out), retrying retryable failures
// if retry is set. It returns the response headers.
func (t *transport) call(ctx context.Context, method, rawURL string, in, out any, retry bool) (http.Header, error) {
	var payload []byte
	if in != nil {
		var err error
		if payload, err = json.Marshal(in); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		h, err := t.once(ctx, method, rawURL, payload, out)
		if err == nil {
			return h, nil
		}
		wait, ok := t.retryWait(ctx, err, attempt)
		if !retry || !ok {
			return nil, err
		}
		if err := t.o.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// retryWait says whether a failed attempt may be retried and after how long.
func (t *transport) retryWait(ctx context.Context, err error, attempt int) (time.Duration, bool) {
	if attempt >= t.o.MaxAttempts || ctx.Err() != nil {
		return 0, false
	}
	wait := backoff.Policy{Min: t.o.MinBackoff, Max: t.o.MaxBackoff}.Delay(attempt)
	var ae *APIError
	if !errors.As(err, &ae) {
		var te *transportError
		return wait, errors.As(err, &te)
	}
	if !ae.retryable() {
		return 0, false
	}
	if ae.RetryAfter > 0 {
		if ae.RetryAfter > t.o.MaxBackoff {
			return 0, false
		}
		return ae.RetryAfter, true
	}
	return wait, true
}

// Retryable reports whether a call that failed with err may succeed when
// tried again (a 5xx, a 429, a rate-limited 403, no answer), and how long
// the forge asked to wait first (0: not said).
func Retryable(err error) (time.Duration, bool) {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.RetryAfter, ae.retryable()
	}
	var te *transportError
	return 0, errors.As(err, &te)
}

// transportError is a request that got no answer (a connection failure or
// its deadline); it may be retried.
type transportError struct {
	method, path string
	err          error
}

func (e *transportError) Error() string { return e.method + " " + e.path + ": " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// maxResponse bounds the bytes read from one response.
const maxResponse = 16 << 20

func (t *transport) once(ctx context.Context, method, rawURL string, payload []byte, out any) (http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, t.o.RequestTimeout)
	defer cancel()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, body)
	if err != nil {
		return nil, err
	}
	path := req.URL.Path
	token := t.o.Token
	if t.o.TokenSource != nil {
		if token, err = t.o.TokenSource(ctx); err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	switch t.o.Kind {
	case GitLab:
		req.Header.Set("PRIVATE-TOKEN", token)
		req.Header.Set("Accept", "application/json")
	case Gitea:
		req.Header.Set("Authorization", "token "+token)
		req.Header.Set("Accept", "application/json")
	default:
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/vnd.github+json")
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	}
	req.Header.Set("User-Agent", t.o.UserAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := t.o.Client.Do(req)
	if err != nil {
		// A *url.Error names the URL, which holds no credentials: BaseURL
		// may not have any and the token is only ever in a header.
		return nil, &transportError{method: method, path: path, err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	t.observeLimit(resp.Header)
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, &transportError{method: method, path: path, err: fmt.Errorf("read response: %w", err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, t.apiError(method, path, resp, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("%s %s: decode response: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

// limitHeaders reads a forge's rate-limit headers: X-RateLimit-* (GitHub,
// Gitea, and GitLab's older name) or RateLimit-* (GitLab). Reset is Unix
// seconds.
func limitHeaders(h http.Header) (remaining int, reset time.Time, ok bool) {
	for _, prefix := range []string{"X-RateLimit-", "RateLimit-"} {
		rem, err := strconv.Atoi(strings.TrimSpace(h.Get(prefix + "Remaining")))
		if err != nil {
			continue
		}
		if secs, err := strconv.ParseInt(strings.TrimSpace(h.Get(prefix+"Reset")), 10, 64); err == nil {
			reset = time.Unix(secs, 0)
		}
		return rem, reset, true
	}
	return 0, time.Time{}, false
}

func (t *transport) observeLimit(h http.Header) {
	rem, reset, ok := limitHeaders(h)
	if !ok {
		return
	}
	t.mu.Lock()
	t.limit = RateLimit{Known: true, Remaining: rem, Reset: reset}
	t.mu.Unlock()
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (t *transport) apiError(method, path string, resp *http.Response, data []byte) *APIError {
	e := &APIError{Method: method, Path: path, StatusCode: resp.StatusCode}
	// GitHub and Gitea answer {"message": "..."}; GitLab {"message": ...}
	// (a string, or an object of field errors) or {"error": "..."}.
	var msg struct {
		Message json.RawMessage `json:"message"`
		Error   string          `json:"error"`
	}
	if json.Unmarshal(data, &msg) == nil && (len(msg.Message) > 0 || msg.Error != "") {
		var s string
		switch {
		case json.Unmarshal(msg.Message, &s) == nil && s != "":
			e.Message = s
		case len(msg.Message) > 0 && string(msg.Message) != "null":
			e.Message = string(msg.Message)
		default:
			e.Message = msg.Error
		}
	} else {
		e.Message = strings.TrimSpace(string(data))
	}
	e.Message = clip(strings.Join(strings.Fields(e.Message), " "), 300)
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		} else if tm, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(tm.Sub(t.o.Now()), time.Millisecond)
		}
	}
	rem, reset, known := limitHeaders(resp.Header)
	limited := known && rem == 0
	if (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) &&
		(limited || e.RetryAfter > 0 || strings.Contains(strings.ToLower(e.Message), "rate limit")) {
		e.RateLimited = true
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		e.RateLimited = true
	}
	if e.RetryAfter == 0 && limited && !reset.IsZero() {
		e.RetryAfter = max(reset.Sub(t.o.Now()), time.Second)
	}
	return e
}

// clip shortens s to at most n bytes at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// clipRunes shortens s to at most n runes, the last one an ellipsis.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

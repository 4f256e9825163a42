package forge

import (
	"github.com/stackd/stackd/internal/version"

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
	"time"
	"unicode/utf8"

	"github.com/stackd/stackd/internal/backoff"
	"github.com/stackd/stackd/internal/clock"
)

// Errors returned by this package (wrapped; check with errors.Is).
var (
	// ErrInvalidOptions is returned by Options.Validate and New.
	ErrInvalidOptions = errors.New("invalid forge options")
	// ErrCommentTooLarge is returned by Upsert for a body the forge would
	// refuse (over MaxCommentChars characters with its marker).
	ErrCommentTooLarge = errors.New("comment too large")
	// ErrForeignLink is returned when a pagination link points to another
	// host than Options.BaseURL: the token is not sent there.
	ErrForeignLink = errors.New("pagination link to another host")
)

// MaxCommentChars is GitHub's limit on the length of a comment body.
const MaxCommentChars = 65536

// Options configures a Client. BaseURL, Token and Repo are required; Validate
// fills the defaults of the others.
type Options struct {
	// BaseURL is the REST API root: "https://api.github.com", or
	// "https://ghe.example.com/api/v3" for GitHub Enterprise Server.
	BaseURL string
	// Token is sent as "Authorization: Bearer <token>". It never appears in
	// errors, and String redacts it.
	Token string
	// Repo is "owner/name".
	Repo string
	// Client sends the requests. Default: a new http.Client (deadlines come
	// from RequestTimeout, not from the client).
	Client *http.Client
	// RequestTimeout bounds each request, reading its response included.
	// Default 30s.
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts of one request that fails with a
	// 5xx, a 429, a rate-limited 403 or a transport error. Default 4.
	MaxAttempts int
	// MinBackoff is the wait before the second attempt, doubled for each
	// further one. Default 1s.
	MinBackoff time.Duration
	// MaxBackoff caps the wait between attempts. A Retry-After (or rate
	// limit reset) further away than this is not waited for: the request
	// fails with the forge's answer. Default 60s.
	MaxBackoff time.Duration
	// UserAgent is sent with every request. Default "stackd/<version>".
	UserAgent string
	// Sleep waits between attempts; it returns early with ctx's error.
	// Default: a timer. Tests inject a recorder.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock used to read HTTP-date Retry-After headers and rate
	// limit resets. Default time.Now.
	Now func() time.Time
}

// String describes the options with the token redacted, so that logging
// them by accident leaks nothing.
func (o Options) String() string {
	tok := ""
	if o.Token != "" {
		tok = "<redacted>"
	}
	return fmt.Sprintf("forge.Options{BaseURL: %q, Repo: %q, Token: %q}", o.BaseURL, o.Repo, tok)
}

// GoString is String, for %#v.
func (o Options) GoString() string { return o.String() }

// Validate checks the options and fills defaults. Errors wrap
// ErrInvalidOptions.
func (o *Options) Validate() error {
	u, err := url.Parse(strings.TrimRight(o.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%w: BaseURL %q is not an http(s) URL without query or credentials", ErrInvalidOptions, o.BaseURL)
	}
	owner, name, ok := strings.Cut(o.Repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%w: Repo %q is not \"owner/name\"", ErrInvalidOptions, o.Repo)
	}
	if o.Token == "" {
		return fmt.Errorf("%w: Token is required", ErrInvalidOptions)
	}
	if strings.ContainsAny(o.Token, "\r\n") {
		return fmt.Errorf("%w: Token contains a line break", ErrInvalidOptions)
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 4
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	if o.UserAgent == "" {
		o.UserAgent = version.UserAgent("stackd")
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, clock.Real, d) }

// Client talks to one repository on a forge. It is safe for concurrent use.
type Client struct {
	o           Options
	base        *url.URL
	owner, name string
}

// New validates o (see Options.Validate) and returns a Client.
func New(o Options) (*Client, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	base, _ := url.Parse(strings.TrimRight(o.BaseURL, "/"))
	owner, name, _ := strings.Cut(o.Repo, "/")
	return &Client{o: o, base: base, owner: owner, name: name}, nil
}

// Marker is the hidden first line that identifies the comment of a stack set.
func Marker(stackSet string) string { return "<!-- stackd:changeset:" + stackSet + " -->" }

// APIError is a forge's answer other than 2xx.
type APIError struct {
	Method     string
	Path       string // the request's path, without host and query
	StatusCode int
	// Message is the forge's "message" field, or the start of the body.
	Message string
	// RetryAfter is when the forge said to try again (Retry-After, or the
	// rate limit reset), zero if it did not.
	RetryAfter time.Duration
	// RateLimited is set when the forge says a rate limit was hit.
	RateLimited bool
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	switch {
	case e.StatusCode == http.StatusUnauthorized:
		s += " (the token was refused: check that it is valid and not expired)"
	case e.RateLimited:
		s += " (rate limited"
		if e.RetryAfter > 0 {
			s += ", retry after " + e.RetryAfter.Round(time.Second).String()
		}
		s += ")"
	case e.StatusCode == http.StatusForbidden:
		s += " (the token lacks a permission: it needs write access to pull requests or issues)"
	case e.StatusCode == http.StatusNotFound:
		s += " (check the repository and pull request, and that the token can see them)"
	}
	return s
}

// retryable reports whether the request may succeed when tried again.
func (e *APIError) retryable() bool {
	return e.StatusCode >= 500 || e.StatusCode == http.StatusTooManyRequests || e.RateLimited
}

type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

// maxPages bounds how many pages of comments are read (100 comments each).
const maxPages = 100

// Upsert makes the Markdown the body of the pull request's comment for the
// stack set: it edits the comment whose first line is Marker(stackSet) if
// there is one (and leaves it alone if it already says the same), and
// creates it otherwise. The marker is prepended to markdown.
//
// Errors: ErrCommentTooLarge; *APIError for a forge's refusal (after retries
// for the retryable ones); a transport error; ctx.Err().
func (c *Client) Upsert(ctx context.Context, pr int, stackSet string, markdown string) error {
	if stackSet == "" || strings.ContainsAny(stackSet, "\r\n>") {
		return fmt.Errorf("upsert comment on pull request %d: invalid stack set name %q", pr, stackSet)
	}
	marker := Marker(stackSet)
	body := marker + "\n" + markdown
	if n := utf8.RuneCountInString(body); n > MaxCommentChars {
		return fmt.Errorf("upsert comment of %s on pull request %d: %w: %d characters, at most %d", stackSet, pr, ErrCommentTooLarge, n, MaxCommentChars)
	}
	for attempt := 1; ; attempt++ {
		id, old, found, err := c.findComment(ctx, pr, marker)
		if err != nil {
			return fmt.Errorf("find comment of %s on pull request %d: %w", stackSet, pr, err)
		}
		if found {
			if strings.ReplaceAll(old, "\r\n", "\n") == body {
				return nil
			}
			p := c.path("issues", "comments", strconv.FormatInt(id, 10))
			if _, err := c.call(ctx, http.MethodPatch, c.endpoint(p, nil), map[string]string{"body": body}, nil, true); err != nil {
				return fmt.Errorf("update comment %d of %s on pull request %d: %w", id, stackSet, pr, err)
			}
			return nil
		}
		// A create is not retried blindly: a forge may have created the
		// comment and failed to answer. The comments are listed again first.
		p := c.path("issues", strconv.Itoa(pr), "comments")
		_, err = c.call(ctx, http.MethodPost, c.endpoint(p, nil), map[string]string{"body": body}, nil, false)
		if err == nil {
			return nil
		}
		wait, ok := c.retryWait(ctx, err, attempt)
		if !ok {
			return fmt.Errorf("create comment of %s on pull request %d: %w", stackSet, pr, err)
		}
		if err := c.o.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// findComment returns the first comment of the pull request whose body
// starts with marker, reading every page.
func (c *Client) findComment(ctx context.Context, pr int, marker string) (int64, string, bool, error) {
	next := c.endpoint(c.path("issues", strconv.Itoa(pr), "comments"), url.Values{"per_page": {"100"}})
	for page := 0; next != "" && page < maxPages; page++ {
		var comments []comment
		h, err := c.call(ctx, http.MethodGet, next, nil, &comments, true)
		if err != nil {
			return 0, "", false, err
		}
		for _, cm := range comments {
			if strings.HasPrefix(strings.TrimLeft(cm.Body, " \t\r\n"), marker) {
				return cm.ID, cm.Body, true, nil
			}
		}
		if next, err = c.nextPage(h); err != nil {
			return 0, "", false, err
		}
	}
	return 0, "", false, nil
}

// PullRequestForBranch returns the number of the open pull request whose
// head is branch in this repository; found is false if there is none.
//
// Errors: *APIError; a transport error; ctx.Err().
func (c *Client) PullRequestForBranch(ctx context.Context, branch string) (int, bool, error) {
	q := url.Values{"head": {c.owner + ":" + branch}, "state": {"open"}, "per_page": {"100"}}
	var pulls []struct {
		Number int    `json:"number"`
		State  string `json:"state"`
		Head   struct {
			Ref string `json:"ref"`
		} `json:"head"`
	}
	if _, err := c.call(ctx, http.MethodGet, c.endpoint(c.path("pulls"), q), nil, &pulls, true); err != nil {
		return 0, false, fmt.Errorf("find pull request of branch %s: %w", branch, err)
	}
	for _, p := range pulls {
		// Forges that ignore the head filter list every pull request.
		if (p.Head.Ref == "" || p.Head.Ref == branch) && (p.State == "" || p.State == "open") {
			return p.Number, true, nil
		}
	}
	return 0, false, nil
}

// path is the API path of the repository followed by elems, each escaped.
func (c *Client) path(elems ...string) string {
	p := "/repos/" + url.PathEscape(c.owner) + "/" + url.PathEscape(c.name)
	for _, e := range elems {
		p += "/" + url.PathEscape(e)
	}
	return p
}

func (c *Client) endpoint(p string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + p
	u.RawPath = ""
	u.RawQuery = q.Encode()
	return u.String()
}

// nextPage returns the rel="next" link of a response's Link header, ""
// without one. A link to another scheme or host is refused.
func (c *Client) nextPage(h http.Header) (string, error) {
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
			u, err := c.base.Parse(strings.TrimSuffix(strings.TrimPrefix(target, "<"), ">"))
			if err != nil {
				return "", fmt.Errorf("pagination link %q: %w", target, err)
			}
			if u.Scheme != c.base.Scheme || u.Host != c.base.Host {
				return "", fmt.Errorf("%w: %s://%s", ErrForeignLink, u.Scheme, u.Host)
			}
			return u.String(), nil
		}
	}
	return "", nil
}

// call sends one request (JSON in, JSON out), retrying retryable failures
// if retry is set. It returns the response headers.
func (c *Client) call(ctx context.Context, method, rawURL string, in, out any, retry bool) (http.Header, error) {
	var payload []byte
	if in != nil {
		var err error
		if payload, err = json.Marshal(in); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		h, err := c.once(ctx, method, rawURL, payload, out)
		if err == nil {
			return h, nil
		}
		wait, ok := c.retryWait(ctx, err, attempt)
		if !retry || !ok {
			return nil, err
		}
		if err := c.o.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// retryWait says whether a failed attempt may be retried and after how long.
func (c *Client) retryWait(ctx context.Context, err error, attempt int) (time.Duration, bool) {
	if attempt >= c.o.MaxAttempts || ctx.Err() != nil {
		return 0, false
	}
	wait := backoff.Policy{Min: c.o.MinBackoff, Max: c.o.MaxBackoff}.Delay(attempt)
	var ae *APIError
	if !errors.As(err, &ae) {
		var te *transportError
		return wait, errors.As(err, &te)
	}
	if !ae.retryable() {
		return 0, false
	}
	if ae.RetryAfter > 0 {
		if ae.RetryAfter > c.o.MaxBackoff {
			return 0, false
		}
		return ae.RetryAfter, true
	}
	return wait, true
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

func (c *Client) once(ctx context.Context, method, rawURL string, payload []byte, out any) (http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.RequestTimeout)
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
	req.Header.Set("Authorization", "Bearer "+c.o.Token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", c.o.UserAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.o.Client.Do(req)
	if err != nil {
		// A *url.Error names the URL, which holds no credentials: BaseURL
		// may not have any and the token is only ever in a header.
		return nil, &transportError{method: method, path: path, err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, &transportError{method: method, path: path, err: fmt.Errorf("read response: %w", err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.apiError(method, path, resp, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return nil, fmt.Errorf("%s %s: decode response: %w", method, path, err)
		}
	}
	return resp.Header, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (c *Client) apiError(method, path string, resp *http.Response, data []byte) *APIError {
	e := &APIError{Method: method, Path: path, StatusCode: resp.StatusCode}
	var msg struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &msg) == nil && msg.Message != "" {
		e.Message = msg.Message
	} else {
		e.Message = strings.TrimSpace(string(data))
	}
	e.Message = clip(strings.Join(strings.Fields(e.Message), " "), 300)
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(t.Sub(c.o.Now()), time.Millisecond)
		}
	}
	limited := resp.Header.Get("X-RateLimit-Remaining") == "0"
	if (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) &&
		(limited || e.RetryAfter > 0 || strings.Contains(strings.ToLower(e.Message), "rate limit")) {
		e.RateLimited = true
	}
	if e.RetryAfter == 0 && limited {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			e.RetryAfter = max(time.Unix(reset, 0).Sub(c.o.Now()), time.Second)
		}
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

package forge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stackd/stackd/internal/clock"
	"github.com/stackd/stackd/internal/version"
)

// Errors returned by this package (wrapped; check with errors.Is).
var (
	// ErrInvalidOptions is returned by Options.Validate and New.
	ErrInvalidOptions = errors.New("invalid forge options")
	// ErrForeignLink is returned when a pagination link points to another
	// host than Options.BaseURL: the token is not sent there.
	ErrForeignLink = errors.New("pagination link to another host")
)

// Comment size limits, in characters. GitHub documents 65,536 for a
// comment body; GitLab 1,000,000 for a note. Gitea and Forgejo document
// none (the column is unbounded text), so stackd keeps GitHub's: a comment
// that long is unreadable anyway, and reverse proxies in front of
// self-hosted forges often bound request bodies at about 1 MB.
const (
	MaxCommentChars       = 65536
	MaxGitLabCommentChars = 1000000
	MaxGiteaCommentChars  = 65536
)

// Options configures a client. BaseURL, Repo and Token (or TokenSource)
// are required; Validate fills the defaults of the others.
type Options struct {
	// Kind is the forge's API (default GitHub).
	Kind Kind
	// BaseURL is the REST API root: "https://api.github.com",
	// "https://ghe.example.com/api/v3", "https://gitlab.com/api/v4",
	// "https://gitea.example.com/api/v1".
	BaseURL string
	// Token is sent as "Authorization: Bearer <token>" (GitHub),
	// "Authorization: token <token>" (Gitea) or "PRIVATE-TOKEN: <token>"
	// (GitLab). It never appears in errors, and String redacts it.
	Token string
	// TokenSource, if set, gives the token of each request instead of
	// Token (a GitHub App's installation token, GitHubApp.Token).
	TokenSource func(ctx context.Context) (string, error)
	// Repo is "owner/name" ("group/subgroup/name" on GitLab).
	Repo string
	// Client sends the requests. Default: a new http.Client (deadlines come
	// from RequestTimeout, not from the client).
	Client *http.Client
	// RequestTimeout bounds each request, reading its response included.
	// Default 30s.
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts of one request that fails with a
	// 5xx, a 429, a rate-limited 403 or a transport error. Default 4; the
	// Queue sets 1 and retries by itself.
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
	// Clock is the default of Sleep and Now (default the real clock).
	Clock clock.Clock
	// Sleep waits between attempts; it returns early with ctx's error.
	// Default: Clock.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock used to read HTTP-date Retry-After headers and rate
	// limit resets. Default Clock.Now.
	Now func() time.Time
}

// String describes the options with the token redacted, so that logging
// them by accident leaks nothing.
func (o Options) String() string {
	tok := ""
	if o.Token != "" {
		tok = "<redacted>"
	}
	return fmt.Sprintf("forge.Options{Kind: %q, BaseURL: %q, Repo: %q, Token: %q}", o.Kind, o.BaseURL, o.Repo, tok)
}

// GoString is String, for %#v.
func (o Options) GoString() string { return o.String() }

// Validate checks the options and fills defaults. Errors wrap
// ErrInvalidOptions.
func (o *Options) Validate() error {
	switch o.Kind {
	case "":
		o.Kind = GitHub
	case GitHub, GitLab, Gitea:
	default:
		return fmt.Errorf("%w: Kind %q", ErrInvalidOptions, o.Kind)
	}
	u, err := url.Parse(strings.TrimRight(o.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%w: BaseURL %q is not an http(s) URL without query or credentials", ErrInvalidOptions, o.BaseURL)
	}
	parts := strings.Split(o.Repo, "/")
	// On GitLab, a project's numeric id names it as well as its path.
	gitlabID := o.Kind == GitLab && isProjectID(o.Repo)
	if !gitlabID && (len(parts) < 2 || (o.Kind != GitLab && len(parts) != 2) || strings.Contains(o.Repo, "//") || parts[0] == "" || parts[len(parts)-1] == "") {
		return fmt.Errorf("%w: Repo %q is not \"owner/name\"", ErrInvalidOptions, o.Repo)
	}
	if o.Token == "" && o.TokenSource == nil {
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
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Sleep == nil {
		c := o.Clock
		o.Sleep = func(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, c, d) }
	}
	if o.Now == nil {
		o.Now = o.Clock.Now
	}
	return nil
}

// Open returns the client of o.Kind.
func Open(o Options) (Forge, error) {
	if o.Kind == GitLab {
		return NewGitLab(o)
	}
	return New(o)
}

// Client talks to one repository on GitHub or Gitea (whose API follows
// GitHub's for everything used here but the page size parameter and the
// authorization scheme). It is safe for concurrent use.
type Client struct {
	*transport
	owner, name string
}

var _ Forge = (*Client)(nil)

// New validates o (see Options.Validate) and returns a Client; o.Kind must
// be GitHub or Gitea.
func New(o Options) (*Client, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Kind == GitLab {
		return nil, fmt.Errorf("%w: use NewGitLab for GitLab", ErrInvalidOptions)
	}
	owner, name, _ := strings.Cut(o.Repo, "/")
	return &Client{transport: newTransport(o), owner: owner, name: name}, nil
}

// Kind is GitHub or Gitea.
func (c *Client) Kind() Kind { return c.o.Kind }

// MaxCommentChars is the forge's limit on a comment body.
func (c *Client) MaxCommentChars() int {
	if c.o.Kind == Gitea {
		return MaxGiteaCommentChars
	}
	return MaxCommentChars
}

// Marker is the hidden first line that identifies the comment of a stack set.
func Marker(stackSet string) string { return "<!-- stackd:changeset:" + stackSet + " -->" }

func validStackSet(stackSet string) error {
	if stackSet == "" || strings.ContainsAny(stackSet, "\r\n>") {
		return fmt.Errorf("invalid stack set name %q", stackSet)
	}
	return nil
}

// commentBody is the marker line and the Markdown, cut to limit characters
// with a note (and a link to the full text, if known) when it is longer.
func commentBody(c Comment, limit int) string {
	body := Marker(c.StackSet) + "\n" + c.Markdown
	if utf8.RuneCountInString(body) <= limit {
		return body
	}
	note := fmt.Sprintf("\n\n---\n**This change set is cut here**: it is longer than the %d characters a comment may have here.", limit)
	if c.FullURL != "" {
		note += fmt.Sprintf(" The full change set: [%s](%s).", c.StackSet+".md", c.FullURL)
	} else {
		note += " The full change set is on the status branch."
	}
	note += "\n"
	keep := limit - utf8.RuneCountInString(note) - 5
	cut := body
	n := 0
	for i := range body { // the byte offset of rune keep
		if n == keep {
			cut = body[:i]
			break
		}
		n++
	}
	// Close a code fence left open, so the note renders as text.
	if strings.Count(cut, "```")%2 == 1 {
		cut += "\n```"
	}
	return cut + note
}

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
		s += " (the token lacks a permission: it needs write access to pull requests or issues, and to commit statuses)"
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
	ID      int64  `json:"id"`
	Body    string `json:"body"`
	HTMLURL string `json:"html_url"`
}

// maxPages bounds how many pages of a list are read.
const maxPages = 100

// perPage is the page size parameter: Gitea's is "limit" (at most 50 by
// default), GitHub's "per_page" (at most 100).
func (c *Client) perPage(q url.Values) url.Values {
	if q == nil {
		q = url.Values{}
	}
	if c.o.Kind == Gitea {
		q.Set("limit", "50")
	} else {
		q.Set("per_page", "100")
	}
	return q
}

// Upsert makes the Markdown the body of the pull request's comment for the
// stack set (see UpsertComment).
func (c *Client) Upsert(ctx context.Context, pr int, stackSet string, markdown string) error {
	_, err := c.UpsertComment(ctx, PullRequest{Number: pr}, Comment{StackSet: stackSet, Markdown: markdown})
	return err
}

// UpsertComment edits the comment whose first line is Marker(c.StackSet)
// if there is one (and leaves it alone if it already says the same), and
// creates it otherwise (unless c.OnlyIfExists). The marker is prepended to
// the Markdown; a body over MaxCommentChars is cut with a note.
//
// Errors: *APIError for a forge's refusal (after retries for the retryable
// ones); a transport error; ctx.Err().
func (c *Client) UpsertComment(ctx context.Context, pr PullRequest, cm Comment) (string, error) {
	if err := validStackSet(cm.StackSet); err != nil {
		return "", fmt.Errorf("upsert comment on pull request %d: %w", pr.Number, err)
	}
	marker := Marker(cm.StackSet)
	body := commentBody(cm, c.MaxCommentChars())
	for attempt := 1; ; attempt++ {
		old, found, err := c.findComment(ctx, pr.Number, marker)
		if err != nil {
			return "", fmt.Errorf("find comment of %s on pull request %d: %w", cm.StackSet, pr.Number, err)
		}
		if found {
			if strings.ReplaceAll(old.Body, "\r\n", "\n") == body {
				return old.HTMLURL, nil
			}
			p := c.path("issues", "comments", strconv.FormatInt(old.ID, 10))
			var out comment
			if _, err := c.call(ctx, http.MethodPatch, c.endpoint(p, nil), map[string]string{"body": body}, &out, true); err != nil {
				return "", fmt.Errorf("update comment %d of %s on pull request %d: %w", old.ID, cm.StackSet, pr.Number, err)
			}
			return out.HTMLURL, nil
		}
		if cm.OnlyIfExists {
			return "", nil
		}
		// A create is not retried blindly: a forge may have created the
		// comment and failed to answer. The comments are listed again first.
		p := c.path("issues", strconv.Itoa(pr.Number), "comments")
		var out comment
		_, err = c.call(ctx, http.MethodPost, c.endpoint(p, nil), map[string]string{"body": body}, &out, false)
		if err == nil {
			return out.HTMLURL, nil
		}
		wait, ok := c.retryWait(ctx, err, attempt)
		if !ok {
			return "", fmt.Errorf("create comment of %s on pull request %d: %w", cm.StackSet, pr.Number, err)
		}
		if err := c.o.Sleep(ctx, wait); err != nil {
			return "", err
		}
	}
}

// hasMarker reports whether a comment body starts with marker.
func hasMarker(body, marker string) bool {
	return strings.HasPrefix(strings.TrimLeft(body, " \t\r\n"), marker)
}

// findComment returns the first comment of the pull request whose body
// starts with marker, reading every page.
func (c *Client) findComment(ctx context.Context, pr int, marker string) (comment, bool, error) {
	next := c.endpoint(c.path("issues", strconv.Itoa(pr), "comments"), c.perPage(nil))
	for page := 0; next != "" && page < maxPages; page++ {
		var comments []comment
		h, err := c.call(ctx, http.MethodGet, next, nil, &comments, true)
		if err != nil {
			return comment{}, false, err
		}
		for _, cm := range comments {
			if hasMarker(cm.Body, marker) {
				return cm, true, nil
			}
		}
		if next, err = c.nextPage(h); err != nil {
			return comment{}, false, err
		}
	}
	return comment{}, false, nil
}

type pull struct {
	Number  int    `json:"number"`
	State   string `json:"state"`
	HTMLURL string `json:"html_url"`
	Head    struct {
		Ref  string `json:"ref"`
		SHA  string `json:"sha"`
		Repo *struct {
			FullName string `json:"full_name"`
		} `json:"repo"`
	} `json:"head"`
}

// OpenPullRequests lists the open pull requests of branches of this
// repository, reading every page.
func (c *Client) OpenPullRequests(ctx context.Context) ([]PullRequest, error) {
	var out []PullRequest
	next := c.endpoint(c.path("pulls"), c.perPage(url.Values{"state": {"open"}}))
	for page := 0; next != "" && page < maxPages; page++ {
		var pulls []pull
		h, err := c.call(ctx, http.MethodGet, next, nil, &pulls, true)
		if err != nil {
			return nil, fmt.Errorf("list open pull requests: %w", err)
		}
		for _, p := range pulls {
			if p.State != "" && p.State != "open" {
				continue
			}
			if p.Head.Repo != nil && p.Head.Repo.FullName != "" && !strings.EqualFold(p.Head.Repo.FullName, c.owner+"/"+c.name) {
				continue // a fork's branch
			}
			out = append(out, PullRequest{Number: p.Number, Branch: p.Head.Ref, HeadSHA: p.Head.SHA, URL: p.HTMLURL})
		}
		if next, err = c.nextPage(h); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// PullRequestForBranch returns the number of the open pull request whose
// head is branch in this repository; found is false if there is none.
//
// Errors: *APIError; a transport error; ctx.Err().
func (c *Client) PullRequestForBranch(ctx context.Context, branch string) (int, bool, error) {
	q := c.perPage(url.Values{"head": {c.owner + ":" + branch}, "state": {"open"}})
	var pulls []pull
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

type ghStatus struct {
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// CommitStatus reads the combined status of sha (GET
// /repos/{owner}/{repo}/commits/{sha}/status: the latest status of each
// context) and returns context's.
func (c *Client) CommitStatus(ctx context.Context, sha, context string) (Status, bool, error) {
	next := c.endpoint(c.path("commits", sha, "status"), c.perPage(nil))
	for page := 0; next != "" && page < maxPages; page++ {
		var combined struct {
			Statuses []struct {
				ghStatus
				// Gitea and Forgejo name a listed status's state
				// "status" (they take "state" when one is posted).
				GiteaState string `json:"status"`
			} `json:"statuses"`
		}
		h, err := c.call(ctx, http.MethodGet, next, nil, &combined, true)
		if err != nil {
			return Status{}, false, fmt.Errorf("read status %s of %s: %w", context, short(sha), err)
		}
		for _, s := range combined.Statuses {
			if s.Context == context {
				return Status{Context: s.Context, State: StatusState(cmp.Or(s.State, s.GiteaState)), Description: s.Description, TargetURL: s.TargetURL}, true, nil
			}
		}
		if next, err = c.nextPage(h); err != nil {
			return Status{}, false, err
		}
	}
	return Status{}, false, nil
}

// SetCommitStatus creates a status on sha (POST
// /repos/{owner}/{repo}/statuses/{sha}).
func (c *Client) SetCommitStatus(ctx context.Context, sha string, s Status) error {
	s = s.normalize()
	in := ghStatus{State: string(s.State), Context: s.Context, Description: s.Description, TargetURL: s.TargetURL}
	if _, err := c.call(ctx, http.MethodPost, c.endpoint(c.path("statuses", sha), nil), in, nil, true); err != nil {
		return fmt.Errorf("set status %s of %s: %w", s.Context, short(sha), err)
	}
	return nil
}

// isProjectID reports whether s is a GitLab project's numeric id.
func isProjectID(s string) bool {
	if s == "" || len(s) > 19 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// path is the API path of the repository followed by elems, each escaped.
func (c *Client) path(elems ...string) string {
	p := "/repos/" + url.PathEscape(c.owner) + "/" + url.PathEscape(c.name)
	for _, e := range elems {
		p += "/" + url.PathEscape(e)
	}
	return p
}

// short is a commit's abbreviation, for messages.
func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

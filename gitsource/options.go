package gitsource

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Defaults filled in by [Options.Validate].
const (
	DefaultBranch       = "main"
	DefaultStatusBranch = "stackd/status"
	DefaultAuthorName   = "stackd"
	DefaultAuthorEmail  = "stackd@localhost"
	DefaultFetchTimeout = 60 * time.Second
)

// Options configures [Open].
type Options struct {
	// Repo is a URL go-git can clone (file://, git://, http(s)://, ssh:// or scp-like
	// user@host:path) or a local path to a repository (bare, or the root of a work tree).
	Repo string
	// Branch is the deploy branch. Default "main".
	Branch string
	// StatusBranch receives status commits. Default "stackd/status". It may equal Branch.
	StatusBranch string
	// CacheDir is the directory of the bare cache clone for a URL repository. Required
	// for URLs, ignored for local paths.
	CacheDir string
	// AuthorName and AuthorEmail sign status commits (author and committer).
	// Defaults "stackd" and "stackd@localhost".
	AuthorName  string
	AuthorEmail string
	// FetchTimeout bounds each network operation (one fetch, one push). Default 60s.
	FetchTimeout time.Duration
	// Auth are credentials for a private repository (see Auth).
	Auth Auth
}

// Validate checks the options and fills in defaults. Errors wrap [ErrInvalidOptions].
func (o *Options) Validate() error {
	if strings.TrimSpace(o.Repo) == "" {
		return fmt.Errorf("repo is empty: %w", ErrInvalidOptions)
	}
	if o.Branch == "" {
		o.Branch = DefaultBranch
	}
	if o.StatusBranch == "" {
		o.StatusBranch = DefaultStatusBranch
	}
	for _, b := range []string{o.Branch, o.StatusBranch} {
		if !validBranchName(b) {
			return fmt.Errorf("branch name %q is not a valid Git branch name: %w", b, ErrInvalidOptions)
		}
	}
	if o.AuthorName == "" {
		o.AuthorName = DefaultAuthorName
	}
	if o.AuthorEmail == "" {
		o.AuthorEmail = DefaultAuthorEmail
	}
	if o.FetchTimeout < 0 {
		return fmt.Errorf("fetch timeout %s is negative: %w", o.FetchTimeout, ErrInvalidOptions)
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if IsURL(o.Repo) && o.CacheDir == "" {
		return fmt.Errorf("repo %s is a URL, so a cache directory is required: %w",
			redactURL(o.Repo), ErrInvalidOptions)
	}
	return nil
}

// validBranchName reports whether name is a short branch name Git accepts.
func validBranchName(name string) bool {
	return name != "" && plumbing.NewBranchReferenceName(name).Validate() == nil
}

// scpLike matches git's scp-like remote syntax: [user@]host:path (host without a slash).
var scpLike = regexp.MustCompile(`^(?:[^@/\s]+@)?[A-Za-z0-9._-]+:`)

// IsURL reports whether repo names a remote (anything go-git clones over a transport,
// file:// included) rather than a local path.
func IsURL(repo string) bool {
	if strings.Contains(repo, "://") {
		return true
	}
	// A path starting with / or . is local even if it contains a colon.
	if strings.HasPrefix(repo, "/") || strings.HasPrefix(repo, ".") {
		return false
	}
	return scpLike.MatchString(repo)
}

// redactURL hides credentials in a URL's user info so errors never leak them: the
// password always, and for http(s) a lone user name too (tokens are often passed that way).
func redactURL(raw string) string {
	if !strings.Contains(raw, "://") {
		if m := scpPassword.FindStringSubmatch(raw); m != nil {
			return m[1] + ":xxxxx@" + m[3]
		}
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	if u.User == nil {
		return raw
	}
	if _, hasPassword := u.User.Password(); !hasPassword && (u.Scheme == "http" || u.Scheme == "https") {
		u.User = url.User("redacted")
	}
	return u.Redacted()
}

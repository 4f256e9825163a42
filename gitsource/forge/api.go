package forge

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// Kind names a forge's API.
type Kind string

// The forges stackd speaks to.
const (
	GitHub Kind = "github" // REST v3: github.com and GitHub Enterprise Server
	GitLab Kind = "gitlab" // REST v4: gitlab.com and self-managed
	Gitea  Kind = "gitea"  // REST /api/v1: Gitea and Forgejo
)

// ParseKind reads a --forge value; "" guesses it from the API base URL
// (GuessKind).
func ParseKind(s, baseURL string) (Kind, error) {
	switch k := Kind(strings.ToLower(strings.TrimSpace(s))); k {
	case GitHub, GitLab, Gitea:
		return k, nil
	case "forgejo":
		return Gitea, nil
	case "":
		return GuessKind(baseURL), nil
	default:
		return "", fmt.Errorf("%w: forge %q: use github, gitlab or gitea", ErrInvalidOptions, s)
	}
}

// GuessKind guesses the forge from its API base URL: a path ending in
// /api/v4 or a host named gitlab is GitLab, /api/v1 or a host named gitea,
// forgejo or codeberg is Gitea, anything else (api.github.com, /api/v3) is
// GitHub.
func GuessKind(baseURL string) Kind {
	u, err := url.Parse(baseURL)
	if err != nil {
		return GitHub
	}
	p := strings.TrimRight(u.Path, "/")
	h := strings.ToLower(u.Hostname())
	switch {
	case strings.HasSuffix(p, "/api/v4") || strings.Contains(h, "gitlab"):
		return GitLab
	case strings.HasSuffix(p, "/api/v1") || strings.Contains(h, "gitea") || strings.Contains(h, "forgejo") || strings.Contains(h, "codeberg"):
		return Gitea
	}
	return GitHub
}

// APIBaseURL is the REST API root of the forge of kind k at raw, which
// may be the API's root already or the forge's web address, as a user
// copies it from the browser: https://github.com becomes
// https://api.github.com, a GitLab at https://gitlab.example.com (or
// https://example.com/gitlab) gets /api/v4, a Gitea or Forgejo /api/v1. A
// GitHub Enterprise Server's root (/api/v3) cannot be told from another
// GitHub-compatible API's, so other GitHub URLs are kept as given, and so
// is anything that does not parse (Options.Validate refuses it).
func APIBaseURL(k Kind, raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return raw
	}
	p := strings.TrimRight(u.Path, "/")
	switch k {
	case GitHub:
		if h := strings.ToLower(u.Hostname()); (h == "github.com" || h == "www.github.com") && u.Port() == "" {
			u.Host, p = "api.github.com", ""
		}
	case GitLab:
		p = withAPIPath(p, "/api/v4")
	case Gitea:
		p = withAPIPath(p, "/api/v1")
	}
	u.Path, u.RawPath = p, ""
	return u.String()
}

// withAPIPath ends p with api ("/api/v4"), completing a bare "/api".
func withAPIPath(p, api string) string {
	switch {
	case strings.HasSuffix(p, api):
		return p
	case strings.HasSuffix(p, "/api"):
		return strings.TrimSuffix(p, "/api") + api
	}
	return p + api
}

// Forge is what stackd needs from a forge: the open pull (merge) requests,
// one comment per pull request and stack set kept up to date, and commit
// statuses. Implementations: *Client (GitHub, Gitea) and *GitLabClient.
// Calls block on the network; the Queue runs them off the caller's path.
type Forge interface {
	// Kind is the forge's API.
	Kind() Kind
	// OpenPullRequests lists the open pull requests whose head branch is
	// in this repository (pull requests from forks are left out: their
	// branches are not in the repository stackd reads).
	OpenPullRequests(ctx context.Context) ([]PullRequest, error)
	// UpsertComment makes c the pull request's comment of c.StackSet (see
	// Comment) and returns the comment's web URL ("" when OnlyIfExists
	// found none).
	UpsertComment(ctx context.Context, pr PullRequest, c Comment) (string, error)
	// CommitStatus returns the forge's latest status of sha in context;
	// found is false if there is none.
	CommitStatus(ctx context.Context, sha, context string) (s Status, found bool, err error)
	// SetCommitStatus sets a status on sha.
	SetCommitStatus(ctx context.Context, sha string, s Status) error
	// MaxCommentChars is the forge's limit on a comment's length.
	MaxCommentChars() int
}

// PullRequest is an open pull request (a merge request on GitLab).
type PullRequest struct {
	// Number is GitHub's and Gitea's number, GitLab's iid.
	Number int
	// Branch is the head (source) branch.
	Branch string
	// HeadSHA is the commit the pull request's head points at.
	HeadSHA string
	// URL is the pull request's web page.
	URL string
}

// Comment is the change set of a stack set for a pull request.
type Comment struct {
	StackSet string
	Markdown string
	// FullURL is where the full Markdown can be read (the change set on
	// the status branch); a comment over the forge's limit is cut and ends
	// with a link to it.
	FullURL string
	// OnlyIfExists edits the stack set's comment if it has one and
	// creates none otherwise (a change set that became empty).
	OnlyIfExists bool
}

// StatusState is a commit status's state, as GitHub names them.
type StatusState string

// Commit status states (GitLab's "failed" is Failure, its "running"
// Pending, its "canceled" Error).
const (
	Pending StatusState = "pending"
	Success StatusState = "success"
	Failure StatusState = "failure"
	Error   StatusState = "error"
)

// Status is a commit status.
type Status struct {
	// Context names the check: "stackd/plan", "stackd/deploy".
	Context     string
	State       StatusState
	Description string
	TargetURL   string
}

// maxDescription is GitHub's limit on a status description (GitLab's is
// 255, Gitea has none): descriptions are cut to it everywhere.
const maxDescription = 140

func (s Status) normalize() Status {
	s.Description = clipRunes(strings.Join(strings.Fields(s.Description), " "), maxDescription)
	return s
}

// Same reports whether the forge's status b says what s does.
func (s Status) Same(b Status) bool {
	s, b = s.normalize(), b.normalize()
	return s.Context == b.Context && s.State == b.State && s.Description == b.Description && s.TargetURL == b.TargetURL
}

// RepoWebURL is the repository's web page, derived from the web URL of one
// of its pull requests ("" if it cannot be).
func RepoWebURL(prURL string) string {
	for _, sep := range []string{"/-/merge_requests/", "/pull/", "/pulls/"} {
		if i := strings.LastIndex(prURL, sep); i > 0 {
			return prURL[:i]
		}
	}
	return ""
}

// FileURL is the web URL of path on branch of the repository whose web
// page is repoWeb, on a forge of kind k ("" without repoWeb).
func FileURL(k Kind, repoWeb, branch, path string) string {
	if repoWeb == "" {
		return ""
	}
	esc := func(s string) string {
		parts := strings.Split(s, "/")
		for i, p := range parts {
			parts[i] = url.PathEscape(p)
		}
		return strings.Join(parts, "/")
	}
	switch k {
	case GitLab:
		return repoWeb + "/-/blob/" + esc(branch) + "/" + esc(path)
	case Gitea:
		return repoWeb + "/src/branch/" + esc(branch) + "/" + esc(path)
	default:
		return repoWeb + "/blob/" + esc(branch) + "/" + esc(path)
	}
}

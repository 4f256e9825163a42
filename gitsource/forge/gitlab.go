package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// GitLabClient talks to one project on GitLab (REST v4: gitlab.com and
// self-managed): merge requests, their notes (one per stack set, edited in
// place) and commit statuses. It is safe for concurrent use.
type GitLabClient struct {
	*transport
	// project is the URL-encoded project path, GitLab's :id.
	project string
}

var _ Forge = (*GitLabClient)(nil)

// NewGitLab validates o (o.Kind is set to GitLab; Repo is the project's
// path, "group/subgroup/name") and returns a GitLabClient.
func NewGitLab(o Options) (*GitLabClient, error) {
	o.Kind = GitLab
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &GitLabClient{transport: newTransport(o), project: url.PathEscape(o.Repo)}, nil
}

// Kind is GitLab.
func (c *GitLabClient) Kind() Kind { return GitLab }

// MaxCommentChars is GitLab's limit on a note (1,000,000 characters).
func (c *GitLabClient) MaxCommentChars() int { return MaxGitLabCommentChars }

// path is /projects/:id followed by elems, each escaped.
func (c *GitLabClient) path(elems ...string) string {
	p := "/projects/" + c.project
	for _, e := range elems {
		p += "/" + url.PathEscape(e)
	}
	return p
}

// list reads every page of a list, following the Link header or, where a
// proxy dropped it, X-Next-Page.
func (c *GitLabClient) list(ctx context.Context, p string, q url.Values, each func(h http.Header) any, use func()) error {
	q.Set("per_page", "100")
	next := c.endpoint(p, q)
	for page := 0; next != "" && page < maxPages; page++ {
		out := each(nil)
		h, err := c.call(ctx, http.MethodGet, next, nil, out, true)
		if err != nil {
			return err
		}
		use()
		if next, err = c.nextPage(h); err != nil {
			return err
		}
		if next == "" {
			if np := h.Get("X-Next-Page"); np != "" {
				if _, err := strconv.Atoi(np); err == nil {
					q.Set("page", np)
					next = c.endpoint(p, q)
				}
			}
		}
	}
	return nil
}

type glMR struct {
	IID          int    `json:"iid"`
	State        string `json:"state"`
	SourceBranch string `json:"source_branch"`
	SHA          string `json:"sha"`
	WebURL       string `json:"web_url"`
	SourceProj   int64  `json:"source_project_id"`
	TargetProj   int64  `json:"target_project_id"`
}

// OpenPullRequests lists the project's open merge requests whose source
// branch is in the project (GET /projects/:id/merge_requests?state=opened).
func (c *GitLabClient) OpenPullRequests(ctx context.Context) ([]PullRequest, error) {
	var out []PullRequest
	var page []glMR
	err := c.list(ctx, c.path("merge_requests"), url.Values{"state": {"opened"}}, func(http.Header) any { page = nil; return &page }, func() {
		for _, mr := range page {
			if mr.State != "" && mr.State != "opened" {
				continue
			}
			if mr.SourceProj != 0 && mr.TargetProj != 0 && mr.SourceProj != mr.TargetProj {
				continue // a fork's branch
			}
			out = append(out, PullRequest{Number: mr.IID, Branch: mr.SourceBranch, HeadSHA: mr.SHA, URL: mr.WebURL})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list open merge requests: %w", err)
	}
	return out, nil
}

type glNote struct {
	ID     int64  `json:"id"`
	Body   string `json:"body"`
	System bool   `json:"system"`
}

// UpsertComment keeps one note per merge request and stack set: the note
// whose first line is Marker(c.StackSet) is edited (PUT
// /projects/:id/merge_requests/:iid/notes/:note_id) unless it already says
// the same, or created (POST .../notes) unless c.OnlyIfExists. The URL
// returned is the merge request's page with the note's anchor.
func (c *GitLabClient) UpsertComment(ctx context.Context, pr PullRequest, cm Comment) (string, error) {
	if err := validStackSet(cm.StackSet); err != nil {
		return "", fmt.Errorf("upsert note on merge request %d: %w", pr.Number, err)
	}
	marker := Marker(cm.StackSet)
	body := commentBody(cm, c.MaxCommentChars())
	noteURL := func(id int64) string {
		if pr.URL == "" {
			return ""
		}
		return pr.URL + "#note_" + strconv.FormatInt(id, 10)
	}
	notes := c.path("merge_requests", strconv.Itoa(pr.Number), "notes")
	for attempt := 1; ; attempt++ {
		var found *glNote
		var page []glNote
		err := c.list(ctx, notes, url.Values{"sort": {"asc"}, "order_by": {"created_at"}}, func(http.Header) any { page = nil; return &page }, func() {
			for i := range page {
				if found == nil && !page[i].System && hasMarker(page[i].Body, marker) {
					n := page[i]
					found = &n
				}
			}
		})
		if err != nil {
			return "", fmt.Errorf("find note of %s on merge request %d: %w", cm.StackSet, pr.Number, err)
		}
		if found != nil {
			if strings.ReplaceAll(found.Body, "\r\n", "\n") == body {
				return noteURL(found.ID), nil
			}
			p := notes + "/" + strconv.FormatInt(found.ID, 10)
			if _, err := c.call(ctx, http.MethodPut, c.endpoint(p, nil), map[string]string{"body": body}, nil, true); err != nil {
				return "", fmt.Errorf("update note %d of %s on merge request %d: %w", found.ID, cm.StackSet, pr.Number, err)
			}
			return noteURL(found.ID), nil
		}
		if cm.OnlyIfExists {
			return "", nil
		}
		var out glNote
		_, err = c.call(ctx, http.MethodPost, c.endpoint(notes, nil), map[string]string{"body": body}, &out, false)
		if err == nil {
			return noteURL(out.ID), nil
		}
		wait, ok := c.retryWait(ctx, err, attempt)
		if !ok {
			return "", fmt.Errorf("create note of %s on merge request %d: %w", cm.StackSet, pr.Number, err)
		}
		if err := c.o.Sleep(ctx, wait); err != nil {
			return "", err
		}
	}
}

type glStatus struct {
	Name        string `json:"name"`
	Status      string `json:"status"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// GitLab's states: pending, running, success, failed, canceled (and
// created, skipped, manual for pipeline jobs).
func toGitLab(s StatusState) string {
	switch s {
	case Success:
		return "success"
	case Failure, Error:
		return "failed"
	default:
		return "pending"
	}
}

func fromGitLab(s string) StatusState {
	switch s {
	case "success":
		return Success
	case "failed":
		return Failure
	case "canceled", "skipped":
		return Error
	default:
		return Pending
	}
}

// CommitStatus returns the latest status named context on sha (GET
// /projects/:id/repository/commits/:sha/statuses?name=...: the latest of
// each name).
// An Error state reads back as Failure (GitLab has one failed state).
func (c *GitLabClient) CommitStatus(ctx context.Context, sha, context string) (Status, bool, error) {
	var got *glStatus
	var page []glStatus
	err := c.list(ctx, c.path("repository", "commits", sha, "statuses"), url.Values{"name": {context}}, func(http.Header) any { page = nil; return &page }, func() {
		// Without all=true GitLab lists the latest status of each name.
		for i := range page {
			if got == nil && page[i].Name == context {
				s := page[i]
				got = &s
			}
		}
	})
	if err != nil {
		return Status{}, false, fmt.Errorf("read status %s of %s: %w", context, short(sha), err)
	}
	if got == nil {
		return Status{}, false, nil
	}
	return Status{Context: got.Name, State: fromGitLab(got.Status), Description: got.Description, TargetURL: got.TargetURL}, true, nil
}

// SetCommitStatus sets a status on sha (POST /projects/:id/statuses/:sha).
// GitLab refuses to post a state a status already has (400 "Cannot
// transition status"); the Queue reads the current status first.
func (c *GitLabClient) SetCommitStatus(ctx context.Context, sha string, s Status) error {
	s = s.normalize()
	in := map[string]string{"state": toGitLab(s.State), "name": s.Context, "description": s.Description}
	if s.TargetURL != "" {
		in["target_url"] = s.TargetURL
	}
	if _, err := c.call(ctx, http.MethodPost, c.endpoint(c.path("statuses", sha), nil), in, nil, true); err != nil {
		return fmt.Errorf("set status %s of %s: %w", s.Context, short(sha), err)
	}
	return nil
}

package forge

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrPaused is returned by Reviews.OpenPullRequests while the forge's rate
// limit or Retry-After holds its calls back.
var ErrPaused = errors.New("forge calls paused by its rate limit")

// Reviews is what the reconciler asks of a forge, over a Queue: the open
// pull requests (asked at once), and comments and statuses (queued). It
// remembers each pull request's latest comment URL, the target of its
// stackd/plan status.
type Reviews struct {
	Queue *Queue
	// StatusBranch is where the full change sets are (the links of cut
	// comments).
	StatusBranch string
	// PerStackSet: stackd/deploy is set once per stack set
	// (stackd/deploy/<name>) instead of once per commit.
	PerStackSet bool
	// ListTimeout bounds OpenPullRequests (default 10s): a forge that
	// hangs delays a pass's branch planning by no more.
	ListTimeout time.Duration

	mu       sync.Mutex
	prs      map[string]PullRequest // by branch, from the latest listing
	comments map[int]string         // pull request → a stackd comment's URL
}

// OpenPullRequests lists the open pull requests by head branch. While the
// queue is paused by a rate limit it fails at once (ErrPaused): the caller
// goes on without.
func (r *Reviews) OpenPullRequests(ctx context.Context) (map[string]PullRequest, error) {
	if st := r.Queue.Stats(); st.PausedUntil != nil {
		return nil, ErrPaused
	}
	d := r.ListTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	prs, err := r.Queue.Forge().OpenPullRequests(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]PullRequest, len(prs))
	for _, p := range prs {
		if _, dup := out[p.Branch]; !dup {
			out[p.Branch] = p
		}
	}
	r.mu.Lock()
	r.prs = out
	r.mu.Unlock()
	return out, nil
}

// PullRequest returns the open pull request of branch as last listed.
func (r *Reviews) PullRequest(branch string) (PullRequest, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.prs[branch]
	return p, ok
}

// Comment queues the comment of a stack set on pr; fullPath is the change
// set's path on the status branch (the link of a comment cut to the
// forge's limit). settled, if set, is called once the forge has the
// comment or refused it for good.
func (r *Reviews) Comment(pr PullRequest, c Comment, fullPath string, settled func()) {
	if c.FullURL == "" && fullPath != "" {
		c.FullURL = FileURL(r.Queue.Forge().Kind(), RepoWebURL(pr.URL), r.StatusBranch, fullPath)
	}
	r.Queue.Comment(pr, c, func(u string) {
		if settled != nil {
			defer settled()
		}
		if u == "" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.comments == nil {
			r.comments = map[int]string{}
		}
		if _, ok := r.comments[pr.Number]; !ok {
			r.comments[pr.Number] = u
		}
	})
}

// Status queues a commit status. Without a TargetURL, a pull request's
// status links to its first stackd comment (or the pull request).
func (r *Reviews) Status(sha string, s Status, pr *PullRequest, delivered func()) {
	if s.TargetURL != "" || pr == nil {
		r.Queue.Status(sha, s, delivered)
		return
	}
	p := *pr
	r.Queue.StatusFunc(sha, s.Context, func() Status {
		r.mu.Lock()
		u := r.comments[p.Number]
		r.mu.Unlock()
		if u == "" {
			u = p.URL
		}
		s.TargetURL = u
		return s
	}, delivered)
}

// StatusPerStackSet reports PerStackSet.
func (r *Reviews) StatusPerStackSet() bool { return r.PerStackSet }

// Notify posts a change set as the comment of branch's pull request, if
// it has one open (the reconciler's plain Notifier).
func (r *Reviews) Notify(ctx context.Context, branch, stackSet, markdown string) error {
	pr, ok := r.PullRequest(branch)
	if !ok {
		prs, err := r.OpenPullRequests(ctx)
		if err != nil {
			return err
		}
		if pr, ok = prs[branch]; !ok {
			return nil
		}
	}
	r.Comment(pr, Comment{StackSet: stackSet, Markdown: markdown}, "", nil)
	return nil
}

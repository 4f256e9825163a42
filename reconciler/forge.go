package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/dustin/go-humanize"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/gitsource/forge"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/state"
)

// ForgeReviewer is a Notifier that also keeps pull-request reviews on a
// forge (gitsource/forge's Reviews): when Options.Notifier is one, pull
// requests are planned only while open, their comments are kept up to
// date (also when a change set becomes empty), and commit statuses are
// set: stackd/plan on pull-request heads, stackd/deploy on deploy-branch
// commits. Comment and Status return at once (a queue sends them), so a
// forge's rate limits and outages hold up neither planning nor deploying.
type ForgeReviewer interface {
	Notifier
	// OpenPullRequests lists the open pull requests by head branch.
	OpenPullRequests(ctx context.Context) (map[string]forge.PullRequest, error)
	// Comment queues a stack set's comment on pr; fullPath is its change
	// set's path on the status branch. settled is called once the forge
	// has it or refused it for good (it is not retried then).
	Comment(pr forge.PullRequest, c forge.Comment, fullPath string, settled func())
	// Status queues a commit status (linked to pr's comment when it has no
	// target URL); delivered is called once the forge has it.
	Status(sha string, s forge.Status, pr *forge.PullRequest, delivered func())
	// StatusPerStackSet: stackd/deploy/<stack set> instead of one
	// stackd/deploy per commit.
	StatusPerStackSet() bool
}

// The commit status contexts.
const (
	StatusPlan   = "stackd/plan"
	StatusDeploy = "stackd/deploy"
)

// Meta keys of the forge's reviews.
const (
	// metaForgeStatus + <sha>/<context>: a status not yet delivered,
	// re-sent after a restart.
	metaForgeStatus = "forge/status/"
	// metaForgeComment + <pull request>/<stack set>: a comment not yet
	// delivered, re-sent after a restart (comments are found by their
	// marker before one is created, so a re-send edits, never duplicates).
	metaForgeComment = "forge/comment/"
	// metaForgeCommented + <branch>: the stack sets with a comment on the
	// branch's pull request (JSON list), updated when they become empty.
	metaForgeCommented = "forge/commented/"
	// metaForgeOpen + <branch>: the number of the branch's pull request,
	// seen open; once it is not, the branch is no longer planned.
	metaForgeOpen = "forge/open/"
	// metaForgeReviewed + <branch>: the head whose comments and status
	// were queued.
	metaForgeReviewed = "forge/reviewed/"
)

// forgeState is the reconciler's memory of the forge.
type forgeState struct {
	mu sync.Mutex
	// prs are the open pull requests of the latest PlanBranches pass, by
	// branch (nil: the forge could not be asked).
	prs    map[string]forge.PullRequest
	resend sync.Once
}

func (r *Reconciler) reviewer() ForgeReviewer {
	f, _ := r.opts.Notifier.(ForgeReviewer)
	return f
}

// forgePR returns the open pull request of branch, as last listed.
func (r *Reconciler) forgePR(branch string) (forge.PullRequest, bool) {
	r.forge.mu.Lock()
	defer r.forge.mu.Unlock()
	pr, ok := r.forge.prs[branch]
	return pr, ok
}

// forgeBranches drops, of the planned branches, those whose pull request
// was closed or merged: a branch seen with an open pull request is planned
// while one is open (its change sets are removed as a deleted branch's
// are once it is not). Branches never seen with one are planned as
// without a forge. When the forge cannot be asked, nothing is dropped.
func (r *Reconciler) forgeBranches(ctx context.Context, branches map[string]string) map[string]string {
	f := r.reviewer()
	if f == nil {
		return branches
	}
	r.forgeResend()
	prs, err := f.OpenPullRequests(ctx)
	r.forge.mu.Lock()
	r.forge.prs = prs
	r.forge.mu.Unlock()
	if err != nil {
		r.log.Warn().Err(err).Msg("cannot list the open pull requests: every branch is planned")
		return branches
	}
	out := make(map[string]string, len(branches))
	for b, head := range branches {
		key := metaForgeOpen + b
		if pr, open := prs[b]; open {
			if err := r.opts.Store.SetMeta(key, []byte(strconv.Itoa(pr.Number))); err != nil {
				r.log.Warn().Err(err).Str("branch", b).Msg("cannot remember a pull request")
			}
			if rv, _ := r.opts.Store.Meta(metaForgeReviewed + b); string(rv) != head {
				// Planned while the forge could not be asked, or before
				// the pull request was opened: plan it again for its
				// comment and status.
				_ = r.opts.Store.DeleteMeta(metaPRPrefix + b)
			}
			out[b] = head
			continue
		}
		if had, _ := r.opts.Store.Meta(key); len(had) > 0 && r.planned(b) {
			continue // its pull request was closed or merged
		}
		out[b] = head
	}
	// Branches deleted: forget their pull requests.
	if keys, err := r.opts.Store.MetaKeys(metaForgeOpen); err == nil {
		for _, k := range keys {
			b := strings.TrimPrefix(k, metaForgeOpen)
			if _, ok := branches[b]; !ok {
				_ = r.opts.Store.DeleteMeta(k)
				_ = r.opts.Store.DeleteMeta(metaForgeCommented + b)
				_ = r.opts.Store.DeleteMeta(metaForgeReviewed + b)
			}
		}
	}
	return out
}

// forgeStatus queues a status, remembered until delivered so that a
// restart sends it again.
func (r *Reconciler) forgeStatus(f ForgeReviewer, sha string, s forge.Status, pr *forge.PullRequest) {
	key := metaForgeStatus + sha + "/" + s.Context
	if b, err := json.Marshal(owedStatus{SHA: sha, Status: s, PR: pr}); err == nil {
		if err := r.opts.Store.SetMeta(key, b); err != nil {
			r.log.Warn().Err(err).Str("context", s.Context).Msg("cannot remember a commit status")
		}
	}
	f.Status(sha, s, pr, func() {
		// Only if it still says this status: a newer one of the key is
		// owed otherwise.
		if b, err := r.opts.Store.Meta(key); err == nil {
			var o owedStatus
			if json.Unmarshal(b, &o) == nil && o.Status == s {
				_ = r.opts.Store.DeleteMeta(key)
			}
		}
	})
}

type owedStatus struct {
	SHA    string             `json:"sha"`
	Status forge.Status       `json:"status"`
	PR     *forge.PullRequest `json:"pr,omitempty"`
}

// forgeResend queues, once per process, the comments and statuses a
// previous one owed. Comments go first: a status links to its pull
// request's comment once that is posted.
func (r *Reconciler) forgeResend() {
	f := r.reviewer()
	if f == nil {
		return
	}
	r.forge.resend.Do(func() {
		if keys, err := r.opts.Store.MetaKeys(metaForgeComment); err == nil {
			for _, k := range keys {
				b, err := r.opts.Store.Meta(k)
				var o owedComment
				if err != nil || json.Unmarshal(b, &o) != nil || o.PR.Number <= 0 || o.Comment.StackSet == "" {
					_ = r.opts.Store.DeleteMeta(k)
					continue
				}
				r.forgeSendComment(f, o.PR, o.Comment, o.FullPath)
			}
		}
		keys, err := r.opts.Store.MetaKeys(metaForgeStatus)
		if err != nil {
			return
		}
		for _, k := range keys {
			b, err := r.opts.Store.Meta(k)
			var o owedStatus
			if err != nil || json.Unmarshal(b, &o) != nil || o.SHA == "" {
				_ = r.opts.Store.DeleteMeta(k)
				continue
			}
			r.forgeStatus(f, o.SHA, o.Status, o.PR)
		}
	})
}

// forgeSendComment queues a comment, remembered until the forge has it
// (or refused it for good) so that a restart sends it again: a comment
// that failed to post is delivered by the queue's retries or by the next
// start, not only by planning its branch again.
func (r *Reconciler) forgeSendComment(f ForgeReviewer, pr forge.PullRequest, c forge.Comment, fullPath string) {
	key := metaForgeComment + strconv.Itoa(pr.Number) + "/" + c.StackSet
	owed := owedComment{PR: pr, Comment: c, FullPath: fullPath}
	if b, err := json.Marshal(owed); err == nil {
		if err := r.opts.Store.SetMeta(key, b); err != nil {
			r.log.Warn().Err(err).Str("stack_set", c.StackSet).Int("pull_request", pr.Number).Msg("cannot remember a pull-request comment")
		}
	}
	f.Comment(pr, c, fullPath, func() {
		// Only if it is still this comment: a newer one of the key is
		// owed otherwise.
		if b, err := r.opts.Store.Meta(key); err == nil {
			var o owedComment
			if json.Unmarshal(b, &o) == nil && o == owed {
				_ = r.opts.Store.DeleteMeta(key)
			}
		}
	})
}

type owedComment struct {
	PR       forge.PullRequest `json:"pr"`
	Comment  forge.Comment     `json:"comment"`
	FullPath string            `json:"full_path,omitempty"`
}

// forgePlanStarted sets stackd/plan pending on a pull request's head.
func (r *Reconciler) forgePlanStarted(branch, head string) {
	f := r.reviewer()
	pr, ok := r.forgePR(branch)
	if f == nil || !ok {
		return
	}
	r.forgeStatus(f, head, forge.Status{Context: StatusPlan, State: forge.Pending, Description: "planning " + short(head)}, &pr)
}

// forgePlanFailed sets stackd/plan to error when planning could not finish
// (it is retried at the next pass).
func (r *Reconciler) forgePlanFailed(branch, head string) {
	f := r.reviewer()
	pr, ok := r.forgePR(branch)
	if f == nil || !ok {
		return
	}
	r.forgeStatus(f, head, forge.Status{Context: StatusPlan, State: forge.Error, Description: "planning could not finish: stackd retries it"}, &pr)
}

// forgePlanned sets stackd/plan on a pull request's head: the summary of
// its change sets, or failure for diagnostics (validation errors, the
// planning budget exceeded). Descriptions hold counts and names only.
func (r *Reconciler) forgePlanned(branch, head string, res *PlanResult) {
	f := r.reviewer()
	pr, ok := r.forgePR(branch)
	if f == nil || !ok {
		return
	}
	r.forgeStatus(f, head, planStatus(res), &pr)
	_ = r.opts.Store.SetMeta(metaForgeReviewed+branch, []byte(head))
	if len(res.Diagnostics) == 0 {
		// The errors reported earlier are fixed: their comment says so.
		r.forgeNoChanges(branch, head, &changeset.StackSetChangeSet{StackSetName: config.ReservedStackSetName},
			fmt.Sprintf("The definitions at `%s` validate: the errors reported here are fixed.", short(head)))
	}
}

func planStatus(res *PlanResult) forge.Status {
	s := forge.Status{Context: StatusPlan}
	errs := 0
	budget := false
	for _, d := range res.Diagnostics {
		if d.Severity == changeset.SeverityError || d.Severity == "" {
			errs++
		}
		budget = budget || d.Summary == "Planning took too long"
	}
	switch {
	case budget:
		s.State, s.Description = forge.Failure, "planning budget exceeded: the definitions take too long to evaluate"
		return s
	case errs > 0:
		s.State, s.Description = forge.Failure, "definitions invalid: "+plural(errs, "error")
		return s
	}
	var add, change, destroy, instances int
	for _, cs := range res.ChangeSets {
		sm := cs.Summary
		add += sm.ResourcesToAdd + sm.ResourcesToReplace
		change += sm.ResourcesToModify
		destroy += sm.ResourcesToRemove + sm.ResourcesToReplace
		instances += sm.InstancesToCreate + sm.InstancesToUpdate + sm.InstancesToDelete + sm.InstancesUnchanged
	}
	s.State = forge.Success
	s.Description = fmt.Sprintf("%s: %s to add, %s to change, %s to destroy across %s",
		plural(len(res.ChangeSets), "stack set"), humanize.Comma(int64(add)), humanize.Comma(int64(change)), humanize.Comma(int64(destroy)),
		pluralComma(instances, "instance"))
	return s
}

func pluralComma(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return humanize.Comma(int64(n)) + " " + noun + "s"
}

// forgeComment posts a stack set's change set to the branch's pull
// request and remembers that it has a comment. It reports false when no
// forge reviews are configured (the plain Notifier is used then).
func (r *Reconciler) forgeComment(branch, stackSet, md string) bool {
	f := r.reviewer()
	if f == nil {
		return false
	}
	pr, ok := r.forgePR(branch)
	if !ok {
		return true
	}
	r.forgeSendComment(f, pr, forge.Comment{StackSet: stackSet, Markdown: md}, ChangeSetPath(branch, stackSet, "md"))
	r.forgeCommented(branch, func(sets []string) []string {
		if !slices.Contains(sets, stackSet) {
			sets = append(sets, stackSet)
			sort.Strings(sets)
		}
		return sets
	})
	return true
}

// forgeNoChanges updates the comment of a stack set whose change set
// became empty, so it does not go on showing changes that are gone. Stack
// sets never commented get none.
func (r *Reconciler) forgeNoChanges(branch, head string, cs *changeset.StackSetChangeSet, md string) {
	f := r.reviewer()
	pr, ok := r.forgePR(branch)
	if f == nil || !ok {
		return
	}
	had := false
	r.forgeCommented(branch, func(sets []string) []string {
		had = slices.Contains(sets, cs.StackSetName)
		return slices.DeleteFunc(sets, func(s string) bool { return s == cs.StackSetName })
	})
	if !had {
		return
	}
	body := md
	if cs.StackSetName != config.ReservedStackSetName {
		body = fmt.Sprintf("**No changes** to stack set `%s` any more at `%s`.\n\n%s", cs.StackSetName, short(head), md)
	}
	r.forgeSendComment(f, pr, forge.Comment{StackSet: cs.StackSetName, Markdown: body, OnlyIfExists: true}, ChangeSetPath(branch, cs.StackSetName, "md"))
}

// forgeCommented edits the list of stack sets commented on branch's pull
// request.
func (r *Reconciler) forgeCommented(branch string, edit func([]string) []string) {
	key := metaForgeCommented + branch
	var sets []string
	if b, err := r.opts.Store.Meta(key); err == nil {
		_ = json.Unmarshal(b, &sets)
	}
	sets = edit(sets)
	if len(sets) == 0 {
		_ = r.opts.Store.DeleteMeta(key)
		return
	}
	if b, err := json.Marshal(sets); err == nil {
		_ = r.opts.Store.SetMeta(key, b)
	}
}

// forgeDeploy sets stackd/deploy on the deploy branch's head after a pass
// dispatched (pending, then the outcome once its operations end), was
// rejected (failure) or found nothing to do (success). With
// StatusPerStackSet the operations' events set one status per stack set
// instead (forgeEvent). It returns the pass to wait for: p, joined with
// the queueing of the outcome, so that a one-shot reconcile (stackd
// apply) has queued it when it returns.
func (r *Reconciler) forgeDeploy(head string, res *Result, err error, p *pass) *pass {
	f := r.reviewer()
	if f == nil || err != nil || res == nil || res.UpToDate || !r.leader() {
		return p
	}
	r.forgeResend()
	switch {
	case res.Rejected:
		n := 0
		for _, d := range res.Diagnostics {
			if d.Severity == changeset.SeverityError {
				n++
			}
		}
		r.forgeStatus(f, head, forge.Status{Context: StatusDeploy, State: forge.Failure, Description: fmt.Sprintf("revision rejected (%s): nothing deployed", plural(n, "error"))}, nil)
		return p
	case f.StatusPerStackSet():
		return p
	case p == nil:
		r.forgeStatus(f, head, forge.Status{Context: StatusDeploy, State: forge.Success, Description: "nothing to deploy"}, nil)
		return p
	}
	r.forgeStatus(f, head, forge.Status{Context: StatusDeploy, State: forge.Pending, Description: "deploying " + short(head)}, nil)
	outcome := &pass{}
	outcome.wg.Add(1)
	go func() {
		defer outcome.wg.Done()
		p.wg.Wait()
		p.mu.Lock()
		ops := slices.Clone(p.ops)
		failedRun := len(p.errs) > 0
		p.mu.Unlock()
		byRev := map[string][]state.Operation{head: nil}
		for _, op := range ops {
			byRev[op.Revision] = append(byRev[op.Revision], op)
		}
		for rev, ops := range byRev {
			r.forgeStatus(f, rev, deployStatus(ops, failedRun && rev == head), nil)
		}
	}()
	return p.join(outcome)
}

// deployStatus sums up a commit's operations.
func deployStatus(ops []state.Operation, failedRun bool) forge.Status {
	s := forge.Status{Context: StatusDeploy, State: forge.Success}
	var failed []string
	total, ok := 0, 0
	for i := range ops {
		c := Counts(&ops[i])
		total += c.Total
		ok += c.Succeeded
		if operationFailed(&ops[i]) {
			failed = append(failed, fmt.Sprintf("%s %s", ops[i].StackSet, ops[i].Status))
		}
	}
	switch {
	case len(failed) > 0:
		sort.Strings(failed)
		s.State = forge.Failure
		s.Description = fmt.Sprintf("%s (%d/%d instances succeeded)", strings.Join(failed, ", "), ok, total)
	case failedRun:
		s.State = forge.Error
		s.Description = "an operation could not run: see the daemon's log"
	case len(ops) == 0:
		s.Description = "deployed"
	default:
		s.Description = fmt.Sprintf("%s deployed (%d/%d instances)", plural(len(ops), "stack set"), ok, total)
	}
	return s
}

// forgeEvent sets stackd/deploy/<stack set> from an operation's events
// when statuses are per stack set. Drift corrections set none: they do
// not deploy a commit.
func (r *Reconciler) forgeEvent(e notify.Event) {
	f := r.reviewer()
	if f == nil || !f.StatusPerStackSet() || e.StackSet == "" || e.Revision == "" || e.Kind == string(state.KindDriftCorrection) {
		return
	}
	s := forge.Status{Context: StatusDeploy + "/" + e.StackSet}
	switch e.Type {
	case notify.TypeOperationStarted:
		s.State, s.Description = forge.Pending, fmt.Sprintf("%s of %s running", e.Kind, plural(e.Instances, "instance"))
	case notify.TypeOperationSucceeded:
		s.State, s.Description = forge.Success, fmt.Sprintf("%s %s (%d/%d)", e.Kind, e.Status, e.Succeeded, e.Instances)
	case notify.TypeOperationFailed, notify.TypeOperationRolledBack:
		s.State, s.Description = forge.Failure, fmt.Sprintf("%s %s (%d/%d)", e.Kind, e.Status, e.Succeeded, e.Instances)
	default:
		return
	}
	r.forgeStatus(f, e.Revision, s, nil)
}

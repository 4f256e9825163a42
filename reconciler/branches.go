package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
)

// BranchLister lists the repository's branches (name → head commit).
type BranchLister interface {
	Branches(ctx context.Context) (map[string]string, error)
}

// Notifier posts a stack set's Markdown change set for a branch to a
// forge (a pull-request comment); nil means no forge is configured.
type Notifier interface {
	Notify(ctx context.Context, branch, stackSet, markdown string) error
}

// Paths and meta keys of pull-request change sets.
const (
	changesetsDir = "changesets/"
	metaPRPrefix  = "pr/"
)

// ChangeSetPath is where a branch's change set of a stack set is written on
// the status branch (ext "md" or "json").
func ChangeSetPath(branch, stackSet, ext string) string {
	return changesetsDir + branch + "/" + stackSet + "." + ext
}

// PlanBranches plans every branch matching Options.PRBranches (all but the
// deploy and status branches by default) whose head changed since it was
// last planned, against the current state, and writes its change sets —
// or its diagnostics — to the status branch: one commit per planned head.
// Change sets of branches that no longer exist are removed.
//
// Branches are untrusted: each is planned under Options.PlanBudget without
// the state's sensitive values, and a panic or an exhausted budget is that
// branch's diagnostic. PlanBranches never takes the lock the deploy
// branch's reconcile holds, so Run calls it from a worker of its own.
func (r *Reconciler) PlanBranches(ctx context.Context) error {
	lister, ok := r.opts.Source.(BranchLister)
	if !ok || !r.leader() {
		return nil // no branches, or another replica plans them
	}
	r.branchMu.Lock()
	defer r.branchMu.Unlock()
	defer r.reportGitFaults()
	ctx, cancel := r.gitContext(ctx)
	defer cancel()
	branches, err := lister.Branches(ctx)
	if err != nil {
		return fmt.Errorf("list branches: %w", err)
	}
	branches = r.forgeBranches(ctx, branches)
	names := make([]string, 0, len(branches))
	for b := range branches {
		if r.planned(b) {
			names = append(names, b)
		}
	}
	sort.Strings(names)
	// A branch that cannot be planned (its tree cannot be read, its change
	// set not written) is retried at the next pass and holds up no other.
	var failed []error
	for _, b := range names {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		head := branches[b]
		if last, _ := r.opts.Store.Meta(metaPRPrefix + b); string(last) == head {
			continue
		}
		if err := r.planBranch(ctx, b, head); err != nil {
			r.forgePlanFailed(b, head)
			failed = append(failed, fmt.Errorf("plan branch %s: %w", b, err))
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	// Branches deleted since: remove their change sets.
	seen, err := r.opts.Store.MetaKeys(metaPRPrefix)
	if err != nil {
		return err
	}
	for _, key := range seen {
		b := strings.TrimPrefix(key, metaPRPrefix)
		if _, ok := branches[b]; ok && r.planned(b) {
			continue
		}
		msg := fmt.Sprintf("stackd: remove change sets of %s", b)
		if _, err := r.opts.Source.WriteFiles(ctx, msg, nil, []string{changesetsDir + b + "/"}); err != nil {
			return err
		}
		if err := r.opts.Store.DeleteMeta(key); err != nil {
			return err
		}
	}
	return nil
}

// planned reports whether a branch gets change sets.
func (r *Reconciler) planned(branch string) bool {
	if branch == r.opts.Branch || branch == r.opts.StatusBranch {
		return false
	}
	if r.opts.PRBranches == "*" {
		return true // every branch, also those with slashes
	}
	ok, err := path.Match(r.opts.PRBranches, branch)
	return err == nil && ok
}

func (r *Reconciler) planBranch(ctx context.Context, branch, head string) error {
	r.forgePlanStarted(branch, head)
	res, err := r.planBudgeted(ctx, head, true)
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	summary := []string{}
	if len(res.Diagnostics) > 0 {
		doc := IndexStatus{Revision: head, Valid: false, Diagnostics: res.Diagnostics}
		files[ChangeSetPath(branch, config.ReservedStackSetName, "json")] = marshal(doc)
		var md bytes.Buffer
		changeset.WriteDiagnosticsMarkdown(&md, head, res.Diagnostics)
		files[ChangeSetPath(branch, config.ReservedStackSetName, "md")] = md.Bytes()
		summary = append(summary, plural(len(res.Diagnostics), "error"))
		r.notify(ctx, branch, config.ReservedStackSetName, md.String())
	}
	for _, cs := range res.ChangeSets {
		var js bytes.Buffer
		enc := json.NewEncoder(&js)
		enc.SetEscapeHTML(false) // "<sensitive>", not "\u003csensitive\u003e"
		enc.SetIndent("", "  ")
		if err := enc.Encode(cs); err != nil {
			return err
		}
		files[ChangeSetPath(branch, cs.StackSetName, "json")] = js.Bytes()
		var md bytes.Buffer
		if err := changeset.RenderMarkdown(&md, cs, changeset.MarkdownOptions{Branch: branch, StatusBranch: r.opts.StatusBranch}); err != nil {
			return err
		}
		files[ChangeSetPath(branch, cs.StackSetName, "md")] = md.Bytes()
		if cs.HasChanges() {
			summary = append(summary, cs.StackSetName)
			r.notify(ctx, branch, cs.StackSetName, md.String())
		} else {
			r.forgeNoChanges(branch, head, cs, md.String())
		}
	}
	r.forgePlanned(branch, head, res)
	what := "no changes"
	if len(summary) > 0 {
		what = strings.Join(summary, ", ")
	}
	msg := fmt.Sprintf("stackd: plan %s %s (%s)", branch, short(head), what)
	if _, err := r.opts.Source.WriteFiles(ctx, msg, files, []string{changesetsDir + branch + "/"}); err != nil {
		return err
	}
	r.log.Info().Str("branch", branch).Str("revision", short(head)).Str("changes", what).Msg("branch planned")
	return r.opts.Store.SetMeta(metaPRPrefix+branch, []byte(head))
}

func (r *Reconciler) notify(ctx context.Context, branch, stackSet, md string) {
	if r.opts.Notifier == nil {
		return
	}
	if r.forgeComment(branch, stackSet, md) {
		return
	}
	if err := r.opts.Notifier.Notify(ctx, branch, stackSet, md); err != nil {
		r.log.Warn().Err(err).Str("branch", branch).Str("stack_set", stackSet).Msg("cannot post the change set to the forge")
	}
}

package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/stackd/stackd/state"
)

// Before a pass deploys anything, two checks (docs/design.md §9 "The state"):
//
//   - a state that is empty while the status branch shows deployed stack
//     sets was lost or damaged: deploying from it would create every
//     instance again, so the pass fails with an *EmptyStateError until the
//     state is restored or Options.AdoptEmptyState is set;
//   - an operation starts only while Options.Space has room: below the
//     threshold the pass fails before anything is dispatched, and is
//     retried like any failed pass.

// EmptyStateError is returned by passes (and CheckState) while the state is
// empty but the status branch shows deployed stack sets.
type EmptyStateError struct {
	// StatusBranch and Commit are where the status documents were read.
	StatusBranch, Commit string
	// StackSets are the names of the stack sets shown as deployed.
	StackSets []string
}

func (e *EmptyStateError) Error() string {
	names := e.StackSets
	more := ""
	if len(names) > maxNamed {
		names, more = names[:maxNamed], fmt.Sprintf(" and %d more", len(e.StackSets)-maxNamed)
	}
	return fmt.Sprintf("the state is empty, but the status branch %s (commit %s) shows %s deployed (%s%s): "+
		"the state was lost or damaged, and deploying from it would create every instance again; "+
		"nothing is deployed until the state is restored from a backup or the empty state is adopted explicitly",
		e.StatusBranch, short(e.Commit), plural(len(e.StackSets), "stack set"), strings.Join(names, ", "), more)
}

// maxNamed bounds the stack sets an EmptyStateError names.
const maxNamed = 10

// SpaceGate says whether there is room to start an operation: nil, or an
// error saying which disk is short of how much (cmd/stackd wires
// internal/diskspace).
type SpaceGate interface {
	CheckSpace() error
}

// CheckState returns an *EmptyStateError if the state is empty while the
// status branch shows deployed stack sets (unless Options.AdoptEmptyState),
// or an error if the status branch cannot be read to tell. Every pass
// checks this too; stackd run calls it once at start to refuse at once.
// A call whose ctx ends while a pass runs returns ctx.Err().
func (r *Reconciler) CheckState(ctx context.Context) error {
	if err := r.mu.lock(ctx); err != nil {
		return err
	}
	defer r.mu.unlock()
	return r.checkState(ctx)
}

// checkState is CheckState with r.mu held. Once the state has held a stack
// set, or has reconciled a revision, it is known not to be lost, and the
// check is not made again.
func (r *Reconciler) checkState(ctx context.Context) error {
	if r.opts.AdoptEmptyState || r.stateKnown.Load() {
		return nil
	}
	sets, err := r.opts.Store.ListStackSets()
	if err != nil {
		return err
	}
	_, lastErr := r.opts.Store.Meta(metaLastRevision)
	switch {
	case len(sets) > 0, lastErr == nil:
		// Not empty, or emptied by this state's own deletes (its history
		// says it reconciled before).
		r.stateKnown.Store(true)
		return nil
	case !errors.Is(lastErr, state.ErrNotFound):
		return lastErr
	}
	names, commit, err := r.deployedOnStatusBranch(ctx)
	if err != nil {
		return fmt.Errorf("the state is empty, and the status branch %s cannot be read to tell a lost state from a new one: %w", r.opts.StatusBranch, err)
	}
	if len(names) == 0 {
		return nil // a new state
	}
	err = &EmptyStateError{StatusBranch: r.opts.StatusBranch, Commit: commit, StackSets: names}
	r.log.Error().Str("status_branch", r.opts.StatusBranch).Str("commit", short(commit)).Strs("stack_sets", names).
		Msg("state is empty but the status branch shows deployed stack sets: refusing to deploy")
	return err
}

// deployedOnStatusBranch lists the stack sets the status branch has a
// status document for (status/<name>.json with an id), and the commit read.
// A missing status branch shows none.
func (r *Reconciler) deployedOnStatusBranch(ctx context.Context) ([]string, string, error) {
	gctx, cancel := r.gitContext(ctx)
	defer cancel()
	var commit string
	if lister, ok := r.opts.Source.(BranchLister); ok {
		branches, err := lister.Branches(gctx)
		if err != nil {
			return nil, "", err
		}
		if commit, ok = branches[r.opts.StatusBranch]; !ok {
			return nil, "", nil
		}
	} else {
		// Without a branch list a missing branch cannot be told from a
		// failing read: both show nothing.
		var err error
		if commit, err = r.opts.Source.Head(gctx, r.opts.StatusBranch); err != nil {
			return nil, "", nil
		}
	}
	fsys, err := r.opts.Source.Tree(gctx, commit)
	if err != nil {
		return nil, commit, err
	}
	dir := strings.TrimSuffix(statusDir, "/")
	entries, err := fs.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, commit, nil
	}
	if err != nil {
		return nil, commit, err
	}
	var names []string
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		if e.IsDir() || !strings.HasSuffix(p, ".json") || p == statusIndex {
			continue
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, commit, err
		}
		var doc struct {
			Name string `json:"name"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(b, &doc) != nil || doc.ID == "" {
			continue // not a stack set's status document
		}
		if doc.Name == "" {
			doc.Name = strings.TrimSuffix(e.Name(), ".json")
		}
		names = append(names, doc.Name)
	}
	sort.Strings(names)
	return names, commit, nil
}

// checkSpace returns an error (and logs) when Options.Space says there is
// no room to start an operation for rev.
func (r *Reconciler) checkSpace(rev string) error {
	if r.opts.Space == nil {
		return nil
	}
	if err := r.opts.Space.CheckSpace(); err != nil {
		r.log.Warn().Str("revision", short(rev)).Str("reason", err.Error()).Msg("low disk space: no operation starts")
		return fmt.Errorf("no operation started for revision %s: %w", short(rev), err)
	}
	return nil
}

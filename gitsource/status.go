package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/stackd/stackd/internal/backoff"
	"github.com/stackd/stackd/internal/clock"
)

// StatusWrite is one status commit.
type StatusWrite struct {
	// Files maps slash paths ("status/web.json") to their new contents.
	Files map[string][]byte
	// Delete lists paths to remove: a file, or a directory with everything below it
	// ("changesets/feature-x/"; the trailing slash is optional). Deletes apply before
	// Files, so deleting a directory and writing files into it replaces its contents.
	// Deleting a path that does not exist is not an error.
	Delete []string
	// Message is the commit message. Default "stackd: update status".
	Message string
}

const (
	defaultStatusMessage = "stackd: update status"
	// statusAttempts bounds how often WriteStatus rebuilds after losing a race.
	statusAttempts = 5
)

// WriteStatus makes one commit on the status branch: the branch tip's tree (an empty tree
// if the branch does not exist yet, which starts it as an orphan branch) with w's files
// written and removed, parented on the tip. Only the directories on the edited paths are
// rewritten; everything else is shared with the tip. If the result equals the tip's tree
// no commit is made and the tip's hash is returned ("" if the branch does not exist and
// nothing would be in it). It returns the hash of the status branch's new tip.
//
// Local repository: objects are written into the repository and the branch ref is moved
// with a compare-and-swap (lock file, reflog line, rename); on a lost race the commit is
// rebuilt on the new tip. The work tree, index and HEAD are never touched. A status ref
// that another writer left empty or garbled is first pointed back at its last head (a
// FaultStatusRefDamaged); if none can be found, or the status branch is the deploy
// branch, the write fails with ErrRefDamaged rather than start a new history. So is a
// status branch that reads as missing although it has a history (its reflog names a
// commit, or stackd made status commits before: see restoreStatusRef): only a branch
// that never existed starts as an orphan.
//
// URL: a removed or damaged cache clone is cloned again first (a FaultCacheDamaged).
// The commit is made in the cache clone and pushed (under its own FetchTimeout). If
// the push fails and a re-fetch shows the remote branch moved (someone else pushed), the
// commit is rebuilt on the new tip (the files written here win, other paths the other
// pusher changed are kept) and pushed again, up to 5 attempts with a short backoff.
//
// Concurrent calls are serialized. Errors: ErrInvalidPath for a bad path in w; ErrRefDamaged;
// ErrPushRejected (wrapping the last push error) when every attempt lost its race; a
// wrapped transport error when a push fails for another reason; ctx.Err().
func (s *Source) WriteStatus(ctx context.Context, w StatusWrite) (_ string, err error) {
	defer func() { err = s.scrub(err) }()
	edits, err := buildEdits(w)
	if err != nil {
		return "", err
	}
	msg := w.Message
	if msg == "" {
		msg = defaultStatusMessage
	}
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}

	s.writeMu.Lock()
	defer s.writeMu.Unlock()

	ref := plumbing.NewBranchReferenceName(s.opts.StatusBranch)
	var lastErr error
	for attempt := range statusAttempts {
		if attempt > 0 {
			if err := clock.Sleep(ctx, clock.Real, statusRetry.Delay(attempt)); err != nil {
				return "", fmt.Errorf("write status to %s: %w (after %w)", s.opts.StatusBranch, err, lastErr)
			}
		}
		hash, retry, err := s.tryWriteStatus(ctx, ref, edits, msg)
		if !retry {
			if err != nil {
				return "", fmt.Errorf("write status to %s of %s: %w", s.opts.StatusBranch, s.name(), err)
			}
			return hash, nil
		}
		lastErr = err
	}
	return "", fmt.Errorf("write status to %s of %s: %w after %d attempts: %w",
		s.opts.StatusBranch, s.name(), ErrPushRejected, statusAttempts, lastErr)
}

// statusRetry is the wait before each new attempt to push status: 25ms,
// 50ms, 100ms, 200ms, jittered.
var statusRetry = backoff.Policy{Min: 25 * time.Millisecond, Max: time.Second, Jitter: true}

// tryWriteStatus makes one attempt. retry reports a lost race (err says which).
func (s *Source) tryWriteStatus(ctx context.Context, ref plumbing.ReferenceName, edits *edit, msg string) (hash string, retry bool, err error) {
	if err := s.acquire(ctx); err != nil {
		return "", false, err
	}
	defer s.release()

	if s.local {
		if err := s.checkNotCheckedOut(); err != nil {
			return "", false, err
		}
		// A ref file another writer left empty would read as a missing branch, and
		// the commit would start a new history.
		if err := s.repairStatusRef(); err != nil {
			return "", false, err
		}
	} else if why := s.cacheDamage(false); why != "" {
		// Objects written into a removed cache would be lost, and a damaged status
		// ref would read as a missing branch.
		if err := s.reclone(ctx, why); err != nil {
			return "", false, err
		}
	}
	tip, err := s.repo.Storer.Reference(ref)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		tip = nil
		if s.local {
			// Start a new history only if the branch never had one: a ref file
			// that is there after all or was removed under us is restored.
			restored, err := s.restoreStatusRef()
			if err != nil {
				return "", false, err
			}
			if restored {
				if tip, err = s.repo.Storer.Reference(ref); err != nil {
					return "", true, fmt.Errorf("%s still reads as missing after its ref file was found: %w", ref, err)
				}
			}
		}
	} else if err != nil {
		return "", false, err
	}
	commit, changed, err := s.buildCommit(tip, edits, msg)
	if err != nil && s.local && staleHandle(err) {
		if s.reopen() == nil {
			commit, changed, err = s.buildCommit(tip, edits, msg)
		}
	}
	if err != nil || !changed {
		if tip == nil {
			return "", false, err
		}
		return tip.Hash().String(), false, err
	}

	if s.local {
		retry, err := s.setRefAtomic(ref, commit, tip, msg)
		if err != nil {
			return "", retry, fmt.Errorf("update %s: %w", ref, err)
		}
		return commit.String(), false, nil
	}

	pushErr := s.push(ctx, commit, refHash(tip), ref)
	if pushErr == nil {
		return commit.String(), false, nil
	}
	// Was it a lost race? Re-fetch and see whether the remote branch moved.
	if err := s.fetchRemote(ctx); err != nil {
		return "", false, fmt.Errorf("%w (re-fetch after the failed push: %w)", pushErr, err)
	}
	now, err := s.repo.Storer.Reference(ref)
	if err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return "", false, err
	}
	if refHash(now) == refHash(tip) {
		return "", false, pushErr // the remote did not move: not a race
	}
	return "", true, pushErr
}

func refHash(r *plumbing.Reference) plumbing.Hash {
	if r == nil {
		return plumbing.ZeroHash
	}
	return r.Hash()
}

// push sends commit, whose parent is the status branch tip parent (zero: none), to the
// remote's ref (fast-forward only) under its own deadline, sending only the objects the
// commit adds to its parent (see sendCommit). On success, or when the remote already has
// exactly this commit, the cache clone's ref is moved to it.
func (s *Source) push(ctx context.Context, commit, parent plumbing.Hash, ref plumbing.ReferenceName) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.FetchTimeout)
	defer cancel()
	err := s.bounded(ctx, func(ctx context.Context) error {
		return s.sendCommit(ctx, commit, parent, ref)
	})
	if err == nil || errors.Is(err, git.NoErrAlreadyUpToDate) {
		return s.repo.Storer.SetReference(plumbing.NewHashReference(ref, commit))
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return fmt.Errorf("push %s to %s: %w", ref.Short(), s.name(), err)
}

// buildCommit writes the tree of tip (or an empty one) with edits applied and, if it
// differs from tip's tree, a commit of it. changed is false when no commit is needed.
func (s *Source) buildCommit(tip *plumbing.Reference, edits *edit, msg string) (plumbing.Hash, bool, error) {
	st := s.repo.Storer
	var parents []plumbing.Hash
	base := plumbing.ZeroHash
	if tip != nil {
		c, err := object.GetCommit(st, tip.Hash())
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("read tip %s: %w", tip.Hash(), err)
		}
		parents, base = []plumbing.Hash{c.Hash}, c.TreeHash
	}
	root, _, err := applyEdits(st, base, edits, true)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	if root == base || (tip == nil && root == emptyTree) {
		return plumbing.ZeroHash, false, nil
	}
	now := time.Now()
	sig := object.Signature{Name: s.opts.AuthorName, Email: s.opts.AuthorEmail, When: now}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: root, ParentHashes: parents}
	h, err := storeObject(st, c)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("write commit: %w", err)
	}
	return h, true, nil
}

// emptyTree is the hash of the tree with no entries.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

// edit is a node of the edit tree built from a StatusWrite.
type edit struct {
	children map[string]*edit
	content  []byte // for a file write
	isFile   bool
	// clear: remove what the base has at this path before applying children.
	clear bool
	// writes: a file is written at or below this path.
	writes bool
}

func (e *edit) child(name string) *edit {
	if e.children == nil {
		e.children = make(map[string]*edit)
	}
	c, ok := e.children[name]
	if !ok {
		c = &edit{}
		e.children[name] = c
	}
	return c
}

// buildEdits turns w into an edit tree, validating every path.
func buildEdits(w StatusWrite) (*edit, error) {
	root := &edit{}
	for _, p := range w.Delete {
		clean := strings.TrimSuffix(p, "/")
		if err := checkPath(clean); err != nil {
			return nil, fmt.Errorf("delete %q: %w", p, err)
		}
		n := root
		for part := range strings.SplitSeq(clean, "/") {
			n = n.child(part)
		}
		n.clear, n.children = true, nil
	}
	paths := make([]string, 0, len(w.Files))
	for p := range w.Files {
		paths = append(paths, p)
	}
	slices.Sort(paths) // deterministic conflict reports
	for _, p := range paths {
		if err := checkPath(p); err != nil {
			return nil, fmt.Errorf("write %q: %w", p, err)
		}
		n := root
		parts := strings.Split(p, "/")
		for i, part := range parts {
			n.writes = true
			if n.isFile {
				return nil, fmt.Errorf("write %q: %s is also written as a file: %w", p, strings.Join(parts[:i], "/"), ErrInvalidPath)
			}
			n = n.child(part)
		}
		if hasWrites(n) {
			return nil, fmt.Errorf("write %q: also written as a directory: %w", p, ErrInvalidPath)
		}
		n.isFile, n.writes, n.content, n.children = true, true, w.Files[p], nil
	}
	return root, nil
}

func hasWrites(n *edit) bool {
	for _, c := range n.children {
		if c.writes {
			return true
		}
	}
	return false
}

// checkPath accepts clean, relative slash paths that stay out of .git.
func checkPath(p string) error {
	if p == "" || p == "." || !fs.ValidPath(p) {
		return fmt.Errorf("not a clean relative slash path: %w", ErrInvalidPath)
	}
	for part := range strings.SplitSeq(p, "/") {
		if strings.EqualFold(part, ".git") {
			return fmt.Errorf("paths inside .git are not allowed: %w", ErrInvalidPath)
		}
	}
	return nil
}

// applyEdits writes the tree base (zero: empty) with e applied and returns its hash;
// empty reports a tree with no entries (which is only written for the root).
func applyEdits(st storer.EncodedObjectStorer, base plumbing.Hash, e *edit, isRoot bool) (plumbing.Hash, bool, error) {
	entries := map[string]object.TreeEntry{}
	if !base.IsZero() && !e.clear {
		t, err := object.GetTree(st, base)
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("read tree %s: %w", base, err)
		}
		for _, te := range t.Entries {
			entries[te.Name] = te
		}
	}
	changed := e.clear
	for name, c := range e.children {
		old, exists := entries[name]
		switch {
		case c.isFile:
			h, err := storeBlob(st, c.content)
			if err != nil {
				return plumbing.ZeroHash, false, err
			}
			nw := object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h}
			if !exists || old != nw {
				entries[name], changed = nw, true
			}
		case !c.writes && (c.clear || exists && old.Mode != filemode.Dir):
			// A pure delete: of this path, or below something that is not a directory.
			if c.clear && exists {
				delete(entries, name)
				changed = true
			}
		default:
			sub := plumbing.ZeroHash
			if exists && old.Mode == filemode.Dir {
				sub = old.Hash
			}
			h, empty, err := applyEdits(st, sub, c, false)
			if err != nil {
				return plumbing.ZeroHash, false, err
			}
			switch {
			case empty && exists:
				delete(entries, name)
				changed = true
			case empty:
			case !exists || old.Mode != filemode.Dir || old.Hash != h:
				entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
				changed = true
			}
		}
	}
	if !changed && !base.IsZero() {
		return base, false, nil
	}
	if len(entries) == 0 && !isRoot {
		return plumbing.ZeroHash, true, nil
	}
	t := &object.Tree{Entries: make([]object.TreeEntry, 0, len(entries))}
	for _, te := range entries {
		t.Entries = append(t.Entries, te)
	}
	// Git's order: byte order of names, a directory compared as if it ended in "/".
	slices.SortFunc(t.Entries, func(a, b object.TreeEntry) int {
		return strings.Compare(sortKey(a), sortKey(b))
	})
	h, err := storeObject(st, t)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("write tree: %w", err)
	}
	return h, len(entries) == 0, nil
}

func sortKey(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// encoder is an object that encodes itself (tree, commit).
type encoder interface {
	Encode(plumbing.EncodedObject) error
}

// storeObject encodes o and stores it unless the storage already has it.
func storeObject(st storer.EncodedObjectStorer, o encoder) (plumbing.Hash, error) {
	obj := &plumbing.MemoryObject{}
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return store(st, obj)
}

func storeBlob(st storer.EncodedObjectStorer, content []byte) (plumbing.Hash, error) {
	obj := &plumbing.MemoryObject{}
	obj.SetType(plumbing.BlobObject)
	if _, err := obj.Write(content); err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := store(st, obj)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write blob: %w", err)
	}
	return h, nil
}

func store(st storer.EncodedObjectStorer, obj *plumbing.MemoryObject) (plumbing.Hash, error) {
	h := obj.Hash()
	if st.HasEncodedObject(h) == nil {
		return h, nil
	}
	return st.SetEncodedObject(obj)
}

// ErrStatusBranchCheckedOut: the status branch of a local repository is the branch its
// work tree has checked out; moving it would leave the work tree and index behind, and
// the user's next commit there would undo the status commits (git refuses such pushes
// too: receive.denyCurrentBranch).
var ErrStatusBranchCheckedOut = errors.New("the status branch is checked out in the repository's work tree")

// checkNotCheckedOut refuses a status write to the branch a local, non-bare
// repository's HEAD names. Callers hold s.sem (or own s exclusively).
func (s *Source) checkNotCheckedOut() error {
	if !s.local || s.repo == nil {
		return nil
	}
	if _, err := s.repo.Worktree(); err != nil {
		return nil // bare: no work tree to leave behind
	}
	head, err := s.repo.Storer.Reference(plumbing.HEAD)
	if err != nil || head.Type() != plumbing.SymbolicReference || head.Target() != plumbing.NewBranchReferenceName(s.opts.StatusBranch) {
		return nil
	}
	return fmt.Errorf("%w: %s has %s checked out; use a status branch no work tree has checked out (--status-branch, default %s), or check out another branch there", ErrStatusBranchCheckedOut, s.dir, s.opts.StatusBranch, DefaultStatusBranch)
}

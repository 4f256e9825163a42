package gitsource

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Author names who makes a LocalRepo's commits.
type Author struct{ Name, Email string }

// LocalRepo is a repository with a work tree on this machine, for the
// programs that write definitions and commit them themselves: stackd demo
// and stackd bench. The daemon never uses it: a [Source] only reads the
// definitions and writes its status branch, and never touches a work tree.
// Unlike a Source, a LocalRepo does change its work tree, index and HEAD.
type LocalRepo struct {
	dir    string
	author Author
	repo   *git.Repository
}

// InitLocal creates a repository in dir (which may already hold files)
// whose first branch is branch; author makes its commits.
func InitLocal(dir, branch string, author Author) (*LocalRepo, error) {
	if !validBranchName(branch) {
		return nil, fmt.Errorf("branch %q: %w", branch, ErrInvalidOptions)
	}
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
	})
	if err != nil {
		return nil, fmt.Errorf("init %s: %w", dir, err)
	}
	return &LocalRepo{dir: dir, author: author, repo: repo}, nil
}

// Dir is the work tree's directory.
func (r *LocalRepo) Dir() string { return r.dir }

func (r *LocalRepo) signature() *object.Signature {
	return &object.Signature{Name: r.author.Name, Email: r.author.Email, When: time.Now()}
}

// CommitAll commits everything in the work tree (new, changed and removed
// files) to the checked-out branch and returns the commit's hash.
func (r *LocalRepo) CommitAll(msg string) (string, error) {
	wt, err := r.repo.Worktree()
	if err != nil {
		return "", err
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return "", err
	}
	sig := r.signature()
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// Checkout switches the work tree to branch; create makes the branch at
// the current commit first.
func (r *LocalRepo) Checkout(branch string, create bool) error {
	wt, err := r.repo.Worktree()
	if err != nil {
		return err
	}
	return wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(branch), Create: create})
}

// CommitTree points branch at a new commit holding exactly files (slash
// paths to contents), parented on the branch's head if it has one, without
// touching the work tree, the index or HEAD; it returns the commit's hash.
func (r *LocalRepo) CommitTree(branch string, files map[string][]byte, msg string) (string, error) {
	if !validBranchName(branch) {
		return "", fmt.Errorf("branch %q: %w", branch, ErrInvalidOptions)
	}
	edits, err := buildEdits(StatusWrite{Files: files})
	if err != nil {
		return "", err
	}
	st := r.repo.Storer
	root, _, err := applyEdits(st, plumbing.ZeroHash, edits, true)
	if err != nil {
		return "", err
	}
	ref := plumbing.NewBranchReferenceName(branch)
	var parents []plumbing.Hash
	if old, err := r.repo.Reference(ref, true); err == nil {
		parents = append(parents, old.Hash())
	}
	c := &object.Commit{Author: *r.signature(), Committer: *r.signature(), Message: msg, TreeHash: root, ParentHashes: parents}
	h, err := storeObject(st, c)
	if err != nil {
		return "", fmt.Errorf("write commit: %w", err)
	}
	if err := st.SetReference(plumbing.NewHashReference(ref, h)); err != nil {
		return "", err
	}
	return h.String(), nil
}

// Log describes the newest n commits reachable from branch, newest first.
func (r *LocalRepo) Log(branch string, n int) ([]CommitInfo, error) {
	ref, err := r.repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	if err != nil {
		return nil, fmt.Errorf("branch %q: %w", branch, err)
	}
	iter, err := r.repo.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var out []CommitInfo
	for len(out) < n {
		c, err := iter.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		h := c.Hash.String()
		out = append(out, CommitInfo{
			Hash: h, Short: h[:7], Message: strings.TrimRight(c.Message, "\n"),
			Author: fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email), When: c.Author.When,
		})
	}
	return out, nil
}

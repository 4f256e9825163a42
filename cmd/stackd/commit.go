package main

// Commits to a local work tree: the demo's and bench's repositories.

import (
	"os"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// commitEdit rewrites a file of the work tree with edit and commits it.
func commitEdit(repo *git.Repository, file, msg string, edit func(string) string) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, []byte(edit(string(src))), 0o644); err != nil {
		return err
	}
	return commitAll(repo, msg)
}

// commitAll commits everything in the work tree of repo.
func commitAll(repo *git.Repository, msg string) error {
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return err
	}
	sig := &object.Signature{Name: "Demo User", Email: "demo@example.com", When: time.Now()}
	_, err = wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
	return err
}

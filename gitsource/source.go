package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Errors returned by this package, checked with errors.Is. They are always wrapped with
// context (the repository, branch, commit or path concerned).
var (
	// ErrInvalidOptions: Options.Validate rejected the options.
	ErrInvalidOptions = errors.New("invalid gitsource options")
	// ErrRepositoryNotFound: a local path does not exist or holds no Git repository, or
	// the cache directory holds something that is neither a usable bare repository nor
	// what is left of stackd's cache clone (so it may be someone's data).
	ErrRepositoryNotFound = errors.New("repository not found")
	// ErrBranchNotFound: the branch does not exist (for a URL: as of the last fetch).
	ErrBranchNotFound error = notFound("branch not found")
	// ErrCommitNotFound: the hash or revision does not name a commit in the repository.
	ErrCommitNotFound error = notFound("commit not found")
	// ErrInvalidPath: a StatusWrite path is not a clean, relative slash path, touches
	// .git, or is written both as a file and as a directory.
	ErrInvalidPath = errors.New("invalid status path")
	// ErrPushRejected: a status write kept losing races (the local ref moved, or the
	// remote rejected the push because someone else pushed) through all 5 attempts.
	ErrPushRejected = errors.New("status push rejected")
	// ErrStraggler: a fetch or push that outlived its FetchTimeout has still not
	// returned (see Source.bounded), so the repository cannot be used yet.
	ErrStraggler = errors.New("a timed-out fetch or push is still running")
)

// notFound is an error meaning that the branch or commit asked for does not
// exist: a caller's mistake, not a fault of the repository. Callers that
// know no Git (the API answers 404) find it by its NotFound method.
type notFound string

func (e notFound) Error() string { return string(e) }

// NotFound reports that what was asked for does not exist.
func (notFound) NotFound() bool { return true }

const (
	remoteName = "origin"
	// mirrorRefSpec mirrors every remote branch onto the cache clone's own branches,
	// forced, so force-pushes are followed.
	mirrorRefSpec = config.RefSpec("+refs/heads/*:refs/heads/*")
)

// Source is a Git repository stackd reads definitions from and writes status to. It is
// safe for concurrent use. Create it with [Open].
type Source struct {
	opts  Options
	local bool
	// creds are the credentials Open took out of a URL (see splitCredentials); creds.remote
	// is the URL without them, the only one used after Open.
	creds credentials
	// opened is when Open ran: ref locks older than it are leftovers.
	opened time.Time
	// dir is the local repository path, or the cache clone for a URL.
	dir string
	// gitDir holds HEAD; commonDir holds refs and objects (they differ for a linked
	// work tree). Local repositories only.
	gitDir, commonDir string

	// sem guards repo: go-git handles are not safe for concurrent use. A channel so that
	// waiting for it can honour a context.
	sem  chan struct{}
	repo *git.Repository
	// hdrs reads object headers for repository handle hdrsOf (guarded by sem); see
	// objectHeaders.
	hdrs   *headers
	hdrsOf *git.Repository
	// straggler, when not nil, is closed when a network operation that outlived its
	// deadline returns at last (see bounded). Until then it still uses repo, so whoever
	// takes sem waits for it too (guarded by sem).
	straggler chan struct{}

	// writeMu serializes WriteStatus calls, retries included.
	writeMu sync.Mutex

	// deployHead is the deploy branch's head as of the last Open or Fetch that saw
	// it (guarded by sem), to tell a force-push from a fast-forward.
	deployHead plumbing.Hash
	faults     faultLog
	// idle drops go-git's in-memory indexes when the handle is unused (see idle.go).
	idle idleTrim
}

// CommitInfo describes one commit.
type CommitInfo struct {
	Hash    string    // full 40-hex hash
	Short   string    // first 7 characters of Hash
	Message string    // full message, trailing newlines removed
	Author  string    // "Name <email>"
	When    time.Time // author time
}

// Open opens the repository opts names. For a local path it opens the repository in place
// (nothing is written until WriteStatus). For a URL it creates (or reuses) the bare clone
// in opts.CacheDir and fetches every branch, so Head and Tree work at once. A cache
// directory holding stackd's unusable cache clone, or only what Git writes into the path
// of a removed one, is cleared and cloned again (a FaultCacheDamaged).
//
// Errors: ErrInvalidOptions (from Validate); ErrRepositoryNotFound for a missing local
// path, a directory that is not a repository, or a CacheDir holding something else; a
// wrapped transport error (e.g. go-git's transport.ErrRepositoryNotFound,
// context.DeadlineExceeded) when the first fetch of a URL fails, in which case a cache
// directory created by this call is removed again.
func Open(ctx context.Context, opts Options) (_ *Source, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Source{opts: opts, sem: make(chan struct{}, 1), opened: time.Now()}
	defer func() { err = s.scrub(err) }()
	if IsURL(opts.Repo) {
		s.creds = splitCredentials(opts.Repo)
		if err = s.creds.applyAuth(opts.Auth, s.creds.remote); err != nil {
			return nil, err
		}
		err = s.openRemote(ctx)
	} else if err = s.openLocal(); err == nil {
		err = s.checkNotCheckedOut()
	}
	if err != nil {
		return nil, err
	}
	s.noteDeployHead()
	return s, nil
}

// IsLocal reports whether the source is a repository on local disk (read and written in
// place) rather than a URL mirrored into a cache clone.
func (s *Source) IsLocal() bool { return s.local }

func (s *Source) openLocal() error {
	s.local = true
	dir, err := filepath.Abs(s.opts.Repo)
	if err != nil {
		return fmt.Errorf("open repository %s: %w", s.opts.Repo, err)
	}
	s.dir = dir
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("open repository %s: %w: %w", dir, ErrRepositoryNotFound, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("open repository %s: not a directory: %w", dir, ErrRepositoryNotFound)
	}
	s.gitDir, s.commonDir, err = findGitDirs(dir)
	if err != nil {
		return fmt.Errorf("open repository %s: %w", dir, err)
	}
	return s.reopen()
}

// reopen replaces the repository handle with a fresh one, which sees packfiles and
// object moves made by other processes. Callers hold s.sem (or own s exclusively).
func (s *Source) reopen() error {
	r, err := git.PlainOpenWithOptions(s.dir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		if errors.Is(err, git.ErrRepositoryNotExists) {
			return fmt.Errorf("open repository %s: %w", s.dir, ErrRepositoryNotFound)
		}
		return fmt.Errorf("open repository %s: %w", s.dir, err)
	}
	s.repo = r
	return nil
}

// findGitDirs locates the Git directory of the repository at dir: dir/.git (a directory,
// or a "gitdir:" file for linked work trees and submodules), or dir itself if bare.
// commonDir is where refs and objects live (the "commondir" file of a linked work tree).
func findGitDirs(dir string) (gitDir, commonDir string, err error) {
	dotGit := filepath.Join(dir, ".git")
	fi, err := os.Stat(dotGit)
	switch {
	case err == nil && fi.IsDir():
		gitDir = dotGit
	case err == nil:
		b, err := os.ReadFile(dotGit)
		if err != nil {
			return "", "", err
		}
		line, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return "", "", fmt.Errorf("%s has no gitdir line: %w", dotGit, ErrRepositoryNotFound)
		}
		gitDir = strings.TrimSpace(line)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(dir, gitDir)
		}
	case errors.Is(err, fs.ErrNotExist):
		gitDir = dir // bare, or not a repository (PlainOpen will say)
	default:
		return "", "", err
	}
	commonDir = gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		commonDir = filepath.Clean(c)
	}
	return gitDir, commonDir, nil
}

// Fetch brings the source up to date.
//
// For a URL it fetches every branch of the remote into the cache clone, forced (so
// force-pushes are followed) and pruned (so deleted branches disappear); an up-to-date
// remote is success, an empty remote leaves no branches. The fetch runs under its own
// FetchTimeout deadline. A cache clone that was removed or damaged (files every
// repository has are missing, a branch's ref file is emptied, or a failed fetch turns
// out to be the cache's fault: unreadable refs or commits) is cleared and cloned again,
// and a FaultCacheDamaged recorded; a directory that may hold someone else's data is
// never cleared. Errors wrap the transport error (with the URL, credentials redacted)
// or ctx.Err() (context.DeadlineExceeded when FetchTimeout passed), ErrStraggler (an
// earlier fetch or push that timed out is still running), or say why the cache cannot be
// cloned again.
//
// For a local repository it re-opens the repository handle so that packfiles written by
// other processes (git gc, git fetch) are seen, and repairs a damaged status branch ref
// (see WriteStatus). Errors: ErrRepositoryNotFound if the repository has gone.
//
// Either way, a deploy branch that moved to a commit not descending from the head seen
// by the previous Open or Fetch is recorded as a FaultForcePush (see Faults).
func (s *Source) Fetch(ctx context.Context) (err error) {
	defer func() { err = s.scrub(err) }()
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	if s.local {
		if err := s.reopen(); err != nil {
			return err
		}
		// Best effort: a status ref that cannot be repaired fails the next status
		// write, not the deploy.
		_ = s.repairStatusRef()
	} else if err := s.fetchRemote(ctx); err != nil {
		return err
	}
	s.noteDeployHead()
	return nil
}

// acquire takes the repository lock, giving up when ctx ends. If a network operation
// that outlived its deadline still runs (a straggler), it also waits for that, for at
// most FetchTimeout: then it gives up with ErrStraggler.
func (s *Source) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.straggler == nil {
		return nil
	}
	wait := time.NewTimer(s.opts.FetchTimeout)
	defer wait.Stop()
	select {
	case <-s.straggler:
		s.straggler = nil
		return nil
	case <-ctx.Done():
		s.release()
		return fmt.Errorf("%w (%w)", ctx.Err(), ErrStraggler)
	case <-wait.C:
		s.release()
		return fmt.Errorf("%s: %w", s.name(), ErrStraggler)
	}
}

func (s *Source) release() {
	s.noteUse()
	<-s.sem
}

// bounded runs op, a go-git network call given ctx, and returns what it returns, or
// ctx's error as soon as ctx ends even if op has not returned. go-git's git:// transport
// dials without a deadline (net.Dial), so against a remote that never answers the TCP
// handshake op runs until the kernel gives up (over two minutes on Linux) whatever ctx
// says. Such an op is left to finish in the background as s.straggler, which acquire
// waits for. Callers hold s.sem (or own s exclusively); when bounded leaves a straggler
// they must not touch s.repo again before releasing s.sem.
func (s *Source) bounded(ctx context.Context, op func(context.Context) error) error {
	finished := make(chan struct{})
	var err error
	go func() {
		defer close(finished)
		err = op(ctx)
	}()
	select {
	case <-finished:
		return err
	case <-ctx.Done():
	}
	select {
	case <-finished: // returned at the same moment: keep its result
		return err
	default:
	}
	s.straggler = finished
	return ctx.Err()
}

// read runs fn with the repository handle under the lock. For a local repository, an
// error that suggests the handle went stale (another process repacked or pruned) gets
// one retry on a fresh handle.
func (s *Source) read(ctx context.Context, fn func(r *git.Repository) error) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	err := fn(s.repo)
	if err != nil && s.local && staleHandle(err) {
		if s.reopen() == nil {
			err = fn(s.repo)
		}
	}
	return err
}

// staleHandle reports errors a repository handle opened before a repack can produce.
func staleHandle(err error) bool {
	return errors.Is(err, plumbing.ErrObjectNotFound) || errors.Is(err, fs.ErrNotExist)
}

// Head returns the commit hash at the tip of branch (a short name such as "main" or
// "feature/x"). For a URL this is the tip as of the last Fetch.
//
// Errors: ErrBranchNotFound (also for a name Git would not accept), ErrRefDamaged (a
// local repository's ref file of the branch is empty or garbled), or ctx.Err().
func (s *Source) Head(ctx context.Context, branch string) (_ string, err error) {
	defer func() { err = s.scrub(err) }()
	if !validBranchName(branch) {
		return "", fmt.Errorf("head of branch %q in %s: %w", branch, s.name(), ErrBranchNotFound)
	}
	if s.local {
		// go-git reads past a damaged loose ref into packed-refs, which may hold an
		// older head: deploying that would silently roll back.
		if err := s.checkLooseRef(branch); err != nil {
			return "", fmt.Errorf("head of branch %q in %s: %w", branch, s.name(), err)
		}
	}
	var hash string
	err = s.read(ctx, func(r *git.Repository) error {
		ref, err := r.Reference(plumbing.NewBranchReferenceName(branch), true)
		if err != nil {
			return err
		}
		hash = ref.Hash().String()
		return nil
	})
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return "", fmt.Errorf("head of branch %q in %s: %w", branch, s.name(), ErrBranchNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("head of branch %q in %s: %w", branch, s.name(), err)
	}
	return hash, nil
}

// Branches returns every branch as short name -> commit hash: all local branches of a
// local repository, all branches of a remote as of the last Fetch. The status branch is
// included. Errors: ctx.Err() or a storage error.
func (s *Source) Branches(ctx context.Context) (_ map[string]string, err error) {
	defer func() { err = s.scrub(err) }()
	out := make(map[string]string)
	err = s.read(ctx, func(r *git.Repository) error {
		clear(out)
		iter, err := r.Storer.IterReferences()
		if err != nil {
			return err
		}
		defer iter.Close()
		return iter.ForEach(func(ref *plumbing.Reference) error {
			if !ref.Name().IsBranch() {
				return nil
			}
			if ref.Type() == plumbing.SymbolicReference {
				resolved, err := storer.ResolveReference(r.Storer, ref.Name())
				if err != nil {
					return nil // dangling symbolic branch: not a branch with a commit
				}
				ref = resolved
			}
			if strings.HasSuffix(ref.Name().String(), ".lock") {
				return nil // a writer's lock file under refs/heads, not a branch
			}
			out[ref.Name().Short()] = ref.Hash().String()
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list branches of %s: %w", s.name(), err)
	}
	return out, nil
}

// Commit describes the commit named by hash: a full hash, or any revision go-git resolves
// (a branch name, an unambiguous short hash, "main~1").
//
// Errors: ErrCommitNotFound, or ctx.Err().
func (s *Source) Commit(ctx context.Context, hash string) (_ CommitInfo, err error) {
	defer func() { err = s.scrub(err) }()
	var info CommitInfo
	err = s.read(ctx, func(r *git.Repository) error {
		c, err := s.resolveCommit(r, hash)
		if err != nil {
			return err
		}
		h := c.Hash.String()
		info = CommitInfo{
			Hash:    h,
			Short:   h[:7],
			Message: strings.TrimRight(c.Message, "\n"),
			Author:  fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
			When:    c.Author.When,
		}
		return nil
	})
	if err != nil {
		return CommitInfo{}, fmt.Errorf("commit %q in %s: %w", hash, s.name(), err)
	}
	return info, nil
}

// maxCommitSize bounds a commit object stackd decodes: 4 MiB. A branch is untrusted, and
// go-git decodes a commit whole, message included; real commits are a few hundred bytes,
// long messages a few kilobytes.
const maxCommitSize = 4 << 20

// resolveCommit finds the commit rev names. A missing or non-commit object gives
// ErrCommitNotFound; one over maxCommitSize, ErrTooLarge (from its header, before it is
// read). Callers hold s.sem.
func (s *Source) resolveCommit(r *git.Repository, rev string) (*object.Commit, error) {
	var h plumbing.Hash
	if len(rev) == 40 && plumbing.IsHash(rev) {
		h = plumbing.NewHash(rev)
	} else {
		resolved, err := r.ResolveRevision(plumbing.Revision(rev))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCommitNotFound, err)
		}
		h = *resolved
	}
	if _, err := s.objectStat(r, h, maxCommitSize); errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("commit %s: %w", short(h), err)
	}
	c, err := object.GetCommit(r.Storer, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) || errors.Is(err, object.ErrUnsupportedObject) {
		return nil, fmt.Errorf("%w: %w", ErrCommitNotFound, err)
	}
	return c, err
}

// Name is how the source refers to its repository in messages, and how its consumers
// should in logs: the local repository's path, or the URL without credentials.
func (s *Source) Name() string { return s.name() }

// name is how errors refer to the repository.
func (s *Source) name() string {
	if s.local {
		return s.dir
	}
	return s.creds.remote
}

package gitsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Modules fetches the packages of Terraform module sources from Git
// (git::https://…?ref=…, git::ssh://…) into a cache on disk shared by every
// stack set: one bare repository per URL, holding the commits fetched,
// each kept under refs/stackd/pins/COMMIT. A commit already there is read
// without any network access, so a pinned module costs one fetch per
// daemon, ever. The cache keeps at most MaxRepositories repositories (the
// least recently used are removed first); a removed or damaged one is
// fetched again.
//
// A package is read through the same bounded fs.FS as the definitions
// ([Source.Tree]). Credentials (ModulesOptions.Auth) are only ever sent to
// the host of the definitions repository (AuthHost): a template may name
// any host, and must not make stackd hand them to it.
type Modules struct {
	opts ModulesOptions
	// mu serializes the work on the cache: fetching a module is rare (once
	// per new pin) and reading a pinned one takes microseconds.
	mu sync.Mutex
	// open are the repositories opened lately, by directory (at most
	// maxOpenModules, guarded by mu): a plan loads its modules again at
	// every revision, and opening a repository costs more than reading it.
	open map[string]*Source
}

// maxOpenModules bounds the repository handles Modules keeps open.
const maxOpenModules = 32

// ModulesOptions configures [NewModules].
type ModulesOptions struct {
	// CacheDir holds the repositories (created 0700 when first needed).
	CacheDir string
	// FetchTimeout bounds one network operation. Default 60s.
	FetchTimeout time.Duration
	// MaxRepositories bounds the repositories kept. Default 256.
	MaxRepositories int
	// Auth are the credentials for AuthHost ("host" or "host:port"), and
	// its CABundle (and ssh host-key policy) for every host.
	Auth     Auth
	AuthHost string
}

// Errors of Modules, checked with errors.Is.
var (
	// ErrModuleNotCached: a fetch that may not use the network (an untrusted
	// branch's) asked for a commit the cache does not hold.
	ErrModuleNotCached = errors.New("not fetched by the deploy branch")
	// ErrRefNotFound: the remote has no tag or branch of that name.
	ErrRefNotFound = errors.New("no such tag or branch")
)

// NewModules returns a module fetcher caching in opts.CacheDir.
func NewModules(opts ModulesOptions) (*Modules, error) {
	if opts.CacheDir == "" {
		return nil, fmt.Errorf("module cache directory is empty: %w", ErrInvalidOptions)
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.MaxRepositories <= 0 {
		opts.MaxRepositories = 256
	}
	// The directory is made by the first fetch: a daemon whose templates
	// call no remote module writes nothing.
	return &Modules{opts: opts}, nil
}

// Fetch returns the file tree of a Git package and the commit it is at:
// commit when given (a pin), else the commit ref names now (a tag, a
// branch, a full commit hash; "" for the default branch). With cachedOnly
// nothing goes over the network: only a commit a fetch without it brought
// is returned, else ErrModuleNotCached.
func (m *Modules) Fetch(ctx context.Context, rawURL, ref, commit string, cachedOnly bool) (_ fs.FS, _ string, err error) {
	if commit != "" && !plumbing.IsHash(commit) {
		return nil, "", fmt.Errorf("pinned commit %q is not a full hash", commit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	creds := credentials{remote: rawURL}
	if u, perr := url.Parse(rawURL); perr == nil && m.opts.AuthHost != "" && u.Host == m.opts.AuthHost {
		if err := creds.applyAuth(m.opts.Auth, rawURL); err != nil {
			return nil, "", err
		}
	} else if err := creds.applyAuth(Auth{CABundle: m.opts.Auth.CABundle, KnownHostsFile: m.opts.Auth.KnownHostsFile, InsecureIgnoreHostKey: m.opts.Auth.InsecureIgnoreHostKey}, rawURL); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256([]byte(rawURL))
	dir := filepath.Join(m.opts.CacheDir, "git", hex.EncodeToString(sum[:16]))
	s := m.open[dir]
	if s != nil && commit != "" && m.pinned(s, commit) {
		touch(dir)
		return m.tree(ctx, s, commit)
	}
	if s == nil || !s.exists() {
		s = &Source{opts: Options{Repo: rawURL, FetchTimeout: m.opts.FetchTimeout, Auth: m.opts.Auth}, creds: creds, sem: make(chan struct{}, 1), dir: dir}
		r, err := m.openRepo(s.dir, !cachedOnly)
		if err != nil {
			if cachedOnly {
				return nil, "", fmt.Errorf("%s: %w", redactURL(rawURL), ErrModuleNotCached)
			}
			return nil, "", s.scrub(err)
		}
		s.repo = r
		m.keep(s)
		if commit != "" && m.pinned(s, commit) {
			return m.tree(ctx, s, commit)
		}
	}
	defer func() { err = s.scrub(err) }()
	if cachedOnly {
		if commit == "" {
			return nil, "", fmt.Errorf("%s at %q: no pin: %w", redactURL(rawURL), ref, ErrModuleNotCached)
		}
		return nil, "", fmt.Errorf("%s at commit %s: %w", redactURL(rawURL), commit, ErrModuleNotCached)
	}
	if err := s.acquire(ctx); err != nil {
		return nil, "", err
	}
	commit, err = m.fetchPin(ctx, s, ref, commit)
	s.release()
	if err != nil {
		return nil, "", err
	}
	m.prune(s.dir)
	return m.tree(ctx, s, commit)
}

// exists reports whether s's repository is still on disk.
func (s *Source) exists() bool {
	_, err := os.Stat(filepath.Join(s.dir, "refs"))
	return err == nil
}

// fetchPin fetches ref and pins commit (ref's, when ""). Callers hold s.sem.
func (m *Modules) fetchPin(ctx context.Context, s *Source, ref, commit string) (string, error) {
	head, err := m.fetch(ctx, s, ref)
	if err != nil {
		return "", err
	}
	if commit == "" {
		commit = head
	} else if _, err := s.repo.CommitObject(plumbing.NewHash(commit)); err != nil {
		return "", fmt.Errorf("%s: the pinned commit %s is not reachable from %q any more (the ref was moved?); pin it again: %w", s.name(), commit, ref, ErrCommitNotFound)
	}
	if err := s.repo.Storer.SetReference(plumbing.NewHashReference(pinRef(commit), plumbing.NewHash(commit))); err != nil {
		return "", fmt.Errorf("module cache %s: %w", s.dir, err)
	}
	return commit, nil
}

func pinRef(commit string) plumbing.ReferenceName {
	return plumbing.ReferenceName("refs/stackd/pins/" + commit)
}

// openRepo opens the cache repository at dir, creating it when create is
// set (and clearing it if it is damaged).
func (m *Modules) openRepo(dir string, create bool) (*git.Repository, error) {
	r, err := openCache(dir)
	if err == nil || !create {
		if err == nil {
			touch(dir)
		}
		return r, err
	}
	if _, serr := os.Stat(dir); serr == nil {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("module cache %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, privateDirMode); err != nil {
		return nil, fmt.Errorf("module cache %s: %w", dir, err)
	}
	r, err = git.InitWithOptions(cacheStorage(dir), nil, git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(DefaultBranch)})
	if err != nil {
		return nil, fmt.Errorf("module cache %s: %w", dir, err)
	}
	return r, nil
}

// touch marks a repository recently used (prune).
func touch(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// keep remembers s's open repository, forgetting the others beyond
// maxOpenModules. Callers hold m.mu.
func (m *Modules) keep(s *Source) {
	if m.open == nil {
		m.open = map[string]*Source{}
	}
	if len(m.open) >= maxOpenModules {
		clear(m.open)
	}
	m.open[s.dir] = s
}

// pinned reports whether commit was fetched into s's repository (and is
// still there: a repository removed under it reads as not pinned).
func (m *Modules) pinned(s *Source, commit string) bool {
	if !s.exists() {
		return false
	}
	found := false
	_ = s.read(context.Background(), func(r *git.Repository) error {
		ref, err := r.Storer.Reference(pinRef(commit))
		if err != nil || ref.Hash().String() != commit {
			return nil
		}
		_, err = r.CommitObject(ref.Hash())
		found = err == nil
		return nil
	})
	return found
}

// fetch resolves ref on the remote and fetches it, returning its commit.
func (m *Modules) fetch(ctx context.Context, s *Source, ref string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.FetchTimeout)
	defer cancel()
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: remoteName, URLs: []string{s.creds.remote}})
	var refs []*plumbing.Reference
	err := s.bounded(ctx, func(ctx context.Context) error {
		var err error
		refs, err = remote.ListContext(ctx, &git.ListOptions{Auth: s.creds.auth, CABundle: s.opts.Auth.CABundle, PeelingOption: git.AppendPeeled})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("list refs of %s: %w", s.name(), err)
	}
	var src string
	var want plumbing.Hash
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name()] = r
	}
	switch {
	case ref == "":
		head := byName[plumbing.HEAD]
		if head != nil && head.Type() == plumbing.SymbolicReference {
			head = byName[head.Target()]
		}
		if head == nil {
			return "", fmt.Errorf("%s has no default branch: %w", s.name(), ErrRefNotFound)
		}
		src, want = head.Name().String(), head.Hash()
		if head.Name() == plumbing.HEAD {
			src = "HEAD"
		}
	case byName[plumbing.NewTagReferenceName(ref)] != nil:
		tag := plumbing.NewTagReferenceName(ref)
		src, want = tag.String(), byName[tag].Hash()
		if peeled := byName[plumbing.ReferenceName(tag.String()+"^{}")]; peeled != nil {
			want = peeled.Hash() // an annotated tag: its commit
		}
	case byName[plumbing.NewBranchReferenceName(ref)] != nil:
		b := plumbing.NewBranchReferenceName(ref)
		src, want = b.String(), byName[b].Hash()
	case len(ref) == 40 && plumbing.IsHash(ref):
		// Servers seldom let a client fetch a commit by its hash: fetch
		// the branches and tags, and find it among their history.
		want = plumbing.NewHash(ref)
	default:
		return "", fmt.Errorf("%s has no tag or branch %q: %w", s.name(), ref, ErrRefNotFound)
	}
	specs := []config.RefSpec{config.RefSpec("+" + src + ":refs/stackd/fetched")}
	if src == "" {
		if _, err := s.repo.CommitObject(want); err == nil {
			return want.String(), nil
		}
		specs = []config.RefSpec{"+refs/heads/*:refs/stackd/heads/*", "+refs/tags/*:refs/stackd/tags/*"}
	}
	err = s.bounded(ctx, func(ctx context.Context) error {
		fetcher := git.NewRemote(s.repo.Storer, &config.RemoteConfig{Name: remoteName, URLs: []string{s.creds.remote}})
		return fetcher.FetchContext(ctx, &git.FetchOptions{
			RemoteName: remoteName,
			RefSpecs:   specs,
			Tags:       git.NoTags, Force: true,
			Auth: s.creds.auth, CABundle: s.opts.Auth.CABundle,
		})
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return "", fmt.Errorf("fetch %s from %s: %w", ref, s.name(), err)
	}
	c, err := s.resolveCommit(s.repo, want.String())
	if err != nil {
		return "", fmt.Errorf("%s at %q: %w", s.name(), ref, err)
	}
	return c.Hash.String(), nil
}

// tree is the bounded file system of commit.
func (m *Modules) tree(ctx context.Context, s *Source, commit string) (fs.FS, string, error) {
	t, err := s.Tree(ctx, commit)
	if err != nil {
		return nil, "", err
	}
	return t, commit, nil
}

// prune removes the least recently used repositories beyond
// MaxRepositories, never keep.
func (m *Modules) prune(keep string) {
	root := filepath.Join(m.opts.CacheDir, "git")
	ents, err := os.ReadDir(root)
	if err != nil || len(ents) <= m.opts.MaxRepositories {
		return
	}
	type repo struct {
		dir string
		at  time.Time
	}
	var repos []repo
	for _, e := range ents {
		if info, err := e.Info(); err == nil && e.IsDir() && len(e.Name()) == 32 && !strings.ContainsAny(e.Name(), "./") {
			repos = append(repos, repo{filepath.Join(root, e.Name()), info.ModTime()})
		}
	}
	sort.Slice(repos, func(i, j int) bool { return repos[i].at.Before(repos[j].at) })
	for _, r := range repos[:max(0, len(repos)-m.opts.MaxRepositories)] {
		if r.dir != keep {
			_ = os.RemoveAll(r.dir)
			delete(m.open, r.dir)
		}
	}
}

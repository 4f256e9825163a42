package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// The cache clone of a URL repository is a bare repository in Options.CacheDir that
// stackd owns: its config carries the marker below. stackd clears and clones it again
// when it is removed or damaged, but never clears a directory that may hold someone
// else's data (see clearCache).
const (
	cacheMarkSection = "stackd"
	cacheMarkKey     = "cache"
)

// bareLayout holds the names Git uses at the top of a bare repository.
var bareLayout = map[string]bool{
	"HEAD": true, "config": true, "description": true, "hooks": true, "info": true,
	"objects": true, "refs": true, "packed-refs": true, "shallow": true, "logs": true,
	"branches": true, "FETCH_HEAD": true, "ORIG_HEAD": true,
}

func (s *Source) openRemote(ctx context.Context) error {
	dir, err := filepath.Abs(s.opts.CacheDir)
	if err != nil {
		return fmt.Errorf("cache directory %s: %w", s.opts.CacheDir, err)
	}
	s.dir = dir
	_, statErr := os.Stat(dir)
	existed := statErr == nil
	created, err := s.initCache()
	if err == nil {
		err = s.fetchRemote(ctx)
		if err == nil && created {
			releaseCloneMemory()
		}
		if err != nil && !created && s.straggler == nil {
			// The remote is down, but the cache clone holds what was
			// fetched before: open on it (docs/design.md §9: keep the last good
			// revision), and let the next fetches try again.
			s.fault(FaultUnreachableAtOpen, "", "cannot fetch %s at start-up (%v): working from the cache clone until a fetch succeeds", s.name(), err)
			err = nil
		}
	}
	// A fetch still running may write into the directory: then it is left as it is,
	// stackd's mark on it, for the next Open to reuse or clear.
	if err != nil && created && s.straggler == nil {
		// Leave no half-made cache behind: the next Open starts clean.
		if existed {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				_ = os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		} else {
			_ = os.RemoveAll(dir)
		}
	}
	return err
}

// initCache opens the bare cache clone, creating it if the directory is missing or
// empty, and points its origin at the configured URL, without credentials. A directory
// that holds no usable bare repository is cleared first if it is stackd's (clearCache),
// else refused. The directory is made 0700 and the config 0600 (also those of a cache an
// older stackd made); whatever go-git writes in it is private (see privateFS).
func (s *Source) initCache() (created bool, err error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("cache directory %s: %w", s.dir, err)
	}
	var r *git.Repository
	if len(entries) > 0 {
		r, err = openBare(s.dir)
		if err != nil {
			if cerr := clearCache(s.dir); cerr != nil {
				return false, fmt.Errorf("cache directory %s is not empty and holds no usable bare repository (%v); %w", s.dir, err, cerr)
			}
			s.fault(FaultCacheDamaged, "", "cache clone %s was unusable (%v): cleared it to clone again", s.dir, err)
			r = nil
		}
	}
	if err := os.MkdirAll(s.dir, privateDirMode); err != nil {
		return false, fmt.Errorf("create cache clone in %s: %w", s.dir, err)
	}
	if err := os.Chmod(s.dir, privateDirMode); err != nil {
		return false, fmt.Errorf("cache directory %s: %w", s.dir, err)
	}
	if r == nil {
		created = true
		r, err = git.InitWithOptions(cacheStorage(s.dir), nil, git.InitOptions{
			DefaultBranch: plumbing.NewBranchReferenceName(s.opts.Branch),
		})
		if err != nil {
			return created, fmt.Errorf("create cache clone in %s: %w", s.dir, err)
		}
	}
	cfg, err := r.Config()
	if err != nil {
		return created, fmt.Errorf("cache clone %s: read config: %w", s.dir, err)
	}
	remote := s.creds.remote
	want := &config.RemoteConfig{Name: remoteName, URLs: []string{remote}, Fetch: []config.RefSpec{mirrorRefSpec}}
	changed := !cfg.Core.IsBare
	cfg.Core.IsBare = true
	if rc, ok := cfg.Remotes[remoteName]; !ok || len(rc.URLs) != 1 || rc.URLs[0] != remote ||
		len(rc.Fetch) != 1 || rc.Fetch[0] != mirrorRefSpec {
		// A cache reused for another URL is re-pointed; the next fetch prunes stale
		// branches. So is one whose URL held credentials (an older stackd wrote them).
		cfg.Remotes[remoteName] = want
		changed = true
	}
	if cfg.Raw.Section(cacheMarkSection).Option(cacheMarkKey) != "true" {
		cfg.Raw.Section(cacheMarkSection).SetOption(cacheMarkKey, "true")
		changed = true
	}
	if changed {
		if err := r.Storer.SetConfig(cfg); err != nil {
			return created, fmt.Errorf("cache clone %s: write config: %w", s.dir, err)
		}
	}
	if err := os.Chmod(filepath.Join(s.dir, "config"), privateFileMode); err != nil {
		return created, fmt.Errorf("cache clone %s: %w", s.dir, err)
	}
	s.repo = r
	return created, nil
}

// openBare opens the bare repository at dir.
func openBare(dir string) (*git.Repository, error) {
	r, err := openCache(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := r.Config()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if !cfg.Core.IsBare {
		return nil, errors.New("it is a non-bare repository")
	}
	return r, nil
}

// clearCache empties the cache directory dir so that a clone can be made in it again,
// provided what it holds is stackd's: a repository whose config carries stackd's cache
// mark, or (no config at all) nothing but names of a bare repository's layout, which is
// what Git writes into the path of a cache clone removed under it. Anything else may be
// someone's data: clearCache then touches nothing and returns an error wrapping
// ErrRepositoryNotFound. A missing or empty directory is left as it is.
func clearCache(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cache directory %s: %w", dir, err)
	}
	if !markedCache(dir) {
		if _, err := os.Lstat(filepath.Join(dir, "config")); err == nil {
			return fmt.Errorf("it holds a repository stackd did not make; remove it or choose another cache directory: %w",
				ErrRepositoryNotFound)
		}
		for _, e := range entries {
			if !bareLayout[strings.TrimSuffix(e.Name(), ".lock")] {
				return fmt.Errorf("it holds %q, which stackd did not put there; remove it or choose another cache directory: %w",
					e.Name(), ErrRepositoryNotFound)
			}
		}
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("clear cache directory %s: %w", dir, err)
		}
	}
	return nil
}

// markedCache reports whether dir/config carries stackd's cache mark.
func markedCache(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "config"))
	if err != nil {
		return false
	}
	defer f.Close()
	cfg, err := config.ReadConfig(f)
	return err == nil && cfg.Raw.Section(cacheMarkSection).Option(cacheMarkKey) == "true"
}

// fetchRemote brings the cache clone up to date: it fetches the mirror refspec, first
// clearing and cloning the cache again if it was removed or damaged, and again when a
// failed fetch turns out to be the cache's fault rather than the remote's. Callers hold
// s.sem.
func (s *Source) fetchRemote(ctx context.Context) error {
	if s.straggler != nil {
		// A push of this call timed out and still runs: no second network operation.
		return fmt.Errorf("fetch %s: %w", s.name(), ErrStraggler)
	}
	if why := s.cacheDamage(false); why != "" {
		return s.reclone(ctx, why)
	}
	err := s.fetchOnce(ctx)
	if err == nil {
		return nil
	}
	if s.straggler != nil {
		return err // the fetch still runs: the cache cannot be examined
	}
	if why := s.cacheDamage(true); why != "" {
		return s.reclone(ctx, why)
	}
	return err
}

// reclone clears the cache clone and clones it again, recording a FaultCacheDamaged.
// Callers hold s.sem.
func (s *Source) reclone(ctx context.Context, why string) error {
	if err := clearCache(s.dir); err != nil {
		return fmt.Errorf("cache clone %s %s and cannot be cloned again: %w", s.dir, why, err)
	}
	s.fault(FaultCacheDamaged, "", "cache clone %s %s: cloning it again", s.dir, why)
	if _, err := s.initCache(); err != nil {
		return err
	}
	err := s.fetchOnce(ctx)
	if err == nil {
		releaseCloneMemory()
	}
	return err
}

// releaseCloneMemory returns to the operating system the memory a clone
// used and freed. go-git indexes a cloned pack in memory (on a remote of
// 20,000 commits its live heap peaks near 70 MB, the delta bases it
// inflates), and the Go runtime keeps those pages after they are free: a
// daemon on a long history stayed near 180 MB resident against 95 MB on a
// short one, for the same live heap within 10 MB. A clone is rare (the
// first start, a damaged cache), so one forced collection after it costs
// nothing that matters.
func releaseCloneMemory() { debug.FreeOSMemory() }

// cacheDamage says how the cache clone is damaged, or returns "". The cheap checks (run
// before every fetch and status write) look for the files every repository has and for
// an emptied or garbled ref file of the deploy or status branch; deep also reads the
// config, every ref and every branch's commit (run when a fetch failed, to tell a broken
// cache from an unreachable remote). Callers hold s.sem.
func (s *Source) cacheDamage(deep bool) string {
	if _, err := os.Stat(s.dir); err != nil {
		return "is gone"
	}
	for _, name := range []string{"HEAD", "config", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(s.dir, name)); err != nil {
			return "has lost " + name
		}
	}
	for _, b := range []string{s.opts.Branch, s.opts.StatusBranch} {
		if content, err := os.ReadFile(looseRefPath(s.dir, b)); err == nil && damagedRef(content) {
			return fmt.Sprintf("has a damaged ref file for branch %s", b)
		}
	}
	if !deep {
		return ""
	}
	cfg, err := s.repo.Config()
	if err != nil {
		return fmt.Sprintf("has an unreadable config (%v)", err)
	}
	if rc, ok := cfg.Remotes[remoteName]; !ok || len(rc.URLs) != 1 || rc.URLs[0] != s.creds.remote {
		return "has lost its remote"
	}
	refs, err := s.repo.Storer.IterReferences()
	if err != nil {
		return fmt.Sprintf("has unreadable refs (%v)", err)
	}
	var branches []*plumbing.Reference
	err = refs.ForEach(func(r *plumbing.Reference) error {
		if r.Name().IsBranch() && r.Type() == plumbing.HashReference {
			branches = append(branches, r)
		}
		return nil
	})
	refs.Close()
	if err != nil {
		return fmt.Sprintf("has unreadable refs (%v)", err)
	}
	for _, r := range branches {
		if _, err := object.GetCommit(s.repo.Storer, r.Hash()); err != nil {
			return fmt.Sprintf("cannot read commit %s of branch %s (%v)", short(r.Hash()), r.Name().Short(), err)
		}
	}
	return ""
}

// fetchOnce fetches the mirror refspec into the cache clone under its own FetchTimeout.
// An up-to-date remote is success; an empty remote leaves no branches. Callers hold
// s.sem.
func (s *Source) fetchOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.FetchTimeout)
	defer cancel()
	err := s.bounded(ctx, func(ctx context.Context) error {
		return s.repo.FetchContext(ctx, &git.FetchOptions{
			RemoteName: remoteName,
			RefSpecs:   []config.RefSpec{mirrorRefSpec},
			Tags:       git.NoTags,
			Force:      true,
			Prune:      true,
			Auth:       s.creds.auth,
			CABundle:   s.opts.Auth.CABundle,
		})
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return s.removeAllBranches()
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return fmt.Errorf("fetch %s: %w", s.name(), err)
}

// removeAllBranches empties the cache's refs/heads (the remote has no branches left).
func (s *Source) removeAllBranches() error {
	iter, err := s.repo.Storer.IterReferences()
	if err != nil {
		return fmt.Errorf("cache clone %s: %w", s.dir, err)
	}
	defer iter.Close()
	var names []plumbing.ReferenceName
	_ = iter.ForEach(func(r *plumbing.Reference) error {
		if r.Name().IsBranch() {
			names = append(names, r.Name())
		}
		return nil
	})
	for _, n := range names {
		if err := s.repo.Storer.RemoveReference(n); err != nil {
			return fmt.Errorf("cache clone %s: prune %s: %w", s.dir, n, err)
		}
	}
	return nil
}

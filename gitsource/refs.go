package gitsource

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
)

// ErrRefDamaged: a branch's ref file is empty or garbled (a writer was killed while
// rewriting it in place), or missing although the branch has a history, and stackd may
// not or cannot repair it: the deploy branch is never rewritten, and a status branch is
// only pointed back at a commit found in its reflog, in packed-refs or among stackd's
// own status commits.
var ErrRefDamaged = errors.New("branch ref damaged")

// errNoStatusHistory: recoverRef found no trace of the branch (no reflog naming a commit
// the repository holds, no packed-refs entry, no status commit of stackd's).
var errNoStatusHistory = errors.New("no reflog, no packed-refs entry and no status commit of stackd's")

// looseRefPath is the file of branch's loose ref under the directory holding refs/.
func looseRefPath(commonDir, branch string) string {
	return filepath.Join(commonDir, "refs", "heads", filepath.FromSlash(branch))
}

// reflogPath is the file of branch's reflog under the directory holding logs/.
func reflogPath(commonDir, branch string) string {
	return filepath.Join(commonDir, "logs", "refs", "heads", filepath.FromSlash(branch))
}

// damagedRef reports whether the content of a loose ref file is neither a hash nor a
// symbolic ref: what a writer that truncates before writing leaves when it is killed.
func damagedRef(content []byte) bool {
	line := strings.TrimSpace(string(content))
	if strings.HasPrefix(line, "ref: ") {
		return false
	}
	return len(line) != 40 || !plumbing.IsHash(line)
}

// checkLooseRef returns ErrRefDamaged if branch's loose ref file in a local repository is
// damaged. go-git would read past it into packed-refs, which may hold an older head.
func (s *Source) checkLooseRef(branch string) error {
	b, err := os.ReadFile(looseRefPath(s.commonDir, branch))
	if err == nil && damagedRef(b) {
		return fmt.Errorf("the ref file of branch %s holds %q: %w", branch, truncate(b), ErrRefDamaged)
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 50 {
		return string(b[:50]) + "..."
	}
	return string(b)
}

// repairStatusRef checks the status branch's loose ref in a local repository and, if
// another writer left it empty or garbled, points it back at the newest commit it can
// find for it (recoverRef) and records a FaultStatusRefDamaged. Without that, go-git
// reads the branch as missing (or as an old packed value) and the next status commit
// would start a new history without the other stack sets' status files. The deploy branch
// is never repaired: when the status branch is the deploy branch it returns
// ErrRefDamaged. Callers hold s.sem.
func (s *Source) repairStatusRef() error {
	branch := s.opts.StatusBranch
	path := looseRefPath(s.commonDir, branch)
	damaged, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !damagedRef(damaged) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the ref of branch %s: %w", branch, err)
	}
	if branch == s.opts.Branch {
		return fmt.Errorf("the ref file of branch %s holds %q; it is the deploy branch, which stackd never rewrites: %w",
			branch, truncate(damaged), ErrRefDamaged)
	}
	commit, from, err := s.recoverRef(branch)
	if err != nil {
		return fmt.Errorf("the ref file of branch %s holds %q and no earlier head can be found (%w): %w",
			branch, truncate(damaged), err, ErrRefDamaged)
	}
	ref := plumbing.NewBranchReferenceName(branch)
	msg := "stackd: recovered the damaged ref from " + from
	if _, err := s.writeLooseRef(ref, commit, plumbing.ZeroHash, msg, func() (bool, error) {
		now, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(now, damaged) {
			return true, fmt.Errorf("%s changed during the repair", ref)
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("repair the ref of branch %s: %w", branch, err)
	}
	s.fault(FaultStatusRefDamaged, branch, "the ref file of branch %s held %q: pointed it back at %s, found in %s",
		branch, truncate(damaged), short(commit), from)
	return nil
}

// restoreStatusRef is called when the status branch of a local repository reads as
// missing just before a status commit. Only a branch that never existed may start a new
// history: a commit without a parent holds nothing but the files it writes, so the other
// stack sets' status would silently vanish from the branch. go-git takes any failure to
// read a loose ref file for a missing ref (and then looks in packed-refs), so the file is
// looked at directly:
//
//   - it is there after all (a read that failed, or another writer just created it):
//     restored, the caller reads the ref again; if it is empty or garbled it is repaired
//     first (repairStatusRef);
//   - it cannot be read (permissions, I/O): the error, and no commit;
//   - it is absent but the branch has a history — its reflog names a commit the
//     repository holds, or stackd made status commits before (recoverRef): the ref file
//     was removed under us (or lost), so the branch is pointed back at that commit, a
//     FaultStatusRefDamaged is recorded and restored is true. When the status branch is
//     the deploy branch, which stackd never rewrites, that is ErrRefDamaged instead;
//   - it is absent and the branch has no history: restored is false, and the caller
//     starts the branch.
//
// The history search scans the object store for stackd's commits when there is no
// reflog, which happens once per status branch (the first status commit creates it).
// Deleting the status branch therefore does not start it afresh while stackd's old
// status commits are in the repository: it resumes from the newest. Callers hold s.sem.
func (s *Source) restoreStatusRef() (restored bool, err error) {
	branch := s.opts.StatusBranch
	path := looseRefPath(s.commonDir, branch)
	b, err := os.ReadFile(path)
	switch {
	case err == nil && damagedRef(b):
		return true, s.repairStatusRef()
	case err == nil:
		return true, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("branch %s reads as missing and its ref file cannot be read: %w", branch, err)
	}
	commit, from, err := s.recoverRef(branch)
	if errors.Is(err, errNoStatusHistory) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("branch %s reads as missing; look for its history: %w", branch, err)
	}
	if branch == s.opts.Branch {
		return false, fmt.Errorf("the ref file of branch %s is missing although %s names %s; it is the deploy branch, which stackd never rewrites: %w",
			branch, from, short(commit), ErrRefDamaged)
	}
	ref := plumbing.NewBranchReferenceName(branch)
	msg := "stackd: restored the missing ref from " + from
	if _, err := s.writeLooseRef(ref, commit, plumbing.ZeroHash, msg, func() (bool, error) {
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			return true, fmt.Errorf("%s changed during the repair", ref)
		}
		return false, nil
	}); err != nil {
		return false, fmt.Errorf("restore the missing ref of branch %s: %w", branch, err)
	}
	s.fault(FaultStatusRefDamaged, branch, "the ref file of branch %s was missing although the branch has a history: pointed it back at %s, found in %s",
		branch, short(commit), from)
	return true, nil
}

// recoverRef finds the commit a damaged branch ref pointed at: the newest reflog entry
// naming a commit the repository holds (stackd writes one for every status commit, git
// for its own ref updates), else the branch's entry in packed-refs, else the newest
// commit stackd made with its author and a "stackd: " message. from says which. With
// none of them, the error is errNoStatusHistory.
func (s *Source) recoverRef(branch string) (commit plumbing.Hash, from string, err error) {
	st := s.repo.Storer
	if h, ok := lastReflogCommit(reflogPath(s.commonDir, branch), st); ok {
		return h, "the reflog", nil
	}
	// With the loose file unreadable, go-git looks the ref up in packed-refs.
	if r, err := st.Reference(plumbing.NewBranchReferenceName(branch)); err == nil && r.Type() == plumbing.HashReference {
		if _, err := object.GetCommit(st, r.Hash()); err == nil {
			return r.Hash(), "packed-refs", nil
		}
	}
	h, err := s.newestStatusCommit()
	if err != nil {
		return plumbing.ZeroHash, "", err
	}
	return h, "the newest status commit of stackd's", nil
}

// newestStatusCommit scans the object store for the commits stackd made (its author, a
// "stackd: " message) and returns the newest by committer time; among commits of the
// same second (the resolution Git keeps) the one with the longest chain of such commits
// behind it, so that a commit is preferred to its parent.
func (s *Source) newestStatusCommit() (plumbing.Hash, error) {
	st := s.repo.Storer
	iter, err := st.IterEncodedObjects(plumbing.CommitObject)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	ours := map[plumbing.Hash]*object.Commit{}
	err = iter.ForEach(func(o plumbing.EncodedObject) error {
		c, err := object.DecodeCommit(st, o)
		if err == nil && c.Author.Name == s.opts.AuthorName && c.Author.Email == s.opts.AuthorEmail &&
			strings.HasPrefix(c.Message, "stackd: ") {
			ours[c.Hash] = c
		}
		return nil
	})
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if len(ours) == 0 {
		return plumbing.ZeroHash, errNoStatusHistory
	}
	depths := map[plumbing.Hash]int{}
	var depth func(h plumbing.Hash) int
	depth = func(h plumbing.Hash) int {
		if d, ok := depths[h]; ok {
			return d
		}
		depths[h] = 0 // a cycle cannot happen; this guards against one anyway
		d := 1
		for _, p := range ours[h].ParentHashes {
			if _, ok := ours[p]; ok {
				d = max(d, depth(p)+1)
			}
		}
		depths[h] = d
		return d
	}
	var best *object.Commit
	for _, c := range ours {
		if best == nil {
			best = c
			continue
		}
		ct, bt := c.Committer.When.Unix(), best.Committer.When.Unix()
		if ct > bt || ct == bt && (depth(c.Hash) > depth(best.Hash) || depth(c.Hash) == depth(best.Hash) && c.Hash.String() < best.Hash.String()) {
			best = c
		}
	}
	return best.Hash, nil
}

// lastReflogCommit returns the newest "new" hash of a reflog that names a commit st holds.
func lastReflogCommit(path string, st storer.EncodedObjectStorer) (plumbing.Hash, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	var news []plumbing.Hash
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// "<old> <new> <committer> <time> <tz>\t<message>"; a line cut short by a
		// kill is skipped.
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && len(f[1]) == 40 && plumbing.IsHash(f[1]) {
			if h := plumbing.NewHash(f[1]); !h.IsZero() {
				news = append(news, h)
			}
		}
	}
	for i := len(news) - 1; i >= 0; i-- {
		if _, err := object.GetCommit(st, news[i]); err == nil {
			return news[i], true
		}
	}
	return plumbing.ZeroHash, false
}

// staleLockAge is how old a ref lock file must be before it is taken for
// the leftover of a killed writer and removed.
const staleLockAge = 10 * time.Second

// setRefAtomic moves a local branch from old (nil: the branch does not exist) to
// commit (see writeLooseRef), checking under the lock that the branch still points at
// old. go-git reads a loose ref file it fails to read as absent (and falls back on
// packed-refs), so the file itself is checked too: it must be absent when old is nil,
// and hold old's hash if it is there.
func (s *Source) setRefAtomic(ref plumbing.ReferenceName, commit plumbing.Hash, old *plumbing.Reference, msg string) (retry bool, err error) {
	path := filepath.Join(s.commonDir, filepath.FromSlash(ref.String()))
	return s.writeLooseRef(ref, commit, refHash(old), msg, func() (bool, error) {
		moved := fmt.Errorf("branch moved during the write: %w", storage.ErrReferenceHasChanged)
		cur, err := s.repo.Storer.Reference(ref)
		if err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
			return false, err
		}
		if refHash(cur) != refHash(old) {
			return true, moved
		}
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return false, nil // absent, or packed: go-git's answer stands
		case err != nil:
			return false, fmt.Errorf("read the ref file of %s: %w", ref, err)
		case old == nil || strings.TrimSpace(string(b)) != old.Hash().String():
			return true, moved
		}
		return false, nil
	})
}

// writeLooseRef points a local branch at commit the way git does: take
// <ref>.lock with O_EXCL, run check (which reports whether the branch is
// still as the caller saw it), append the update to the branch's reflog,
// write the new value into the lock file and rename it over the ref. A kill
// at any point leaves the ref either old or new — never empty (go-git
// writes loose refs in place) — and the reflog names the new commit at
// least as soon as the ref does, so a ref another writer damages can be
// recovered. It reports retry when another writer holds the lock or moved
// the branch. old is the value being replaced (zero: none or unknown), for
// the reflog.
func (s *Source) writeLooseRef(ref plumbing.ReferenceName, commit, old plumbing.Hash, msg string, check func() (retry bool, err error)) (retry bool, err error) {
	path := filepath.Join(s.commonDir, filepath.FromSlash(ref.String()))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	lock := path + ".lock"
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		// A lock older than this Source was left by a process that died
		// (stackd's writes are serialised within a process); an old one
		// is some writer's leftover too.
		if info, serr := os.Stat(lock); serr == nil && (info.ModTime().Before(s.opened) || time.Since(info.ModTime()) > staleLockAge) {
			os.Remove(lock)
		}
		return true, fmt.Errorf("%s is locked by another writer", ref)
	}
	if err != nil {
		return false, err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(lock)
		}
	}()
	if retry, err := check(); err != nil {
		return retry, err
	}
	s.appendReflog(ref, old, commit, msg)
	if _, err := f.WriteString(commit.String() + "\n"); err != nil {
		return false, err
	}
	if err := f.Sync(); err != nil {
		return false, err
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(lock, path); err != nil {
		os.Remove(lock)
		done = true
		return false, err
	}
	done = true
	return false, nil
}

// appendReflog adds a line for an update of ref to its reflog in git's format. It is
// best effort: a status commit is not refused for want of its reflog line.
func (s *Source) appendReflog(ref plumbing.ReferenceName, old, commit plumbing.Hash, msg string) {
	path := filepath.Join(s.commonDir, "logs", filepath.FromSlash(ref.String()))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	msg, _, _ = strings.Cut(strings.TrimSpace(msg), "\n")
	now := time.Now()
	line := fmt.Sprintf("%s %s %s <%s> %d %s\t%s\n", old, commit, s.opts.AuthorName, s.opts.AuthorEmail,
		now.Unix(), now.Format("-0700"), msg)
	_, _ = f.WriteString(line)
}

package gitsource

import (
	"fmt"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Kinds of [Fault], meant as metric label values.
const (
	// FaultForcePush: the deploy branch moved to a commit that does not descend from
	// the head seen before (a force-push, or a reset of a local branch). The new head
	// is followed.
	FaultForcePush = "force_push"
	// FaultCacheDamaged: the cache clone of a URL repository was removed or damaged
	// under the running Source. It was cleared and cloned again.
	FaultCacheDamaged = "cache_damaged"
	// FaultStatusRefDamaged: the status branch's ref file was found empty or garbled
	// (another writer was killed while rewriting it in place), or missing although the
	// branch has a history (its reflog, or stackd's earlier status commits). It was
	// pointed back at the newest status commit that could be found.
	FaultStatusRefDamaged = "status_ref_damaged"
	// FaultUnreachableAtOpen: the remote could not be fetched when the Source was
	// opened, but its cache clone could: the Source opened on what the cache holds,
	// and the next fetches try again.
	FaultUnreachableAtOpen = "unreachable_at_open"
)

// maxFaults bounds the faults kept for [Source.Faults]; older ones are dropped first.
const maxFaults = 64

// Fault is a Git problem a [Source] met and got past by itself: the operation that met it
// went on. It is an error so that consumers can take it without importing this package
// (a FaultKind method gives its kind).
type Fault struct {
	// Kind is one of the Fault* constants.
	Kind string
	// Branch is the branch concerned, if any.
	Branch string
	// Detail says what happened and what was done, in lower case; it never holds
	// credentials.
	Detail string
}

func (f *Fault) Error() string { return f.Detail }

// FaultKind returns f.Kind.
func (f *Fault) FaultKind() string { return f.Kind }

// faultLog holds the faults not yet handed out.
type faultLog struct {
	mu     sync.Mutex
	faults []error
}

// Faults returns the faults met since the last call, oldest first, and forgets them.
// Each is a *[Fault]. At most the last 64 are kept between calls.
func (s *Source) Faults() []error {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	out := s.faults.faults
	s.faults.faults = nil
	return out
}

// fault records a fault for Faults.
func (s *Source) fault(kind, branch, format string, args ...any) {
	f := &Fault{Kind: kind, Branch: branch, Detail: s.scrubString(fmt.Sprintf(format, args...))}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if len(s.faults.faults) >= maxFaults {
		s.faults.faults = s.faults.faults[1:]
	}
	s.faults.faults = append(s.faults.faults, f)
}

// noteDeployHead remembers the deploy branch's head and records a FaultForcePush when it
// moved to a commit that does not descend from the head seen before. A missing branch
// keeps the head seen before, so a branch deleted and pushed again is compared with it.
// Callers hold s.sem.
func (s *Source) noteDeployHead() {
	if s.local && s.checkLooseRef(s.opts.Branch) != nil {
		return // go-git would read an older head from packed-refs
	}
	ref, err := s.repo.Reference(plumbing.NewBranchReferenceName(s.opts.Branch), true)
	if err != nil {
		return
	}
	old, now := s.deployHead, ref.Hash()
	s.deployHead = now
	if old.IsZero() || old == now {
		return
	}
	if descends, known := isAncestor(s.repo, old, now); known && !descends {
		s.fault(FaultForcePush, s.opts.Branch,
			"branch %s was rewritten: its new head %s does not descend from %s, the head seen before (force-push or reset); following the new head",
			s.opts.Branch, short(now), short(old))
	}
}

// isAncestor reports whether old is an ancestor of (or equal to) now; known is false
// when the history of now cannot be read. A missing old commit is no ancestor: every
// ancestor of a commit the repository holds is there too (cache clones are never shallow).
func isAncestor(r *git.Repository, old, now plumbing.Hash) (descends, known bool) {
	nc, err := object.GetCommit(r.Storer, now)
	if err != nil {
		return false, false
	}
	oc, err := object.GetCommit(r.Storer, old)
	if err != nil {
		return false, true
	}
	ok, err := oc.IsAncestor(nc)
	if err != nil {
		return false, false
	}
	return ok, true
}

func short(h plumbing.Hash) string { return h.String()[:7] }

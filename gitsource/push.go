package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/revlist"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// A status push costs what the new commit changes, not what the repository holds.
// go-git's Remote.PushContext treats every ref the remote advertises as a "have" and
// walks every object reachable from them in the cache clone (plumbing/revlist) before
// it sends anything: on a remote whose main has 20,000 commits that took seconds per
// push. A status commit has one parent, the status branch tip the remote already has
// (the push is fast-forward only), so what the remote lacks is exactly the commit and
// the trees and blobs of its tree that differ from its parent's at the same path:
// sendCommit finds them by walking only the subtrees whose hashes differ, encodes them
// into a packfile and drives the receive-pack session itself, over whatever transport
// the URL names (go-git's clients: file://, git://, http(s), ssh).

// errNonFastForward: the remote's branch is not the commit's parent. Like a rejected
// push, it makes WriteStatus re-fetch and, if the branch moved, rebuild.
var errNonFastForward = errors.New("non-fast-forward update")

// sendCommit pushes commit, whose only parent is parent (zero: an orphan commit), to
// ref on the remote, fast-forward only: the remote's ref must be parent (or missing).
// git.NoErrAlreadyUpToDate: the remote's ref already is commit. The cache clone's ref
// is left to the caller. Callers hold s.sem (see bounded).
func (s *Source) sendCommit(ctx context.Context, commit, parent plumbing.Hash, ref plumbing.ReferenceName) (err error) {
	ep, err := transport.NewEndpoint(s.creds.remote)
	if err != nil {
		return err
	}
	ep.CaBundle = s.opts.Auth.CABundle
	cl, err := client.NewClient(ep)
	if err != nil {
		return err
	}
	sess, err := cl.NewReceivePackSession(ep, s.creds.auth)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sess.Close(); err == nil {
			err = cerr
		}
	}()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return err
	}
	remoteRefs, err := ar.AllReferences()
	if err != nil {
		return err
	}

	old := plumbing.ZeroHash
	if r, err := remoteRefs.Reference(ref); err == nil {
		if r.Type() != plumbing.HashReference {
			return fmt.Errorf("%s is a symbolic reference on the remote", ref)
		}
		old = r.Hash()
	} else if !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return err
	}

	st := s.repo.Storer
	var objects []plumbing.Hash
	switch {
	case old == commit:
		return git.NoErrAlreadyUpToDate
	case old == parent:
		// The usual case: the remote has the parent, and so everything it reaches.
		if objects, err = commitObjects(st, commit, parent); err != nil {
			return err
		}
	case old.IsZero():
		// The remote has lost the branch (deleted since the last fetch): it gets the
		// commit with its history, less what the remote's other refs reach. This walks
		// as go-git's push does, but only here, where the branch is created again.
		var haves []plumbing.Hash
		for _, r := range remoteRefs {
			if r.Type() == plumbing.HashReference {
				haves = append(haves, r.Hash())
			}
		}
		if objects, err = revlist.Objects(st, []plumbing.Hash{commit}, haves); err != nil {
			return err
		}
	default:
		// The remote's branch moved since the last fetch (or went back): the commit is
		// not parented on it. Deciding whether it is an ancestor would walk history; the
		// caller re-fetches and rebuilds on the remote's tip instead.
		return fmt.Errorf("%w: %s", errNonFastForward, ref)
	}

	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	req.Commands = []*packp.Command{{Name: ref, Old: old, New: commit}}
	return sendPack(ctx, sess, st, req, objects, !ar.Capabilities.Supports(capability.OFSDelta))
}

// sendPack sends req with a packfile of objects and checks the remote's report.
func sendPack(ctx context.Context, sess transport.ReceivePackSession, st storer.EncodedObjectStorer,
	req *packp.ReferenceUpdateRequest, objects []plumbing.Hash, useRefDeltas bool,
) error {
	rd, wr := io.Pipe()
	req.Packfile = rd
	encoded := make(chan error, 1)
	go func() {
		// No delta window: the few objects of one status commit are not worth it.
		_, err := packfile.NewEncoder(wr, st, useRefDeltas).Encode(objects, 0)
		_ = wr.CloseWithError(err)
		encoded <- err
	}()
	report, err := sess.ReceivePack(ctx, req)
	_ = rd.Close() // unblocks the encoder if the session stopped reading
	encErr := <-encoded
	if err != nil {
		return err
	}
	if encErr != nil {
		return fmt.Errorf("encode packfile: %w", encErr)
	}
	if report != nil {
		return report.Error()
	}
	return nil
}

// commitObjects lists the objects commit adds to parent (zero: none): the commit, and
// the trees and blobs of its tree that are not in parent's tree at the same path. Only
// subtrees whose hashes differ are read, so the cost follows the change, not the size of
// the tree or the length of the history. Submodule entries name commits of other
// repositories and are not sent.
func commitObjects(st storer.EncodedObjectStorer, commit, parent plumbing.Hash) ([]plumbing.Hash, error) {
	c, err := object.GetCommit(st, commit)
	if err != nil {
		return nil, err
	}
	base := plumbing.ZeroHash
	if !parent.IsZero() {
		p, err := object.GetCommit(st, parent)
		if err != nil {
			return nil, err
		}
		base = p.TreeHash
	}
	out := []plumbing.Hash{commit}
	seen := map[plumbing.Hash]bool{}
	if err := treeDiffObjects(st, c.TreeHash, base, seen, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// treeDiffObjects appends tree and every object below it that old (zero: an empty tree)
// does not have at the same path. seen keeps an object that appears twice from being
// listed twice.
func treeDiffObjects(st storer.EncodedObjectStorer, tree, old plumbing.Hash, seen map[plumbing.Hash]bool, out *[]plumbing.Hash) error {
	if tree == old || seen[tree] {
		return nil
	}
	seen[tree] = true
	*out = append(*out, tree)
	t, err := object.GetTree(st, tree)
	if err != nil {
		return err
	}
	was := map[string]object.TreeEntry{}
	if !old.IsZero() {
		ot, err := object.GetTree(st, old)
		if err != nil {
			return err
		}
		for _, e := range ot.Entries {
			was[e.Name] = e
		}
	}
	for _, e := range t.Entries {
		prev, existed := was[e.Name]
		if existed && prev.Hash == e.Hash {
			continue
		}
		switch e.Mode {
		case filemode.Submodule:
		case filemode.Dir:
			sub := plumbing.ZeroHash
			if existed && prev.Mode == filemode.Dir {
				sub = prev.Hash
			}
			if err := treeDiffObjects(st, e.Hash, sub, seen, out); err != nil {
				return err
			}
		default:
			if !seen[e.Hash] {
				seen[e.Hash] = true
				*out = append(*out, e.Hash)
			}
		}
	}
	return nil
}

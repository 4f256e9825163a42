// Package gitsource is stackd's only door to Git.
//
// A [Source] opens the definitions repository, either a local repository on disk (bare or
// with a work tree) or a remote URL (file://, git://, http(s)://, ssh) mirrored into a bare
// cache clone. It lists branches, resolves a branch to its commit, hands out a read-only
// [io/fs.FS] of any commit's tree, writes status commits to the status branch, and tells
// its consumer when the repository may have changed ([Source.Watch]: fsnotify for a local
// repository, a ticker for a remote, which the consumer answers with [Source.Fetch]).
//
// Invariants:
//
//   - All Git work goes through go-git; this package never runs the git binary itself.
//     (go-git's own file:// transport execs git-upload-pack/git-receive-pack, so file://
//     URLs, and only those, need git installed; local paths do not.)
//   - A local repository's work tree, index and HEAD are never touched. Status commits are
//     built directly from blob and tree objects and published by moving one branch ref
//     with a compare-and-swap; the user's checkout stays exactly as it was. (If the status
//     branch is the checked-out deploy branch, the ref moves under the work tree as a push
//     from elsewhere would: `git status` then shows the status files as staged removals.)
//   - A status commit contains the tip's tree plus the requested edits, never anything else:
//     files other writers put on the status branch are kept. Writes are serialized inside a
//     Source and retried on a lost race (a moved local ref or a rejected push), rebuilt on
//     the new tip each time. A push is fast-forward only and sends what the commit adds to
//     its parent (the tip the remote has), found by walking only the changed subtrees: its
//     cost follows the change, not the repository's history (see push.go). Nothing stackd
//     does walks the history on every poll or write, and the cache clone's object cache is
//     bounded (16 MiB), so memory grows with history only by go-git's pack index (about
//     100 bytes per object).
//   - A remote's branches are mirrored +refs/heads/*:refs/heads/* with prune and force, so
//     force-pushes and deleted branches are followed; the remote is the truth. A deploy
//     branch that moves to a commit not descending from the head seen before is reported
//     as a force-push (see below).
//   - The cache clone is stackd's (marked in its config) and disposable: removed or
//     damaged under a running Source, it is cleared and cloned again by the next Fetch or
//     status write. A cache directory is only ever cleared if it carries the mark or holds
//     nothing but what Git writes into a removed cache's path; anything else may be
//     someone's data and is refused, untouched.
//   - Status branch refs of a local repository are written like git writes them (lock
//     file, reflog line, rename). A status ref that another writer left empty or garbled is
//     pointed back at its last head (from the reflog, packed-refs or, at worst, stackd's
//     newest status commit) before it is read, so no status commit starts a new history.
//     So is one whose ref file is missing although the branch has a history (a reflog
//     naming a commit, or status commits of stackd's): a commit without a parent is only
//     ever made on a status branch that never existed. The deploy branch is never
//     rewritten: its damaged or missing ref is an error (ErrRefDamaged).
//   - Faults the Source got past by itself (force-push, cache cloned again, status ref
//     repaired) are queued for its consumer, who takes them with [Source.Faults].
//   - Every network operation runs under its own deadline (Options.FetchTimeout) derived
//     from the caller's context, and returns when it passes even where go-git cannot
//     abort the operation (its git:// transport connects with no deadline, so a host that
//     never answers would hold it for minutes): the operation then finishes in the
//     background, and the next use of the repository waits for it, for at most
//     FetchTimeout (ErrStraggler). Every blocking method takes ctx first; Watch goroutines
//     end when their context ends.
//   - Credentials embedded in a URL are taken out of it when the Source opens and kept in
//     memory as transport auth: the cache clone's config holds the URL without them, and
//     no error, Fault or [Source.Name] holds them (errors are also scrubbed of them by
//     string, in case a transport quotes what it was given). The cache directory is 0700,
//     every directory in it 0700 and every file 0600 or 0400, whatever the umask.
//   - Reading a tree is bounded before the work is done, since every branch but the deploy
//     branch is untrusted: object sizes come from object headers (a loose object's zlib
//     header, a packed one's header and, for a delta, the first bytes of its delta data and
//     its chain of bases), never from inflating the object, and a Tree's fs.FS refuses a
//     file over MaxFileSize (a symbolic link's target included), a delta built from too
//     much, symbolic-link loops, over-long link targets, over-deep paths, over-large
//     directories and, per FS, too many entries or bytes in all (see [Source.Tree]).
//     Not bounded (a known gap): a fetch from a remote, where go-git's pack indexer
//     inflates every object it receives once, whole, to hash it, so a branch pushed with
//     a 200 MB blob costs 200 MB of memory for the length of that fetch (go-git v5 offers
//     no fetch filter to leave such blobs on the server).
//
// go-git repository handles are not safe for concurrent use, so every access to the
// repository (including each call on a Tree's fs.FS) takes one lock; a remote fetch or push
// holds it for its duration.
//
// gitsource must not import engine, state, reconciler or any other package of stackd:
// consumers define the small interfaces they need and a *Source satisfies them. It knows
// nothing about HCL, stack sets or Badger.
package gitsource

package gitsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Tree returns a read-only file system of the tree of commit (a full hash or any revision
// Commit accepts). It implements fs.FS, fs.ReadDirFS, fs.ReadFileFS, fs.StatFS and
// fs.ReadLinkFS. Objects are read lazily, so the FS stays cheap for large trees.
//
// Reading is bounded before the work is done, since any branch may be untrusted: a file
// (a symbolic link's target included) over MaxFileSize is refused from its object header,
// never inflated, with an *fs.PathError naming it and wrapping ErrTooLarge; so is a
// directory object over 4 MiB, a symbolic link target over 4096 bytes, and a path deeper
// than 256 components once links are expanded. One FS decodes at most 1,000,000 directory
// entries and reads at most 512 MiB of file content in all (ErrTooLarge beyond). Stat,
// Lstat and a directory entry's Info read the object header only, so the size of a 200 MB
// file costs a few hundred bytes of reading.
//
// Every file and directory reports the commit's committer time as its modification time;
// files are mode 0444 (0555 if executable), directories fs.ModeDir|0555. Symbolic links
// are followed by Open, Stat and ReadFile as long as their target stays inside the tree
// (an absolute target or one escaping the root reads as fs.ErrNotExist); ReadLink and
// Lstat report the link itself. A submodule reads as an empty directory.
//
// Errors: ErrCommitNotFound, ErrTooLarge (a commit object over 4 MiB), or ctx.Err().
// Errors from the FS's methods are *fs.PathError wrapping fs.ErrNotExist, fs.ErrInvalid,
// ErrTooLarge (saying how large) or a storage error.
func (s *Source) Tree(ctx context.Context, commit string) (_ fs.FS, err error) {
	defer func() { err = s.scrub(err) }()
	var t *treeFS
	err = s.read(ctx, func(r *git.Repository) error {
		c, err := s.resolveCommit(r, commit)
		if err != nil {
			return err
		}
		t = &treeFS{s: s, root: c.TreeHash, mtime: c.Committer.When, trees: make(map[plumbing.Hash]dir),
			maxEntries: maxTreeEntries, maxBytes: maxTreeBytes}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tree of %q in %s: %w", commit, s.name(), err)
	}
	return t, nil
}

// Limits of a Tree's fs.FS (see Source.Tree).
const (
	// MaxFileSize bounds one file read through a Tree (ReadFile, Open; a symbolic link
	// reads as its target): 16 MiB. It is the floor under the engine's own, lower limits
	// (4 MiB for a definitions or template file, 1 MiB for a vars_file), for every reader:
	// a 200 MB blob committed on a branch is refused from its object header, never
	// inflated, whatever the reader checked before.
	MaxFileSize = 16 << 20
	// maxSymlinks bounds the symbolic links followed within one path: 40, the kernel's
	// ELOOP limit. A loop ends there.
	maxSymlinks = 40
	// maxLinkTarget bounds a symbolic link's target: 4096 bytes, Linux's PATH_MAX.
	maxLinkTarget = 4096
	// maxPathDepth bounds the components of a path once symbolic links are expanded: 256.
	// Definitions nest a few levels; with maxSymlinks it bounds the lookups of one path.
	maxPathDepth = 256
	// maxDirSize bounds one directory's tree object: 4 MiB, over 100,000 entries with
	// names of 20 characters (the Linux kernel's largest directory has under 3,000).
	maxDirSize = 4 << 20
	// maxTreeEntries bounds the directory entries one FS decodes in all: 1,000,000, so a
	// walk of a tree with millions of files ends instead of filling memory. Definitions
	// read a few directories.
	maxTreeEntries = 1_000_000
	// maxTreeBytes bounds the file content one FS reads in all, re-reads included:
	// 512 MiB, 32 files of the largest size. Definitions are kilobytes; this bounds
	// the time a tree of many large files can take.
	maxTreeBytes = 512 << 20
)

var (
	errIsDir        = errors.New("is a directory")
	errTooManyLinks = errors.New("too many levels of symbolic links")
	errPathTooDeep  = fmt.Errorf("path deeper than %d components once symbolic links are expanded", maxPathDepth)
)

var (
	_ fs.FS         = (*treeFS)(nil)
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.ReadFileFS = (*treeFS)(nil)
	_ fs.StatFS     = (*treeFS)(nil)
	_ fs.ReadLinkFS = (*treeFS)(nil)
)

// treeFS is the fs.FS of one Git tree. Objects are immutable, so decoded trees are cached.
type treeFS struct {
	s     *Source
	root  plumbing.Hash
	mtime time.Time

	mu    sync.Mutex
	trees map[plumbing.Hash]dir
	// nEntries and nBytes count what this FS decoded and read, against maxEntries and
	// maxBytes (maxTreeEntries and maxTreeBytes; tests lower them).
	nEntries   int
	nBytes     int64
	maxEntries int
	maxBytes   int64
}

// dir is one decoded directory. sorted: its entries are in Git's order (as git fsck
// requires), so that a name is found by binary search.
type dir struct {
	entries []object.TreeEntry
	sorted  bool
}

// node is one resolved entry of the tree.
type node struct {
	name string // base name; "." for the root
	mode filemode.FileMode
	hash plumbing.Hash
}

func (n node) isDir() bool { return n.mode == filemode.Dir || n.mode == filemode.Submodule }

// ctx for FS methods, which have none: they only read local objects.
var fsCtx = context.Background()

// entries returns the entries of the directory n (none for a submodule). The tree object's
// size is checked from its header before it is decoded.
func (t *treeFS) entries(n node) (dir, error) {
	if n.mode == filemode.Submodule {
		return dir{sorted: true}, nil
	}
	t.mu.Lock()
	d, ok := t.trees[n.hash]
	t.mu.Unlock()
	if ok {
		return d, nil
	}
	err := t.s.read(fsCtx, func(r *git.Repository) error {
		info, err := t.s.objectStat(r, n.hash, maxDirSize)
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				return fmt.Errorf("directory: %w", err)
			}
			return err
		}
		if info.typ != plumbing.TreeObject && info.typ != plumbing.AnyObject {
			return fmt.Errorf("object %s is a %s, not a tree", short(n.hash), info.typ)
		}
		tree, err := object.GetTree(r.Storer, n.hash)
		if err != nil {
			return err
		}
		d.entries = tree.Entries
		return nil
	})
	if err != nil {
		return dir{}, err
	}
	d.sorted = slices.IsSortedFunc(d.entries, func(a, b object.TreeEntry) int {
		return strings.Compare(sortKey(a), sortKey(b))
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.nEntries+len(d.entries) > t.maxEntries {
		return dir{}, fmt.Errorf("%w: more than %d directory entries read from one tree", ErrTooLarge, t.maxEntries)
	}
	t.nEntries += len(d.entries)
	t.trees[n.hash] = d
	return d, nil
}

// find returns the entry called name.
func (d dir) find(name string) (object.TreeEntry, bool) {
	if !d.sorted {
		i := slices.IndexFunc(d.entries, func(e object.TreeEntry) bool { return e.Name == name })
		if i < 0 {
			return object.TreeEntry{}, false
		}
		return d.entries[i], true
	}
	// Git orders a directory "a" as "a/".
	for _, key := range []string{name, name + "/"} {
		i, ok := slices.BinarySearchFunc(d.entries, key, func(e object.TreeEntry, k string) int {
			return strings.Compare(sortKey(e), k)
		})
		if ok && d.entries[i].Name == name {
			return d.entries[i], true
		}
	}
	return object.TreeEntry{}, false
}

// blob returns the content of blob h, refusing one over limit (or built from more) from its
// header, before reading it.
func (t *treeFS) blob(h plumbing.Hash, limit int64) ([]byte, error) {
	var b []byte
	err := t.s.read(fsCtx, func(r *git.Repository) error {
		info, err := t.s.objectStat(r, h, limit)
		if err != nil {
			return err
		}
		t.mu.Lock()
		over := t.nBytes+info.size > t.maxBytes
		if !over {
			t.nBytes += info.size
		}
		t.mu.Unlock()
		if over {
			return fmt.Errorf("%w: more than %d bytes of files read from one tree", ErrTooLarge, t.maxBytes)
		}
		b, err = t.s.readObject(r, h, info, plumbing.BlobObject)
		return err
	})
	return b, err
}

// size returns the size of the object h, from its header alone.
func (t *treeFS) size(h plumbing.Hash) (int64, error) {
	var n int64
	err := t.s.read(fsCtx, func(r *git.Repository) error {
		info, err := t.s.objectStat(r, h, -1)
		n = info.size
		return err
	})
	return n, err
}

// resolve walks name from the root. Symbolic links in the middle of the path are always
// followed; the last element's only if follow is set.
func (t *treeFS) resolve(op, name string, follow bool) (node, error) {
	if !fs.ValidPath(name) {
		return node{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	notExist := &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	root := node{name: ".", mode: filemode.Dir, hash: t.root}
	if name == "." {
		return root, nil
	}
	parts := strings.Split(name, "/")
	if len(parts) > maxPathDepth {
		return node{}, &fs.PathError{Op: op, Path: name, Err: errPathTooDeep}
	}
	cur, dir := root, []string(nil)
	links := 0
	for i := 0; i < len(parts); i++ {
		if !cur.isDir() {
			return node{}, notExist
		}
		d, err := t.entries(cur)
		if err != nil {
			return node{}, &fs.PathError{Op: op, Path: name, Err: err}
		}
		e, ok := d.find(parts[i])
		if !ok {
			return node{}, notExist
		}
		next := node{name: e.Name, mode: e.Mode, hash: e.Hash}
		last := i == len(parts)-1
		if next.mode == filemode.Symlink && (follow || !last) {
			if links++; links > maxSymlinks {
				return node{}, &fs.PathError{Op: op, Path: name, Err: errTooManyLinks}
			}
			target, err := t.blob(next.hash, maxLinkTarget)
			if err != nil {
				if errors.Is(err, ErrTooLarge) {
					err = fmt.Errorf("symbolic link %s: target %w", path.Join(path.Join(dir...), e.Name), err)
				}
				return node{}, &fs.PathError{Op: op, Path: name, Err: err}
			}
			if path.IsAbs(string(target)) {
				return node{}, notExist
			}
			p := path.Join(path.Join(dir...), string(target), path.Join(parts[i+1:]...))
			if p == ".." || strings.HasPrefix(p, "../") {
				return node{}, notExist
			}
			if p == "." {
				return root, nil
			}
			parts, cur, dir, i = strings.Split(p, "/"), root, nil, -1
			if len(parts) > maxPathDepth {
				return node{}, &fs.PathError{Op: op, Path: name, Err: errPathTooDeep}
			}
			continue
		}
		cur, dir = next, append(dir, e.Name)
	}
	return cur, nil
}

// info builds the FileInfo of n; base names the entry as its caller asked for it.
func (t *treeFS) info(n node, base string) (*fileInfo, error) {
	fi := &fileInfo{name: base, mtime: t.mtime}
	switch n.mode {
	case filemode.Dir, filemode.Submodule:
		fi.mode = fs.ModeDir | 0o555
		return fi, nil
	case filemode.Symlink:
		fi.mode = fs.ModeSymlink | 0o777
	case filemode.Executable:
		fi.mode = 0o555
	default:
		fi.mode = 0o444
	}
	size, err := t.size(n.hash)
	if err != nil {
		return nil, err
	}
	fi.size = size
	return fi, nil
}

// Open opens name, following symbolic links. A file is read whole here: one over
// MaxFileSize is an error wrapping ErrTooLarge.
func (t *treeFS) Open(name string) (fs.File, error) {
	n, err := t.resolve("open", name, true)
	if err != nil {
		return nil, err
	}
	fi, err := t.info(n, path.Base(name))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if n.isDir() {
		return &dirFile{t: t, n: n, path: name, info: fi}, nil
	}
	b, err := t.blob(n.hash, MaxFileSize)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &file{Reader: bytes.NewReader(b), path: name, info: fi}, nil
}

// Stat describes name, following symbolic links.
func (t *treeFS) Stat(name string) (fs.FileInfo, error) {
	return t.stat("stat", name, true)
}

// Lstat describes name without following a final symbolic link.
func (t *treeFS) Lstat(name string) (fs.FileInfo, error) {
	return t.stat("lstat", name, false)
}

func (t *treeFS) stat(op, name string, follow bool) (fs.FileInfo, error) {
	n, err := t.resolve(op, name, follow)
	if err != nil {
		return nil, err
	}
	fi, err := t.info(n, path.Base(name))
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return fi, nil
}

// ReadLink returns the target of the symbolic link name.
func (t *treeFS) ReadLink(name string) (string, error) {
	n, err := t.resolve("readlink", name, false)
	if err != nil {
		return "", err
	}
	if n.mode != filemode.Symlink {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	b, err := t.blob(n.hash, maxLinkTarget)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return string(b), nil
}

// ReadFile returns the content of name, following symbolic links. The caller owns the
// returned slice. A file over MaxFileSize is an error wrapping ErrTooLarge.
func (t *treeFS) ReadFile(name string) ([]byte, error) {
	n, err := t.resolve("read", name, true)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errIsDir}
	}
	b, err := t.blob(n.hash, MaxFileSize)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return b, nil
}

// ReadDir lists the directory name, sorted by file name.
func (t *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := t.resolve("readdir", name, true)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return t.dirEntries(name, n)
}

func (t *treeFS) dirEntries(name string, n node) ([]fs.DirEntry, error) {
	d, err := t.entries(n)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	out := make([]fs.DirEntry, 0, len(d.entries))
	for _, e := range d.entries {
		out = append(out, &dirEntry{t: t, n: node{name: e.Name, mode: e.Mode, hash: e.Hash}})
	}
	// Git orders a directory "a" as "a/", fs.ReadDir orders by plain name.
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// fileInfo is the fs.FileInfo of a tree entry.
type fileInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.size }
func (fi *fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return fi.mtime }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any           { return nil }

// dirEntry is one entry of a directory listing; its FileInfo (which needs the blob size)
// is looked up on demand and describes the entry itself (a symbolic link is not followed).
type dirEntry struct {
	t *treeFS
	n node
}

func (d *dirEntry) Name() string { return d.n.name }
func (d *dirEntry) IsDir() bool  { return d.n.isDir() }
func (d *dirEntry) Type() fs.FileMode {
	switch {
	case d.n.isDir():
		return fs.ModeDir
	case d.n.mode == filemode.Symlink:
		return fs.ModeSymlink
	}
	return 0
}
func (d *dirEntry) Info() (fs.FileInfo, error) { return d.t.info(d.n, d.n.name) }
func (d *dirEntry) String() string             { return fs.FormatDirEntry(d) }

// file is an open regular file; its content was read in full by Open.
type file struct {
	*bytes.Reader
	path string
	info *fileInfo
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }

var _ interface {
	fs.File
	io.Seeker
	io.ReaderAt
} = (*file)(nil)

// dirFile is an open directory.
type dirFile struct {
	t    *treeFS
	n    node
	path string
	info *fileInfo

	list []fs.DirEntry // nil until the first ReadDir
	read bool
	off  int
}

var _ fs.ReadDirFile = (*dirFile)(nil)

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Close() error               { return nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.path, Err: errIsDir}
}

// ReadDir follows the fs.ReadDirFile contract: n <= 0 returns everything left and a nil
// error; n > 0 returns at most n entries and io.EOF once the listing is exhausted.
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		list, err := d.t.dirEntries(d.path, d.n)
		if err != nil {
			return nil, err
		}
		d.list, d.read = list, true
	}
	rest := d.list[d.off:]
	if n <= 0 {
		d.off = len(d.list)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return slices.Clone(rest[:n]), nil
}

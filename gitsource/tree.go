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
// Every file and directory reports the commit's committer time as its modification time;
// files are mode 0444 (0555 if executable), directories fs.ModeDir|0555. Symbolic links
// are followed by Open, Stat and ReadFile as long as their target stays inside the tree
// (an absolute target or one escaping the root reads as fs.ErrNotExist); ReadLink and
// Lstat report the link itself. A submodule reads as an empty directory.
//
// Errors: ErrCommitNotFound, or ctx.Err(). Errors from the FS's methods are
// *fs.PathError wrapping fs.ErrNotExist, fs.ErrInvalid or a storage error.
func (s *Source) Tree(ctx context.Context, commit string) (fs.FS, error) {
	var t *treeFS
	err := s.read(ctx, func(r *git.Repository) error {
		c, err := resolveCommit(r, commit)
		if err != nil {
			return err
		}
		t = &treeFS{s: s, root: c.TreeHash, mtime: c.Committer.When, trees: make(map[plumbing.Hash][]object.TreeEntry)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tree of %q in %s: %w", commit, s.name(), err)
	}
	return t, nil
}

// maxSymlinks bounds symbolic-link resolution within one path, like the kernel's ELOOP.
const maxSymlinks = 40

var (
	errIsDir        = errors.New("is a directory")
	errTooManyLinks = errors.New("too many levels of symbolic links")
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
	trees map[plumbing.Hash][]object.TreeEntry
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

// entries returns the entries of the directory n (none for a submodule).
func (t *treeFS) entries(n node) ([]object.TreeEntry, error) {
	if n.mode == filemode.Submodule {
		return nil, nil
	}
	t.mu.Lock()
	e, ok := t.trees[n.hash]
	t.mu.Unlock()
	if ok {
		return e, nil
	}
	err := t.s.read(fsCtx, func(r *git.Repository) error {
		tree, err := object.GetTree(r.Storer, n.hash)
		if err != nil {
			return err
		}
		e = tree.Entries
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.trees[n.hash] = e
	t.mu.Unlock()
	return e, nil
}

// blob returns the content of blob h.
func (t *treeFS) blob(h plumbing.Hash) ([]byte, error) {
	var b []byte
	err := t.s.read(fsCtx, func(r *git.Repository) error {
		o, err := r.Storer.EncodedObject(plumbing.BlobObject, h)
		if err != nil {
			return err
		}
		rd, err := o.Reader()
		if err != nil {
			return err
		}
		defer rd.Close()
		b = make([]byte, 0, o.Size())
		buf := bytes.NewBuffer(b)
		if _, err := io.Copy(buf, rd); err != nil {
			return err
		}
		b = buf.Bytes()
		return nil
	})
	return b, err
}

// size returns the size of the blob h.
func (t *treeFS) size(h plumbing.Hash) (int64, error) {
	var n int64
	err := t.s.read(fsCtx, func(r *git.Repository) error {
		o, err := r.Storer.EncodedObject(plumbing.BlobObject, h)
		if err != nil {
			return err
		}
		n = o.Size()
		return nil
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
	cur, dir := root, []string(nil)
	links := 0
	for i := 0; i < len(parts); i++ {
		if !cur.isDir() {
			return node{}, notExist
		}
		ents, err := t.entries(cur)
		if err != nil {
			return node{}, &fs.PathError{Op: op, Path: name, Err: err}
		}
		j := slices.IndexFunc(ents, func(e object.TreeEntry) bool { return e.Name == parts[i] })
		if j < 0 {
			return node{}, notExist
		}
		e := ents[j]
		next := node{name: e.Name, mode: e.Mode, hash: e.Hash}
		last := i == len(parts)-1
		if next.mode == filemode.Symlink && (follow || !last) {
			if links++; links > maxSymlinks {
				return node{}, &fs.PathError{Op: op, Path: name, Err: errTooManyLinks}
			}
			target, err := t.blob(next.hash)
			if err != nil {
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

// Open opens name, following symbolic links.
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
	b, err := t.blob(n.hash)
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
	b, err := t.blob(n.hash)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return string(b), nil
}

// ReadFile returns the content of name, following symbolic links. The caller owns the
// returned slice.
func (t *treeFS) ReadFile(name string) ([]byte, error) {
	n, err := t.resolve("read", name, true)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errIsDir}
	}
	b, err := t.blob(n.hash)
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
	ents, err := t.entries(n)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	out := make([]fs.DirEntry, 0, len(ents))
	for _, e := range ents {
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

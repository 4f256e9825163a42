package config

import (
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// mountFS is the definitions' tree with the packages of remote modules
// mounted in it (module_source_load.go): a path under a mount point reads
// the package, the directories above a mount point list it, and
// everything else reads the tree.
type mountFS struct {
	base   fs.FS
	mounts map[string]fs.FS
}

var (
	_ fs.ReadDirFS  = (*mountFS)(nil)
	_ fs.StatFS     = (*mountFS)(nil)
	_ fs.ReadLinkFS = (*mountFS)(nil)
)

// route finds the package name is in and its path there.
func (m *mountFS) route(name string) (fs.FS, string, bool) {
	best := ""
	for p := range m.mounts {
		if (name == p || strings.HasPrefix(name, p+"/")) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return nil, "", false
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(name, best), "/")
	if rel == "" {
		rel = "."
	}
	return m.mounts[best], rel, true
}

// above lists the names of the entries a mount point adds to directory
// name (nil when none is under it).
func (m *mountFS) above(name string) []string {
	seen := map[string]bool{}
	for p := range m.mounts {
		rest, ok := strings.CutPrefix(p, name+"/")
		if name == "." {
			rest, ok = p, true
		}
		if ok && rest != "" {
			seen[strings.SplitN(rest, "/", 2)[0]] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (m *mountFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if sub, rel, ok := m.route(name); ok {
		return sub.Open(rel)
	}
	if extra := m.above(name); len(extra) > 0 {
		ents, err := m.ReadDir(name)
		if err != nil {
			return nil, err
		}
		return &mountDir{name: name, ents: ents}, nil
	}
	return m.base.Open(name)
}

func (m *mountFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	if sub, rel, ok := m.route(name); ok {
		return fs.ReadDir(sub, rel)
	}
	extra := m.above(name)
	ents, err := fs.ReadDir(m.base, name)
	if err != nil && len(extra) == 0 {
		return nil, err
	}
	byName := map[string]fs.DirEntry{}
	for _, e := range ents {
		byName[e.Name()] = e
	}
	for _, n := range extra {
		byName[n] = fs.FileInfoToDirEntry(dirInfo(n))
	}
	out := make([]fs.DirEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

func (m *mountFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if sub, rel, ok := m.route(name); ok {
		return fs.Stat(sub, rel)
	}
	if len(m.above(name)) > 0 {
		return dirInfo(path.Base(name)), nil
	}
	return fs.Stat(m.base, name)
}

func (m *mountFS) ReadLink(name string) (string, error) {
	if sub, rel, ok := m.route(name); ok {
		return fs.ReadLink(sub, rel)
	}
	return fs.ReadLink(m.base, name)
}

func (m *mountFS) Lstat(name string) (fs.FileInfo, error) {
	if sub, rel, ok := m.route(name); ok {
		return fs.Lstat(sub, rel)
	}
	if len(m.above(name)) > 0 {
		return dirInfo(path.Base(name)), nil
	}
	return fs.Lstat(m.base, name)
}

// dirInfo is a directory mountFS makes up above a mount point.
type dirInfo string

func (d dirInfo) Name() string       { return string(d) }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o555 }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return true }
func (d dirInfo) Sys() any           { return nil }

// mountDir is an open directory mountFS makes up.
type mountDir struct {
	name string
	ents []fs.DirEntry
}

func (d *mountDir) Stat() (fs.FileInfo, error) { return dirInfo(path.Base(d.name)), nil }
func (d *mountDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errIsDirectory}
}
func (d *mountDir) Close() error { return nil }
func (d *mountDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if n <= 0 {
		out := d.ents
		d.ents = nil
		return out, nil
	}
	if len(d.ents) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.ents))
	out := d.ents[:n]
	d.ents = d.ents[n:]
	return out, nil
}

var errIsDirectory = fs.ErrInvalid

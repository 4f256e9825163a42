package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/stackd/stackd/engine/provider"
)

// ErrInvalidPath matches (with errors.Is) every *InvalidPathError.
var ErrInvalidPath = errors.New("invalid path")

// InvalidPathError says why a path may not be used inside an instance root.
type InvalidPathError struct {
	Path   string
	Reason string
}

func (e *InvalidPathError) Error() string {
	return fmt.Sprintf("path %q: %s", e.Path, e.Reason)
}

// Is reports whether target is ErrInvalidPath.
func (e *InvalidPathError) Is(target error) bool { return target == ErrInvalidPath }

const reasonEscape = `must be relative to the instance root and must not contain ".."`

// CheckRelativePath does the lexical part of the jail: p must be non-empty,
// free of NUL bytes, relative, and contain no ".." element. It does not look
// at the filesystem; symbolic links are handled by the os.Root every access
// goes through. The error is an *InvalidPathError.
func CheckRelativePath(p string) error {
	switch {
	case p == "":
		return &InvalidPathError{Path: p, Reason: "must not be empty"}
	case strings.ContainsRune(p, 0):
		return &InvalidPathError{Path: p, Reason: "must not contain NUL bytes"}
	case strings.HasPrefix(p, "/") || filepath.IsAbs(p):
		return &InvalidPathError{Path: p, Reason: reasonEscape}
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return &InvalidPathError{Path: p, Reason: reasonEscape}
		}
		if len(elem) > maxNameLen {
			return &InvalidPathError{Path: p, Reason: fmt.Sprintf("has a component of %d bytes; file systems allow at most %d", len(elem), maxNameLen)}
		}
	}
	return nil
}

// CheckFilePath is CheckRelativePath plus the rule that p names a file, not
// a directory (no trailing "/", and not the instance root itself), and not
// one named like the provider's temporary files.
func CheckFilePath(p string) error {
	if err := CheckRelativePath(p); err != nil {
		return err
	}
	if strings.HasSuffix(p, "/") || path.Clean(p) == "." {
		return &InvalidPathError{Path: p, Reason: "must name a file, not a directory"}
	}
	if isTmpName(path.Base(p)) {
		return &InvalidPathError{Path: p, Reason: "names a temporary file of stackd's (" + tmpPrefix + "...), which stackd removes"}
	}
	return nil
}

// maxNameLen is the longest file name (one path component) Linux file
// systems take: NAME_MAX.
const maxNameLen = 255

// OpenInstanceRoot creates (if missing) and opens the instance root
// <targetsRoot>/<account>/<region> of target. It is opened through an
// os.Root on targetsRoot, so an account or region directory that is a
// symbolic link out of the targets root is refused. The caller closes the
// returned root; dir is the instance root's path on disk.
func OpenInstanceRoot(targetsRoot string, target provider.Target) (root *os.Root, dir string, err error) {
	return NewRoots(targetsRoot).Instance(target)
}

// Roots opens instance roots under one targets root, keeping the targets
// root open between calls (opening it per call costs several system calls
// per resource).
type Roots struct {
	path string
	mu   sync.Mutex
	root *os.Root
}

// NewRoots returns the instance roots under targetsRoot; nothing is opened yet.
func NewRoots(targetsRoot string) *Roots { return &Roots{path: targetsRoot} }

// targets returns the open targets root, creating the directory on first use.
func (r *Roots) targets() (*os.Root, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.root != nil {
		return r.root, nil
	}
	if r.path == "" {
		return nil, errors.New("no targets root configured")
	}
	if err := os.MkdirAll(r.path, 0o755); err != nil {
		return nil, fmt.Errorf("create targets root: %w", err)
	}
	markTopDir(r.path)
	// Through "/.": a directory only (a named pipe put in its place meanwhile
	// would block the open).
	root, err := os.OpenRoot(r.path + string(filepath.Separator) + ".")
	if err != nil {
		return nil, fmt.Errorf("open targets root: %w", err)
	}
	r.root = root
	return root, nil
}

// Instance opens (creating it if needed) the instance root
// <targets root>/<account>/<region>; the caller closes it. A symlinked
// account or region directory cannot lead out of the targets root.
func (r *Roots) Instance(target provider.Target) (root *os.Root, dir string, err error) {
	if err := checkElement("account", target.Account); err != nil {
		return nil, "", err
	}
	if err := checkElement("region", target.Region); err != nil {
		return nil, "", err
	}
	tr, err := r.targets()
	if err != nil {
		return nil, "", err
	}
	rel := target.Account + "/" + target.Region
	root, err = openRootDir(tr, rel)
	if errors.Is(err, fs.ErrNotExist) {
		if err := tr.MkdirAll(rel, 0o755); err != nil {
			return nil, "", fmt.Errorf("create instance root %s: %w", rel, err)
		}
		root, err = openRootDir(tr, rel)
	}
	if err != nil {
		return nil, "", fmt.Errorf("open instance root %s: %w", rel, err)
	}
	return root, filepath.Join(r.path, target.Account, target.Region), nil
}

// openRootDir opens the directory dir (a slash path, "" or ending in "/"
// allowed) of root as a root. It opens dir's "." element, so that dir
// itself is opened as a directory only: root.OpenRoot(dir) would open a
// named pipe found there for reading, which waits for a writer for ever.
// Symbolic links inside root are followed as by root.OpenRoot.
func openRootDir(root *os.Root, dir string) (*os.Root, error) {
	if dir != "" && !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	return root.OpenRoot(dir + ".")
}

func checkElement(what, v string) error {
	if v == "" || v == "." || v == ".." || strings.ContainsAny(v, "/\\\x00") {
		return fmt.Errorf("%s %q cannot be used as a directory name", what, v)
	}
	return nil
}

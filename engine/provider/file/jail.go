package file

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

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
	}
	return nil
}

// CheckFilePath is CheckRelativePath plus the rule that p names a file, not
// a directory: no trailing "/", and not the instance root itself.
func CheckFilePath(p string) error {
	if err := CheckRelativePath(p); err != nil {
		return err
	}
	if strings.HasSuffix(p, "/") || path.Clean(p) == "." {
		return &InvalidPathError{Path: p, Reason: "must name a file, not a directory"}
	}
	return nil
}

// OpenInstanceRoot creates (if missing) and opens the instance root
// <targetsRoot>/<account>/<region> of target. It is opened through an
// os.Root on targetsRoot, so an account or region directory that is a
// symbolic link out of the targets root is refused. The caller closes the
// returned root; dir is the instance root's path on disk.
func OpenInstanceRoot(targetsRoot string, target provider.Target) (root *os.Root, dir string, err error) {
	if targetsRoot == "" {
		return nil, "", errors.New("no targets root configured")
	}
	if err := checkElement("account", target.Account); err != nil {
		return nil, "", err
	}
	if err := checkElement("region", target.Region); err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(targetsRoot, 0o755); err != nil {
		return nil, "", fmt.Errorf("create targets root: %w", err)
	}
	tr, err := os.OpenRoot(targetsRoot)
	if err != nil {
		return nil, "", fmt.Errorf("open targets root: %w", err)
	}
	defer tr.Close()
	rel := target.Account + "/" + target.Region
	if err := tr.MkdirAll(rel, 0o755); err != nil {
		return nil, "", fmt.Errorf("create instance root %s: %w", rel, err)
	}
	root, err = tr.OpenRoot(rel)
	if err != nil {
		return nil, "", fmt.Errorf("open instance root %s: %w", rel, err)
	}
	return root, filepath.Join(targetsRoot, target.Account, target.Region), nil
}

// checkElement checks that an account or region can be used as exactly one
// directory name.
func checkElement(what, v string) error {
	if v == "" || v == "." || v == ".." || strings.ContainsAny(v, "/\\\x00") {
		return fmt.Errorf("%s %q cannot be used as a directory name", what, v)
	}
	return nil
}

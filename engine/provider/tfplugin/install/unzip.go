package install

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/dirhash"
)

// unzip extracts the provider archive zipPath into the existing, empty
// directory dir. It refuses (ErrUnsafeArchive) entries whose name is not a
// plain relative path inside dir (absolute, "..", backslashes, newlines),
// symbolic links and special files, and stops (ErrTooLarge) at
// lim.MaxArchiveEntries entries or lim.MaxUnpackedBytes bytes actually
// written, whatever the headers claim. Files are written through an
// os.Root on dir, which refuses any path resolving outside it as a second
// line of defence. Top-level files named terraform-provider-* and files
// with an executable bit are 0755, the rest 0644.
func unzip(zipPath, dir string, lim Limits) error {
	r, err := zip.OpenReader(zipPath)
	if err != nil {
		return wrapf(ErrUnsafeArchive, err, "open provider archive %s", filepath.Base(zipPath))
	}
	defer r.Close()
	if len(r.File) > lim.MaxArchiveEntries {
		return errorf(ErrTooLarge, "provider archive %s has %d entries, more than the limit of %d",
			filepath.Base(zipPath), len(r.File), lim.MaxArchiveEntries)
	}
	if err := checkZipEntries(r.File); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("unpack provider archive: %w", err)
	}
	defer root.Close()

	budget := lim.MaxUnpackedBytes
	for _, f := range r.File {
		name := strings.TrimSuffix(f.Name, "/")
		if f.FileInfo().IsDir() {
			if err := root.MkdirAll(filepath.FromSlash(name), 0o755); err != nil {
				return wrapf(ErrUnsafeArchive, err, "unpack provider archive entry %q", f.Name)
			}
			continue
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(filepath.FromSlash(d), 0o755); err != nil {
				return wrapf(ErrUnsafeArchive, err, "unpack provider archive entry %q", f.Name)
			}
		}
		if f.UncompressedSize64 > uint64(budget) {
			return errorf(ErrTooLarge, "provider archive entry %q is %d bytes unpacked; the whole package may have at most %d",
				f.Name, f.UncompressedSize64, lim.MaxUnpackedBytes)
		}
		perm := os.FileMode(0o644)
		if f.Mode().Perm()&0o111 != 0 || (!strings.Contains(name, "/") && strings.HasPrefix(name, "terraform-provider-")) {
			perm = 0o755
		}
		n, err := extractFile(root, f, name, perm, budget)
		if err != nil {
			return err
		}
		budget -= n
	}
	return nil
}

// checkZipEntries refuses unsafe names and file types before anything is
// written.
func checkZipEntries(files []*zip.File) error {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		name := strings.TrimSuffix(f.Name, "/")
		switch {
		case name == "" || strings.ContainsAny(name, "\\\n\r\x00") || !filepath.IsLocal(filepath.FromSlash(name)) ||
			path.Clean(name) != name:
			return errorf(ErrUnsafeArchive, "provider archive entry %q is not a plain relative path inside the package (zip-slip)", f.Name)
		case f.Mode()&os.ModeSymlink != 0:
			return errorf(ErrUnsafeArchive, "provider archive entry %q is a symbolic link; provider packages hold regular files only", f.Name)
		case !f.FileInfo().IsDir() && !f.Mode().IsRegular():
			return errorf(ErrUnsafeArchive, "provider archive entry %q is a special file (%s); provider packages hold regular files only", f.Name, f.Mode().Type())
		case seen[name]:
			return errorf(ErrUnsafeArchive, "provider archive has entry %q twice", f.Name)
		}
		seen[name] = true
	}
	return nil
}

func extractFile(root *os.Root, f *zip.File, name string, perm os.FileMode, budget int64) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, wrapf(ErrUnsafeArchive, err, "read provider archive entry %q", f.Name)
	}
	defer rc.Close()
	w, err := root.OpenFile(filepath.FromSlash(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, wrapf(ErrUnsafeArchive, err, "unpack provider archive entry %q", f.Name)
	}
	n, err := io.Copy(w, io.LimitReader(rc, budget+1))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return n, wrapf(ErrUnsafeArchive, err, "unpack provider archive entry %q", f.Name)
	case n > budget:
		return n, errorf(ErrTooLarge, "provider archive entry %q unpacks to more than the %d bytes left of the package limit", f.Name, budget)
	}
	return n, nil
}

// zipContentHash is the h1: hash the package directory unzip makes from
// zipPath would have: dirhash.Hash1 over its regular files (directory
// entries, which hold no file, left out).
func zipContentHash(zipPath string) (string, error) {
	r, err := zip.OpenReader(zipPath)
	if err != nil {
		return "", wrapf(ErrUnsafeArchive, err, "open provider archive %s", filepath.Base(zipPath))
	}
	defer r.Close()
	if err := checkZipEntries(r.File); err != nil {
		return "", err
	}
	files := map[string]*zip.File{}
	var names []string
	for _, f := range r.File {
		if f.FileInfo().IsDir() {
			continue
		}
		files[f.Name] = f
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return dirhash.Hash1(names, func(name string) (io.ReadCloser, error) {
		f := files[name]
		if f == nil {
			return nil, errors.New("no such entry")
		}
		return f.Open()
	})
}

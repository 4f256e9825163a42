package modregistry

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing/fstest"
	"time"
)

func (c *Client) maxBytes() int64 {
	if c.MaxArchiveBytes > 0 {
		return c.MaxArchiveBytes
	}
	return DefaultMaxArchiveBytes
}

func (c *Client) maxEntries() int {
	if c.MaxEntries > 0 {
		return c.MaxEntries
	}
	return DefaultMaxEntries
}

// Archive returns the unpacked files of the archive at rawURL (typ
// "tar.gz", "tgz" or "zip") and its hex SHA-256. With sum, the archive
// must have that digest, and is read from the cache when it is there;
// with cachedOnly nothing goes over the network (ErrNotCached).
func (c *Client) Archive(ctx context.Context, rawURL, typ, sum string, cachedOnly bool) (fs.FS, string, error) {
	var data []byte
	if sum != "" {
		if b, err := os.ReadFile(c.cachePath(sum)); err == nil && digest(b) == sum {
			data = b
			now := time.Now()
			_ = os.Chtimes(c.cachePath(sum), now, now)
		}
	}
	if data == nil {
		if cachedOnly {
			return nil, "", fmt.Errorf("archive %s: %w", redact(rawURL), ErrNotCached)
		}
		b, err := c.download(ctx, rawURL)
		if err != nil {
			return nil, "", err
		}
		if sum != "" && digest(b) != sum {
			return nil, "", fmt.Errorf("%w: %s has sha256 %s, but it is pinned to %s", ErrArchive, redact(rawURL), digest(b), sum)
		}
		data = b
	}
	got := digest(data)
	files, err := unpack(data, typ, c.maxBytes(), c.maxEntries())
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s: %v", ErrArchive, redact(rawURL), err)
	}
	if !cachedOnly {
		c.store(got, data)
	}
	return files, got, nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (c *Client) cachePath(sum string) string {
	return filepath.Join(c.CacheDir, "archives", sum)
}

// store keeps an archive in the cache (atomically: a temporary file
// renamed), dropping the least recently used beyond MaxArchives.
func (c *Client) store(sum string, data []byte) {
	dir := filepath.Join(c.CacheDir, "archives")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), c.cachePath(sum)) != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	limit := c.MaxArchives
	if limit <= 0 {
		limit = DefaultMaxArchives
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) <= limit {
		return
	}
	type entry struct {
		name string
		at   time.Time
	}
	var all []entry
	for _, e := range ents {
		if info, err := e.Info(); err == nil && len(e.Name()) == 64 {
			all = append(all, entry{e.Name(), info.ModTime()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, e := range all[:max(0, len(all)-limit)] {
		if e.name != sum {
			_ = os.Remove(filepath.Join(dir, e.name))
		}
	}
}

// download GETs an archive, refusing one over maxBytes.
func (c *Client) download(ctx context.Context, rawURL string) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname()))) {
		return nil, fmt.Errorf("%w: %s: archives are fetched over https (plain http only from loopback)", ErrArchive, redact(rawURL))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrArchive, redact(rawURL), err)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", redact(rawURL), stripURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s answered %d", ErrArchive, redact(rawURL), resp.StatusCode)
	}
	if resp.ContentLength > c.maxBytes() {
		return nil, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrArchive, redact(rawURL), resp.ContentLength, c.maxBytes())
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes()+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", redact(rawURL), stripURL(err))
	}
	if int64(len(b)) > c.maxBytes() {
		return nil, fmt.Errorf("%w: %s is more than %d bytes", ErrArchive, redact(rawURL), c.maxBytes())
	}
	return b, nil
}

func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "<unparsable URL>"
}

// unpack reads an archive into memory, refusing what a module package
// must not hold.
func unpack(data []byte, typ string, maxBytes int64, maxEntries int) (fstest.MapFS, error) {
	files := fstest.MapFS{}
	var total int64
	add := func(name string, mode fs.FileMode, r io.Reader) error {
		if len(files) >= maxEntries {
			return fmt.Errorf("more than %d entries", maxEntries)
		}
		clean := path.Clean(strings.TrimPrefix(name, "./"))
		if name == "" || path.IsAbs(name) || strings.Contains(name, "\\") || clean == ".." || strings.HasPrefix(clean, "../") || !fs.ValidPath(clean) {
			return fmt.Errorf("entry %q leaves the package", name)
		}
		switch {
		case mode.IsDir():
			if clean != "." {
				files[clean] = &fstest.MapFile{Mode: fs.ModeDir | 0o555}
			}
			return nil
		case !mode.IsRegular():
			return fmt.Errorf("entry %q is a %s: module archives may hold only files and directories", name, kind(mode))
		}
		b, err := io.ReadAll(io.LimitReader(r, maxBytes-total+1))
		if err != nil {
			return fmt.Errorf("entry %q: %v", name, err)
		}
		if total += int64(len(b)); total > maxBytes {
			return fmt.Errorf("it unpacks to more than %d bytes", maxBytes)
		}
		files[clean] = &fstest.MapFile{Data: b, Mode: mode.Perm() | 0o444}
		return nil
	}
	switch typ {
	case "tar.gz", "tgz":
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("not gzip: %v", err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("not a tar archive: %v", err)
			}
			if h.Typeflag == tar.TypeXGlobalHeader {
				continue
			}
			if err := add(h.Name, h.FileInfo().Mode(), tr); err != nil {
				return nil, err
			}
		}
	case "zip":
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("not a zip archive: %v", err)
		}
		for _, f := range zr.File {
			if f.UncompressedSize64 > uint64(maxBytes) {
				return nil, fmt.Errorf("entry %q unpacks to %d bytes, more than %d", f.Name, f.UncompressedSize64, maxBytes)
			}
			if f.Mode().IsRegular() {
				rc, err := f.Open()
				if err != nil {
					return nil, fmt.Errorf("entry %q: %v", f.Name, err)
				}
				err = add(f.Name, f.Mode(), rc)
				rc.Close()
				if err != nil {
					return nil, err
				}
				continue
			}
			if err := add(f.Name, f.Mode(), nil); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("archive type %q is not supported", typ)
	}
	return files, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	}
	return "special file"
}

// Sub is fsys's directory dir as a package's root. dir "*" is the single
// directory at the root of an archive (go-getter's "//*", as GitHub's
// archives need).
func Sub(fsys fs.FS, dir string) (fs.FS, error) {
	if dir == "" || dir == "." {
		return fsys, nil
	}
	if dir == "*" {
		ents, err := fs.ReadDir(fsys, ".")
		if err != nil {
			return nil, err
		}
		if len(ents) != 1 || !ents[0].IsDir() {
			return nil, fmt.Errorf("the package's \"//*\" needs exactly one directory at its root; it has %d entries", len(ents))
		}
		dir = ents[0].Name()
	}
	if fi, err := fs.Stat(fsys, dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the package has no directory %q", dir)
	}
	return fs.Sub(fsys, dir)
}

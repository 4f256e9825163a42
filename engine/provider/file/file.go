package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

var (
	_ provider.Provider         = (*Provider)(nil)
	_ provider.AttributePlanner = (*Provider)(nil)
	_ provider.Validator        = (*Provider)(nil)
	_ provider.Syncer           = (*Provider)(nil)
	_ provider.DriftReader      = (*Provider)(nil)
)

// DefaultMode is the permission of a file whose mode is not set.
const DefaultMode = "0644"

// Options configure the file provider.
type Options struct {
	// Root is the targets root; a resource's file lives at
	// <Root>/<account>/<region>/<path>.
	Root string
}

// Provider manages files under instance roots.
type Provider struct {
	opts  Options
	roots *Roots
	temps *temps
	group *groupSync
	dirs  dirCache
}

// New returns a file provider writing under opts.Root.
func New(opts Options) *Provider {
	p := &Provider{opts: opts, roots: NewRoots(opts.Root), temps: newTemps()}
	p.group = newGroupSync(p.flush)
	return p
}

// Sync makes every write, rename and delete the provider made before the
// call durable (provider.Syncer): Create, Update and Delete return once
// the change is in the page cache, and the engine calls Sync before it
// records them as done. Calls waiting at the same time share one flush of
// the targets root's filesystem (group commit), so a fleet of instances
// costs a few flushes instead of two fsyncs per file.
func (p *Provider) Sync(ctx context.Context, _ provider.Target) error {
	return p.group.Sync(ctx)
}

// Schema declares path (a change replaces the file), content and mode.
func (p *Provider) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{
			"path":    {Type: cty.String, Required: true, Recreation: provider.Always},
			"content": {Type: cty.String, Required: true, Recreation: provider.Never},
			"mode":    {Type: cty.String, Recreation: provider.Never},
		},
		Attributes: []string{"id", "sha256"},
	}
}

// ValidateProperties checks the known parts of properties: the path is
// jailed and the mode is an octal permission. Unknown values pass.
func (p *Provider) ValidateProperties(_ provider.Target, properties cty.Value) error {
	props, _ := properties.UnmarkDeep()
	if props.IsNull() || !props.IsKnown() {
		return nil
	}
	if s, ok := knownString(props, "path"); ok {
		if err := CheckFilePath(s); err != nil {
			return err
		}
	}
	if s, ok := knownString(props, "mode"); ok {
		if _, err := parseMode(s); err != nil {
			return err
		}
	}
	return nil
}

// PlanAttributes tells id (the path) and sha256 (of the content) when they
// are known; the others stay unknown. Marks on the inputs carry over.
func (p *Provider) PlanAttributes(_ provider.Target, properties cty.Value) map[string]cty.Value {
	attrs := map[string]cty.Value{
		"id":     cty.UnknownVal(cty.String),
		"sha256": cty.UnknownVal(cty.String),
	}
	props, topMarks := properties.Unmark()
	if props.IsNull() || !props.IsKnown() || !props.Type().IsObjectType() {
		return attrs
	}
	if props.Type().HasAttribute("path") {
		v, marks := props.GetAttr("path").Unmark()
		if v.IsKnown() && !v.IsNull() {
			attrs["id"] = cty.StringVal(v.AsString()).WithMarks(marks, topMarks)
		}
	}
	if props.Type().HasAttribute("content") {
		v, marks := props.GetAttr("content").Unmark()
		if v.IsKnown() && !v.IsNull() {
			attrs["sha256"] = cty.StringVal(sum([]byte(v.AsString()))).WithMarks(marks, topMarks)
		}
	}
	return attrs
}

// Create writes the file atomically. Called again with the same properties
// it rewrites the same content: create-or-verify.
func (p *Provider) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	return p.write(ctx, req)
}

// Update rewrites content and mode. The path never changes in place (it is
// Recreation Always); an Update asking for another path is an error.
func (p *Provider) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	return p.write(ctx, req)
}

func (p *Provider) write(ctx context.Context, req provider.Request) (provider.Result, error) {
	if err := ctx.Err(); err != nil {
		return provider.Result{}, err
	}
	cfg, err := decode(req.Properties)
	if err != nil {
		return provider.Result{}, err
	}
	if req.PhysicalID != "" && path.Clean(req.PhysicalID) != path.Clean(cfg.path) {
		return provider.Result{}, fmt.Errorf("path %q: cannot change to %q in place; the file must be replaced", req.PhysicalID, cfg.path)
	}
	dir, base := path.Split(path.Clean(cfg.path))
	data := []byte(cfg.content)
	for attempt := 0; ; attempt++ {
		h, release, err := p.dirs.open(p, req.Target, dir)
		if err != nil {
			return provider.Result{}, fmt.Errorf("write file %q: %w", cfg.path, err)
		}
		err = p.temps.writeAtomic(h.d, h.instDir, dir, base, data, cfg.mode)
		if err != nil && attempt == 0 && errors.Is(err, fs.ErrNotExist) {
			// The directory kept open was removed meanwhile (the
			// instance's files deleted by hand): open it again, once.
			p.dirs.forget(dirKey{req.Target.Account, req.Target.Region, dir}, h)
			release()
			continue
		}
		release()
		if err != nil {
			return provider.Result{}, err
		}
		break
	}
	return result(cfg.path, sum(data)), nil
}

// Read hashes the file on disk. A missing file is provider.ErrNotFound.
// Something else than a regular file at the path (a named pipe, socket,
// device or directory put there out of band) is drift: its content is
// found as a description of what is there, and it is never opened for
// reading, which for a named pipe would wait for a writer for ever.
func (p *Provider) Read(ctx context.Context, req provider.Request) (provider.Result, error) {
	if err := ctx.Err(); err != nil {
		return provider.Result{}, err
	}
	name, err := physicalPath(req)
	if err != nil {
		return provider.Result{}, err
	}
	root, instDir, err := p.roots.Instance(req.Target)
	if err != nil {
		return provider.Result{}, err
	}
	defer root.Close()
	p.temps.sweep(root, instDir, dirOf(name))
	f, fi, err := openRegular(root, name)
	if errors.Is(err, fs.ErrNotExist) {
		return provider.Result{}, fmt.Errorf("file %q: %w", name, provider.ErrNotFound)
	}
	if err != nil {
		return provider.Result{}, fmt.Errorf("read file %q: %w", name, err)
	}
	if f == nil {
		res := result(name, "")
		res.Properties = found(req.Properties, "", notRegular(fi.Mode()), fi.Mode().Perm())
		return res, nil
	}
	defer f.Close()
	h := sha256.New()
	head, err := io.ReadAll(io.LimitReader(io.TeeReader(f, h), MaxShownContent+1))
	var rest int64
	if err == nil {
		rest, err = io.Copy(h, f)
	}
	if err != nil {
		return provider.Result{}, fmt.Errorf("read file %q: %w", name, err)
	}
	sha := hex.EncodeToString(h.Sum(nil))
	res := result(name, sha)
	res.Properties = found(req.Properties, sha, shownContent(head, int64(len(head))+rest, sha), fi.Mode().Perm())
	return res, nil
}

// openRegular opens name in root for reading when it is a regular file
// (following a symbolic link inside root). When it is something else, f
// is nil and fi tells what it is. It never blocks: name is opened only
// once a stat found a regular file, and then with O_NONBLOCK, in case a
// named pipe took its place meanwhile (the open of a named pipe for
// reading otherwise waits for a writer, and no context can end that wait).
func openRegular(root *os.Root, name string) (f *os.File, fi fs.FileInfo, err error) {
	fi, err = root.Stat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fi, err
	}
	f, err = root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err = f.Stat()
	if err == nil && fi.Mode().IsRegular() {
		// Reads of a regular file do not block anyway; some network and
		// FUSE filesystems would still honour the flag.
		err = setBlocking(f)
	}
	if err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, fi, err
	}
	return f, fi, nil
}

// setBlocking clears O_NONBLOCK of f.
func setBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	cerr := rc.Control(func(fd uintptr) {
		err = syscall.SetNonblock(int(fd), false)
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// notRegular is how drift shows content found to be something else than a
// regular file: "(a named pipe, not a regular file)".
func notRegular(mode fs.FileMode) string {
	var what string
	switch t := mode.Type(); {
	case t&fs.ModeDir != 0:
		what = "directory"
	case t&fs.ModeNamedPipe != 0:
		what = "named pipe"
	case t&fs.ModeSocket != 0:
		what = "socket"
	case t&fs.ModeCharDevice != 0:
		what = "character device"
	case t&fs.ModeDevice != 0:
		what = "block device"
	default:
		what = "special file"
	}
	return fmt.Sprintf("(a %s, not a regular file)", what)
}

// MaxShownContent bounds the content found that drift shows (4 KiB):
// drift goes into every status commit, the API and --json, for every
// instance. Larger content, or content that is not UTF-8 text, is shown by
// its size and hash. Drift is decided on the hash of the whole file.
const MaxShownContent = 4 << 10

// shownContent is how drift shows the content found, head (at most
// MaxShownContent+1 bytes) of size bytes with SHA-256 sha: as it is when it
// is short UTF-8 text, else "(<size> bytes, sha256 <sha>)".
func shownContent(head []byte, size int64, sha string) string {
	if size == int64(len(head)) && size <= MaxShownContent && utf8.Valid(head) {
		return string(head)
	}
	return fmt.Sprintf("(%d bytes, sha256 %s)", size, sha)
}

// Readable: every file can be read (provider.DriftReader).
func (p *Provider) Readable(cty.Value) bool { return true }

// found is the file's properties as Read found them, in the shape of the
// last applied properties: content and mode keep the applied value when
// the file still has it. sha is the SHA-256 of the content found ("" when
// there is none: not a regular file); content found otherwise is shown as
// shown.
func found(applied cty.Value, sha, shown string, perm fs.FileMode) cty.Value {
	props, marks := applied.Unmark()
	if props.IsNull() || !props.IsKnown() || !props.Type().IsObjectType() {
		return cty.NilVal
	}
	m := props.AsValueMap()
	if c, ok := knownString(props, "content"); !ok || sha == "" || sum([]byte(c)) != sha {
		if ok && shown == c {
			// A summary that reads like the applied content: drift is
			// told by the content found differing, so it must differ.
			shown += " (differs from the applied content)"
		}
		m["content"] = cty.StringVal(shown)
	}
	mode := DefaultMode
	if s, ok := knownString(props, "mode"); ok {
		mode = s
	}
	if want, err := parseMode(mode); err != nil || want != perm {
		m["mode"] = cty.StringVal(fmt.Sprintf("%04o", uint32(perm)))
	}
	return cty.ObjectVal(m).WithMarks(marks)
}

// Delete removes the file (a missing file is success) and a temporary file
// an interrupted write of it left, then every parent directory it leaves
// empty, up to but not including the instance root.
func (p *Provider) Delete(ctx context.Context, req provider.Request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name, err := physicalPath(req)
	if err != nil {
		return err
	}
	root, instDir, err := p.roots.Instance(req.Target)
	if err != nil {
		return err
	}
	defer root.Close()
	dir := dirOf(name)
	// A write of this file interrupted by a crash may have left a temporary
	// file: the sweep removes it (once per directory and process).
	p.temps.sweep(root, instDir, dir)
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Already gone; still prune what may have been left behind.
	case err != nil:
		return fmt.Errorf("delete file %q: %w", name, err)
	case fi.IsDir():
		return fmt.Errorf("delete file %q: is a directory", name)
	default:
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete file %q: %w", name, err)
		}
	}
	p.dirs.forgetTarget(req.Target) // its directories may go now
	pruneEmptyDirs(root, path.Dir(path.Clean(name)))
	return nil
}

// pruneEmptyDirs removes dir and its parents while they are empty real
// directories (never a symbolic link), stopping below the root.
func pruneEmptyDirs(root *os.Root, dir string) {
	for ; dir != "." && dir != "/"; dir = path.Dir(dir) {
		fi, err := root.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil || !fi.IsDir() {
			return
		}
		if err := root.Remove(dir); err != nil {
			return // not empty, or not ours to remove
		}
	}
}

// writeAtomic writes data to base inside d, the open directory dir ("" or a
// slash path ending in "/") of the instance root at instDir, through a
// temporary file in the same directory and a rename, so readers
// never see a partial file. It does not fsync: the write is durable once
// Sync returns (see Provider.Sync). Every access names one element
// relative to d, so a file costs a handful of system calls.
func (t *temps) writeAtomic(d *os.Root, instDir, dir, base string, data []byte, mode fs.FileMode) error {
	name := dir + base
	fi, err := d.Lstat(base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("write file %q: %w", name, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("write file %q: is a symbolic link; refusing to follow or replace it", name)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("write file %q: exists and is not a regular file", name)
	}
	// A temporary name of its own per write: concurrent writes never share
	// one, and what a crash leaves behind is swept (see temps).
	tmp := newTmpName()
	defer t.begin(instDir, dir+tmp)()
	f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write file %q: %w", name, err)
	}
	_, err = f.Write(data)
	if err == nil && !createsWith(mode) {
		err = f.Chmod(mode) // the umask took bits away
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.Rename(tmp, base)
	}
	if err != nil {
		_ = d.Remove(tmp)
		return fmt.Errorf("write file %q: %w", name, err)
	}
	return nil
}

type config struct {
	path    string
	content string
	mode    fs.FileMode
}

func decode(properties cty.Value) (config, error) {
	props, _ := properties.UnmarkDeep()
	if props.IsNull() || !props.IsKnown() || !props.Type().IsObjectType() {
		return config{}, errors.New("properties must be a known object")
	}
	var cfg config
	var ok bool
	if cfg.path, ok = knownString(props, "path"); !ok {
		return config{}, errors.New("property path: must be a known string")
	}
	if err := CheckFilePath(cfg.path); err != nil {
		return config{}, err
	}
	if cfg.content, ok = knownString(props, "content"); !ok {
		return config{}, errors.New("property content: must be a known string")
	}
	mode := DefaultMode
	if s, ok := knownString(props, "mode"); ok {
		mode = s
	}
	m, err := parseMode(mode)
	if err != nil {
		return config{}, err
	}
	cfg.mode = m
	return cfg, nil
}

// physicalPath is the file a Read or Delete is about: the physical id, or
// the configured path when there is none yet.
func physicalPath(req provider.Request) (string, error) {
	name := req.PhysicalID
	if name == "" {
		props, _ := req.Properties.UnmarkDeep()
		if props.IsKnown() && !props.IsNull() && props.Type().IsObjectType() {
			name, _ = knownString(props, "path")
		}
	}
	if err := CheckFilePath(name); err != nil {
		return "", err
	}
	return name, nil
}

// knownString returns attribute name of the object props when it is a
// known, non-null string.
func knownString(props cty.Value, name string) (string, bool) {
	if !props.Type().IsObjectType() || !props.Type().HasAttribute(name) {
		return "", false
	}
	v := props.GetAttr(name)
	if !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

// parseMode parses an octal permission such as "0644", "644" or "0o644".
func parseMode(s string) (fs.FileMode, error) {
	digits := strings.TrimPrefix(s, "0o")
	n, err := strconv.ParseUint(digits, 8, 32)
	if err != nil || digits == "" || n > 0o777 {
		return 0, fmt.Errorf("mode %q: must be an octal permission between 0000 and 0777, such as %q", s, DefaultMode)
	}
	return fs.FileMode(n), nil
}

func result(name, sha string) provider.Result {
	return provider.Result{
		PhysicalID: name,
		Attributes: map[string]cty.Value{
			"id":     cty.StringVal(name),
			"sha256": cty.StringVal(sha),
		},
	}
}

func sum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

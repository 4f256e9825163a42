package funcs

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// Errors of paths the file functions refuse.
var (
	// ErrHomeDir is the error of a path starting with "~": it would name
	// the home directory of the machine running the daemon.
	ErrHomeDir = errors.New(`paths starting with "~" name a home directory on the machine running stackd; templates can read only the files of their own tree`)
	// ErrOutsideTree is the error of a path that leaves the template's
	// tree.
	ErrOutsideTree = errors.New("the path leaves the template's tree; templates can read only the files of their own tree")
)

func sha1New() hash.Hash   { return sha1.New() }
func sha256New() hash.Hash { return sha256.New() }
func sha512New() hash.Hash { return sha512.New() }
func md5New() hash.Hash    { return md5.New() }

func encHex(b []byte) string    { return hex.EncodeToString(b) }
func encBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// redact is s, or a placeholder when its marks make it sensitive.
func (t *table) redact(s string, marks ...cty.ValueMarks) string {
	for _, m := range marks {
		if _, ok := m[t.o.SensitiveMark]; ok {
			return "(sensitive value)"
		}
	}
	return s
}

// resolve turns the path argument of a file function into a path of FS.
func (t *table) resolve(p string) (string, error) {
	if strings.HasPrefix(p, "~") {
		return "", ErrHomeDir
	}
	rel := p
	if path.IsAbs(p) {
		rel = relativeTo(path.Clean(t.o.CWD), path.Clean(p))
	}
	full := path.Join(t.o.BaseDir, rel)
	if !fs.ValidPath(full) {
		return "", ErrOutsideTree
	}
	return full, nil
}

// readFile reads a file of FS named as a file function's argument.
func (t *table) readFile(p string, marks cty.ValueMarks) ([]byte, error) {
	name := t.redact(p, marks)
	full, err := t.resolve(p)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", name, err)
	}
	if t.o.FS == nil {
		return nil, noFile(name)
	}
	f, err := t.o.FS.Open(full)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, noFile(name)
		}
		return nil, fmt.Errorf("failed to read %s: %s", name, fsReason(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("failed to read %s", name)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("failed to read file: %s is a directory", name)
	}
	if fi.Size() > t.o.MaxFileBytes {
		return nil, t.tooBig(name)
	}
	b, err := io.ReadAll(io.LimitReader(f, t.o.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read file %s", name)
	}
	if int64(len(b)) > t.o.MaxFileBytes {
		return nil, t.tooBig(name)
	}
	return b, nil
}

// fsReason is why FS refused a path, without the path (which may be
// sensitive: the caller names it, redacted).
func fsReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return "the file system refused it"
}

func (t *table) tooBig(name string) error {
	return fmt.Errorf("%s is larger than %d bytes, the largest file a function may read", name, t.o.MaxFileBytes)
}

func noFile(name string) error {
	return fmt.Errorf("no file exists at %s; this function works only with files that are distributed as part of the configuration source code, so if this file will be created by a resource in this configuration you must instead obtain this result from an attribute of that resource", name)
}

// fileFunc reads a file as a UTF-8 string, or as base64.
func (t *table) fileFunc(encB64 bool) function.Function {
	return function.New(&function.Spec{
		Params:       []function.Parameter{{Name: "path", Type: cty.String, AllowMarked: true}},
		Type:         function.StaticReturnType(cty.String),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, marks := args[0].Unmark()
			b, err := t.readFile(p.AsString(), marks)
			if err != nil {
				return cty.UnknownVal(cty.String), function.NewArgError(0, err)
			}
			if encB64 {
				return cty.StringVal(encBase64(b)).WithMarks(marks), nil
			}
			if !utf8.Valid(b) {
				return cty.UnknownVal(cty.String), fmt.Errorf("contents of %s are not valid UTF-8; use the filebase64 function to obtain the Base64 encoded contents or the other file functions (e.g. filemd5, filesha256) to obtain file hashing results instead", t.redact(p.AsString(), marks))
			}
			return cty.StringVal(string(b)).WithMarks(marks), nil
		},
	})
}

// fileHashFunc hashes the contents of a file.
func (t *table) fileHashFunc(h func() hash.Hash, enc func([]byte) string) function.Function {
	return function.New(&function.Spec{
		Params:       []function.Parameter{{Name: "path", Type: cty.String, AllowMarked: true}},
		Type:         function.StaticReturnType(cty.String),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, marks := args[0].Unmark()
			b, err := t.readFile(p.AsString(), marks)
			if err != nil {
				return cty.UnknownVal(cty.String), function.NewArgError(0, err)
			}
			hh := h()
			hh.Write(b)
			return cty.StringVal(enc(hh.Sum(nil))).WithMarks(marks), nil
		},
	})
}

// hashFunc hashes a string.
func hashFunc(h func() hash.Hash, enc func([]byte) string) function.Function {
	return function.New(&function.Spec{
		Params:       []function.Parameter{{Name: "str", Type: cty.String}},
		Type:         function.StaticReturnType(cty.String),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			hh := h()
			hh.Write([]byte(args[0].AsString()))
			return cty.StringVal(enc(hh.Sum(nil))), nil
		},
	})
}

// fileExistsFunc reports whether a regular file exists.
func (t *table) fileExistsFunc() function.Function {
	return function.New(&function.Spec{
		Params:       []function.Parameter{{Name: "path", Type: cty.String, AllowMarked: true}},
		Type:         function.StaticReturnType(cty.Bool),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, marks := args[0].Unmark()
			name := t.redact(p.AsString(), marks)
			full, err := t.resolve(p.AsString())
			if err != nil {
				return cty.UnknownVal(cty.Bool), fmt.Errorf("cannot read %s: %w", name, err)
			}
			if t.o.FS == nil {
				return cty.False.WithMarks(marks), nil
			}
			fi, err := fs.Stat(t.o.FS, full)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return cty.False.WithMarks(marks), nil
			case err != nil:
				return cty.UnknownVal(cty.Bool), fmt.Errorf("failed to stat %s: %s", name, fsReason(err))
			case fi.Mode().IsRegular():
				return cty.True.WithMarks(marks), nil
			case fi.IsDir():
				return cty.False, function.NewArgErrorf(0, "%s is a directory, not a file", name)
			}
			return cty.False, function.NewArgErrorf(0, "%s is not a regular file", name)
		},
	})
}

// fileSetFunc lists the regular files under a directory that match a glob
// pattern, relative to that directory.
func (t *table) fileSetFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{
			{Name: "path", Type: cty.String, AllowMarked: true},
			{Name: "pattern", Type: cty.String, AllowMarked: true},
		},
		Type:         function.StaticReturnType(cty.Set(cty.String)),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			p, pathMarks := args[0].Unmark()
			pat, patMarks := args[1].Unmark()
			marks := []cty.ValueMarks{pathMarks, patMarks}
			dir, err := t.resolve(p.AsString())
			if err != nil {
				return cty.UnknownVal(retType), fmt.Errorf("cannot read %s: %w", t.redact(p.AsString(), marks...), err)
			}
			full := path.Join(dir, pat.AsString())
			if _, err := doublestar.Match(full, full); err != nil {
				return cty.UnknownVal(retType), fmt.Errorf("failed to glob pattern %s: %w", t.redact(full, marks...), err)
			}
			var matches []cty.Value
			if t.o.FS != nil {
				err = fs.WalkDir(t.o.FS, dir, func(name string, d fs.DirEntry, err error) error {
					if err != nil {
						if name == dir && errors.Is(err, fs.ErrNotExist) {
							return fs.SkipAll // no such directory: no match
						}
						return err
					}
					if d.IsDir() {
						return nil
					}
					if ok, err := doublestar.Match(full, name); err != nil || !ok {
						return err
					}
					fi, err := fs.Stat(t.o.FS, name)
					if err != nil || !fi.Mode().IsRegular() {
						return nil
					}
					rel := strings.TrimPrefix(name, dir+"/")
					if dir == "." {
						rel = name
					}
					matches = append(matches, cty.StringVal(rel))
					return nil
				})
				if err != nil {
					return cty.UnknownVal(retType), fmt.Errorf("failed to glob pattern %s: %s", t.redact(full, marks...), fsReason(err))
				}
			}
			if len(matches) == 0 {
				return cty.SetValEmpty(cty.String).WithMarks(marks...), nil
			}
			return cty.SetVal(matches).WithMarks(marks...), nil
		},
	})
}

// absPathFunc makes a path absolute, relative to Options.CWD.
func (t *table) absPathFunc() function.Function {
	return function.New(&function.Spec{
		Params:       []function.Parameter{{Name: "path", Type: cty.String}},
		Type:         function.StaticReturnType(cty.String),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			if path.IsAbs(p) {
				return cty.StringVal(path.Clean(p)), nil
			}
			return cty.StringVal(path.Join(t.o.CWD, p)), nil
		},
	})
}

var basenameFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "path", Type: cty.String}},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(path.Base(args[0].AsString())), nil
	},
})

var dirnameFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "path", Type: cty.String}},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(path.Dir(args[0].AsString())), nil
	},
})

// pathExpandFunc returns paths unchanged and refuses those starting with
// "~": expanding them would read the daemon's home directory.
var pathExpandFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "path", Type: cty.String}},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		p := args[0].AsString()
		if strings.HasPrefix(p, "~") {
			return cty.UnknownVal(cty.String), ErrHomeDir
		}
		return cty.StringVal(p), nil
	},
})

// relativeTo is the path of target relative to dir, both absolute and
// clean; it may start with "..".
func relativeTo(dir, target string) string {
	d := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	g := strings.Split(strings.TrimPrefix(target, "/"), "/")
	if dir == "/" {
		d = nil
	}
	if target == "/" {
		g = nil
	}
	i := 0
	for i < len(d) && i < len(g) && d[i] == g[i] {
		i++
	}
	parts := slices.Repeat([]string{".."}, len(d)-i)
	return path.Join(append(parts, g[i:]...)...)
}

package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/stackd/stackd/engine/config/funcs"
)

// What the file functions (file, fileset, templatefile, …) read.
//
// They read the definitions' tree at the commit (the fs.FS the template
// was loaded from, never the daemon's disk), relative to the root
// module's directory as Terraform's are relative to its working
// directory, and only under the directories of the template and of the
// modules it calls: those are the files a template's hash covers, so that
// a commit changing a file a template reads plans its instances again
// (stackd plans an instance only when its template or variables change).
// A path elsewhere in the repository is an error saying so, never a
// different result. Files are opened as they are in the tree: a SOPS
// file reads as its ciphertext, as Terraform would read it; on an
// untrusted ref nothing is readable that the ref's own tree does not hold.

// MaxFunctionFiles bounds the files under the directories of a template
// whose expressions call file functions: each is hashed when the
// template is loaded.
const MaxFunctionFiles = 10000

// fileFunctions are the functions that read files.
var fileFunctions = map[string]bool{
	"file": true, "filebase64": true, "filebase64sha256": true, "filebase64sha512": true,
	"fileexists": true, "filemd5": true, "fileset": true, "filesha1": true,
	"filesha256": true, "filesha512": true, "templatefile": true,
}

// ProviderFunctions are the provider-defined functions a plan's templates
// call, by the names they call them ("provider::NAME::FUNC").
type ProviderFunctions map[string]function.Function

// providerFunctions are m's provider-defined functions that only names
// (all when nil).
func (m *Meter) providerFunctions(only map[string]bool) map[string]function.Function {
	out := map[string]function.Function{}
	for name, f := range m.Template.pluginFunctions() { // provider_functions.go
		if only == nil || only[name] {
			out[name] = f
		}
	}
	for name, f := range m.ProviderFunctions {
		if only == nil || only[name] {
			out[name] = f
		}
	}
	return out
}

// bindFiles gives t the files its file functions read and, when it (or a
// module) calls one, adds what they can read to its hash.
func (t *Template) bindFiles(ld *loader) hcl.Diagnostics {
	dirs := t.fileDirs()
	t.files = funcFS{fsys: ld.fsys, dirs: dirs}
	uses := t.readsRemoteState() // remote_state.go: state files are read like files
	for name := range t.Funcs {
		if fileFunctions[strings.TrimPrefix(name, funcs.CorePrefix)] {
			uses = true
		}
	}
	if !uses {
		return nil
	}
	h := sha256.New()
	h.Write([]byte(t.Hash))
	n := 0
	for _, dir := range dirs {
		err := fs.WalkDir(ld.fsys, dir, func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if n++; n > MaxFunctionFiles {
				return errTooManyFiles
			}
			fi, err := fs.Stat(ld.fsys, name)
			if err != nil || !fi.Mode().IsRegular() {
				fmt.Fprintf(h, "\x00%s\x00-", name)
				return nil
			}
			fmt.Fprintf(h, "\x00%s\x00%d\x00", name, fi.Size())
			if fi.Size() > MaxTemplateFileSize {
				return nil // no function reads it
			}
			f, err := ld.fsys.Open(name)
			if err != nil {
				return nil // nor this one
			}
			defer f.Close()
			_, err = io.Copy(h, io.LimitReader(f, MaxTemplateFileSize+1))
			return err
		})
		if errors.Is(err, errTooManyFiles) {
			return hcl.Diagnostics{Errorf(t.filesRange(), "Too many files for file functions",
				"The template in %s calls file functions (%s), which read the files under its directories (%s); those hold more than %d files, and stackd hashes them all to know when they change. Keep the files the template reads in a smaller directory.",
				t.Dir, strings.Join(t.fileFuncNames(), ", "), strings.Join(dirs, ", "), MaxFunctionFiles)}
		}
		if err != nil {
			return hcl.Diagnostics{Errorf(t.filesRange(), "Cannot read template files",
				"The template in %s calls file functions; reading the files under %s failed: %s.", t.Dir, dir, trimFSError(err))}
		}
	}
	t.Hash = hex.EncodeToString(h.Sum(nil))
	return nil
}

var errTooManyFiles = errors.New("too many files")

// fileDirs are the directories of t and of the modules it calls, none
// inside another, sorted.
func (t *Template) fileDirs() []string {
	var all []string
	seen := map[*Template]bool{}
	var walk func(t *Template)
	walk = func(t *Template) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		all = append(all, path.Clean(t.Dir))
		for _, mc := range t.Modules {
			walk(mc.Template)
		}
	}
	walk(t)
	slices.Sort(all)
	var out []string
	for _, d := range all {
		if len(out) > 0 && within(out[len(out)-1], d) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// within reports whether name is dir or under it.
func within(dir, name string) bool {
	return dir == "." || name == dir || strings.HasPrefix(name, dir+"/")
}

func (t *Template) fileFuncNames() []string {
	var out []string
	for name := range t.Funcs {
		if fileFunctions[strings.TrimPrefix(name, funcs.CorePrefix)] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// filesRange is where a diagnostic about the files of t points: the first
// declaration found.
func (t *Template) filesRange() hcl.Range {
	for _, n := range SortedKeys(t.Resources) {
		return t.Resources[n].DeclRange
	}
	for _, n := range SortedKeys(t.Locals) {
		return t.Locals[n].DeclRange
	}
	for _, n := range SortedKeys(t.Outputs) {
		return t.Outputs[n].DeclRange
	}
	return hcl.Range{Filename: t.Dir}
}

// funcFS is the file system of the file functions: fsys, read only under
// dirs.
type funcFS struct {
	fsys fs.FS
	dirs []string
}

func (f funcFS) check(op, name string) error {
	for _, d := range f.dirs {
		if within(d, name) {
			return nil
		}
	}
	return &fs.PathError{Op: op, Path: name, Err: fmt.Errorf(
		"file functions read only the files under the template's directories (%s), whose changes stackd watches", strings.Join(f.dirs, ", "))}
}

func (f funcFS) Open(name string) (fs.File, error) {
	if err := f.check("open", name); err != nil {
		return nil, err
	}
	if fi, err := fs.Stat(f.fsys, name); err == nil && !fi.IsDir() && fi.Size() > MaxTemplateFileSize {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("the file is %d bytes; functions read files of at most %d bytes", fi.Size(), MaxTemplateFileSize)}
	}
	return f.fsys.Open(name)
}

func (f funcFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.check("stat", name); err != nil {
		return nil, err
	}
	return fs.Stat(f.fsys, name)
}

func (f funcFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.check("readdir", name); err != nil {
		return nil, err
	}
	return fs.ReadDir(f.fsys, name)
}

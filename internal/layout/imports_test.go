package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/stackd/stackd/"

// rule forbids packages under dir (slash path from the module root; "."
// for the whole module), except those under the directories in except, to
// import paths with any of the prefixes in forbidden, except those that an
// entry of allowed covers (same matching as forbidden).
type rule struct {
	dir       string
	why       string
	forbidden []string
	except    []string
	allowed   []string
}

// programs are the bodies of stackd's programs that drive a whole daemon
// in-process (bench, demo, and what they share): they import every part,
// and only cmd/stackd imports them.
var programs = []string{"internal/bench", "internal/demo", "internal/inproc"}

var rules = []rule{
	{"state", "state imports no package of ours", []string{module}, nil, nil},
	{"engine", "engine knows no Git, no Badger and none of the packages that use it", []string{
		"github.com/go-git/", "github.com/dgraph-io/badger", module + "state", module + "gitsource", module + "reconciler", module + "api", module + "cmd"}, nil, nil},
	{"engine/changeset", "change sets are data and views: they import nothing of ours", []string{module}, nil, nil},
	{"engine/config", "the language imports no engine package but engine/provider (resource type schemas, Secrets) and engine/changeset (JSON diagnostics, rollout plans)", []string{
		module + "engine", module + "state", module + "gitsource", module + "reconciler", module + "api", module + "cmd"},
		nil, []string{module + "engine/config", module + "engine/provider", module + "engine/changeset"}},
	{"engine/provider/tfplugin", "the plugin client imports no engine package above it: only engine/provider, the interface it implements", []string{
		module + "engine", module + "state", module + "gitsource", module + "reconciler", module + "api", module + "cmd"},
		nil, []string{module + "engine/provider"}},
	{"gitsource", "gitsource imports neither engine, state nor reconciler", []string{
		"github.com/dgraph-io/badger", module + "engine", module + "state", module + "reconciler", module + "api", module + "cmd"}, nil, nil},
	{"reconciler", "reconciler works through state and gitsource's interfaces, not Git or Badger, and knows no API", []string{
		"github.com/go-git/", "github.com/dgraph-io/badger", module + "api", module + "cmd"}, nil, nil},
	{"internal", "internal packages are leaves: they import none of ours but internal ones", []string{
		module + "state", module + "engine", module + "gitsource", module + "reconciler", module + "api", module + "cmd"}, programs, nil},
	{".", "only gitsource imports go-git (test files may)", []string{"github.com/go-git/"}, []string{"gitsource"}, nil},
	{".", "only cmd/stackd starts the programs", []string{
		module + "internal/bench", module + "internal/demo", module + "internal/inproc"}, append([]string{"cmd"}, programs...), nil},
}

// covers reports whether the slash path rel is under dir ("." is the
// module), and not under any of except.
func (r rule) covers(rel string) bool {
	if r.dir != "." && !strings.HasPrefix(rel, r.dir+"/") {
		return false
	}
	for _, e := range r.except {
		if strings.HasPrefix(rel, e+"/") {
			return false
		}
	}
	return true
}

// forbids reports whether the forbidden entry bad covers import path p:
// an entry ending in "/" is a prefix; any other is a package and the
// packages under it.
func forbids(bad, p string) bool {
	if strings.HasSuffix(bad, "/") {
		return strings.HasPrefix(p, bad)
	}
	return p == bad || strings.HasPrefix(p, bad+"/")
}

// violates reports whether importing p breaks r.
func violates(r rule, p string) bool {
	for _, ok := range r.allowed {
		if forbids(ok, p) {
			return false
		}
	}
	for _, bad := range r.forbidden {
		if forbids(bad, p) {
			return true
		}
	}
	return false
}

// TestImportRules parses every non-test Go file of the module and checks
// the import rules of docs/design.md §1.
func TestImportRules(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := map[int]int{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for i, r := range rules {
			if !r.covers(rel) {
				continue
			}
			checked[i]++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if violates(r, p) {
					t.Errorf("%s imports %s: %s", rel, p, r.why)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rules {
		if checked[i] == 0 {
			t.Errorf("no file under %s/ was checked: the rule %q checks nothing", r.dir, r.why)
		}
	}
}

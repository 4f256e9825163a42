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

// rule forbids packages under dir (slash path from the module root) to
// import paths with any of the prefixes in forbidden.
type rule struct {
	dir       string
	why       string
	forbidden []string
}

var rules = []rule{
	{"state", "state imports no package of ours", []string{module}},
	{"engine", "engine knows no Git, no Badger and none of the packages that use it", []string{
		"github.com/go-git/", "github.com/dgraph-io/badger", module + "state", module + "gitsource", module + "reconciler", module + "api", module + "cmd"}},
	{"engine/changeset", "change sets are data and views: they import nothing of ours", []string{module}},
	{"gitsource", "gitsource imports neither engine, state nor reconciler", []string{
		"github.com/dgraph-io/badger", module + "engine", module + "state", module + "reconciler", module + "api", module + "cmd"}},
	{"reconciler", "reconciler works through state and gitsource's interfaces, not Git or Badger, and knows no API", []string{
		"github.com/go-git/", "github.com/dgraph-io/badger", module + "api", module + "cmd"}},
	{"internal", "internal packages are leaves: they import none of ours but internal ones", []string{
		module + "state", module + "engine", module + "gitsource", module + "reconciler", module + "api", module + "cmd"}},
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

// TestImportRules parses every non-test Go file of the module and checks
// the import rules of DESIGN §1.
func TestImportRules(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := map[string]int{}
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
		for _, r := range rules {
			if !strings.HasPrefix(rel, r.dir+"/") {
				continue
			}
			checked[r.dir]++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range r.forbidden {
					if forbids(bad, p) {
						t.Errorf("%s imports %s: %s", rel, p, r.why)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if checked[r.dir] == 0 {
			t.Errorf("no file under %s/ was checked: the rule checks nothing", r.dir)
		}
	}
}

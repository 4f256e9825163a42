package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Comments cite the design the repository carries, docs/design.md, whose
// sections keep their numbers; the upper-case name with a section sign
// named a document outside it.
func TestCommentsCiteTheRepositorysDesign(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "DESIGN "+"§") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d cites %q: cite docs/design.md §n", rel, i+1, "DESIGN "+"§")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

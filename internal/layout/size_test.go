package layout

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxFileLines bounds a hand-written Go file of the packages a new
// maintainer reads first (issue 30): past it, a file mixes concerns and is
// split along them.
const maxFileLines = 600

// maxEngineFiles bounds the non-test Go files of engine's top level: the
// language lives in engine/config, the providers in engine/provider.
const maxEngineFiles = 21

// generated matches the line Go tools write atop generated files.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// sourceFiles returns the non-test, hand-written Go files of dir (slash
// path from the module root, not its sub-directories) and their line
// counts.
func sourceFiles(t *testing.T, dir string) map[string]int {
	t.Helper()
	root := filepath.Join("..", "..", filepath.FromSlash(dir))
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if generated.Match(src) {
			continue
		}
		n := 0
		for sc := bufio.NewScanner(bytes.NewReader(src)); sc.Scan(); {
			n++
		}
		out[dir+"/"+name] = n
	}
	if len(out) == 0 {
		t.Fatalf("no Go file in %s: the check checks nothing", dir)
	}
	return out
}

func TestFileSizes(t *testing.T) {
	for _, dir := range []string{"engine", "engine/config", "reconciler"} {
		t.Run(dir, func(t *testing.T) {
			for name, n := range sourceFiles(t, dir) {
				if n > maxFileLines {
					t.Errorf("%s has %d lines, more than %d: split it along its concerns", name, n, maxFileLines)
				}
			}
		})
	}
}

func TestEngineFileCount(t *testing.T) {
	if n := len(sourceFiles(t, "engine")); n > maxEngineFiles {
		t.Errorf("engine/ has %d non-test Go files, more than %d: the language belongs in engine/config", n, maxEngineFiles)
	}
}

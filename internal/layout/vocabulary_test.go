package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/state"
)

// The resource journal statuses are declared by state (which imports no
// package of ours) and by engine (which must not import state); the
// reconciler hands records from one to the other unconverted, so the two
// declarations must spell every status alike (issue 30, item 4).
func TestJournalStatusesAgree(t *testing.T) {
	for _, tc := range []struct{ name, engine, state string }{
		{"applied", engine.StatusApplied, state.ResourceApplied},
		{"pending create", engine.StatusPendingCreate, state.ResourcePendingCreate},
		{"pending update", engine.StatusPendingUpdate, state.ResourcePendingUpdate},
		{"pending delete", engine.StatusPendingDelete, state.ResourcePendingDelete},
	} {
		if tc.engine != tc.state {
			t.Errorf("%s: engine says %q, state says %q", tc.name, tc.engine, tc.state)
		}
	}
}

// moduleGoFiles parses every hand-written, non-test Go file of the module
// (testdata aside), keyed by slash path from the module root.
func moduleGoFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	out := map[string]*ast.File{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found only %d Go files: the check checks nothing", len(out))
	}
	return out
}

// stringValue is the value of a string literal ("" and false otherwise).
func stringValue(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// Every value of the vocabulary is spelled once, as a string literal in
// the file that declares its typed constant: a reviewer who greps the
// value finds its one declaration, and code names the constant.
func TestVocabularyDeclaredOnce(t *testing.T) {
	declared := map[string]string{
		// deletion policy ("Delete" is also a change-set action's name)
		"Retain": "engine/changeset/changeset.go",
		// permission model
		"SERVICE_MANAGED": "engine/config/definitions.go",
		"SELF_MANAGED":    "engine/config/definitions.go",
		// operation kinds (the reconciler re-exports state's constants)
		"CreateStackInstances": "state/records.go",
		"UpdateStackInstances": "state/records.go",
		"DeployStackSet":       "state/records.go",
		"DeleteStackInstances": "state/records.go",
		"DeleteStackSet":       "state/records.go",
		// rollout phases
		"DEPLOYING":             "state/records.go",
		"PAUSED":                "state/records.go",
		"HEALTH_CHECK":          "state/records.go",
		"WAITING_FOR_PROMOTION": "state/records.go",
		"ROLLING_BACK":          "state/records.go",
		// a rollout's events in the operation log
		"HEALTH_CHECK_FAILED": "reconciler/rollout.go",
		"PROMOTED":            "reconciler/rollout.go",
		"ROLLOUT_REPLANNED":   "reconciler/rollout.go",
		"ROLLOUT_STOPPED":     "reconciler/rollout.go",
	}
	found := map[string]map[string]int{}
	for path, f := range moduleGoFiles(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			if e, ok := n.(ast.Expr); ok {
				if s, ok := stringValue(e); ok {
					if _, ok := declared[s]; ok {
						if found[s] == nil {
							found[s] = map[string]int{}
						}
						found[s][path]++
					}
				}
			}
			return true
		})
	}
	for value, decl := range declared {
		if found[value][decl] != 1 {
			t.Errorf("%q is spelled %d times in %s, want once: its declaration", value, found[value][decl], decl)
		}
		for path, n := range found[value] {
			if path != decl {
				t.Errorf("%s spells %q %d times: name the constant declared in %s", path, value, n, decl)
			}
		}
	}
}

// typedFields are the fields whose values are typed constants that read
// like common words ("error", "done"): no code compares them with, or
// sets them to, a string literal; it names the constant
// (changeset.SeverityError, engine.EventDone, …).
var typedFields = map[string]string{
	"Severity": "changeset.Severity (changeset.SeverityError, SeverityWarning)",
	"Phase":    "engine.EventPhase (engine.EventStart, …) or the state's rollout phases (state.RolloutDeploying, …)",
}

func TestTypedFieldsNotStringLiterals(t *testing.T) {
	field := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.SelectorExpr:
			return e.Sel.Name
		case *ast.Ident:
			return e.Name
		}
		return ""
	}
	for path, f := range moduleGoFiles(t) {
		report := func(n ast.Node, name string, lit ast.Expr) {
			if _, typed := typedFields[name]; !typed {
				return
			}
			if s, ok := stringValue(lit); ok && s != "" { // "": unset
				t.Errorf("%s: %s set to or compared with the string %q; use %s", path, name, s, typedFields[name])
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op == token.EQL || n.Op == token.NEQ {
					if _, ok := n.X.(*ast.SelectorExpr); ok {
						report(n, field(n.X), n.Y)
					}
					if _, ok := n.Y.(*ast.SelectorExpr); ok {
						report(n, field(n.Y), n.X)
					}
				}
			case *ast.KeyValueExpr:
				report(n, field(n.Key), n.Value)
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if _, ok := l.(*ast.SelectorExpr); ok && i < len(n.Rhs) && len(n.Lhs) == len(n.Rhs) {
						report(n, field(l), n.Rhs[i])
					}
				}
			case *ast.SwitchStmt:
				if _, ok := n.Tag.(*ast.SelectorExpr); !ok {
					return true
				}
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						report(n, field(n.Tag), e)
					}
				}
			}
			return true
		})
	}
}

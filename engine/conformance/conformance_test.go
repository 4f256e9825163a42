package conformance

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine"
)

// manifestPath lists the cases stackd does not support yet, one a line:
// "CASE: SUBSTRING", SUBSTRING being part of the diagnostic stackd must
// refuse the case with. Lines starting with # are comments.
var manifestPath = filepath.Join("testdata", "expected-failures.txt")

func readManifest(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(manifestPath)
	if os.IsNotExist(err) {
		return map[string]string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, sub, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(sub) == "" {
			t.Fatalf("%s:%d: want \"CASE: DIAGNOSTIC SUBSTRING\", got %q", manifestPath, n, line)
		}
		out[strings.TrimSpace(name)] = strings.TrimSpace(sub)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// knownPath lists the silent differences from Terraform that are known
// and open (each a defect to fix, never a supported behaviour), one a
// line: "CASE: DIFFERENCE", DIFFERENCE exactly as the test reports it. A
// case whose differences are all listed is counted as a silent difference
// in the figure but does not fail the test; a difference not listed, or a
// listed one that no longer occurs, fails it, so the list only shrinks.
var knownPath = filepath.Join("testdata", "known-differences.txt")

func readKnown(t *testing.T) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile(knownPath)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, diff, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("%s:%d: want \"CASE: DIFFERENCE\", got %q", knownPath, n+1, line)
		}
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		out[name][diff] = true
	}
	return out
}

// unknownDiffs returns the differences of a case not listed in known, and
// the listed ones that did not occur.
func unknownDiffs(known map[string]bool, diffs []string) (unlisted, gone []string) {
	seen := map[string]bool{}
	for _, d := range diffs {
		seen[d] = true
		if !known[d] {
			unlisted = append(unlisted, d)
		}
	}
	for d := range known {
		if !seen[d] {
			gone = append(gone, d)
		}
	}
	sort.Strings(gone)
	return unlisted, gone
}

func writeManifest(t *testing.T, m map[string]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# Conformance cases stackd refuses today, with a substring of the diagnostic it\n")
	b.WriteString("# must refuse them with (see doc.go). A silent difference is never listed here.\n")
	b.WriteString("# Rewritten by go test ./engine/conformance -update-manifest; review the diff.\n")
	for _, name := range sortedKeys(m) {
		fmt.Fprintf(&b, "%s: %s\n", name, m[name])
	}
	if err := os.WriteFile(manifestPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Verdicts of a case.
const (
	verdictPass     = "pass"
	verdictExpected = "expected failure"
	verdictFails    = "fails"   // refused, but not as the manifest says
	verdictDiffers  = "differs" // a silent difference from Terraform
	verdictUnclear  = "refused without a source range"
)

// TestConformance runs every case through stackd and compares it with
// Terraform's recording (with -record, records it first).
func TestConformance(t *testing.T) {
	manifest := readManifest(t)
	known := readKnown(t)
	verdicts := map[string]string{}
	failures := map[string]*failure{}
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			if *recordFlag {
				recordCase(t, c)
			}
			fail, diffs := runCase(t, c)
			failures[c.name] = fail
			want, listed := manifest[c.name]
			switch {
			case len(diffs) > 0:
				verdicts[c.name] = verdictDiffers
				unlisted, gone := unknownDiffs(known[c.name], diffs)
				if len(unlisted) > 0 {
					t.Errorf("stackd differs from Terraform without a diagnostic:\n  %s", strings.Join(unlisted, "\n  "))
				} else {
					t.Logf("known silent differences (open defects, %s):\n  %s", knownPath, strings.Join(diffs, "\n  "))
				}
				if len(gone) > 0 {
					t.Errorf("listed in %s but no longer seen (remove them):\n  %s", knownPath, strings.Join(gone, "\n  "))
				}
			case fail != nil && len(fail.unclear) > 0:
				verdicts[c.name] = verdictUnclear
				t.Errorf("stackd refuses the case with diagnostics that say not where (%s): %v", strings.Join(fail.unclear, "; "), fail)
			case fail != nil && listed && strings.Contains(fail.Error(), want):
				verdicts[c.name] = verdictExpected
				t.Logf("expected failure: %v", fail)
			case fail != nil:
				verdicts[c.name] = verdictFails
				if !*updateManifest {
					if listed {
						t.Errorf("stackd refuses the case, but not with %q as %s says: %v", want, manifestPath, fail)
					} else {
						t.Errorf("stackd refuses the case (a regression, or list it in %s): %v", manifestPath, fail)
					}
				}
			default:
				verdicts[c.name] = verdictPass
				if len(known[c.name]) > 0 {
					t.Errorf("the case passes: remove its lines from %s", knownPath)
				}
				if listed && !*updateManifest {
					t.Errorf("the case passes: remove it from %s (or run with -update-manifest)", manifestPath)
				}
			}
		})
	}
	counts := map[string]int{}
	var names []string
	for name, v := range verdicts {
		counts[v]++
		names = append(names, name)
	}
	sort.Strings(names)
	t.Logf("conformance with Terraform 1.11: %d of %d cases pass (%d expected failures, %d failing otherwise, %d silent differences, %d refused without a source range)",
		counts[verdictPass], len(verdicts), counts[verdictExpected], counts[verdictFails], counts[verdictDiffers], counts[verdictUnclear])
	for _, name := range names {
		t.Logf("  %-28s %s", name, verdicts[name])
	}
	if *updateManifest {
		next := map[string]string{}
		for name, v := range verdicts {
			if f := failures[name]; f != nil && (v == verdictFails || v == verdictExpected) {
				if sub, ok := manifest[name]; ok && strings.Contains(f.Error(), sub) {
					next[name] = sub
				} else {
					next[name] = f.first
				}
			}
		}
		for name, sub := range manifest {
			if _, ran := verdicts[name]; !ran {
				next[name] = sub // not run (-run): kept
			}
		}
		writeManifest(t, next)
	}
}

// runCase runs the steps of c through stackd, comparing each with
// Terraform's recording, then destroys. It returns stackd's refusal, or
// the differences found in every step it ran (a refusal ends it).
func runCase(t *testing.T, c tcase) (*failure, []string) {
	var diffs []string
	e, stop := newEngine(t)
	defer stop()
	world := t.TempDir()
	j := &journal{recs: map[string]engine.ResourceState{}}
	ctx := context.Background()
	for i, dir := range c.steps {
		at := ""
		if len(c.steps) > 1 {
			at = filepath.Base(dir) + " "
		}
		files, err := configFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		w := ""
		if usesWorld(files) {
			w = world
		}
		defs, diags := e.Load(definitions(files, w), ".")
		if f := diagFailure(at+"load", diags); f != nil {
			return f, diffs
		}
		ss := defs.StackSet(stackSetName)
		if ss == nil {
			t.Fatalf("%sload: no stack set %q and no diagnostic", at, stackSetName)
		}
		inst := &engine.Instance{StackSet: ss, StackSetID: "conformance", Target: target}
		before := j.list()
		p, diags := e.Plan(inst, before)
		if f := diagFailure(at+"plan", diags); f != nil {
			return f, diffs
		}
		var tp tfPlan
		mustReadJSON(t, filepath.Join(dir, goldenPlan), &tp)
		diffs = append(diffs, prefix(at+"plan", comparePlan(tp, p, before, world, true))...)
		res, err := e.Apply(ctx, p, j, nil)
		if err != nil {
			return &failure{stage: at + "apply", msg: err.Error(), first: err.Error()}, diffs
		}
		var ts tfState
		mustReadJSON(t, filepath.Join(dir, goldenState), &ts)
		diffs = append(diffs, prefix(at+"apply", compareState(ts, j.list(), res.Outputs, world))...)
		before = j.list()
		p, diags = e.Plan(inst, before)
		if f := diagFailure(at+"plan after apply", diags); f != nil {
			return f, diffs
		}
		tp = tfPlan{} // decoding keeps what the document does not have
		mustReadJSON(t, filepath.Join(dir, goldenReplan), &tp)
		diffs = append(diffs, prefix(at+"plan after apply", comparePlan(tp, p, before, world, true))...)
		if i < len(c.steps)-1 {
			continue
		}
		before = j.list()
		p = engine.PlanDestroy(inst, before)
		tp = tfPlan{}
		mustReadJSON(t, filepath.Join(dir, goldenDestroy), &tp)
		diffs = append(diffs, prefix(at+"destroy plan", comparePlan(tp, p, before, world, false))...)
		if _, err := e.Apply(ctx, p, j, nil); err != nil {
			return &failure{stage: at + "destroy", msg: err.Error(), first: err.Error()}, diffs
		}
		if left := j.list(); len(left) > 0 {
			diffs = append(diffs, fmt.Sprintf("%sdestroy: %d resources still recorded (%s first)", at, len(left), left[0].Address))
		}
	}
	return nil, diffs
}

func mustReadJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := readJSON(path, v); err != nil {
		t.Fatalf("%v (record it with go test ./engine/conformance -record -run 'TestConformance/%s')", err, filepath.Base(filepath.Dir(path)))
	}
}

func prefix(at string, diffs []string) []string {
	out := make([]string, len(diffs))
	for i, d := range diffs {
		out[i] = at + ": " + d
	}
	return out
}

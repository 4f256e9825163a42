package reconciler_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/internal/testkit"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// BenchmarkStackSetsChangedByOneCommit: one commit changes 300 stack sets
// (one instance each); an iteration is that commit reconciled until every
// stack set is deployed and its status written. It reports the status
// commits per pass (the goal is 1) besides the time.
//
//	go test -run '^$' -bench StackSetsChangedByOneCommit -count 5 ./reconciler/
func BenchmarkStackSetsChangedByOneCommit(b *testing.B) {
	const sets = 300
	dir := b.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		b.Fatal(err)
	}
	testkit.MustGit(b, repo, "init", "-q")
	defs := func(tag string) map[string]string {
		var s strings.Builder
		for i := range sets {
			s.WriteString(stackSetHCL(fmt.Sprintf("s%03d", i), tag, []string{"eu"}, []string{accountID(1)}, ""))
		}
		return map[string]string{"sets.hcl": s.String(), "templates/ctl/main.hcl": ctlTemplate}
	}
	testkit.CommitFiles(b, repo, defs("v0"), "v0")
	src, err := gitsource.Open(b.Context(), gitsource.Options{Repo: repo})
	if err != nil {
		b.Fatal(err)
	}
	st, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	rec, err := reconciler.New(reconciler.Options{Source: src, Store: st, Engine: engine.New(provider.Registry{"ctl": newCtl()}), Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	if res, err := rec.Reconcile(b.Context()); err != nil || len(res.Operations) != sets {
		b.Fatalf("first deployment: %v, %d operations", err, len(res.Operations))
	}
	commits := rec.StatusCommits()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		testkit.CommitFiles(b, repo, defs(fmt.Sprintf("v%d", i+1)), "change every stack set")
		b.StartTimer()
		res, err := rec.Reconcile(b.Context())
		if err != nil || len(res.Operations) != sets || res.Failed() {
			b.Fatalf("pass %d: %v, %d operations (failed: %v)", i+1, err, len(res.Operations), res != nil && res.Failed())
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(rec.StatusCommits()-commits)/float64(b.N), "status-commits/pass")
}

package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// statusCommitsSince counts the status branch's commits after base (""
// counts them all) and returns the newest message.
func statusCommitsSince(t *testing.T, repo, base string) (int, string) {
	t.Helper()
	r, err := git.PlainOpen(repo)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Reference(plumbing.NewBranchReferenceName(gitsource.DefaultStatusBranch), true)
	if err != nil {
		return 0, ""
	}
	iter, err := r.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		t.Fatal(err)
	}
	n, newest := 0, ""
	stop := errors.New("stop")
	_ = iter.ForEach(func(c *object.Commit) error {
		if c.Hash.String() == base {
			return stop
		}
		if n == 0 {
			newest = strings.TrimSpace(c.Message)
		}
		n++
		return nil
	})
	return n, newest
}

// statusHead is the status branch's tip ("" when there is none).
func statusHead(t *testing.T, repo string) string {
	t.Helper()
	r, err := git.PlainOpen(repo)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Reference(plumbing.NewBranchReferenceName(gitsource.DefaultStatusBranch), true)
	if err != nil {
		return ""
	}
	return ref.Hash().String()
}

// One commit that changes many stack sets makes one status commit, whose
// message sums the pass up and names each stack set's operation; the
// same again for an update of all of them.
func TestOneStatusCommitPerPass(t *testing.T) {
	const n = 12
	c := newCtl()
	defs := func(tag string) map[string]string {
		var b strings.Builder
		for i := range n {
			b.WriteString(stackSetHCL(fmt.Sprintf("s%02d", i), tag, []string{"eu"}, accountIDs(2), ""))
		}
		return map[string]string{"sets.hcl": b.String()}
	}
	h, rev1 := newHarness(t, c, defs("v1"))
	for i, step := range []struct {
		kind string
		rev  func() string
	}{
		{"CreateStackInstances", func() string { return rev1 }},
		{"DeployStackSet", func() string { return commitFiles(t, h.repo, defs("v2"), "v2") }},
	} {
		rev := step.rev()
		base := statusHead(t, h.repo)
		res, err := h.rec.Reconcile(t.Context())
		if err != nil || len(res.Operations) != n {
			t.Fatalf("pass %d: %v, %d operations; want %d", i+1, err, len(res.Operations), n)
		}
		commits, msg := statusCommitsSince(t, h.repo, base)
		if commits != 1 {
			t.Errorf("pass %d: %d status commits, want 1: %q", i+1, commits, firstLines(statusMessages(t, h.repo)))
		}
		lines := strings.Split(msg, "\n")
		if want := fmt.Sprintf("stackd: %d stack sets at %s: %d SUCCEEDED", n, rev[:7], n); lines[0] != want {
			t.Errorf("pass %d: summary %q, want %q", i+1, lines[0], want)
		}
		for s := range n {
			want := fmt.Sprintf("stackd: s%02d %s %s SUCCEEDED (2/2)", s, step.kind, rev[:7])
			if !strings.Contains(msg, "\n"+want+"\n") && !strings.HasSuffix(msg, "\n"+want) {
				t.Errorf("pass %d: message lacks %q:\n%s", i+1, want, msg)
			}
		}
		for s := range n {
			doc, _ := statusDoc(t, h.repo, fmt.Sprintf("s%02d", s))
			if lo := doc.LastOperation; lo == nil || lo.Revision != rev || lo.Status != state.OperationSucceeded {
				t.Errorf("pass %d: s%02d last_operation %+v, want SUCCEEDED at %s", i+1, s, lo, rev[:7])
			}
		}
	}
}

// gatedWriter is the real Source whose status pushes can be held (a
// stalled remote) or refused (a remote down for pushes).
type gatedWriter struct {
	reconciler.Source
	mu      sync.Mutex
	hold    chan struct{} // non-nil: pushes wait for it to close
	refuse  bool
	started chan struct{} // told when a push starts
}

func (g *gatedWriter) WriteFiles(ctx context.Context, message string, files map[string][]byte, deletes []string) (string, error) {
	g.mu.Lock()
	hold, refuse := g.hold, g.refuse
	g.mu.Unlock()
	select {
	case g.started <- struct{}{}:
	default:
	}
	if refuse {
		return "", errors.New("push refused: remote down")
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return g.Source.WriteFiles(ctx, message, files, deletes)
}

// gatedHarness is a reconciler on a fresh repository whose status pushes
// go through a gatedWriter; build makes another reconciler on the same
// repository and state (a restart).
func gatedHarness(t *testing.T, c *ctl, files map[string]string) (*harness, *gatedWriter, string, func() *reconciler.Reconciler) {
	t.Helper()
	dir := t.TempDir()
	h := &harness{repo: filepath.Join(dir, "repo"), ctl: c}
	if err := os.MkdirAll(h.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, h.repo, "init", "-q")
	files["templates/ctl/main.hcl"] = ctlTemplate
	rev := commitFiles(t, h.repo, files, "first")
	src, err := gitsource.Open(t.Context(), gitsource.Options{Repo: h.repo})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h.store = st
	g := &gatedWriter{Source: src, started: make(chan struct{}, 1)}
	build := func() *reconciler.Reconciler {
		rec, err := reconciler.New(reconciler.Options{Source: g, Store: st, Engine: engine.New(provider.Registry{"ctl": c}), Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	h.rec = build()
	return h, g, rev, build
}

// A stack set's next operation does not wait for the status push of the
// one before: with the push stalled, the next commit deploys; once the
// remote answers, the status branch shows the newest operation.
func TestStatusPushDoesNotHoldNextOperation(t *testing.T) {
	c := newCtl()
	h, g, rev1, _ := gatedHarness(t, c, map[string]string{"web.hcl": stackSetHCL("web", "v1", []string{"eu"}, accountIDs(2), "")})
	hold := make(chan struct{})
	g.mu.Lock()
	g.hold = hold
	g.mu.Unlock()
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	d := runDriver(t, h)
	defer func() { release(); d.stop(t) }()
	eventually(t, "v1 deployed", opStatusIs(h.store, "web", rev1, state.OperationSucceeded))
	select {
	case <-g.started:
	case <-time.After(waitLimit):
		t.Fatal("no status push started for v1")
	}
	rev2 := commitFiles(t, h.repo, map[string]string{"web.hcl": stackSetHCL("web", "v2", []string{"eu"}, accountIDs(2), "")}, "v2")
	d.submit()
	// The push of v1's status is still held here.
	eventually(t, "v2 deployed while v1's status push is stalled", opStatusIs(h.store, "web", rev2, state.OperationSucceeded))
	if head := statusHead(t, h.repo); head != "" {
		t.Fatalf("a status commit landed while pushes were held: %s", head)
	}
	release()
	eventually(t, "the status branch to show v2", func() (bool, string) {
		msg := statusTip(t, h.repo)
		return strings.Contains(msg, "web DeployStackSet "+rev2[:7]+" SUCCEEDED"), msg
	})
	doc, _ := statusDoc(t, h.repo, "web")
	if lo := doc.LastOperation; lo == nil || lo.Revision != rev2 {
		t.Errorf("status/web.json last_operation %+v, want v2", lo)
	}
}

// A status push that fails is owed: a one-shot Reconcile reports it, and a
// restart (the process died before the push) writes it.
func TestOwedStatusWrittenAfterRestart(t *testing.T) {
	c := newCtl()
	h, g, rev, build := gatedHarness(t, c, map[string]string{"web.hcl": stackSetHCL("web", "v1", []string{"eu"}, accountIDs(2), "")})
	g.mu.Lock()
	g.refuse = true
	g.mu.Unlock()
	res, err := h.rec.Reconcile(t.Context())
	if err == nil || !strings.Contains(err.Error(), "write status commit") {
		t.Fatalf("Reconcile with pushes refused: %v, want the status write's error", err)
	}
	if len(res.Operations) != 1 || res.Operations[0].Status != state.OperationSucceeded {
		t.Fatalf("operations %+v, want one SUCCEEDED", res.Operations)
	}
	if head := statusHead(t, h.repo); head != "" {
		t.Fatalf("a status commit landed while pushes were refused")
	}
	g.mu.Lock()
	g.refuse = false
	g.mu.Unlock()
	rec := build() // the restart: nothing in memory
	if _, err := rec.Reconcile(t.Context()); err != nil {
		t.Fatalf("Reconcile after the restart: %v", err)
	}
	doc, msg := statusDoc(t, h.repo, "web")
	if lo := doc.LastOperation; lo == nil || lo.Revision != rev || lo.Status != state.OperationSucceeded {
		t.Errorf("status/web.json last_operation %+v, want SUCCEEDED at %s", lo, rev[:7])
	}
	if want := "stackd: web CreateStackInstances " + rev[:7] + " SUCCEEDED (2/2)"; msg != want {
		t.Errorf("status commit %q, want %q", msg, want)
	}
}

func firstLines(msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i], _, _ = strings.Cut(m, "\n")
	}
	return out
}

// Two operations of one stack set that end while the status push is held
// write one document (the newer), and the status commits still say what
// each operation did: the earlier one's line is not lost with its document.
func TestStatusTellsEveryOperationOfAStackSet(t *testing.T) {
	c := newCtl()
	h, g, rev1, _ := gatedHarness(t, c, map[string]string{"web.hcl": stackSetHCL("web", "v1", []string{"eu"}, accountIDs(2), "")})
	hold := make(chan struct{})
	g.mu.Lock()
	g.hold = hold
	g.mu.Unlock()
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	d := runDriver(t, h)
	defer func() { release(); d.stop(t) }()
	eventually(t, "v1 deployed", opStatusIs(h.store, "web", rev1, state.OperationSucceeded))
	select {
	case <-g.started:
	case <-time.After(waitLimit):
		t.Fatal("no status push started for v1")
	}
	// v1's push is held; v2 and v3 end meanwhile.
	var revs []string
	for _, tag := range []string{"v2", "v3"} {
		rev := commitFiles(t, h.repo, map[string]string{"web.hcl": stackSetHCL("web", tag, []string{"eu"}, accountIDs(2), "")}, tag)
		d.submit()
		eventually(t, tag+" deployed", opStatusIs(h.store, "web", rev, state.OperationSucceeded))
		revs = append(revs, rev)
	}
	release()
	eventually(t, "the status branch to show v3", func() (bool, string) {
		msg := statusTip(t, h.repo)
		return strings.Contains(msg, "web DeployStackSet "+revs[1][:7]+" SUCCEEDED"), msg
	})
	if doc, _ := statusDoc(t, h.repo, "web"); doc.LastOperation == nil || doc.LastOperation.Revision != revs[1] {
		t.Errorf("status/web.json last_operation %+v, want v3", doc.LastOperation)
	}
	all := strings.Join(statusMessages(t, h.repo), "\n---\n")
	for _, rev := range revs {
		if want := "stackd: web DeployStackSet " + rev[:7] + " SUCCEEDED (2/2)"; !strings.Contains(all, want) {
			t.Errorf("no status commit says %q:\n%s", want, all)
		}
	}
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// timeline is the one ordered log of what providers and the journal did.
type timeline struct {
	mu    sync.Mutex
	lines []string
}

func (tl *timeline) add(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, fmt.Sprintf(format, args...))
}

func (tl *timeline) all() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.lines)
}

// lazyRecorder is a recorder whose calls are durable only after Sync
// (provider.Syncer), like the file provider; syncErr fails every Sync.
type lazyRecorder struct {
	*recorder
	tl      *timeline
	syncErr error
	syncs   int
}

func (r *lazyRecorder) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	r.tl.add("create %s", req.LogicalID)
	return r.recorder.Create(ctx, req)
}

func (r *lazyRecorder) Delete(ctx context.Context, req provider.Request) error {
	r.tl.add("delete %s", req.LogicalID)
	return r.recorder.Delete(ctx, req)
}

func (r *lazyRecorder) Sync(_ context.Context, target provider.Target) error {
	r.syncs++
	r.tl.add("sync %s/%s", target.Region, target.Account)
	return r.syncErr
}

// plainRecorder logs its creates on the timeline; it has no Sync.
type plainRecorder struct {
	*recorder
	tl *timeline
}

func (r *plainRecorder) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	r.tl.add("create %s", req.LogicalID)
	return r.recorder.Create(ctx, req)
}

// timelineJournal is a memJournal that logs what it records.
type timelineJournal struct {
	*memJournal
	tl *timeline
}

func (j *timelineJournal) Save(ctx context.Context, r ResourceState) error {
	j.tl.add("journal %s %s", r.Address, r.Status)
	return j.memJournal.Save(ctx, r)
}

func (j *timelineJournal) Remove(ctx context.Context, addr string) error {
	j.tl.add("journal %s removed", addr)
	return j.memJournal.Remove(ctx, addr)
}

const durableDefs = `
stack_set "web" {
  template = "./tmpl"
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}
`

// lazy.a and lazy.b go through a provider that syncs later; plain.c
// (depending on lazy.b) through one that does not.
const durableTmpl = `
resource "lazy" "a" { name = "a" }
resource "lazy" "b" { name = "b" }
resource "plain" "c" {
  name    = "c"
  content = lazy.b.id
}
`

func durableSetup(t *testing.T) (*Engine, *Instance, *lazyRecorder, *timeline) {
	t.Helper()
	tl := &timeline{}
	lazy := &lazyRecorder{recorder: newRecorder(), tl: tl}
	reg := provider.Registry{"lazy": lazy, "plain": &plainRecorder{recorder: newRecorder(), tl: tl}}
	defs := mustLoad(t, map[string]string{"web.hcl": durableDefs, "tmpl/main.hcl": durableTmpl}, reg)
	inst := &Instance{StackSet: defs.StackSet("web"), StackSetID: "id-1", Target: config.Target{Region: "eu", Account: "111"}}
	return New(reg), inst, lazy, tl
}

// index is the position of line in lines, failing the test when absent.
func index(t *testing.T, lines []string, line string) int {
	t.Helper()
	i := slices.Index(lines, line)
	if i < 0 {
		t.Fatalf("%q never happened; the timeline:\n%s", line, strings.Join(lines, "\n"))
	}
	return i
}

// TestSyncerDoneOnlyAfterSync: what a provider.Syncer did is journaled
// as done only after one Sync for the instance, while its pending
// records still go before each call; a provider without Sync is
// journaled at once.
func TestSyncerDoneOnlyAfterSync(t *testing.T) {
	e, inst, lazy, tl := durableSetup(t)
	j := &timelineJournal{memJournal: newJournal(), tl: tl}
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	lines := tl.all()
	if lazy.syncs != 1 {
		t.Errorf("Sync called %d times for one instance, want once:\n%s", lazy.syncs, strings.Join(lines, "\n"))
	}
	sync := index(t, lines, "sync eu/111")
	for _, addr := range []string{"lazy.a", "lazy.b"} {
		pending := index(t, lines, "journal "+addr+" "+StatusPendingCreate)
		create := index(t, lines, "create "+addr)
		done := index(t, lines, "journal "+addr+" "+StatusApplied)
		if !(pending < create && create < sync && sync < done) {
			t.Errorf("%s: want pending record, create, sync, done record in that order; the timeline:\n%s", addr, strings.Join(lines, "\n"))
		}
	}
	if done := index(t, lines, "journal plain.c "+StatusApplied); done > sync {
		t.Errorf("plain.c (no Sync) was journaled done only after the sync; the timeline:\n%s", strings.Join(lines, "\n"))
	}
	for _, r := range j.list() {
		if r.Status != StatusApplied {
			t.Errorf("%s: %s after the apply, want %s", r.Address, r.Status, StatusApplied)
		}
	}
}

// TestSyncerSyncFailsLeavesPending: when the Sync fails nothing it
// covers is journaled done; the resources stay pending with their request
// ids, and the next apply repeats their calls with those ids and settles
// them.
func TestSyncerSyncFailsLeavesPending(t *testing.T) {
	e, inst, lazy, tl := durableSetup(t)
	j := &timelineJournal{memJournal: newJournal(), tl: tl}
	lazy.syncErr = errors.New("syncfs: input/output error")
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	_, err := e.Apply(context.Background(), p, j, nil)
	if err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("Apply with a failing Sync: err = %v, want the Sync's error", err)
	}
	ids := map[string]string{}
	for _, r := range j.list() {
		if r.Type == "lazy" {
			if r.Status != StatusPendingCreate || r.RequestID == "" {
				t.Errorf("%s: %s (request id %q) after a failed Sync, want %s with its request id", r.Address, r.Status, r.RequestID, StatusPendingCreate)
			}
			ids[r.Address] = r.RequestID
		}
	}
	if len(ids) != 2 {
		t.Fatalf("journal after a failed Sync holds %d lazy resources, want 2: %+v", len(ids), j.list())
	}

	lazy.syncErr = nil
	lazy.recorder.calls = nil
	p, diags = e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	for addr, id := range ids {
		if !slices.Contains(lazy.recorder.calls, "create "+addr+" "+id) {
			t.Errorf("the next apply did not repeat the create of %s with request id %s: calls %v", addr, id, lazy.recorder.calls)
		}
	}
	for _, r := range j.list() {
		if r.Status != StatusApplied {
			t.Errorf("%s: %s after the second apply, want %s", r.Address, r.Status, StatusApplied)
		}
	}
}

// TestSyncerDeleteRecordedAfterSync: a delete by a provider.Syncer is
// forgotten by the journal only after the Sync.
func TestSyncerDeleteRecordedAfterSync(t *testing.T) {
	e, inst, _, tl := durableSetup(t)
	j := &timelineJournal{memJournal: newJournal(), tl: tl}
	planApply(t, e, inst, j.memJournal)
	tl.lines = nil

	p := PlanDestroy(inst, j.list())
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	lines := tl.all()
	sync := index(t, lines, "sync eu/111")
	for _, addr := range []string{"lazy.a", "lazy.b"} {
		del := index(t, lines, "delete "+addr)
		gone := index(t, lines, "journal "+addr+" removed")
		if !(del < sync && sync < gone) {
			t.Errorf("%s: want delete, sync, removal from the journal in that order; the timeline:\n%s", addr, strings.Join(lines, "\n"))
		}
	}
	if got := j.list(); len(got) != 0 {
		t.Errorf("journal after destroy: %+v", got)
	}
}

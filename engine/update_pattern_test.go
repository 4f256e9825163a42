package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// pacer is a controllable provider: every Update (and, when blockCreate
// is set, Create) announces itself on started and blocks until the test
// releases it, so a test sees exactly which members are in flight.
type pacer struct {
	*recorder
	started     chan string
	release     chan error
	blockCreate bool

	mu       sync.Mutex
	inFlight int
	peak     int
}

func newPacer() *pacer {
	return &pacer{recorder: newRecorder(), started: make(chan string, 1000), release: make(chan error)}
}

func (p *pacer) block(id string) error {
	p.mu.Lock()
	p.inFlight++
	p.peak = max(p.peak, p.inFlight)
	p.mu.Unlock()
	p.started <- id
	err := <-p.release
	p.mu.Lock()
	p.inFlight--
	p.mu.Unlock()
	return err
}

func (p *pacer) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	if p.blockCreate {
		if err := p.block(req.LogicalID); err != nil {
			return provider.Result{}, err
		}
	}
	return p.recorder.Create(ctx, req)
}

func (p *pacer) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	if err := p.block(req.LogicalID); err != nil {
		return provider.Result{}, err
	}
	return p.recorder.Update(ctx, req)
}

// batch collects the n members that start next and checks nothing else
// starts with them.
func (p *pacer) batch(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for len(ids) < n {
		select {
		case id := <-p.started:
			ids = append(ids, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %v started, want %d members", ids, n)
		}
	}
	slices.Sort(ids)
	return ids
}

// releaseAll lets n blocked calls return err.
func (p *pacer) releaseAll(n int, err error) {
	for range n {
		p.release <- err
	}
}

type patternEnv struct {
	p   *pacer
	clk *testClock
	e   *Engine
	reg provider.Registry
	j   *memJournal
}

func newPatternEnv() *patternEnv {
	p := newPacer()
	reg := provider.Registry{"rec": p}
	e := New(reg)
	clk := newTestClock()
	e.SetClock(clk)
	return &patternEnv{p: p, clk: clk, e: e, reg: reg, j: newJournal()}
}

func (pe *patternEnv) instance(t *testing.T, tmpl string, vars string) *Instance {
	t.Helper()
	defs := mustLoad(t, map[string]string{"defs.hcl": fmt.Sprintf(`
stack_set "web" {
  template = "./t"
  vars     = %s
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`, vars), "t/main.hcl": tmpl}, pe.reg)
	return &Instance{StackSet: defs.StackSets[0], StackSetID: "ss-1", Target: config.Target{Region: "eu", Account: "111"}}
}

func (pe *patternEnv) applyAsync(t *testing.T, inst *Instance) chan error {
	t.Helper()
	plan, diags := pe.e.Plan(inst, pe.j.list())
	if diags.HasErrors() {
		t.Fatalf("plan: %s", diags.Error())
	}
	done := make(chan error, 1)
	go func() {
		_, err := pe.e.Apply(context.Background(), plan, pe.j, nil)
		done <- err
	}()
	return done
}

const groupTmpl = `
variable "n" { type = number }
variable "image" { type = string }
resource "rec" "app" {
  count   = var.n
  name    = "app-${count.index}"
  content = var.image
  update_pattern {
    %s
  }
}
resource "rec" "lb" {
  name       = "lb"
  content    = var.image
  depends_on = [rec.app]
}
`

func names(ids ...int) []string {
	var out []string
	for _, i := range ids {
		out = append(out, fmt.Sprintf("rec.app[%d]", i))
	}
	slices.Sort(out)
	return out
}

// deploy creates the group (unpaced) and returns the env ready for an
// update of image.
func deployGroup(t *testing.T, pattern string, n int) (*patternEnv, string) {
	t.Helper()
	pe := newPatternEnv()
	tmpl := fmt.Sprintf(groupTmpl, pattern)
	done := pe.applyAsync(t, pe.instance(t, tmpl, fmt.Sprintf(`{ n = %d, image = "v1" }`, n)))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-pe.clk.armed:
		t.Fatalf("creating the group paused for %s; a new group is not paced", d)
	default:
	}
	return pe, tmpl
}

func TestUpdatePatternRollingBatchesWithPause(t *testing.T) {
	pe, tmpl := deployGroup(t, `pattern = "rolling"
    batch_size = 2
    pause = "30s"`, 7)
	done := pe.applyAsync(t, pe.instance(t, tmpl, `{ n = 7, image = "v2" }`))
	for k, want := range [][]string{names(0, 1), names(2, 3), names(4, 5), names(6)} {
		if k > 0 {
			if d := pe.clk.blocked(t); d != 30*time.Second {
				t.Fatalf("pause before batch %d: %s", k+1, d)
			}
			select {
			case id := <-pe.p.started:
				t.Fatalf("%s started during the pause", id)
			default:
			}
			pe.clk.Advance(30 * time.Second)
		}
		got := pe.p.batch(t, len(want))
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d = %v, want %v", k+1, got, want)
		}
		pe.p.releaseAll(len(want), nil)
	}
	// The lb depends on the group: it starts only after the last batch.
	if got := pe.p.batch(t, 1); got[0] != "rec.lb" {
		t.Fatalf("after the group: %v", got)
	}
	pe.p.releaseAll(1, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pe.p.peak != 2 {
		t.Errorf("peak concurrency %d, want batch_size 2", pe.p.peak)
	}
}

func TestUpdatePatternCanaryGrows(t *testing.T) {
	pe, tmpl := deployGroup(t, `pattern = "canary"
    batch_size = 1`, 7)
	done := pe.applyAsync(t, pe.instance(t, tmpl, `{ n = 7, image = "v2" }`))
	for k, want := range [][]string{names(0), names(1, 2), names(3, 4, 5, 6)} {
		got := pe.p.batch(t, len(want))
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d = %v, want %v", k+1, got, want)
		}
		pe.p.releaseAll(len(want), nil)
	}
	pe.p.batch(t, 1) // lb
	pe.p.releaseAll(1, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// min_in_service caps batches: with 4 members and min_in_service 3, a
// batch_size of 4 still updates one at a time. Members that do not
// change count as in service (here only 3 of 5 change).
func TestUpdatePatternMinInService(t *testing.T) {
	for _, c := range []struct {
		name, pattern string
		n             int
		want          []int
	}{
		{"all change", "batch_size = 4\n    min_in_service = 3", 4, []int{1, 1, 1, 1}},
		{"one below the batch", "batch_size = 3\n    min_in_service = 1", 4, []int{3, 1}},
		{"min one below the group", "batch_size = 5\n    min_in_service = 2", 3, []int{1, 1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pe, tmpl := deployGroup(t, c.pattern, c.n)
			done := pe.applyAsync(t, pe.instance(t, tmpl, fmt.Sprintf(`{ n = %d, image = "v2" }`, c.n)))
			var sizes []int
			for total := 0; total < c.n; {
				var got []string
				got = append(got, pe.p.batch(t, 1)...)
				// Collect the rest of the batch: what starts before any release.
				want := c.want[len(sizes)]
				if want > 1 {
					got = append(got, pe.p.batch(t, want-1)...)
				}
				sizes = append(sizes, len(got))
				total += len(got)
				pe.p.mu.Lock()
				inFlight := pe.p.inFlight
				pe.p.mu.Unlock()
				if inFlight != len(got) {
					t.Fatalf("%d in flight, batch of %d", inFlight, len(got))
				}
				pe.p.releaseAll(len(got), nil)
			}
			pe.p.batch(t, 1) // lb
			pe.p.releaseAll(1, nil)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sizes, c.want) || pe.p.peak != slices.Max(c.want) {
				t.Errorf("batches %v (peak %d), want %v", sizes, pe.p.peak, c.want)
			}
		})
	}
}

// A failed member stops the group after its batch; later batches and the
// resources that depend on the group are not applied.
func TestUpdatePatternFailureStopsAfterTheBatch(t *testing.T) {
	pe, tmpl := deployGroup(t, `batch_size = 2`, 6)
	done := pe.applyAsync(t, pe.instance(t, tmpl, `{ n = 6, image = "v2" }`))
	pe.p.batch(t, 2)
	pe.p.releaseAll(2, nil)
	pe.p.batch(t, 2)
	pe.p.release <- errors.New("health probe failed")
	pe.p.release <- nil // the other member of the batch finishes
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "health probe failed") || !strings.Contains(err.Error(), "batch 2 of 3 failed (update_pattern rolling, batch_size 2); the 1 later batches were not applied") {
		t.Fatalf("apply: %v", err)
	}
	select {
	case id := <-pe.p.started:
		t.Fatalf("%s started after the failed batch", id)
	default:
	}
	var updated []string
	for _, r := range pe.j.list() {
		if strings.Contains(string(r.Inputs), "v2") {
			updated = append(updated, r.Address)
		}
	}
	slices.Sort(updated)
	if len(updated) != 3 || updated[0] != "rec.app[0]" || updated[1] != "rec.app[1]" || slices.Contains(updated, "rec.app[4]") || slices.Contains(updated, "rec.app[5]") {
		t.Errorf("recorded at v2: %v, want the first batch and the member of batch 2 that succeeded", updated)
	}
}

// A group that grows: new members do not count against min_in_service,
// and they go in the batches with the updated ones.
func TestUpdatePatternGrowingGroup(t *testing.T) {
	pe, tmpl := deployGroup(t, "batch_size = 2\n    min_in_service = 1", 2)
	pe.p.blockCreate = true
	done := pe.applyAsync(t, pe.instance(t, tmpl, `{ n = 4, image = "v2" }`))
	// 2 existing members, min_in_service 1: one existing at a time; the new
	// members ride along, past the existing one held back.
	for k, want := range [][]string{names(0, 2), names(1, 3)} {
		got := pe.p.batch(t, len(want))
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d = %v, want %v", k+1, got, want)
		}
		pe.p.releaseAll(len(want), nil)
	}
	pe.p.batch(t, 1) // lb
	pe.p.releaseAll(1, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestUpdatePatternForEach(t *testing.T) {
	pe := newPatternEnv()
	tmpl := `
variable "image" { type = string }
resource "rec" "app" {
  for_each = toset(["c", "a", "b"])
  name     = "app-${each.key}"
  content  = var.image
  update_pattern { batch_size = 2 }
}
`
	if err := <-pe.applyAsync(t, pe.instance(t, tmpl, `{ image = "v1" }`)); err != nil {
		t.Fatal(err)
	}
	done := pe.applyAsync(t, pe.instance(t, tmpl, `{ image = "v2" }`))
	if got := pe.p.batch(t, 2); !slices.Equal(got, []string{`rec.app["a"]`, `rec.app["b"]`}) {
		t.Fatalf("first batch %v, want the first two keys in order", got)
	}
	pe.p.releaseAll(2, nil)
	if got := pe.p.batch(t, 1); got[0] != `rec.app["c"]` {
		t.Fatalf("second batch %v", got)
	}
	pe.p.releaseAll(1, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestUpdatePatternDiagnostics(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	for _, c := range []struct{ block, count, want string }{
		{`pattern = "blue-green"`, "count = 2", `t/main.hcl:6,15-27: Invalid update pattern; rec.app: pattern is "blue-green"; it must be "rolling" or "canary".`},
		{`batch_size = 0`, "count = 2", `Invalid batch_size; rec.app: batch_size is 0; it must be at least 1.`},
		{`growth_factor = 3`, "count = 2", `growth_factor needs the canary pattern`},
		{"pattern = \"canary\"\n    growth_factor = 1", "count = 2", `growth_factor is 1; a canary update must grow its batches`},
		{`min_in_service = -1`, "count = 2", `t/main.hcl:6,22-24: Invalid value for min_in_service; min_in_service must be a non-negative whole number; got -1.`},
		{`pause = "soon"`, "count = 2", `pause is "soon"; it must be a duration like "30s" or "5m"`},
		{`pause = "25h"`, "count = 2", `it may be at most 24h`},
		{`batch_size = 2`, "", `update_pattern without count or for_each`},
		{`surge = 1`, "count = 2", `Unsupported argument; An argument named "surge" is not expected here.`},
	} {
		_, diags := load(t, map[string]string{"defs.hcl": `
stack_set "web" {
  template = "./t"
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`, "t/main.hcl": fmt.Sprintf(`
resource "rec" "app" {
  %s
  name = "x"
  update_pattern {
    %s
  }
}`, c.count, c.block)}, reg)
		if !strings.Contains(diags.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.block, diags, c.want)
		}
	}
}

// An update_pattern min_in_service at or above the group's members is a
// diagnostic when the instance is planned, at the attribute; below it the
// plan goes. A group created from nothing is held to it too, and so is one
// that shrinks to the bound.
func TestUpdatePatternMinInServiceCannotBeMet(t *testing.T) {
	for _, c := range []struct {
		name   string
		min, n int
		want   string // "" when the plan goes
	}{
		{"below", 2, 3, ""},
		{"at", 3, 3, `t/main.hcl:9,22-23: min_in_service cannot be met; rec.app: update_pattern min_in_service is 3, but the group has 3 members; an update must take at least one member out of service at a time, so min_in_service must be at most 2.`},
		{"above", 10, 3, `update_pattern min_in_service is 10, but the group has 3 members;`},
		{"one member", 1, 1, `the group has 1 member; an update must take at least one member out of service at a time, so min_in_service must be at most 0.`},
		{"empty group", 5, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			pe := newPatternEnv()
			tmpl := fmt.Sprintf(groupTmpl, fmt.Sprintf("min_in_service = %d", c.min))
			_, diags := pe.e.Plan(pe.instance(t, tmpl, fmt.Sprintf(`{ n = %d, image = "v1" }`, c.n)), nil)
			switch {
			case c.want == "" && diags.HasErrors():
				t.Fatalf("min_in_service %d over %d members: %s; want the plan to go", c.min, c.n, diags.Error())
			case c.want != "" && !strings.Contains(diags.Error(), c.want):
				t.Fatalf("min_in_service %d over %d members: %v; want %q", c.min, c.n, diags, c.want)
			}
		})
	}
}

// With no update_pattern, members go one after another (as before).
func TestNoUpdatePatternIsSequential(t *testing.T) {
	pe := newPatternEnv()
	tmpl := `
variable "image" { type = string }
resource "rec" "app" {
  count   = 3
  name    = "app-${count.index}"
  content = var.image
}
`
	if err := <-pe.applyAsync(t, pe.instance(t, tmpl, `{ image = "v1" }`)); err != nil {
		t.Fatal(err)
	}
	done := pe.applyAsync(t, pe.instance(t, tmpl, `{ image = "v2" }`))
	for i := range 3 {
		if got := pe.p.batch(t, 1); got[0] != fmt.Sprintf("rec.app[%d]", i) {
			t.Fatalf("call %d: %v", i, got)
		}
		pe.p.releaseAll(1, nil)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pe.p.peak != 1 {
		t.Errorf("peak %d", pe.p.peak)
	}
}

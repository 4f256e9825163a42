package reconciler_test

// The harness of the reconciler's tests: the ctl provider (a fake of the
// world that records every call and can block, fail or gate them), a
// reconciler on a real Git repository and a real Badger store, and the
// drivers that hand it commits.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/zclconf/go-cty/cty"
	"go.uber.org/goleak"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/internal/testkit"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// Every test stops what it starts: runners, Run, Badger.
// Every test stops what it starts: runners, Run, Badger.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLimit bounds every wait of the controller. A scheduler that starts
// fewer instances than the seed allows makes a wait run into it.
const waitLimit = 15 * time.Second

// ---- the ctl provider -----------------------------------------------------

// ctlEvent is one provider call starting or ending, in global order.
type ctlEvent struct {
	seq                       int
	start                     bool
	op                        string // create | update | delete
	stackSet, region, account string
	tag                       string
}

// ctlCall is a call blocked until the test releases it.
type ctlCall struct {
	stackSet, region, account string
	release                   chan struct{}
}

// ctl is the controllable provider of resource type "ctl". Calls of gated
// stack sets block until released; per target "region/account" a call can
// be told to fail. It counts the calls in flight per stack set and region
// (entered and not returned), the most it has seen, and every call entering
// above the ceiling the test set for its region.
type ctl struct {
	mu      sync.Mutex
	changed chan struct{} // signalled (cap 1) on every change
	seq     int

	fail        map[string]bool   // "region/account"
	failTag     map[string]string // "region/account" -> the tag whose calls fail
	gated       map[string]bool   // stack set name
	blocked     []*ctlCall
	inFlight    map[string]int // "stack_set/region"
	maxInFlight map[string]int
	ceiling     map[string]int
	violations  []string
	events      []ctlEvent
	world       map[string]string // "stack_set/region/account" -> tag
}

var _ provider.Provider = (*ctl)(nil)

func newCtl() *ctl {
	return &ctl{
		changed: make(chan struct{}, 1),
		fail:    map[string]bool{}, failTag: map[string]string{}, gated: map[string]bool{},
		inFlight: map[string]int{}, maxInFlight: map[string]int{}, ceiling: map[string]int{},
		world: map[string]string{},
	}
}

func (c *ctl) notify() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *ctl) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{
			"tag": {Type: cty.String, Required: true, Recreation: provider.Never},
		},
		Attributes: []string{"id"},
	}
}

func (c *ctl) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	return c.call(ctx, "create", req)
}

func (c *ctl) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	return c.call(ctx, "update", req)
}

func (c *ctl) Read(_ context.Context, req provider.Request) (provider.Result, error) {
	return provider.Result{PhysicalID: req.PhysicalID, Attributes: map[string]cty.Value{"id": cty.StringVal(req.PhysicalID)}}, nil
}

func (c *ctl) Delete(ctx context.Context, req provider.Request) error {
	_, err := c.call(ctx, "delete", req)
	return err
}

func (c *ctl) call(ctx context.Context, op string, req provider.Request) (provider.Result, error) {
	tg := req.Target
	tag := ""
	if p := req.Properties; p != cty.NilVal && !p.IsNull() && p.Type().IsObjectType() && p.Type().HasAttribute("tag") {
		if v := p.GetAttr("tag"); v.IsKnown() && !v.IsNull() {
			tag = v.AsString()
		}
	}
	key := tg.StackSetName + "/" + tg.Region
	c.mu.Lock()
	c.seq++
	c.events = append(c.events, ctlEvent{seq: c.seq, start: true, op: op, stackSet: tg.StackSetName, region: tg.Region, account: tg.Account, tag: tag})
	c.inFlight[key]++
	c.maxInFlight[key] = max(c.maxInFlight[key], c.inFlight[key])
	if ceil, ok := c.ceiling[key]; ok && c.inFlight[key] > ceil {
		c.violations = append(c.violations, fmt.Sprintf("%s of %s/%s started with %d calls in flight in %s; the seed allows %d at this point",
			op, tg.Region, tg.Account, c.inFlight[key], key, ceil))
	}
	var cl *ctlCall
	if c.gated[tg.StackSetName] {
		cl = &ctlCall{stackSet: tg.StackSetName, region: tg.Region, account: tg.Account, release: make(chan struct{})}
		c.blocked = append(c.blocked, cl)
	}
	c.notify()
	c.mu.Unlock()

	var err error
	if cl != nil {
		select {
		case <-cl.release:
		case <-ctx.Done():
			err = ctx.Err()
			c.mu.Lock()
			c.blocked = slices.DeleteFunc(c.blocked, func(x *ctlCall) bool { return x == cl })
			c.mu.Unlock()
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	c.events = append(c.events, ctlEvent{seq: c.seq, op: op, stackSet: tg.StackSetName, region: tg.Region, account: tg.Account, tag: tag})
	c.inFlight[key]--
	c.notify()
	target := tg.Region + "/" + tg.Account
	switch {
	case err != nil:
		return provider.Result{}, err
	case c.fail[target] || c.failTag[target] != "" && c.failTag[target] == tag:
		return provider.Result{}, fmt.Errorf("ctl: injected failure for %s", target)
	}
	id := tg.StackSetName + "/" + target
	if op == "delete" {
		delete(c.world, id)
	} else {
		c.world[id] = tag
	}
	return provider.Result{PhysicalID: id, Attributes: map[string]cty.Value{"id": cty.StringVal(id)}}, nil
}

// gate makes the calls of a stack set block until released.
func (c *ctl) gate(stackSet string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gated[stackSet] = true
}

// open stops gating a stack set and releases its blocked calls.
func (c *ctl) open(stackSet string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.gated, stackSet)
	c.blocked = slices.DeleteFunc(c.blocked, func(cl *ctlCall) bool {
		if cl.stackSet == stackSet {
			close(cl.release)
			return true
		}
		return false
	})
	c.notify()
}

// openAll releases everything (test cleanup).
func (c *ctl) openAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gated = map[string]bool{}
	for _, cl := range c.blocked {
		close(cl.release)
	}
	c.blocked = nil
	c.notify()
}

// release lets one blocked call return.
func (c *ctl) release(t *testing.T, stackSet, region, account string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, cl := range c.blocked {
		if cl.stackSet == stackSet && cl.region == region && cl.account == account {
			close(cl.release)
			c.blocked = slices.Delete(c.blocked, i, i+1)
			return
		}
	}
	t.Fatalf("no call of %s for %s/%s is blocked", stackSet, region, account)
}

// blockedIn lists the accounts whose calls are blocked in a region, sorted.
// Callers hold c.mu.
func (c *ctl) blockedIn(stackSet, region string) []string {
	var out []string
	for _, cl := range c.blocked {
		if cl.stackSet == stackSet && cl.region == region {
			out = append(out, cl.account)
		}
	}
	sort.Strings(out)
	return out
}

// waitFor waits until cond (called with c.mu held) holds; it fails the
// test at the deadline or as soon as a call entered above its ceiling.
func (c *ctl) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		c.mu.Lock()
		if len(c.violations) > 0 {
			v := slices.Clone(c.violations)
			c.mu.Unlock()
			t.Fatalf("the scheduler over-parallelized while waiting for %s:\n%s", what, strings.Join(v, "\n"))
		}
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-timer.C:
			c.mu.Lock()
			var got []string
			for _, cl := range c.blocked {
				got = append(got, cl.stackSet+"/"+cl.region+"/"+cl.account)
			}
			c.mu.Unlock()
			t.Fatalf("after %s still waiting for %s; calls blocked now: %v", waitLimit, what, got)
		}
	}
}

func (c *ctl) eventsOf(stackSet string) []ctlEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ctlEvent
	for _, e := range c.events {
		if e.stackSet == stackSet {
			out = append(out, e)
		}
	}
	return out
}

// ---- the definitions repository -------------------------------------------

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return testkit.MustGit(t, dir, args...)
}

// ctlTemplate is the template every test stack set uses: one ctl resource.
const ctlTemplate = `variable "tag" {
  type = string
}

resource "ctl" "unit" {
  tag = var.tag
}

output "unit" {
  value = ctl.unit.id
}
`

// commitFiles writes files into the repository and commits them.
func commitFiles(t *testing.T, dir string, files map[string]string, msg string) string {
	t.Helper()
	return testkit.CommitFiles(t, dir, files, msg)
}

// harness is a reconciler on a fresh repository and state.
type harness struct {
	repo  string
	store *state.Store
	ctl   *ctl
	rec   *reconciler.Reconciler
}

// newHarness commits files as the first commit and wires a reconciler to it
// (with the real clock).
func newHarness(t *testing.T, c *ctl, files map[string]string) (*harness, string) {
	t.Helper()
	h, rev, _ := newRestartableHarness(t, c, nil, files)
	return h, rev
}

// stackSetHCL renders a stack_set block over the ctl template.
func stackSetHCL(name, tag string, regions, accounts []string, prefs string) string {
	q := func(xs []string) string {
		b, _ := json.Marshal(xs)
		return string(b)
	}
	s := fmt.Sprintf(`stack_set %q {
  template = "./templates/ctl"
  vars = {
    tag = %q
  }
  deployment_targets {
    regions  = %s
    accounts = %s
  }
`, name, tag, q(regions), q(accounts))
	if prefs != "" {
		s += "  operation_preferences {\n" + prefs + "\n  }\n"
	}
	return s + "}\n"
}

func accountID(i int) string { return fmt.Sprintf("1000000000%02d", i) }

func accountIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = accountID(i)
	}
	return out
}

// statusDoc reads status/<name>.json at the tip of the status branch, and
// the tip's commit message.
func statusDoc(t *testing.T, repo, name string) (reconciler.StackSetStatus, string) {
	t.Helper()
	r, err := git.PlainOpen(repo)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Reference(plumbing.NewBranchReferenceName(gitsource.DefaultStatusBranch), true)
	if err != nil {
		t.Fatalf("status branch: %v", err)
	}
	c, err := r.CommitObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.File(reconciler.StatusPath(name))
	if err != nil {
		t.Fatalf("%s at the status tip %q: %v", reconciler.StatusPath(name), strings.TrimSpace(c.Message), err)
	}
	s, err := f.Contents()
	if err != nil {
		t.Fatal(err)
	}
	var doc reconciler.StackSetStatus
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		t.Fatalf("%s: %v", reconciler.StatusPath(name), err)
	}
	return doc, strings.TrimSpace(c.Message)
}

// instanceStatuses maps "region/account" to the recorded instance status.
func instanceStatuses(t *testing.T, st *state.Store, name string) map[string]state.Instance {
	t.Helper()
	ss, err := st.StackSetByName(name)
	if err != nil {
		t.Fatalf("stack set %s: %v", name, err)
	}
	ins, err := st.Instances(ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]state.Instance{}
	for _, in := range ins {
		out[in.Region+"/"+in.Account] = in
	}
	return out
}

// ---- queueing ---------------------------------------------------------------

// driver hands commits to the reconciler: Run with a trigger channel (the
// daemon), or one Reconcile call per commit in its own goroutine.
type driver struct {
	submit func()
	stop   func(t *testing.T)
	// results are the Reconcile results, for the Reconcile driver.
	results func() []*reconciler.Result
}

func runDriver(t *testing.T, h *harness) *driver {
	return runDriverWithGrace(t, h, 10*time.Second)
}

// runDriverWithGrace is runDriver whose stop cancels the provider calls in
// flight after grace (a short grace leaves them interrupted, as a kill
// does).
func runDriverWithGrace(t *testing.T, h *harness, grace time.Duration) *driver {
	trigger := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.rec.Run(ctx, trigger, grace) }()
	stopped := false
	stop := func(t *testing.T) {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(waitLimit):
			t.Errorf("Run did not return after its context ended")
		}
		h.rec.Wait()
	}
	return &driver{
		submit: func() {
			select {
			case trigger <- struct{}{}:
			default:
			}
		},
		stop:    stop,
		results: func() []*reconciler.Result { return nil },
	}
}

func reconcileDriver(t *testing.T, h *harness) *driver {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out []*reconciler.Result
	)
	submit := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.rec.Reconcile(context.Background())
			if err != nil {
				t.Errorf("Reconcile: %v", err)
			}
			mu.Lock()
			out = append(out, res)
			mu.Unlock()
		}()
	}
	submit() // the first commit
	return &driver{
		submit: submit,
		stop: func(t *testing.T) {
			ch := make(chan struct{})
			go func() { wg.Wait(); close(ch) }()
			select {
			case <-ch:
			case <-time.After(waitLimit):
				t.Errorf("Reconcile calls did not return")
			}
			h.rec.Wait()
		},
		results: func() []*reconciler.Result {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(out)
		},
	}
}

// eventually polls the state every few milliseconds until cond holds.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, now := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("after %s still waiting for %s; now: %s", waitLimit, what, now)
		case <-tick.C:
		}
	}
}

// operationAt returns the operation of a stack set at a revision.
func operationAt(st *state.Store, name, rev string) (state.Operation, error) {
	ss, err := st.StackSetByName(name)
	if err != nil {
		return state.Operation{}, err
	}
	return st.OperationForRevision(ss.ID, rev)
}

func opStatusIs(st *state.Store, name, rev string, status state.OperationStatus) func() (bool, string) {
	return func() (bool, string) {
		op, err := operationAt(st, name, rev)
		if err != nil {
			return false, err.Error()
		}
		return op.Status == status, fmt.Sprintf("%s at %s is %s (%s)", name, rev[:7], op.Status, op.Reason)
	}
}

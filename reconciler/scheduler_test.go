package reconciler_test

// Scheduler tests: the real reconciler on a real Git repository (git CLI),
// a real gitsource.Source, a real Badger state and the real engine, with one
// hand-written provider at the true edge: "ctl". Its calls block until the
// test releases them, so the test decides when each instance ends and checks,
// at every step, exactly which instances are in flight against what the RFS
// seed's operation_preferences allow.

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// Scheduler tests: the real reconciler on a real Git repository (git CLI),
// a real gitsource.Source, a real Badger state and the real engine, with one
// hand-written provider at the true edge: "ctl" (harness_test.go). Its calls
// block until the test releases them, so the test decides when each instance
// ends and checks, at every step, exactly which instances are in flight
// against what the RFS seed's operation_preferences allow.

// ---- the model of the seed's scheduling ------------------------------------

// regionRun is what the seed says one region of an operation does, step by
// step: which instances are in flight after each instance ends.
type regionRun struct {
	name      string
	accounts  []string // scheduling order
	tol, maxc int
	strict    bool

	started, cancelled bool
	next               int
	inFlight           []string
	failures           int
	broken             bool // failures > tolerance: nothing more starts
	status             map[string]state.InstanceStatus
	trace              []int // instances in flight at each step
	maxSeen            int
}

// limit is the concurrency allowed now: SOFT keeps max concurrency; STRICT
// lowers it so that failures can never pass tolerance + 1, never below 1.
func (r *regionRun) limit() int {
	if !r.strict {
		return r.maxc
	}
	return max(1, min(r.maxc, r.tol+1-r.failures))
}

// fill starts what the seed allows to start now.
func (r *regionRun) fill() {
	r.started = true
	for !r.broken && r.next < len(r.accounts) && len(r.inFlight) < r.limit() {
		r.inFlight = append(r.inFlight, r.accounts[r.next])
		r.next++
	}
	r.maxSeen = max(r.maxSeen, len(r.inFlight))
	if len(r.inFlight) > 0 {
		r.trace = append(r.trace, len(r.inFlight))
	}
}

func (r *regionRun) done() bool {
	return r.cancelled || r.started && len(r.inFlight) == 0 && (r.broken || r.next == len(r.accounts))
}

// cancelWaiting marks the instances that never started CANCEL_COMPLETE.
func (r *regionRun) cancelWaiting() {
	for ; r.next < len(r.accounts); r.next++ {
		r.status[r.accounts[r.next]] = state.InstanceCancelComplete
	}
	r.cancelled = true
}

// opModel is the model of one operation.
type opModel struct {
	regions  []*regionRun // SEQUENTIAL: in region order
	parallel bool
	cur      int // SEQUENTIAL: the running region
	rr       int // PARALLEL: round robin over regions
	fail     map[string]bool
}

func (m *opModel) begin() {
	if m.parallel {
		for _, r := range m.regions {
			r.fill()
		}
		return
	}
	m.regions[0].fill()
}

// pick chooses the next instance to end: the earliest started one of the
// running region (PARALLEL: of the next region in turn).
func (m *opModel) pick() (*regionRun, string) {
	if !m.parallel {
		r := m.regions[m.cur]
		return r, r.inFlight[0]
	}
	for range m.regions {
		r := m.regions[m.rr%len(m.regions)]
		m.rr++
		if len(r.inFlight) > 0 {
			return r, r.inFlight[0]
		}
	}
	panic("pick: nothing in flight")
}

// end ends one instance.
func (m *opModel) end(r *regionRun, account string) {
	r.inFlight = slices.DeleteFunc(r.inFlight, func(a string) bool { return a == account })
	if m.fail[r.name+"/"+account] {
		r.status[account] = state.InstanceOperationFailed
		r.failures++
		if r.failures > r.tol {
			r.broken = true
		}
	} else {
		r.status[account] = state.InstanceOperationComplete
	}
	r.fill()
	if m.parallel {
		if r.done() && r.broken {
			r.cancelWaiting()
		}
		return
	}
	for m.cur < len(m.regions) && m.regions[m.cur].done() {
		cur := m.regions[m.cur]
		if cur.broken {
			// SEQUENTIAL: every later region is cancelled too.
			for _, rest := range m.regions[m.cur:] {
				rest.cancelWaiting()
			}
			m.cur = len(m.regions)
			break
		}
		m.cur++
		if m.cur < len(m.regions) {
			m.regions[m.cur].fill()
		}
	}
}

func (m *opModel) finished() bool {
	for _, r := range m.regions {
		if !r.done() {
			return false
		}
	}
	return true
}

// ceilings tells the provider how many calls may be in flight per region.
func (m *opModel) ceilings(c *ctl, stackSet string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range m.regions {
		c.ceiling[stackSet+"/"+r.name] = len(r.inFlight)
	}
}

// matches reports whether the provider holds exactly the calls the model
// has in flight. Callers hold c.mu.
func (m *opModel) matches(c *ctl, stackSet string) bool {
	n := 0
	for _, r := range m.regions {
		want := slices.Sorted(slices.Values(r.inFlight))
		if !slices.Equal(c.blockedIn(stackSet, r.name), want) {
			return false
		}
		n += len(want)
	}
	return n == len(c.blocked)
}

// waitDelivered waits until every instance goroutine of the scheduler that
// is not blocked in the ctl provider has handed its result to the
// scheduler (the goroutine has ended). Only needed after an instance
// failed while others are still in flight: the scheduler must see that
// failure before the next instance ends, or it could count the later
// success first (and, in STRICT mode, start more than the failures allow).
func waitDelivered(t *testing.T, c *ctl) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	buf := make([]byte, 1<<20)
	for {
		// Read before the dump: only this goroutine removes blocked calls.
		c.mu.Lock()
		blocked := len(c.blocked)
		c.mu.Unlock()
		n := runtime.Stack(buf, true)
		for n == len(buf) {
			buf = make([]byte, 2*len(buf))
			n = runtime.Stack(buf, true)
		}
		transit, inCall := 0, 0
		for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
			// Instance goroutines are created by runRegionWith (not by
			// runRegions, whose goroutines run whole regions).
			if !bytes.Contains(g, []byte("created by github.com/stackd/stackd/reconciler.(*opRun).runRegionWith ")) {
				continue
			}
			if bytes.Contains(g, []byte("reconciler_test.(*ctl).call")) {
				inCall++
			} else {
				transit++
			}
		}
		if inCall < blocked {
			t.Fatalf("found %d instance goroutines of the scheduler in the ctl provider, want at least the %d blocked there: the goroutine dump no longer names runRegionWith as their creator", inCall, blocked)
		}
		// A released call still returning through the provider counts as
		// in call: wait until only the blocked ones are left there.
		if transit == 0 && inCall == blocked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d instance goroutines still have not handed their result to the scheduler", waitLimit, transit+inCall-blocked)
		}
		<-tick.C
	}
}

// ---- scheduling tests ----------------------------------------------------------

var fourRegions = []string{"eu-west-1", "us-east-1", "ap-south-1", "sa-east-1"}

// failing builds the failure set: region -> indexes of failing accounts.
func failing(m map[string][]int) map[string]bool {
	out := map[string]bool{}
	for region, idx := range m {
		for _, i := range idx {
			out[region+"/"+accountID(i)] = true
		}
	}
	return out
}

func TestSchedulerOperationPreferences(t *testing.T) {
	tests := []struct {
		name     string
		regions  []string // as listed in deployment_targets
		accounts int
		prefs    string   // operation_preferences body
		order    []string // the order regions must run in (SEQUENTIAL)
		parallel bool
		// wantTol and wantMax are the seed's resolved per-region values,
		// computed by hand (percentages floored, max concurrency 0 -> 1).
		wantTol, wantMax int
		strict           bool
		fail             map[string][]int
		wantTrace        map[string][]int
		wantStatus       state.OperationStatus
	}{
		{
			name:    "max_concurrent_count is reached and never exceeded, in region_order",
			regions: fourRegions[:3], accounts: 7,
			prefs: `region_concurrency_type = "SEQUENTIAL"
    region_order = ["us-east-1", "ap-south-1", "eu-west-1"]
    max_concurrent_count = 3
    failure_tolerance_mode = "SOFT_FAILURE_TOLERANCE"`,
			order:   []string{"us-east-1", "ap-south-1", "eu-west-1"},
			wantTol: 0, wantMax: 3,
			wantTrace: map[string][]int{
				"us-east-1": {3, 3, 3, 3, 3, 2, 1}, "ap-south-1": {3, 3, 3, 3, 3, 2, 1}, "eu-west-1": {3, 3, 3, 3, 3, 2, 1},
			},
			wantStatus: state.OperationSucceeded,
		},
		{
			name:    "max_concurrent_percentage is floored: 40% of 7 is 2",
			regions: fourRegions[:3], accounts: 7,
			prefs: `region_order = ["ap-south-1", "us-east-1", "eu-west-1"]
    max_concurrent_percentage = 40
    failure_tolerance_mode = "SOFT_FAILURE_TOLERANCE"`,
			order:   []string{"ap-south-1", "us-east-1", "eu-west-1"},
			wantTol: 0, wantMax: 2,
			wantTrace:  map[string][]int{"ap-south-1": {2, 2, 2, 2, 2, 2, 1}},
			wantStatus: state.OperationSucceeded,
		},
		{
			name:    "max_concurrent_percentage flooring to 0 becomes 1: 10% of 5",
			regions: fourRegions[:3], accounts: 5, parallel: true,
			prefs: `region_concurrency_type = "PARALLEL"
    max_concurrent_percentage = 10`,
			wantTol: 0, wantMax: 1, strict: true,
			wantTrace:  map[string][]int{"eu-west-1": {1, 1, 1, 1, 1}, "us-east-1": {1, 1, 1, 1, 1}, "ap-south-1": {1, 1, 1, 1, 1}},
			wantStatus: state.OperationSucceeded,
		},
		{
			name:    "STRICT lowers concurrency as failures grow; within tolerance the operation succeeds",
			regions: fourRegions[:2], accounts: 10,
			prefs: `region_order = ["eu-west-1", "us-east-1"]
    failure_tolerance_count = 3
    max_concurrent_count = 4`,
			order:   []string{"eu-west-1", "us-east-1"},
			wantTol: 3, wantMax: 4, strict: true,
			fail: map[string][]int{"eu-west-1": {0, 1, 2}},
			wantTrace: map[string][]int{
				"eu-west-1": {4, 3, 2, 1, 1, 1, 1, 1, 1, 1},
				"us-east-1": {4, 4, 4, 4, 4, 4, 4, 3, 2, 1},
			},
			wantStatus: state.OperationSucceeded,
		},
		{
			name:    "STRICT never lets failures pass tolerance + 1; SEQUENTIAL cancels every later region",
			regions: fourRegions[:3], accounts: 10,
			prefs: `region_concurrency_type = "SEQUENTIAL"
    region_order = ["eu-west-1", "us-east-1", "ap-south-1"]
    failure_tolerance_count = 2
    max_concurrent_count = 3
    failure_tolerance_mode = "STRICT_FAILURE_TOLERANCE"`,
			order:   []string{"eu-west-1", "us-east-1", "ap-south-1"},
			wantTol: 2, wantMax: 3, strict: true,
			fail: map[string][]int{"us-east-1": {0, 1, 2, 3, 4, 5}},
			wantTrace: map[string][]int{
				"eu-west-1": {3, 3, 3, 3, 3, 3, 3, 3, 2, 1},
				"us-east-1": {3, 2, 1},
			},
			wantStatus: state.OperationFailed,
		},
		{
			name:    "SOFT keeps concurrency, so failures may pass tolerance + 1; in-flight instances keep their outcome",
			regions: fourRegions[:3], accounts: 10,
			prefs: `region_order = ["eu-west-1", "us-east-1", "ap-south-1"]
    failure_tolerance_count = 2
    max_concurrent_count = 3
    failure_tolerance_mode = "SOFT_FAILURE_TOLERANCE"`,
			order:   []string{"eu-west-1", "us-east-1", "ap-south-1"},
			wantTol: 2, wantMax: 3,
			fail: map[string][]int{"us-east-1": {0, 1, 2, 4}},
			wantTrace: map[string][]int{
				"us-east-1": {3, 3, 3, 2, 1},
			},
			wantStatus: state.OperationFailed,
		},
		{
			name:    "failure_tolerance_percentage is floored: 29% of 9 is 2, the third failure cancels",
			regions: fourRegions[:3], accounts: 9,
			prefs: `region_order = ["ap-south-1", "eu-west-1", "us-east-1"]
    failure_tolerance_percentage = 29
    max_concurrent_percentage = 34
    failure_tolerance_mode = "SOFT_FAILURE_TOLERANCE"`,
			order:   []string{"ap-south-1", "eu-west-1", "us-east-1"},
			wantTol: 2, wantMax: 3,
			fail:       map[string][]int{"eu-west-1": {1, 3, 5}},
			wantTrace:  map[string][]int{"eu-west-1": {3, 3, 3, 3, 3, 3, 2, 1}},
			wantStatus: state.OperationFailed,
		},
		{
			name:    "PARALLEL: exceeding the tolerance cancels only that region",
			regions: fourRegions[:3], accounts: 6, parallel: true,
			prefs: `region_concurrency_type = "PARALLEL"
    failure_tolerance_count = 1
    max_concurrent_count = 2
    failure_tolerance_mode = "SOFT_FAILURE_TOLERANCE"`,
			wantTol: 1, wantMax: 2,
			fail: map[string][]int{"us-east-1": {0, 1, 2}},
			wantTrace: map[string][]int{
				"eu-west-1": {2, 2, 2, 2, 2, 1}, "us-east-1": {2, 2, 1}, "ap-south-1": {2, 2, 2, 2, 2, 1},
			},
			wantStatus: state.OperationFailed,
		},
		{
			name:    "PARALLEL within a percentage tolerance: SUCCEEDED with the failed instances OPERATION_FAILED",
			regions: fourRegions, accounts: 9, parallel: true,
			prefs: `region_concurrency_type = "PARALLEL"
    failure_tolerance_percentage = 29
    max_concurrent_percentage = 40
    failure_tolerance_mode = "SOFT_FAILURE_TOLERANCE"`,
			wantTol: 2, wantMax: 3,
			fail:       map[string][]int{"ap-south-1": {0, 8}, "sa-east-1": {4}},
			wantStatus: state.OperationSucceeded,
		},
		{
			name:    "region_order with 20 accounts per region",
			regions: fourRegions[:3], accounts: 20,
			prefs: `region_order = ["ap-south-1", "eu-west-1", "us-east-1"]
    failure_tolerance_count = 4
    max_concurrent_count = 5`,
			order:   []string{"ap-south-1", "eu-west-1", "us-east-1"},
			wantTol: 4, wantMax: 5, strict: true,
			fail:       map[string][]int{"eu-west-1": {3, 11}, "us-east-1": {19}},
			wantStatus: state.OperationSucceeded,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const name = "sched"
			accounts := accountIDs(tc.accounts)
			m := &opModel{parallel: tc.parallel, fail: failing(tc.fail)}
			order := tc.order
			if tc.parallel {
				order = tc.regions
			}
			for _, region := range order {
				m.regions = append(m.regions, &regionRun{
					name: region, accounts: accounts, tol: tc.wantTol, maxc: tc.wantMax, strict: tc.strict, status: map[string]state.InstanceStatus{},
				})
			}
			c := newCtl()
			c.gate(name)
			for target := range m.fail {
				c.fail[target] = true
			}
			// The first instances the seed allows; nothing else may start.
			m.begin()
			m.ceilings(c, name)
			h, rev := newHarness(t, c, map[string]string{"sched.hcl": stackSetHCL(name, "v1", tc.regions, accounts, "    "+tc.prefs)})

			type outcome struct {
				res *reconciler.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := h.rec.Reconcile(context.Background())
				done <- outcome{res, err}
			}()
			var out *outcome
			t.Cleanup(func() {
				if out != nil {
					return
				}
				c.openAll()
				select {
				case <-done:
				case <-time.After(waitLimit):
					t.Errorf("Reconcile did not return after every call was released")
				}
			})

			c.waitFor(t, "the first instances of the operation", func() bool { return m.matches(c, name) })
			// In flight: OPERATION_IN_PROGRESS; not started yet: WAIT_IN_PROGRESS.
			ins := instanceStatuses(t, h.store, name)
			for _, r := range m.regions {
				for i, a := range accounts {
					want := state.InstanceWaitInProgress
					if slices.Contains(r.inFlight, a) {
						want = state.InstanceOperationInProgress
					} else if i < r.next {
						t.Fatalf("model: %s/%s started but not in flight", r.name, a)
					}
					if got := ins[r.name+"/"+a].Status; got != want {
						t.Errorf("while the first instances run, %s/%s is %q, want %q", r.name, a, got, want)
					}
				}
			}

			for !m.finished() {
				r, account := m.pick()
				failed := m.fail[r.name+"/"+account]
				m.end(r, account)
				m.ceilings(c, name)
				c.release(t, name, r.name, account)
				if failed && len(r.inFlight) > 0 {
					// A failure changes what may start next (tolerance
					// exceeded; STRICT: lower concurrency): the scheduler
					// must see it before the next instance ends.
					waitDelivered(t, c)
				}
				c.waitFor(t, fmt.Sprintf("the instances in flight after %s/%s ended (want %v)", r.name, account, r.inFlight),
					func() bool { return m.matches(c, name) })
			}
			select {
			case o := <-done:
				out = &o
			case <-time.After(waitLimit):
				c.mu.Lock()
				var blocked []string
				for _, cl := range c.blocked {
					blocked = append(blocked, cl.region+"/"+cl.account)
				}
				v := slices.Clone(c.violations)
				c.mu.Unlock()
				t.Fatalf("Reconcile did not return after the last instance ended; calls blocked: %v; over-parallelization: %v", blocked, v)
			}
			if out.err != nil {
				t.Fatalf("Reconcile: %v", out.err)
			}
			c.mu.Lock()
			violations := slices.Clone(c.violations)
			maxSeen := cloneCounts(c.maxInFlight)
			c.mu.Unlock()
			if len(violations) > 0 {
				t.Fatalf("the scheduler over-parallelized:\n%s", strings.Join(violations, "\n"))
			}

			// Concurrency: reached, never exceeded, lowered as the seed says.
			for _, r := range m.regions {
				if got := maxSeen[name+"/"+r.name]; got != r.maxSeen {
					t.Errorf("%s: at most %d instances were in flight, want %d", r.name, got, r.maxSeen)
				}
				if got := maxSeen[name+"/"+r.name]; got > tc.wantMax {
					t.Errorf("%s: %d instances were in flight, max concurrency is %d", r.name, got, tc.wantMax)
				}
				if want, ok := tc.wantTrace[r.name]; ok && !slices.Equal(r.trace, want) {
					t.Errorf("%s: instances in flight step by step %v, want %v", r.name, r.trace, want)
				}
				if tc.strict && r.failures > tc.wantTol+1 {
					t.Errorf("%s: %d failures under STRICT with tolerance %d", r.name, r.failures, tc.wantTol)
				}
			}

			// Final statuses in the state.
			want := map[string]string{}
			for _, r := range m.regions {
				for a, s := range r.status {
					want[r.name+"/"+a] = string(s)
				}
			}
			if len(want) != len(tc.regions)*len(accounts) {
				t.Fatalf("model left %d of %d instances without an outcome", len(tc.regions)*len(accounts)-len(want), len(tc.regions)*len(accounts))
			}
			ins = instanceStatuses(t, h.store, name)
			got := map[string]string{}
			for k, in := range ins {
				got[k] = string(in.Status)
				switch in.Status {
				case state.InstanceOperationFailed:
					if !strings.Contains(in.StatusReason, "injected failure for "+k) {
						t.Errorf("%s failed with reason %q, want the provider's error", k, in.StatusReason)
					}
				case state.InstanceCancelComplete:
					if !strings.Contains(in.StatusReason, "failure tolerance exceeded") {
						t.Errorf("%s cancelled with reason %q, want it to say the failure tolerance was exceeded", k, in.StatusReason)
					}
				case state.InstanceOperationComplete:
					if in.Revision != rev {
						t.Errorf("%s complete at %q, want %s", k, in.Revision, rev)
					}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("instance statuses in the state (-want +got):\n%s", diff)
			}

			// Exactly one provider call per instance that ran; none for cancelled ones.
			calls := map[string]int{}
			for _, e := range c.eventsOf(name) {
				if e.start {
					calls[e.region+"/"+e.account]++
				}
			}
			for k, s := range want {
				n := 1
				if s == string(state.InstanceCancelComplete) {
					n = 0
				}
				if calls[k] != n {
					t.Errorf("%s (%s): %d provider calls, want %d", k, s, calls[k], n)
				}
			}

			// Region order: no region starts before the previous one ended.
			if !tc.parallel {
				checkSequential(t, c.eventsOf(name), tc.order)
			} else if !overlapping(c.eventsOf(name)) {
				t.Errorf("PARALLEL: instances of different regions were never in flight together")
			}

			// The operation and its status commit.
			if len(out.res.Operations) != 1 {
				t.Fatalf("Reconcile returned %d operations, want 1", len(out.res.Operations))
			}
			op := out.res.Operations[0]
			if op.Status != tc.wantStatus || op.Kind != reconciler.KindCreateStackInstances {
				t.Errorf("operation %s %s (%s), want CreateStackInstances %s", op.Kind, op.Status, op.Reason, tc.wantStatus)
			}
			counts := reconciler.OperationCounts{Total: len(want)}
			for _, s := range want {
				switch state.InstanceStatus(s) {
				case state.InstanceOperationComplete:
					counts.Succeeded++
				case state.InstanceOperationFailed:
					counts.Failed++
				case state.InstanceCancelComplete:
					counts.Cancelled++
				}
			}
			doc, msg := statusDoc(t, h.repo, name)
			// The subject leads with succeeded/total, then names the
			// failed and cancelled instances, if any.
			extra := ""
			if counts.Failed > 0 {
				extra += fmt.Sprintf(", %d failed", counts.Failed)
			}
			if counts.Cancelled > 0 {
				extra += fmt.Sprintf(", %d cancelled", counts.Cancelled)
			}
			if wantMsg := fmt.Sprintf("stackd: %s CreateStackInstances %s %s (%d/%d%s)", name, rev[:7], tc.wantStatus, counts.Succeeded, counts.Total, extra); msg != wantMsg {
				t.Errorf("status commit %q, want %q", msg, wantMsg)
			}
			if lo := doc.LastOperation; lo == nil || lo.Status != tc.wantStatus || lo.Revision != rev || lo.Counts != counts {
				t.Errorf("status/%s.json last_operation %+v, want %s at %s with %+v", name, lo, tc.wantStatus, rev, counts)
			}
			docStatus := map[string]string{}
			for _, in := range doc.Instances {
				docStatus[in.Region+"/"+in.Account] = string(in.Status)
			}
			if diff := cmp.Diff(want, docStatus); diff != "" {
				t.Errorf("status/%s.json instance statuses (-want +got):\n%s", name, diff)
			}
			wantRev := rev
			if counts.Failed+counts.Cancelled > 0 {
				wantRev = ""
			}
			if doc.Revision != wantRev {
				t.Errorf("status/%s.json revision %q, want %q", name, doc.Revision, wantRev)
			}
		})
	}
}

func cloneCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// regionSpans returns, per region, the sequence numbers of its first call
// start and of its last call end, and the regions by first start.
func regionSpans(events []ctlEvent) (order []string, first, last map[string]int) {
	first, last = map[string]int{}, map[string]int{}
	for _, e := range events {
		if _, ok := first[e.region]; !ok && e.start {
			first[e.region] = e.seq
			order = append(order, e.region)
		}
		if !e.start {
			last[e.region] = max(last[e.region], e.seq)
		}
	}
	return order, first, last
}

// checkSequential checks that regions ran one after the other in want's
// order (regions without calls, all cancelled, are skipped at the end).
func checkSequential(t *testing.T, events []ctlEvent, want []string) {
	t.Helper()
	order, first, last := regionSpans(events)
	if !slices.Equal(order, want[:len(order)]) {
		t.Errorf("regions started in order %v, want %v", order, want)
	}
	for i := 1; i < len(order); i++ {
		if first[order[i]] < last[order[i-1]] {
			t.Errorf("region %s started (event %d) before region %s ended (event %d)", order[i], first[order[i]], order[i-1], last[order[i-1]])
		}
	}
}

// overlapping reports whether calls of two regions were ever in flight together.
func overlapping(events []ctlEvent) bool {
	in := map[string]int{}
	for _, e := range events {
		if e.start {
			in[e.region]++
		} else {
			in[e.region]--
		}
		busy := 0
		for _, n := range in {
			if n > 0 {
				busy++
			}
		}
		if busy > 1 {
			return true
		}
	}
	return false
}

// Without region_order, SEQUENTIAL regions run one at a time in an order
// chosen at random per operation; the defaults are max concurrency 1.
func TestSchedulerRandomRegionOrder(t *testing.T) {
	c := newCtl()
	files := map[string]string{}
	const n = 8
	for i := range n {
		name := fmt.Sprintf("rand-%d", i)
		files[name+".hcl"] = stackSetHCL(name, "v1", fourRegions, accountIDs(2), "")
	}
	h, _ := newHarness(t, c, files)
	res, err := h.rec.Reconcile(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Operations) != n {
		t.Fatalf("%d operations, want %d", len(res.Operations), n)
	}
	for _, op := range res.Operations {
		if op.Status != state.OperationSucceeded {
			t.Errorf("%s: %s (%s), want SUCCEEDED", op.StackSet, op.Status, op.Reason)
		}
	}
	orders := map[string]bool{}
	for i := range n {
		name := fmt.Sprintf("rand-%d", i)
		events := c.eventsOf(name)
		order, _, _ := regionSpans(events)
		if !slices.Equal(slices.Sorted(slices.Values(order)), slices.Sorted(slices.Values(fourRegions))) {
			t.Errorf("%s ran regions %v, want a permutation of %v", name, order, fourRegions)
			continue
		}
		checkSequential(t, events, order)
		orders[strings.Join(order, ",")] = true
		c.mu.Lock()
		for _, region := range fourRegions {
			if got := c.maxInFlight[name+"/"+region]; got != 1 {
				t.Errorf("%s/%s: %d instances in flight at most, want 1 (the default)", name, region, got)
			}
		}
		c.mu.Unlock()
	}
	// 8 operations over 4 regions: all in the same order has probability (1/24)^7.
	if len(orders) < 2 {
		t.Errorf("every operation ran its regions in the same order %v: not random per operation", keys(orders))
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// One operation runs per stack set: a commit arriving while it runs is
// QUEUED, a newer commit replaces the queued one (CANCELLED, coalesced) and
// runs after the running one; another stack set runs in parallel meanwhile.
func TestQueueingAndCoalescing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drive func(*testing.T, *harness) *driver
	}{
		{"Run with a trigger", runDriver},
		{"concurrent Reconcile calls", reconcileDriver},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCtl()
			c.gate("alpha")
			alpha := func(tag string) string {
				return stackSetHCL("alpha", tag, []string{"eu-west-1"}, accountIDs(1), "")
			}
			h, rev1 := newHarness(t, c, map[string]string{"alpha.hcl": alpha("v1")})
			d := tc.drive(t, h)
			t.Cleanup(func() { c.openAll(); d.stop(t) })

			c.waitFor(t, "alpha's first instance to be in flight", func() bool { return len(c.blockedIn("alpha", "eu-west-1")) == 1 })

			rev2 := commitFiles(t, h.repo, map[string]string{"alpha.hcl": alpha("v2")}, "alpha v2")
			d.submit()
			eventually(t, "the second commit's operation to be QUEUED behind the running one", opStatusIs(h.store, "alpha", rev2, state.OperationQueued))

			beta := stackSetHCL("beta", "b1", fourRegions[:2], accountIDs(2), `    region_concurrency_type = "PARALLEL"`)
			rev3 := commitFiles(t, h.repo, map[string]string{"alpha.hcl": alpha("v3"), "beta.hcl": beta}, "alpha v3, beta")
			d.submit()
			eventually(t, "the queued operation to be coalesced", func() (bool, string) {
				op, err := operationAt(h.store, "alpha", rev2)
				if err != nil {
					return false, err.Error()
				}
				return op.Status == state.OperationCancelled, fmt.Sprintf("%s (%s)", op.Status, op.Reason)
			})
			if op, _ := operationAt(h.store, "alpha", rev2); !strings.Contains(op.Reason, "coalesced") || !strings.Contains(op.Reason, rev3[:7]) {
				t.Errorf("coalesced operation's reason %q, want it to say it was coalesced into %s", op.Reason, rev3[:7])
			}
			eventually(t, "the third commit's alpha operation to be QUEUED", opStatusIs(h.store, "alpha", rev3, state.OperationQueued))
			eventually(t, "beta's operation to succeed while alpha's runs", opStatusIs(h.store, "beta", rev3, state.OperationSucceeded))
			c.mu.Lock()
			stillBlocked := len(c.blockedIn("alpha", "eu-west-1"))
			c.mu.Unlock()
			if stillBlocked != 1 {
				t.Fatalf("alpha's first call is no longer in flight while beta ran")
			}
			if op, _ := operationAt(h.store, "alpha", rev1); op.Status != state.OperationRunning {
				t.Errorf("alpha's first operation is %s while its instance is in flight, want RUNNING", op.Status)
			}

			c.open("alpha")
			eventually(t, "alpha's first operation to succeed", opStatusIs(h.store, "alpha", rev1, state.OperationSucceeded))
			eventually(t, "alpha's third-commit operation to succeed", opStatusIs(h.store, "alpha", rev3, state.OperationSucceeded))
			d.stop(t)

			ss, err := h.store.StackSetByName("alpha")
			if err != nil {
				t.Fatal(err)
			}
			ops, err := h.store.Operations(ss.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, op := range ops {
				got[op.Revision[:7]] = string(op.Kind) + " " + string(op.Status)
			}
			want := map[string]string{
				rev1[:7]: string(reconciler.KindCreateStackInstances) + " " + string(state.OperationSucceeded),
				rev2[:7]: string(reconciler.KindDeployStackSet) + " " + string(state.OperationCancelled),
				rev3[:7]: string(reconciler.KindDeployStackSet) + " " + string(state.OperationSucceeded),
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("alpha's operations by revision (-want +got):\n%s", diff)
			}

			// The coalesced commit never reached the provider.
			var alphaCalls []string
			for _, e := range c.eventsOf("alpha") {
				if e.start {
					alphaCalls = append(alphaCalls, e.op+" "+e.tag)
				}
			}
			if want := []string{"create v1", "update v3"}; !slices.Equal(alphaCalls, want) {
				t.Errorf("alpha's provider calls %v, want %v", alphaCalls, want)
			}
			// Beta ran entirely while alpha's first call was in flight.
			alphaEnd := 0
			for _, e := range c.eventsOf("alpha") {
				if !e.start {
					alphaEnd = e.seq
					break
				}
			}
			betaEvents := c.eventsOf("beta")
			if len(betaEvents) != 8 {
				t.Errorf("beta made %d call events, want 8 (4 instances)", len(betaEvents))
			}
			for _, e := range betaEvents {
				if e.seq > alphaEnd {
					t.Errorf("beta's call %s/%s (event %d) came after alpha's first call ended (event %d)", e.region, e.account, e.seq, alphaEnd)
				}
			}

			doc, _ := statusDoc(t, h.repo, "alpha")
			if lo := doc.LastOperation; lo == nil || lo.Revision != rev3 || lo.Status != state.OperationSucceeded {
				t.Errorf("status/alpha.json last_operation %+v, want SUCCEEDED at %s", lo, rev3)
			}
			if doc.Revision != rev3 || len(doc.Instances) != 1 || doc.Instances[0].Revision != rev3 {
				t.Errorf("status/alpha.json revision %s instances %+v, want everything at %s", doc.Revision, doc.Instances, rev3)
			}
			bdoc, _ := statusDoc(t, h.repo, "beta")
			if lo := bdoc.LastOperation; lo == nil || lo.Revision != rev3 || lo.Status != state.OperationSucceeded || lo.Counts.Succeeded != 4 {
				t.Errorf("status/beta.json last_operation %+v, want SUCCEEDED 4/4 at %s", lo, rev3)
			}

			if rs := d.results(); rs != nil {
				byOps := map[string]string{}
				for _, r := range rs {
					var names []string
					for _, op := range r.Operations {
						names = append(names, op.StackSet+" "+string(op.Status))
					}
					byOps[r.Revision[:7]] = strings.Join(names, ", ")
				}
				want := map[string]string{
					rev1[:7]: "alpha SUCCEEDED",
					rev2[:7]: "",
					rev3[:7]: "alpha SUCCEEDED, beta SUCCEEDED",
				}
				if diff := cmp.Diff(want, byOps); diff != "" {
					t.Errorf("Reconcile results by revision (-want +got):\n%s", diff)
				}
			}
		})
	}
}

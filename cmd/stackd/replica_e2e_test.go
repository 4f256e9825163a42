package main

// Replicas as processes on a real PostgreSQL (issue 31, docs/design.md
// §13): three `stackd run` processes share one database (--state-url) and
// one repository; a custom-resource provider on 127.0.0.1 counts every
// request by the replica it came from and serves the instances' health
// checks, sampling how many are in service. The tests kill (SIGKILL), stop
// (SIGSTOP/SIGCONT) and end (SIGTERM) replicas and crash the database
// (pg_ctl restart -m immediate) during operations, and check what the
// design promises: another replica resumes the same operation with the
// same batch plan, min_in_service holds in every sample, no resource is
// created twice, a stalled replica neither calls providers nor writes
// once its lease is gone, every stack set is deployed exactly once.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/state"
)

// The rollout of the takeover tests: 3 regions × 8 accounts, batches of 4,
// min_in_service 20.
var (
	rpRegions = []string{"eu-west-1", "us-east-1", "ap-south-1"}
	rpFleet   = len(rpRegions) * 8
)

const (
	rpBatch = 4
	rpMinIn = 20
)

// rolloutWorld deploys version 1 of stack set "web" (the fleet above)
// with three replicas and returns the world.
func rolloutWorld(t *testing.T, ttl time.Duration) *rpWorld {
	t.Helper()
	w := newRPWorld(t, ttl, 120*time.Millisecond)
	rev := w.commit(map[string]string{
		"types.hcl":              w.rpTypes(),
		"web.hcl":                rpStackSet("web", 1, rpRegions, rpAccounts(8), w.rpRollout(rpBatch, rpMinIn)),
		"templates/web/main.hcl": rpTemplate(1),
	}, "web v1")
	for range 3 {
		w.start()
	}
	if op := w.waitEnded("web", rev, 2*time.Minute); op.Status != state.OperationSucceeded {
		t.Fatalf("v1: %s %s%s", op.Status, op.Reason, w.tails())
	}
	w.prov.watchSet("web", rpFleet, rpMinIn)
	return w
}

// nextVersion commits version n of web and waits until its rollout is at
// batch 2 or later; it returns the revision and the operation then.
func (w *rpWorld) nextVersion(n int) (string, state.Operation) {
	w.t.Helper()
	rev := w.commit(map[string]string{
		"web.hcl":                rpStackSet("web", n, rpRegions, rpAccounts(8), w.rpRollout(rpBatch, rpMinIn)),
		"templates/web/main.hcl": rpTemplate(n),
	}, fmt.Sprintf("web v%d", n))
	op := w.waitOp("web", rev, time.Minute, "never reached batch 2", func(op state.Operation) bool {
		return op.Status.Done() || (op.Rollout != nil && op.Rollout.Batch >= 2 && len(op.Rollout.Plan) > 0)
	})
	if op.Status.Done() {
		w.t.Fatalf("v%d ended (%s) before the test could act in its rollout", n, op.Status)
	}
	return rev, op
}

// checkRollout checks what every takeover test promises of version n's
// operation: it is the one operation of its revision, it succeeded, its
// plan is the one recorded before the fault, every instance has its gen_n
// created once, no resource was created twice and min_in_service held in
// every sample.
func (w *rpWorld) checkRollout(rev string, n int, before state.Operation, final state.Operation) {
	t := w.t
	t.Helper()
	if final.Status != state.OperationSucceeded {
		t.Errorf("v%d: operation %s ended %s (%s), want SUCCEEDED", n, final.ID, final.Status, final.Reason)
	}
	if final.ID != before.ID {
		t.Errorf("v%d: operation %s finished, but %s was running before the fault", n, final.ID, before.ID)
	}
	var ofRev []string
	for _, op := range w.operations("web") {
		if op.Revision == rev {
			ofRev = append(ofRev, op.ID+" "+string(op.Status))
		}
	}
	if len(ofRev) != 1 {
		t.Errorf("v%d: operations of revision %s: %v, want exactly one", n, short(rev), ofRev)
	}
	if final.Rollout == nil {
		t.Fatalf("v%d: the operation has no rollout progress", n)
	}
	if diff := cmp.Diff(before.Rollout.Plan, final.Rollout.Plan); diff != "" {
		t.Errorf("v%d: the batch plan changed across the fault (-before +after):\n%s", n, diff)
	}
	if got := w.prov.created("web", fmt.Sprintf("custom.gen_%d", n)); got != rpFleet {
		t.Errorf("v%d: gen_%d created on %d instances, want %d", n, n, got, rpFleet)
	}
	if dup := w.prov.duplicateCreates(); len(dup) > 0 {
		t.Errorf("duplicate creates: %v", dup)
	}
	min, samples, breaches := w.prov.inService("web")
	if samples == 0 {
		t.Errorf("no in-service sample was taken")
	}
	if len(breaches) > 0 {
		t.Errorf("min_in_service %d violated: %v", rpMinIn, breaches)
	}
	t.Logf("v%d: %d in-service samples, the fewest in service %d of %d (min_in_service %d)", n, samples, min, rpFleet, rpMinIn)
}

// TestReplicaKillOwnerMidRollout: kill -9 of the replica that owns web in
// the middle of its rollout; another replica takes the lease over and
// resumes the same operation to SUCCEEDED. The takeover time (kill → the
// first event the new owner records) is logged; STACKD_TAKEOVER_RUNS
// repeats the kill on later versions (and STACKD_TAKEOVER_TTL sets the
// lease TTL, default 2s) for the figures.
func TestReplicaKillOwnerMidRollout(t *testing.T) {
	t.Parallel()
	ttl := 2 * time.Second
	if s := os.Getenv("STACKD_TAKEOVER_TTL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("STACKD_TAKEOVER_TTL: %v", err)
		}
		ttl = d
	}
	runs := 1
	if s := os.Getenv("STACKD_TAKEOVER_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("STACKD_TAKEOVER_RUNS=%q: want a positive number", s)
		}
		runs = n
	}
	w := rolloutWorld(t, ttl)
	var takeovers []time.Duration
	for i := range runs {
		n := i + 2
		rev, before := w.nextVersion(n)
		owner := w.byID(w.owner("web"))
		if owner == nil {
			t.Fatalf("v%d: web's lease is held by no replica of this test (%q)%s", n, w.owner("web"), w.tails())
		}
		killed := time.Now()
		owner.p.kill(t)
		t.Logf("v%d: killed replica %d (%s) at batch %d of %d", n, owner.n, owner.id, before.Rollout.Batch, before.Rollout.Batches)
		final := w.waitEnded("web", rev, 2*time.Minute)
		w.checkRollout(rev, n, before, final)
		newOwner := w.owner("web")
		if newOwner == owner.id || newOwner == "" {
			t.Errorf("v%d: web's lease after the takeover: %q", n, newOwner)
		}
		first := w.firstEventAfter(final.ID, killed)
		if first.IsZero() {
			t.Errorf("v%d: no event recorded after the kill", n)
		} else {
			takeovers = append(takeovers, first.Sub(killed))
			t.Logf("v%d: takeover (kill → the new owner's first event) %s with --lease-ttl %s", n, first.Sub(killed).Round(time.Millisecond), ttl)
		}
		if i+1 < runs {
			w.start() // three replicas again
		}
	}
	if len(takeovers) > 0 {
		slices.Sort(takeovers)
		t.Logf("takeover with --lease-ttl %s over %d kills: median %s, range %s–%s", ttl, len(takeovers),
			takeovers[len(takeovers)/2].Round(time.Millisecond), takeovers[0].Round(time.Millisecond), takeovers[len(takeovers)-1].Round(time.Millisecond))
	}
}

// TestReplicaStoppedOwnerFencesItself: SIGSTOP of web's owner mid-rollout
// until another replica took its lease over and the rollout went on, then
// SIGCONT: the stopped replica fences itself (its log says the lease was
// lost), sends no provider request and commits no state write afterwards,
// and the rollout completes on the new owner.
func TestReplicaStoppedOwnerFencesItself(t *testing.T) {
	t.Parallel()
	w := rolloutWorld(t, 2*time.Second)
	rev, before := w.nextVersion(2)
	owner := w.byID(w.owner("web"))
	if owner == nil {
		t.Fatalf("web's lease is held by no replica of this test (%q)%s", w.owner("web"), w.tails())
	}
	from := len(owner.p.log.all())
	stopped := time.Now()
	owner.p.signal(t, syscall.SIGSTOP)
	t.Logf("stopped replica %d (%s) at batch %d of %d", owner.n, owner.id, before.Rollout.Batch, before.Rollout.Batches)
	eventually(t, time.Minute, func() bool {
		o := w.owner("web")
		return o != "" && o != owner.id
	}, "no other replica took web's lease over%s", w.tails())
	t.Logf("web taken over by %s %s after the stop", w.owner("web"), time.Since(stopped).Round(time.Millisecond))
	// Let the new owner make progress before the stopped one wakes up.
	w.waitOp("web", rev, time.Minute, "made no progress on the new owner", func(op state.Operation) bool {
		return op.Status.Done() || op.Rollout.Batch > before.Rollout.Batch
	})
	resumed := time.Now()
	owner.p.signal(t, syscall.SIGCONT)
	owner.p.waitLine(t, 30*time.Second, from, "saying the stopped replica lost web's lease", func(l map[string]any) bool {
		return l["stack_set"] == "web" && (l["message"] == "lease not renewed in time: stopping the stack set's work (self-fencing)" ||
			l["message"] == "lease lost: another replica may own the stack set now")
	})
	final := w.waitEnded("web", rev, 2*time.Minute)
	w.checkRollout(rev, 2, before, final)
	// From SIGCONT on, as the issue asks: a request the replica sent just
	// before SIGSTOP may reach the provider a moment after it (seen once
	// with the suite's other tests running).
	if calls := w.prov.callsFrom(owner.addr, resumed); len(calls) > 0 {
		var what []string
		for _, c := range calls {
			what = append(what, fmt.Sprintf("%s %s at +%s", c.req.RequestType, c.req.where(), c.at.Sub(resumed).Round(time.Millisecond)))
		}
		t.Errorf("the stopped replica called the provider %d times after SIGCONT: %v", len(calls), what)
	}
	if owner.p.done() {
		t.Errorf("the stopped replica exited after SIGCONT: %v", owner.p.err)
	}
	// Nothing it did after SIGCONT reached the state: no instance of web
	// completed there, and what it tried was refused by the fence.
	lines, _ := owner.p.log.since(from)
	for _, l := range lines {
		if l["stack_set"] == "web" && (l["message"] == "instance complete" || l["message"] == "operation finished") {
			t.Errorf("the stopped replica went on with web after SIGCONT: %v", l)
		}
	}
	t.Logf("fenced writes refused on the stopped replica: %v", metric(t, owner.addr, "stackd_fenced_writes_total"))
	if msg := w.stateCheck(); msg != "" {
		t.Errorf("state check: %s", msg)
	}
}

// TestReplicaDatabaseRestartMidRollout: pg_ctl restart -m immediate during
// web's rollout. The replicas stay up and reconnect; the rollout completes
// once, with no resource created twice and min_in_service kept.
func TestReplicaDatabaseRestartMidRollout(t *testing.T) {
	t.Parallel()
	w := rolloutWorld(t, 2*time.Second)
	rev, before := w.nextVersion(2)
	restarted := time.Now()
	if err := w.pg.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the database restarted in %s at batch %d of %d", time.Since(restarted).Round(time.Millisecond), before.Rollout.Batch, before.Rollout.Batches)
	final := w.waitEnded("web", rev, 2*time.Minute)
	w.checkRollout(rev, 2, before, final)
	for _, r := range w.reps {
		if r.p.done() {
			t.Errorf("replica %d exited after the database restarted: %v\n%s", r.n, r.p.err, tailLines(r.p.log.String(), 30))
		}
	}
	if msg := w.stateCheck(); msg != "" {
		t.Errorf("state check: %s", msg)
	}
	// The fleet still works: the next version deploys.
	rev3 := w.commit(map[string]string{
		"web.hcl":                rpStackSet("web", 3, rpRegions, rpAccounts(8), w.rpRollout(rpBatch, rpMinIn)),
		"templates/web/main.hcl": rpTemplate(3),
	}, "web v3")
	if op := w.waitEnded("web", rev3, 2*time.Minute); op.Status != state.OperationSucceeded {
		t.Errorf("v3 after the restart: %s %s", op.Status, op.Reason)
	}
	if dup := w.prov.duplicateCreates(); len(dup) > 0 {
		t.Errorf("duplicate creates: %v", dup)
	}
}

// TestReplicaJoinLeave100StackSets: 100 small stack sets deployed by three
// replicas while a fourth joins and one leaves (SIGTERM): every stack set
// gets exactly one operation, every instance's resource is created once,
// all succeed. Then version 2 of all 100 is deployed by the three that
// remain, each taking at most its bounded share; the shares are logged
// (the figure "100 stack sets × 3 replicas").
func TestReplicaJoinLeave100StackSets(t *testing.T) {
	t.Parallel()
	const sets = 100
	// A provider serving 3 requests at a time, 50ms each: the 400
	// creates take several seconds, long enough for a join and a leave
	// while operations are half done (each deploys its 4 instances one
	// after the other).
	w := newRPWorld(t, 2*time.Second, 50*time.Millisecond)
	w.prov.slots = make(chan struct{}, 3)
	w.commit(map[string]string{"types.hcl": w.rpTypes(), "templates/small/main.hcl": rpSmallTemplate}, "the resource type")
	// The replica that leaves gives its calls in flight 300ms: its
	// operations are left half done for the others to resume.
	a := w.start("--shutdown-grace", "300ms")
	w.start()
	w.start()
	names := make([]string, sets)
	files := map[string]string{}
	for i := range names {
		names[i] = fmt.Sprintf("s%03d", i)
		files[names[i]+".hcl"] = rpSmallSet(names[i], 1)
	}
	t0 := time.Now()
	rev := w.commit(files, "100 stack sets")
	joined, left := false, false
	ops := w.waitAll(names, rev, 4*time.Minute, func(ended int) {
		if !joined && ended >= sets/10 {
			joined = true
			t.Logf("%d stack sets deployed: a replica joins", ended)
			w.start()
		}
		if joined && !left && ended >= sets/4 {
			left = true
			t.Logf("%d stack sets deployed: replica %d leaves (SIGTERM)", ended, a.n)
			a.p.signal(t, syscall.SIGTERM)
		}
	})
	t.Logf("100 stack sets deployed in %s with a replica joining and one leaving", time.Since(t0).Round(time.Millisecond))
	if !left {
		t.Errorf("the deployment ended before a replica could leave: the test did not test a leave")
	}
	if code := a.p.wait(t, time.Minute); code != 0 {
		t.Errorf("the leaving replica exited %d after SIGTERM, want 0", code)
	}
	for _, name := range names {
		if op := ops[name]; op.Status != state.OperationSucceeded {
			t.Errorf("%s: %s %s", name, op.Status, op.Reason)
		}
		if n := len(w.operations(name)); n != 1 {
			t.Errorf("%s has %d operations, want 1", name, n)
		}
		if n := w.prov.created(name, "custom.app"); n != rpSmallAccounts {
			t.Errorf("%s: custom.app created on %d instances, want %d", name, n, rpSmallAccounts)
		}
	}
	if dup := w.prov.duplicateCreates(); len(dup) > 0 {
		t.Errorf("duplicate creates: %v", dup)
	}
	creates := w.shares(names, "Create", t0)
	moved := -sets
	for _, n := range creates {
		moved += n
	}
	t.Logf("stack sets with creates by replica (join and leave): %s; %d stack sets' operations moved to another replica mid-way", w.shareText(creates), moved)

	// Three stable replicas: wait until the leases are shared out (each
	// holds at most ⌈100/3⌉), then deploy version 2 of every stack set.
	limit := (sets + 2) / 3
	eventually(t, time.Minute, func() bool {
		ls, err := w.st.Leases()
		if err != nil {
			return false
		}
		now, _ := w.st.DBNow()
		by := map[string]int{}
		held := 0
		for _, l := range ls {
			if strings.HasPrefix(l.StackSet, "s") && l.Expires.After(now) {
				by[l.Holder]++
				held++
			}
		}
		if held != sets || len(by) != 3 {
			return false
		}
		for _, n := range by {
			if n > limit {
				return false
			}
		}
		return true
	}, "the three replicas never shared the 100 stack sets' leases out%s", w.tails())
	for i, name := range names {
		files[name+".hcl"] = rpSmallSet(names[i], 2)
	}
	t1 := time.Now()
	rev2 := w.commit(files, "version 2 of the 100 stack sets")
	ops = w.waitAll(names, rev2, 4*time.Minute, nil)
	t.Logf("version 2 of 100 stack sets deployed in %s by three replicas", time.Since(t1).Round(time.Millisecond))
	for _, name := range names {
		if op := ops[name]; op.Status != state.OperationSucceeded {
			t.Errorf("%s v2: %s %s", name, op.Status, op.Reason)
		}
	}
	shares := w.shares(names, "Update", t1)
	total := 0
	for src, n := range shares {
		total += n
		if n > limit {
			t.Errorf("replica at %s updated %d stack sets, more than its bound %d", src, n, limit)
		}
	}
	if total != sets {
		t.Errorf("the replicas' shares add up to %d stack sets, want %d (a stack set updated by two replicas?)", total, sets)
	}
	t.Logf("share of 100 stack sets × 3 replicas (updates): %s", w.shareText(shares))
}

// TestReplicaChaos: rounds of faults while commits are pushed. Each round
// commits a new version of one to three stack sets (web: a rolling rollout
// with min_in_service; a and b: four instances one after the other), waits
// until an operation of it runs, and then kills a replica (SIGKILL, a new
// one starts), stops one past its TTL (SIGSTOP … SIGCONT), ends one
// (SIGTERM: it must exit 0; a new one starts) or crashes the database
// (pg_ctl restart -m immediate). After each round: every operation of the
// revision ended SUCCEEDED and is its stack set's only one for that
// revision, no operation is left unended, each stack set has one lease row
// and soon a live owner that runs, no resource was created twice,
// min_in_service held in every sample, and `stackd state check` passes.
//
// STACKD_CHAOS_ROUNDS sets the rounds (default 8, well under a minute here;
// the issue asks for 200 once) and STACKD_CHAOS_SEED the seed (default:
// the clock; logged).
func TestReplicaChaos(t *testing.T) {
	t.Parallel()
	rounds := 8
	if s := os.Getenv("STACKD_CHAOS_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("STACKD_CHAOS_ROUNDS=%q: want a number", s)
		}
		rounds = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STACKD_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STACKD_CHAOS_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (STACKD_CHAOS_SEED=%d repeats this run), %d rounds", seed, seed, rounds)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))

	w := newRPWorld(t, 2*time.Second, 30*time.Millisecond)
	regions, accounts := rpRegions[:2], rpAccounts(4)
	const webFleet, webMin = 8, 6
	version := map[string]int{"web": 1, "a": 1, "b": 1}
	names := []string{"a", "b", "web"}
	files := func(changed []string) map[string]string {
		out := map[string]string{}
		for _, name := range changed {
			if name == "web" {
				out["web.hcl"] = rpStackSet("web", version["web"], regions, accounts, w.rpRollout(2, webMin))
				out["templates/web/main.hcl"] = rpTemplate(version["web"])
				continue
			}
			out[name+".hcl"] = rpSmallSet(name, version[name])
		}
		return out
	}
	first := files(names)
	first["types.hcl"] = w.rpTypes()
	first["templates/small/main.hcl"] = rpSmallTemplate
	rev := w.commit(first, "version 1")
	for range 3 {
		w.start()
	}
	for name, op := range w.waitAll(names, rev, 2*time.Minute, nil) {
		if op.Status != state.OperationSucceeded {
			t.Fatalf("version 1 of %s: %s %s", name, op.Status, op.Reason)
		}
	}
	w.prov.watchSet("web", webFleet, webMin)

	actions := map[string]int{}
	started := time.Now()
	for round := 1; round <= rounds && !t.Failed(); round++ {
		// A new version of one to three stack sets.
		var changed []string
		for _, name := range names {
			if rng.IntN(2) == 0 {
				changed = append(changed, name)
			}
		}
		if len(changed) == 0 {
			changed = []string{names[rng.IntN(len(names))]}
		}
		for _, name := range changed {
			version[name]++
		}
		rev := w.commit(files(changed), fmt.Sprintf("round %d: %v", round, changed))
		eventually(t, time.Minute, func() bool {
			for _, name := range changed {
				if op, ok := w.operation(name, rev); ok && (op.Status == state.OperationRunning || op.Status.Done()) {
					return true
				}
			}
			return false
		}, "round %d: no operation of %s started%s", round, short(rev), w.tails())
		// Somewhere in the operations: a random moment.
		select {
		case <-time.After(time.Duration(rng.IntN(600)) * time.Millisecond):
		case <-t.Context().Done():
			return
		}
		live := w.live()
		victim := live[rng.IntN(len(live))]
		var action string
		switch rng.IntN(4) {
		case 0:
			action = "SIGKILL"
			victim.p.kill(t)
			w.start()
		case 1:
			action = "SIGSTOP+SIGCONT"
			victim.p.signal(t, syscall.SIGSTOP)
			// Stopped past its TTL: its membership expired and none of
			// its leases is live any more.
			eventually(t, time.Minute, func() bool {
				ms, err := w.st.Members()
				if err != nil {
					return false
				}
				for _, m := range ms {
					if m.ID == victim.id {
						return false
					}
				}
				for _, name := range names {
					if w.owner(name) == victim.id {
						return false
					}
				}
				return true
			}, "round %d: the stopped replica %d kept its membership or a lease%s", round, victim.n, w.tails())
			victim.p.signal(t, syscall.SIGCONT)
		case 2:
			action = "SIGTERM"
			victim.p.signal(t, syscall.SIGTERM)
			if code := victim.p.wait(t, time.Minute); code != 0 {
				t.Errorf("round %d: replica %d exited %d after SIGTERM, want 0", round, victim.n, code)
			}
			w.start()
		case 3:
			action = "database restart"
			if err := w.pg.Restart(); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		actions[action]++
		ops := w.waitAll(changed, rev, 3*time.Minute, nil)

		// The invariants.
		for _, name := range changed {
			op := ops[name]
			if op.Status != state.OperationSucceeded {
				t.Errorf("round %d (%s): %s v%d ended %s: %s", round, action, name, version[name], op.Status, op.Reason)
			}
		}
		for _, name := range names {
			revs := map[string]int{}
			for _, op := range w.operations(name) {
				revs[op.Revision]++
				if !op.Status.Done() {
					t.Errorf("round %d (%s): operation %s of %s (%s) is %s after the round settled", round, action, op.ID, name, short(op.Revision), op.Status)
				}
			}
			for r, n := range revs {
				if n > 1 {
					t.Errorf("round %d (%s): %s has %d operations for revision %s", round, action, name, n, short(r))
				}
			}
		}
		if slices.Contains(changed, "web") {
			if n := w.prov.created("web", fmt.Sprintf("custom.gen_%d", version["web"])); n != webFleet {
				t.Errorf("round %d (%s): web's gen_%d created on %d instances, want %d", round, action, version["web"], n, webFleet)
			}
		}
		if dup := w.prov.duplicateCreates(); len(dup) > 0 {
			t.Errorf("round %d (%s): duplicate creates: %v", round, action, dup)
		}
		if _, _, breaches := w.prov.inService("web"); len(breaches) > 0 {
			t.Errorf("round %d (%s): min_in_service %d violated: %v", round, action, webMin, breaches)
		}
		w.checkOwners(names, round, action)
		if msg := w.stateCheck(); msg != "" {
			t.Errorf("round %d (%s): state check: %s", round, action, msg)
		}
		t.Logf("round %d: %v, %s of replica %d: settled", round, changed, action, victim.n)
	}
	min, samples, _ := w.prov.inService("web")
	t.Logf("%d rounds in %s (%v); web: %d in-service samples, the fewest %d of %d (min_in_service %d); %d provider requests",
		rounds, time.Since(started).Round(time.Second), actions, samples, min, webFleet, webMin, len(w.prov.all()))
}

// checkOwners checks the leases after a round: one row per stack set, and
// within two TTLs every stack set has a live lease held by a replica whose
// process runs (no stack set is left without an owner).
func (w *rpWorld) checkOwners(names []string, round int, action string) {
	t := w.t
	t.Helper()
	ls, err := w.st.Leases()
	for range 50 {
		if err == nil {
			break
		}
		select { // the database may just have restarted: the pool reconnects
		case <-time.After(100 * time.Millisecond):
		case <-t.Context().Done():
			return
		}
		ls, err = w.st.Leases()
	}
	if err != nil {
		t.Errorf("round %d (%s): leases: %v", round, action, err)
		return
	}
	rows := map[string]int{}
	for _, l := range ls {
		rows[l.StackSet]++
	}
	for set, n := range rows {
		if n > 1 {
			t.Errorf("round %d (%s): stack set %s has %d lease rows", round, action, set, n)
		}
	}
	running := map[string]bool{}
	for _, r := range w.live() {
		running[r.id] = true
	}
	var why string
	deadline := time.Now().Add(2*w.ttl + 5*time.Second)
	for {
		why = ""
		for _, name := range names {
			if o := w.owner(name); !running[o] {
				why += fmt.Sprintf(" %s: %q;", name, o)
			}
		}
		if why == "" || time.Now().After(deadline) {
			break
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-t.Context().Done():
			return
		}
	}
	if why != "" {
		t.Errorf("round %d (%s): stack sets without a running owner after 2×TTL:%s%s", round, action, why, w.tails())
	}
}

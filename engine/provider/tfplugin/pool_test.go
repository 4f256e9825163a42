package tfplugin

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
)

// fakeClock is a clock.Clock whose time moves only when a test says so;
// every After registers a waiter the test fires with tick.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters chan chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), waiters: make(chan chan time.Time, 16)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	f.waiters <- ch
	return ch
}

// tick moves the time by d, fires the janitor's pending wait, and returns
// once the janitor waits again: its sweep is over.
func (f *fakeClock) tick(t *testing.T, d time.Duration) {
	t.Helper()
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	f.mu.Unlock()
	ctx := testCtx(t)
	select {
	case w := <-f.waiters:
		w <- now
	case <-ctx.Done():
		t.Fatal("the pool's janitor never waited on the clock")
	}
	select {
	case w := <-f.waiters:
		f.waiters <- w // keep it for the next tick
	case <-ctx.Done():
		t.Fatal("the pool's janitor did not finish its sweep")
	}
}

func newTestPool(t *testing.T, opts PoolOptions) *Pool {
	t.Helper()
	if buildSkip != "" {
		t.Skip(buildSkip)
	}
	p, err := NewPool(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestPoolShares(t *testing.T) {
	p := newTestPool(t, PoolOptions{Clock: newFakeClock()})
	dir := t.TempDir()
	cfgA := target{region: "eu-west-1", prefix: "a-", dir: dir}.value()
	cfgB := target{region: "us-east-2", prefix: "b-", dir: dir}.value()
	opts := Options{Path: providers[6]}

	const n = 8
	leases := make([]*Lease, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := p.Acquire(testCtx(t), opts, cfgA)
			if err != nil {
				t.Error(err)
				return
			}
			leases[i] = l
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, l := range leases[1:] {
		if l.PID() != leases[0].PID() {
			t.Errorf("callers with one configuration got processes %d and %d, want one", leases[0].PID(), l.PID())
		}
	}
	b, err := p.Acquire(testCtx(t), opts, cfgB)
	if err != nil {
		t.Fatal(err)
	}
	if b.PID() == leases[0].PID() {
		t.Error("another configuration shares the process")
	}
	if got := p.Len(); got != 2 {
		t.Errorf("Len() = %d, want 2", got)
	}
	// Both processes are configured for their own target.
	for _, tc := range []struct {
		l      *Lease
		id, rg string
	}{{leases[0], "a-x", "eu-west-1"}, {b, "b-x", "us-east-2"}} {
		s, _ := tc.l.Schema(testCtx(t))
		tcase := &thingCase{c: tc.l, typ: "p6_thing", b: s.ResourceTypes["p6_thing"].Block}
		if _, err := tcase.apply(t, cty.NilVal, tcase.config(map[string]cty.Value{"name": cty.StringVal("x")})); err != nil {
			t.Fatal(err)
		}
		if got := readObject(t, dir, tc.id)["region"]; got != tc.rg {
			t.Errorf("object %s region = %v, want %s", tc.id, got, tc.rg)
		}
	}
	for _, l := range leases {
		l.Release()
		l.Release() // idempotent
	}
	b.Release()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if processAlive(leases[0].PID()) || processAlive(b.PID()) {
		t.Error("processes outlive Pool.Close")
	}
	if _, err := p.Acquire(testCtx(t), opts, cfgA); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Acquire after Close: %v, want ErrPoolClosed", err)
	}
}

func TestPoolIdleEviction(t *testing.T) {
	fc := newFakeClock()
	p := newTestPool(t, PoolOptions{Clock: fc, IdleTimeout: time.Minute})
	cfg := target{region: "eu-west-1", dir: t.TempDir()}.value()
	opts := Options{Path: providers[5]}

	busy, err := p.Acquire(testCtx(t), opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fc.tick(t, 10*time.Minute)
	if !processAlive(busy.PID()) || p.Len() != 1 {
		t.Fatal("a process in use was evicted")
	}
	busy.Release()
	fc.tick(t, 30*time.Second)
	if !processAlive(busy.PID()) || p.Len() != 1 {
		t.Fatal("a process idle for less than IdleTimeout was evicted")
	}
	fc.tick(t, 31*time.Second)
	if processAlive(busy.PID()) || p.Len() != 0 {
		t.Errorf("a process idle for 61s with IdleTimeout 1m is still there (Len %d)", p.Len())
	}
	again, err := p.Acquire(testCtx(t), opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if again.PID() == busy.PID() {
		t.Error("Acquire after eviction reused the ended process")
	}
}

func TestPoolCap(t *testing.T) {
	p := newTestPool(t, PoolOptions{Clock: newFakeClock(), MaxProcesses: 1})
	dir := t.TempDir()
	opts := Options{Path: providers[6]}
	a, err := p.Acquire(testCtx(t), opts, target{region: "eu-west-1", dir: dir}.value())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	var b *Lease
	go func() {
		var err error
		b, err = p.Acquire(ctx, opts, target{region: "us-east-2", dir: dir}.value())
		got <- err
	}()
	// The second configuration waits for the only process to be released.
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire beyond the cap with a cancelled context: %v, want context.Canceled", err)
	}
	go func() {
		var err error
		b, err = p.Acquire(testCtx(t), opts, target{region: "us-east-2", dir: dir}.value())
		got <- err
	}()
	a.Release()
	if err := <-got; err != nil {
		t.Fatalf("Acquire after the release: %v", err)
	}
	defer b.Release()
	if p.Len() != 1 {
		t.Errorf("Len() = %d, want the cap 1", p.Len())
	}
	if processAlive(a.PID()) {
		t.Error("the idle process was not ended to make room")
	}
}

// TestPoolKeepsWhatCostsMoreToRestart: at the cap, a process idle for less
// than it took to start is not ended to make room; the caller waits until
// it has been idle that long, and meanwhile its own configuration still
// gets it without a restart. One start per instance, not one per call,
// when more configurations are in flight than processes allowed.
func TestPoolKeepsWhatCostsMoreToRestart(t *testing.T) {
	clk := newFakeClock()
	p := newTestPool(t, PoolOptions{Clock: clk, MaxProcesses: 1})
	janitor := <-clk.waiters // the janitor's first wait, never fired here
	defer func() { clk.waiters <- janitor }()
	dir := t.TempDir()
	opts := Options{Path: providers[6]}
	cfgA, cfgB := target{region: "eu-west-1", dir: dir}.value(), target{region: "us-east-2", dir: dir}.value()
	a, err := p.Acquire(testCtx(t), opts, cfgA)
	if err != nil {
		t.Fatal(err)
	}
	pidA := a.PID()
	p.mu.Lock()
	a.e.startCost = 10 * time.Second // as a provider assuming a role would take
	p.mu.Unlock()
	a.Release()

	got := make(chan error, 1)
	var b *Lease
	go func() {
		var err error
		b, err = p.Acquire(testCtx(t), opts, cfgB)
		got <- err
	}()
	// B waits on the clock for A to have been idle 10 s, A lives on.
	select {
	case <-clk.waiters: // never fired: B's wait ends with the release below
	case err := <-got:
		t.Fatalf("Acquire of another configuration at the cap returned (%v) instead of waiting for the idle process to cost less than a restart", err)
	}
	if !processAlive(pidA) {
		t.Fatal("the process idle for less than its start cost was ended")
	}
	// A's own configuration gets the same process meanwhile.
	a2, err := p.Acquire(testCtx(t), opts, cfgA)
	if err != nil {
		t.Fatal(err)
	}
	if a2.PID() != pidA {
		t.Errorf("the kept process was not reused: pid %d, want %d", a2.PID(), pidA)
	}
	a2.Release() // wakes B, which waits again: A was used just now
	var wait chan time.Time
	select {
	case wait = <-clk.waiters:
	case err := <-got:
		t.Fatalf("Acquire returned (%v) right after the idle process was used again", err)
	}
	clk.mu.Lock()
	clk.now = clk.now.Add(10 * time.Second)
	now := clk.now
	clk.mu.Unlock()
	wait <- now
	if err := <-got; err != nil {
		t.Fatalf("Acquire once the idle process cost less than a restart: %v", err)
	}
	defer b.Release()
	if processAlive(pidA) {
		t.Error("the process idle longer than its start cost was not ended to make room")
	}
	if p.Started() != 2 {
		t.Errorf("Started() = %d, want 2 (A once, B once)", p.Started())
	}
}

func TestPoolRestartsCrashed(t *testing.T) {
	p := newTestPool(t, PoolOptions{Clock: newFakeClock()})
	cfg := target{region: "eu-west-1", dir: t.TempDir()}.value()
	opts := Options{Path: providers[6]}
	l, err := p.Acquire(testCtx(t), opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := l.Schema(testCtx(t))
	tc := &thingCase{c: l, typ: "p6_thing", b: s.ResourceTypes["p6_thing"].Block}
	if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("x"), "crash": cty.True})); !errors.Is(err, ErrProviderExited) {
		t.Fatalf("apply with crash: %v, want ErrProviderExited", err)
	}
	l.Release()
	l2, err := p.Acquire(testCtx(t), opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release()
	if l2.PID() == l.PID() {
		t.Fatal("Acquire after a crash returned the dead process")
	}
	tc.c = l2
	if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("y")})); err != nil {
		t.Errorf("apply on the restarted process: %v", err)
	}
}

func TestConfigHash(t *testing.T) {
	a := cty.ObjectVal(map[string]cty.Value{"region": cty.StringVal("eu-west-1"), "n": cty.NumberIntVal(1)})
	b := cty.ObjectVal(map[string]cty.Value{"n": cty.NumberIntVal(1), "region": cty.StringVal("eu-west-1").Mark("sensitive")})
	c := cty.ObjectVal(map[string]cty.Value{"region": cty.StringVal("eu-west-2"), "n": cty.NumberIntVal(1)})
	ha, err := ConfigHash(a)
	if err != nil {
		t.Fatal(err)
	}
	if hb, _ := ConfigHash(b); hb != ha {
		t.Error("equal configurations (one marked) hash differently")
	}
	if hc, _ := ConfigHash(c); hc == ha {
		t.Error("different configurations hash the same")
	}
	if _, err := ConfigHash(cty.ObjectVal(map[string]cty.Value{"r": cty.UnknownVal(cty.String)})); err == nil {
		t.Error("ConfigHash of an unknown value: no error")
	}
}

// TestPoolRecycles: after MaxUses leases a process is retired: the next
// caller gets a fresh one, while the retired one finishes the calls of the
// leases still held and ends after the last is released.
func TestPoolRecycles(t *testing.T) {
	p := newTestPool(t, PoolOptions{Clock: newFakeClock(), MaxUses: 3})
	dir := t.TempDir()
	cfg := target{region: "eu-west-1", prefix: "r-", dir: dir}.value()
	opts := Options{Path: providers[6]}
	var old []*Lease
	for range 3 {
		l, err := p.Acquire(testCtx(t), opts, cfg)
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, l)
	}
	for _, l := range old[1:] {
		if l.PID() != old[0].PID() {
			t.Fatalf("leases within MaxUses got processes %d and %d, want one", old[0].PID(), l.PID())
		}
	}
	fresh, err := p.Acquire(testCtx(t), opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Release()
	if fresh.PID() == old[0].PID() {
		t.Fatal("the fourth lease with MaxUses 3 got the retired process")
	}
	if got := p.Len(); got != 1 {
		t.Errorf("Len() = %d, want 1 (the retired process is not counted)", got)
	}
	if got := p.Started(); got != 2 {
		t.Errorf("Started() = %d, want 2", got)
	}
	// The retired process still serves the leases on it.
	old[0].Release()
	old[1].Release()
	s, err := old[2].Schema(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	tc := &thingCase{c: old[2], typ: "p6_thing", b: s.ResourceTypes["p6_thing"].Block}
	if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("late")})); err != nil {
		t.Fatalf("a call on the retired process before its last release: %v", err)
	}
	if got := readObject(t, dir, "r-late")["region"]; got != "eu-west-1" {
		t.Errorf("object made by the retired process: region %v, want eu-west-1", got)
	}
	select {
	case <-old[2].Exited():
		t.Fatal("the retired process ended while a lease on it was held")
	default:
	}
	old[2].Release()
	select {
	case <-old[2].Exited():
	case <-testCtx(t).Done():
		t.Fatal("the retired process did not end after its last lease was released")
	}
	if !processAlive(fresh.PID()) {
		t.Error("the fresh process ended with the retired one")
	}

	// MaxUses 1: every lease gets a process of its own.
	once := newTestPool(t, PoolOptions{Clock: newFakeClock(), MaxUses: 1})
	a, err := once.Acquire(testCtx(t), opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	b, err := once.Acquire(testCtx(t), opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if a.PID() == b.PID() {
		t.Error("MaxUses 1: a second lease got the first's process")
	}
}

// TestPoolUnconfigured: a nil configuration leases a process that is not
// configured, apart from the configured ones, which validates.
func TestPoolUnconfigured(t *testing.T) {
	p := newTestPool(t, PoolOptions{Clock: newFakeClock(), MaxUses: 2})
	opts := Options{Path: providers[6]}
	configured, err := p.Acquire(testCtx(t), opts, target{region: "eu-west-1", dir: t.TempDir()}.value())
	if err != nil {
		t.Fatal(err)
	}
	defer configured.Release()
	var pids []int
	for range 3 {
		l, err := p.Acquire(testCtx(t), opts, cty.NilVal)
		if err != nil {
			t.Fatal(err)
		}
		if l.Key().ConfigHash != Unconfigured {
			t.Errorf("key %q, want Unconfigured", l.Key().ConfigHash)
		}
		s, err := l.Schema(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		b := s.ResourceTypes["p6_thing"].Block
		if _, err := l.ValidateResourceConfig(testCtx(t), "p6_thing", fill(b, map[string]cty.Value{"name": cty.StringVal("x")})); err != nil {
			t.Errorf("validate on the unconfigured process: %v", err)
		}
		pids = append(pids, l.PID())
		l.Release()
	}
	if pids[0] == configured.PID() {
		t.Error("the unconfigured lease got the configured process")
	}
	if pids[1] != pids[0] || pids[2] == pids[0] {
		t.Errorf("unconfigured processes %v with MaxUses 2: want the first two alike and the third new", pids)
	}
}

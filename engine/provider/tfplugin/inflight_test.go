package tfplugin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"
)

// TestCallDeadline: a call still running at its ctx's deadline returns the
// ctx's error, and the client keeps working.
func TestCallDeadline(t *testing.T) {
	tc := newThingCase(t, 6, target{region: "eu-west-1", dir: t.TempDir()})
	cfg := tc.config(map[string]cty.Value{"name": cty.StringVal("slow"), "sleep_ms": cty.NumberIntVal(60_000)})
	prior := cty.NullVal(tc.b.ImpliedType())
	p := tc.plan(t, prior, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := tc.c.ApplyResourceChange(ctx, ApplyRequest{TypeName: tc.typ, Prior: prior, Planned: p.Planned, Config: cfg})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("apply past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("apply returned %s after a 300ms deadline", d)
	}
	if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("fast")})); err != nil {
		t.Errorf("apply after a timed-out call: %v", err)
	}
}

// TestInFlightCallsFailOnCrash: a call in flight when another call crashes
// the process fails with ErrProviderExited too.
func TestInFlightCallsFailOnCrash(t *testing.T) {
	buf := newSyncBuffer()
	logger := zerolog.New(buf).Level(zerolog.DebugLevel)
	c := start(t, 6, func(o *Options) { o.Logger = &logger })
	tg := target{region: "eu-west-1", dir: t.TempDir()}
	if _, err := c.ConfigureProvider(testCtx(t), tg.value()); err != nil {
		t.Fatal(err)
	}
	s, _ := c.Schema(testCtx(t))
	tc := &thingCase{c: c, proto: 6, typ: "p6_thing", b: s.ResourceTypes["p6_thing"].Block, tg: tg}

	slow := tc.slowCreate(t, buf, 60_000)
	_, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("boom"), "crash": cty.True}))
	if !errors.Is(err, ErrProviderExited) {
		t.Errorf("crashing apply: %v, want ErrProviderExited", err)
	}
	select {
	case err := <-slow:
		if !errors.Is(err, ErrProviderExited) {
			t.Errorf("in-flight apply: %v, want ErrProviderExited", err)
		}
	case <-testCtx(t).Done():
		t.Fatal("the in-flight apply never returned")
	}
}

// TestPoolStopCalls: StopCalls sends StopProvider to a process with a call
// in flight, and the provider cancels that call although its own context
// never ends; the process stays and serves the next call.
func TestPoolStopCalls(t *testing.T) {
	p := newTestPool(t, PoolOptions{Clock: newFakeClock()})
	buf := newSyncBuffer()
	logger := zerolog.New(buf).Level(zerolog.DebugLevel)
	tg := target{region: "eu-west-1", dir: t.TempDir()}
	l, err := p.Acquire(testCtx(t), Options{Path: providers[6], Logger: &logger}, tg.value())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	s, _ := l.Schema(testCtx(t))
	tc := &thingCase{c: l, proto: 6, typ: "p6_thing", b: s.ResourceTypes["p6_thing"].Block, tg: tg}
	slow := tc.slowCreate(t, buf, 600_000)
	p.StopCalls(testCtx(t))
	select {
	case err := <-slow:
		if err == nil || !strings.Contains(err.Error(), "Cancelled") {
			t.Errorf("the call in flight after StopCalls: %v, want the provider's cancellation", err)
		}
	case <-testCtx(t).Done():
		t.Fatal("StopCalls did not stop the call in flight")
	}
	if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("after")})); err != nil {
		t.Errorf("a call after StopCalls: %v", err)
	}
}

// slowCreate starts the create of an object "slow" that sleeps ms in the
// provider, with a context that never ends, and returns once the provider
// said it sleeps (on its stderr, logged to buf); the apply's error comes
// on the channel.
func (tc *thingCase) slowCreate(t *testing.T, buf *syncBuffer, ms int64) <-chan error {
	t.Helper()
	cfg := tc.config(map[string]cty.Value{"name": cty.StringVal("slow"), "sleep_ms": cty.NumberIntVal(ms)})
	prior := cty.NullVal(tc.b.ImpliedType())
	plan := tc.plan(t, prior, cfg)
	slow := make(chan error, 1)
	go func() {
		_, err := tc.c.ApplyResourceChange(context.Background(), ApplyRequest{TypeName: tc.typ, Prior: prior, Planned: plan.Planned, Config: cfg})
		slow <- err
	}()
	if !buf.waitFor(testCtx(t), "sleeping slow") {
		t.Fatal("the slow apply never started")
	}
	return slow
}

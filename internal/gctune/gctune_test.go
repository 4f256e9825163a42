package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestPercent(t *testing.T) {
	p := Policy{Target: 200 << 20, Min: 50, Max: 300}
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 300},
		{10 << 20, 300},  // 1,900 % would do: the ceiling
		{50 << 20, 300},  // exactly 3× to reach the target
		{80 << 20, 150},  // 200/80 = 2.5×
		{100 << 20, 100}, // twice
		{150 << 20, 50},  // 33 %: the floor
		{400 << 20, 50},  // above the target: the floor, never back-to-back
	} {
		if got := p.Percent(tc.live); got != tc.want {
			t.Errorf("live %d MiB: GOGC %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// TestStartTunesAfterCollections: after a collection GOGC is the policy's
// for the live heap, and stop puts back what was set before.
func TestStartTunesAfterCollections(t *testing.T) {
	before := debug.SetGCPercent(77)
	defer debug.SetGCPercent(before)
	// A live heap of ~64 MiB against a target of 96 MiB: GOGC ~50.
	live := make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	stop := Start(Policy{Target: 96 << 20, Min: 10, Max: 400})
	if got := gogc(); got != 400 {
		t.Errorf("GOGC %d right after Start, want the ceiling 400", got)
	}
	// The finalizer runs on its own goroutine after a collection: collect
	// until it has (each round gives it a collection and a chance to run).
	for i := 0; i < 1000 && gogc() == 400; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if got := gogc(); got < 30 || got > 60 {
		t.Errorf("GOGC %d after collections with a live heap of ~64 MiB and a target of 96 MiB, want ~50", got)
	}
	runtime.KeepAlive(live)
	stop()
	if got := gogc(); got != 77 {
		t.Errorf("GOGC %d after stop, want 77 (as before Start)", got)
	}
}

// gogc is the current GOGC.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

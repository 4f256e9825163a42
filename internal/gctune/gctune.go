// Package gctune adjusts the garbage collector's GOGC after every
// collection from the heap that collection found live, so that a small
// heap is collected rarely and a large one is kept close to its live size.
//
// Go's GOGC is one ratio for every heap size: at 100 a heap may grow to
// twice its live size before the next collection. stackd's live heap is
// small for most fleets (tens of MB) and ~150 MB while it deploys 10,000
// instances; a fixed GOGC either collects a small heap needlessly often or
// lets a large one double. The tuner aims the heap's peak at Policy.Target
// (GOGC = Target/live − 1) within [Min, Max]: the floor keeps the
// collector from running back to back once the live heap passes Target
// (where a GOMEMLIMIT would), the ceiling bounds a nearly empty heap.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Policy is the tuner's aim and bounds.
type Policy struct {
	// Target is the heap size (bytes) the collections should keep the
	// peak heap near while the live heap is below it.
	Target uint64
	// Min and Max bound GOGC (percent).
	Min, Max int
}

// Percent is the GOGC the policy gives a live heap of live bytes.
func (p Policy) Percent(live uint64) int {
	if live == 0 {
		return p.Max
	}
	pct := int64(p.Target)*100/int64(live) - 100
	return int(max(int64(p.Min), min(int64(p.Max), pct)))
}

// Start sets GOGC to p.Max and tunes it after every collection until stop
// is called; stop leaves GOGC as it was at Start.
func Start(p Policy) (stop func()) {
	t := &tuner{p: p, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.prev = debug.SetGCPercent(p.Max)
	t.current = p.Max
	t.arm()
	return func() {
		if t.stopped.CompareAndSwap(false, true) {
			debug.SetGCPercent(t.prev)
		}
	}
}

type tuner struct {
	p       Policy
	prev    int
	current int
	sample  []metrics.Sample
	stopped atomic.Bool
}

// sentinel is garbage the moment it is made: its finalizer runs after the
// next collection. It holds a pointer so that it is not a tiny object
// (finalizers of tiny objects may never run).
type sentinel struct {
	t *tuner
	_ [8]byte
}

// arm sets a finalizer that tunes GOGC after the next collection and arms
// the next one. Finalizers run one at a time, on the finalizer goroutine,
// so t needs no lock.
func (t *tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.tune()
		s.t.arm()
	})
}

func (t *tuner) tune() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	if pct := t.p.Percent(t.sample[0].Value.Uint64()); pct != t.current {
		t.current = pct
		debug.SetGCPercent(pct)
	}
}

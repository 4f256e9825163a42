package testkit

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Clock is a fake clock (internal/clock.Clock). Manual, After fires when
// the test advances the clock past it. Auto, a goroutine of the clock
// moves it to the earliest waiter and fires what is due as soon as the
// waiters have had a moment to register, so health checks poll and pauses
// pass without any real waiting — and concurrent waiters share time as
// they would on a real clock (each After is measured from the same now,
// instead of every caller pushing the clock on by its own d).
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	auto    bool
	waiters []waiter
	afters  []time.Duration // every After, in order
	changed chan struct{}
	// advancing: the auto clock's goroutine runs.
	advancing bool
}

type waiter struct {
	at time.Time
	d  time.Duration
	ch chan time.Time
}

// NewClock returns a manual (auto false) or auto clock at 2025-01-01.
func NewClock(auto bool) *Clock {
	return &Clock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), auto: auto, changed: make(chan struct{}, 1)}
}

// advance is the auto clock's goroutine, running while anything waits: it
// lets concurrent waiters register (a real millisecond, so that the probes
// of one batch sleep in the same round), then moves the clock to the
// earliest of them.
func (c *Clock) advance() {
	for {
		time.Sleep(time.Millisecond)
		c.mu.Lock()
		if len(c.waiters) == 0 {
			c.advancing = false
			c.mu.Unlock()
			return
		}
		earliest := c.waiters[0].at
		for _, w := range c.waiters {
			if w.at.Before(earliest) {
				earliest = w.at
			}
		}
		d := earliest.Sub(c.now)
		c.mu.Unlock()
		c.Advance(d)
	}
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.afters = append(c.afters, d)
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), d: d, ch: ch})
	if c.auto && !c.advancing {
		c.advancing = true
		go c.advance()
	}
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return ch
}

// Advance moves the clock and fires what is due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waiters = slices.DeleteFunc(c.waiters, func(w waiter) bool {
		if w.at.After(c.now) {
			return false
		}
		w.ch <- c.now
		return true
	})
}

// WaitForWaiter waits (at most limit) until something waits for d on the
// clock.
func (c *Clock) WaitForWaiter(t testing.TB, d, limit time.Duration) {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		c.mu.Lock()
		ok := slices.ContainsFunc(c.waiters, func(w waiter) bool { return w.d == d })
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-timer.C:
			t.Fatalf("after %s nothing waits %s on the clock", limit, d)
		}
	}
}

// Afters counts the waits of d asked for so far.
func (c *Clock) Afters(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, a := range c.afters {
		if a == d {
			n++
		}
	}
	return n
}

// AllAfters are every wait asked for so far, in order.
func (c *Clock) AllAfters() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.afters)
}

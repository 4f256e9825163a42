package testkit

import (
	"testing"
	"time"
)

func TestManualClock(t *testing.T) {
	c := NewClock(false)
	ch := c.After(time.Minute)
	c.WaitForWaiter(t, time.Minute, time.Second)
	c.Advance(59 * time.Second)
	select {
	case <-ch:
		t.Fatal("fired a second early")
	default:
	}
	c.Advance(time.Second)
	<-ch
	if n := c.Afters(time.Minute); n != 1 {
		t.Errorf("Afters = %d, want 1", n)
	}
}

// Auto: concurrent waiters share time, as on a real clock.
func TestAutoClockSharesTime(t *testing.T) {
	c := NewClock(true)
	start := c.Now()
	a, b := c.After(time.Second), c.After(time.Second)
	<-a
	<-b
	if got := c.Now().Sub(start); got != time.Second {
		t.Errorf("two concurrent 1s waits moved the clock %s, want 1s", got)
	}
}

func TestCommitFiles(t *testing.T) {
	dir := t.TempDir()
	MustGit(t, dir, "init", "-q")
	rev := CommitFiles(t, dir, map[string]string{"a/b.txt": "x"}, "first")
	if got := MustGit(t, dir, "show", rev+":a/b.txt"); got != "x" {
		t.Errorf("committed %q, want x", got)
	}
}

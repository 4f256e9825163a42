package clock

import (
	"context"
	"time"
)

// Clock tells the time and waits.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock.
var Real Clock = real{}

type real struct{}

func (real) Now() time.Time                         { return time.Now() }
func (real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Sleep waits d on c, or until ctx ends (its error is returned).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-c.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// never is a clock whose waits never end.
type never struct{}

func (never) Now() time.Time                       { return time.Time{} }
func (never) After(time.Duration) <-chan time.Time { return nil }

// instant is a clock whose waits end at once.
type instant struct{}

func (instant) Now() time.Time { return time.Time{} }
func (instant) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), instant{}, time.Hour); err != nil {
		t.Errorf("Sleep on a clock that fires: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, never{}, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with a cancelled context: %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, never{}, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(0) with a cancelled context: %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), never{}, 0); err != nil {
		t.Errorf("Sleep(0): %v", err)
	}
}

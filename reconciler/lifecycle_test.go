package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Waiting for the pass lock ends with the caller's context, so an API
// call's deadline holds while another pass runs; a free lock is taken.
func TestPassLockHonoursTheContext(t *testing.T) {
	l := newPassLock()
	if err := l.lock(context.Background()); err != nil {
		t.Fatalf("a free lock: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := l.lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock held by another pass: %v, want context.DeadlineExceeded", err)
	}
	l.unlock()
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := l.lock(done); err != nil {
		t.Errorf("a free lock with an ended context: %v, want it taken (as sync.Mutex)", err)
	}
}

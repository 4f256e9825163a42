package reconciler

import "context"

// stopSignal says that the daemon is stopping: Run's context ended, so no
// new instance starts, waits end and the operations in flight resume on
// restart. The zero stopSignal never fires (Reconcile, one-shot applies).
type stopSignal struct {
	done <-chan struct{}
}

// Done is closed when the stop comes; nil (blocks forever) for the zero
// stopSignal.
func (s stopSignal) Done() <-chan struct{} { return s.done }

// Stopped reports whether the stop has come.
func (s stopSignal) Stopped() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// StopProviderCalls is the shutdown's stop of the provider calls in flight
// (Terraform's StopProvider, engine.StopProviderCalls), for when the grace
// period is over: from now on a call that fails was stopped by the daemon,
// so its instance is left to the resumed operation (interrupted), never
// recorded OPERATION_FAILED. It waits for the providers' answer or ctx.
func (r *Reconciler) StopProviderCalls(ctx context.Context) {
	r.callsStopped.Store(true)
	r.opts.Engine.StopProviderCalls(ctx)
}

// stopping reports whether an instance's provider or plan error comes from
// the daemon stopping it (its context ended, or StopProviderCalls), not
// from the instance: it is then interrupted, not failed.
func (r *Reconciler) stopping(ctx context.Context) bool {
	return ctx.Err() != nil || r.callsStopped.Load()
}

// passLock serializes the reconcile passes of the deploy branch; unlike a
// sync.Mutex, waiting for it ends with the caller's context, so that an
// API call's deadline holds while another pass runs.
type passLock chan struct{}

func newPassLock() passLock { return make(passLock, 1) }

// lock takes the lock, or returns ctx.Err() if ctx ends while it waits
// (a free lock is taken even when ctx has ended, as a sync.Mutex would).
func (l passLock) lock(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	default:
	}
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l passLock) unlock() { <-l }

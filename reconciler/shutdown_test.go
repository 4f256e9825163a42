package reconciler_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/gitsource"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// stoppable is a resource type whose calls, while held, block until the
// daemon stops the provider calls in flight (provider.CallStopper, as a
// Terraform provider's StopProvider) and then fail, as a stopped Terraform
// provider's calls do. It is its own plugin resolver (the engine asks the
// resolver to stop the calls). StopCalls returns only once the reconciler
// has logged the operation's end (finished or interrupted): whatever the
// reconciler makes of the failed call, it has made it while the calls'
// contexts are still alive.
type stoppable struct {
	hold    atomic.Bool
	entered chan struct{} // closed when a held call has entered
	stop    chan struct{} // closed by StopCalls
	ended   <-chan struct{}
	once    sync.Once
	stopped atomic.Int32
}

var (
	_ provider.Provider       = (*stoppable)(nil)
	_ provider.PluginResolver = (*stoppable)(nil)
	_ provider.CallStopper    = (*stoppable)(nil)
)

func (s *stoppable) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{"tag": {Type: cty.String, Required: true, Recreation: provider.Never}},
		Attributes: []string{"id"},
	}
}

func (s *stoppable) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	if s.hold.Load() {
		s.once.Do(func() { close(s.entered) })
		select {
		case <-s.stop:
			return provider.Result{}, errors.New("stoppable: the call was stopped (StopProvider)")
		case <-ctx.Done():
			return provider.Result{}, ctx.Err()
		}
	}
	id := req.Target.Region + "/" + req.Target.Account
	return provider.Result{PhysicalID: id, Attributes: map[string]cty.Value{"id": cty.StringVal(id)}}, nil
}

func (s *stoppable) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	return s.Create(ctx, req)
}

func (s *stoppable) Read(_ context.Context, req provider.Request) (provider.Result, error) {
	return provider.Result{PhysicalID: req.PhysicalID, Attributes: map[string]cty.Value{"id": cty.StringVal(req.PhysicalID)}}, nil
}

func (s *stoppable) Delete(context.Context, provider.Request) error { return nil }

func (s *stoppable) Resolve(context.Context, []provider.ProviderRequirement) (*provider.ResolvedProviders, error) {
	return nil, errors.New("stoppable resolves no provider")
}

func (s *stoppable) StopCalls(ctx context.Context) {
	s.stopped.Add(1)
	close(s.stop)
	select {
	case <-s.ended:
	case <-ctx.Done():
	}
}

// logWatch closes ended at the first log line that ends an operation.
type logWatch struct {
	mu    sync.Mutex
	once  sync.Once
	ended chan struct{}
}

func (w *logWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(`"message":"operation finished"`)) || bytes.Contains(p, []byte(`"message":"operation interrupted; it resumes on restart"`)) {
		w.once.Do(func() { close(w.ended) })
	}
	return len(p), nil
}

// A shutdown whose grace period is over stops the provider calls in flight
// before it cancels their contexts. A call that fails because it was
// stopped is the daemon's doing: the instance is left to the resumed
// operation (interrupted), never recorded OPERATION_FAILED, and the next
// start deploys it.
func TestShutdownStoppedCallIsInterruptedNotFailed(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	runGit(t, dir, "init", "-q", repo)
	rev := commitFiles(t, repo, map[string]string{
		"templates/ctl/main.hcl": ctlTemplate,
		"web.hcl":                stackSetHCL("web", "v1", []string{"eu"}, accountIDs(1), ""),
	}, "first")
	src, err := gitsource.Open(t.Context(), gitsource.Options{Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close state: %v", err)
		}
	})
	watch := &logWatch{ended: make(chan struct{})}
	p := &stoppable{entered: make(chan struct{}), stop: make(chan struct{}), ended: watch.ended}
	p.hold.Store(true)
	build := func(log zerolog.Logger) *reconciler.Reconciler {
		e := engine.New(provider.Registry{"ctl": p})
		e.SetPluginResolver(p)
		rec, err := reconciler.New(reconciler.Options{Source: src, Store: st, Engine: e, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}

	rec := build(zerolog.New(watch))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx, nil, 0) }()
	select {
	case <-p.entered:
	case <-time.After(waitLimit):
		cancel()
		t.Fatal("the create never started")
	}
	cancel() // SIGTERM, with no grace: the calls are stopped at once
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Run did not return after its context ended")
	}
	rec.Wait()
	if p.stopped.Load() != 1 {
		t.Errorf("the providers were asked to stop %d times, want once", p.stopped.Load())
	}
	op, err := operationAt(st, "web", rev)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != state.OperationRunning {
		t.Errorf("operation after the stop is %s (%s), want RUNNING (it resumes on restart)", op.Status, op.Reason)
	}
	for k, in := range instanceStatuses(t, st, "web") {
		if in.Status == state.InstanceOperationFailed {
			t.Errorf("instance %s recorded %s (%s) for a call the shutdown stopped", k, in.Status, in.StatusReason)
		}
	}

	// The next start repeats the interrupted create and succeeds.
	p.hold.Store(false)
	again := build(zerolog.Nop())
	res, err := again.Reconcile(context.Background())
	again.Wait()
	if err != nil {
		t.Fatalf("Reconcile after the restart: %v (%+v)", err, res)
	}
	if op, err = operationAt(st, "web", rev); err != nil || op.Status != state.OperationSucceeded {
		t.Errorf("operation after the restart: %s (%s), %v; want SUCCEEDED", op.Status, op.Reason, err)
	}
	for k, in := range instanceStatuses(t, st, "web") {
		if in.Status != state.InstanceOperationComplete {
			t.Errorf("instance %s after the restart is %s (%s), want %s", k, in.Status, in.StatusReason, state.InstanceOperationComplete)
		}
	}
}

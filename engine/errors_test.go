package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine/provider"
)

// quotaError is a provider's own error type, with a secret in its message.
type quotaError struct{ limit int }

func (e *quotaError) Error() string { return "quota exceeded; token hunter2 is out of calls" }

// failing is a provider whose Create fails with quotaError, or waits for
// the context and returns its error.
type failing struct {
	*recorder
	block bool
}

func (p failing) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	if p.block {
		<-ctx.Done()
		return provider.Result{}, ctx.Err()
	}
	return provider.Result{}, &quotaError{limit: 7}
}

// An error from Apply keeps its identity through the diagnostics it
// travelled as: errors.As finds a provider's own error type, errors.Is a
// cancelled context; its message stays the sanitised diagnostics.
func TestApplyErrorsKeepTheirIdentity(t *testing.T) {
	apply := func(p failing, ctx context.Context) error {
		t.Helper()
		reg := provider.Registry{"rec": p}
		e := New(reg)
		ss := mustLoad(t, map[string]string{"web.hcl": defsHCL, "tmpl/main.hcl": tmplHCL}, reg).StackSet("web")
		plan, diags := e.Plan(&Instance{StackSet: ss, StackSetID: "id", Target: ss.Targets()[0]}, nil)
		if diags.HasErrors() {
			t.Fatalf("plan: %s", diags.Error())
		}
		_, err := e.Apply(ctx, plan, newJournal(), nil)
		if err == nil {
			t.Fatal("Apply succeeded, want the provider's error")
		}
		return err
	}

	err := apply(failing{recorder: newRecorder()}, context.Background())
	var qe *quotaError
	if !errors.As(err, &qe) || qe.limit != 7 {
		t.Errorf("errors.As(%v, *quotaError) = false; the provider's error type is lost", err)
	}
	var de *DiagnosticsError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "Apply failed") {
		t.Errorf("error %q (%T), want a *DiagnosticsError saying Apply failed", err, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- apply(failing{recorder: newRecorder(), block: true}, ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(%v, context.Canceled) = false after a cancel", err)
	}
}

func TestDiagsErrorWithoutErrors(t *testing.T) {
	if err := DiagsError(nil); err != nil {
		t.Errorf("DiagsError(nil) = %v, want nil", err)
	}
}

package tfplugin

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/tfplugin/install"
)

// checkProviderFailure fails t unless err is the failure of a provider
// process that exited (with status, when not empty): an *ExitError, which
// no caller can take for problems found in a configuration (no
// provider.AttributeProblems) and which says so.
func checkProviderFailure(t *testing.T, what string, err error, status string) {
	t.Helper()
	var ee *ExitError
	switch {
	case err == nil:
		t.Errorf("%s: no error, want the provider's exit", what)
		return
	case !errors.Is(err, ErrProviderExited) || !errors.As(err, &ee):
		t.Errorf("%s: %v, want an *ExitError wrapping ErrProviderExited", what, err)
		return
	case status != "" && ee.Status != status:
		t.Errorf("%s: exit status %q, want %q", what, ee.Status, status)
	}
	var ap provider.AttributeProblems
	if errors.As(err, &ap) {
		t.Errorf("%s: %v is a provider.AttributeProblems, which the engine reports as problems of the configuration", what, err)
	}
	var pf interface{ ProviderFailure() bool }
	if !errors.As(err, &pf) || !pf.ProviderFailure() {
		t.Errorf("%s: %v does not say it is a failure of the provider (ProviderFailure)", what, err)
	}
	for _, want := range []string{"provider process exited", "crashed or was killed", "not a problem", "can be retried"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q does not say %q", what, err, want)
		}
	}
}

// TestCallsOfAKilledProviderFail: every call to a provider whose process
// was killed fails as a failure of the provider, never as a verdict on the
// configuration it was sent.
func TestCallsOfAKilledProviderFail(t *testing.T) {
	c := start(t, 6, nil)
	s, err := c.Schema(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited():
	case <-testCtx(t).Done():
		t.Fatal("the killed provider was never reaped")
	}
	thing := fill(s.ResourceTypes["p6_thing"].Block, map[string]cty.Value{"name": cty.StringVal("x")})
	for _, tc := range []struct {
		op   string
		call func(ctx context.Context) error
	}{
		{"ValidateProviderConfig", func(ctx context.Context) error {
			_, err := c.ValidateProviderConfig(ctx, fill(s.Provider.Block, map[string]cty.Value{"region": cty.StringVal("eu-west-1")}))
			return err
		}},
		{"ValidateResourceConfig", func(ctx context.Context) error {
			_, err := c.ValidateResourceConfig(ctx, "p6_thing", thing)
			return err
		}},
		{"ValidateDataResourceConfig", func(ctx context.Context) error {
			_, err := c.ValidateDataResourceConfig(ctx, "p6_object", fill(s.DataSources["p6_object"].Block, map[string]cty.Value{"id": cty.StringVal("x")}))
			return err
		}},
		{"PlanResourceChange", func(ctx context.Context) error {
			_, err := c.PlanResourceChange(ctx, PlanRequest{TypeName: "p6_thing", Prior: cty.NullVal(thing.Type()), Proposed: thing, Config: thing})
			return err
		}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			err := tc.call(testCtx(t))
			checkProviderFailure(t, tc.op, err, "signal: killed")
			if err != nil && !strings.Contains(err.Error(), tc.op) {
				t.Errorf("%q does not name the call, %s", err, tc.op)
			}
		})
	}
}

// TestBridgeValidationCrashIsAProviderFailure: a provider whose process
// crashes while it validates a resource, data or provider block does not
// reject the block: the engine gets a failure of the provider (no
// attribute problems), and the same validation, retried, runs on a new
// process.
func TestBridgeValidationCrashIsAProviderFailure(t *testing.T) {
	pool := newTestPool(t, PoolOptions{})
	r := &Resolver{
		Installer: &install.Installer{PluginDirs: []string{pluginDir(t, 6)}, CacheDir: t.TempDir(), DisableRegistry: true, Log: zerolog.Nop()},
		Pool:      pool, Log: zerolog.Nop(),
	}
	t.Cleanup(func() { _ = r.Close() })
	res, err := r.Resolve(testCtx(t), []provider.ProviderRequirement{{LocalName: "p6", Source: "registry.example.com/stackd/p6", Version: "~> 1.0"}})
	if err != nil {
		t.Fatal(err)
	}
	thing := res.Resources["p6_thing"]
	object := res.DataSources["p6_object"]
	for _, tc := range []struct {
		what     string
		good     string // a value the validator accepts
		validate func(ctx context.Context, value string) error
	}{
		{"resource block", "ok", func(ctx context.Context, v string) error {
			return thing.(provider.ConfigValidator).ValidateConfig(ctx, provider.Request{LogicalID: "p6_thing.a",
				Properties: cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(v)})})
		}},
		{"data block", "ok", func(ctx context.Context, v string) error {
			return object.(provider.ConfigValidator).ValidateConfig(ctx, provider.Request{LogicalID: "data.p6_object.x",
				Properties: cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal(v)})})
		}},
		{"provider block", "eu-west-1", func(ctx context.Context, v string) error {
			return thing.(provider.ProviderConfigValidator).ValidateProviderConfig(ctx,
				cty.ObjectVal(map[string]cty.Value{"region": cty.StringVal(v), "dir": cty.StringVal(t.TempDir())}))
		}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			checkProviderFailure(t, "a validator that crashes", tc.validate(testCtx(t), "crash-in-validation"), "exit status 2")
			if err := tc.validate(testCtx(t), tc.good); err != nil {
				t.Errorf("the validation after the crash: %v", err)
			}
		})
	}
}

// TestBridgePlanReportsAValidationCrash: the plan of an instance whose
// provider crashed validating a resource says the provider crashed and
// the plan can be retried, with no verdict on the resource's attributes;
// planned again, the block is validated by a new process.
func TestBridgePlanReportsAValidationCrash(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	plan := func(name string) hcl.Diagnostics {
		t.Helper()
		defs, diags := e.Load(oneTargetDefs("resource \"p6_thing\" \"a\" {\n  name = \""+name+"\"\n}\n"), ".")
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		_, diags = e.PlanContext(testCtx(t), &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss", Target: config.Target{Region: "eu-west-1", Account: "111"}}, nil)
		return diags
	}
	diags := plan("crash-in-validation")
	if !diags.HasErrors() {
		t.Fatal("a plan whose provider crashed validating: no error")
	}
	for _, want := range []string{"Provider failed", "p6_thing.a", "provider process exited", "crashed or was killed", "can be retried"} {
		if !strings.Contains(diags.Error(), want) {
			t.Errorf("a plan whose provider crashed validating: %v; want it to say %q", diags, want)
		}
	}
	if strings.Contains(diags.Error(), "p6_thing.a.name") {
		t.Errorf("a plan whose provider crashed validating: %v; want no problem of the attribute name", diags)
	}
	if diags := plan("ok"); diags.HasErrors() {
		t.Errorf("the plan after the crash: %v", diags)
	}
}

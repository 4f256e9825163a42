package tfplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/engine/provider"
	"github.com/zclconf/go-cty/cty"
)

// thingCase is a client configured for one target, with the p*_thing schema.
type thingCase struct {
	c     Client
	proto int
	typ   string
	b     *Block
	tg    target
}

func newThingCase(t *testing.T, proto int, tg target) *thingCase {
	t.Helper()
	c := configured(t, proto, tg)
	s, err := c.Schema(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	typ := prefixOf[proto] + "_thing"
	return &thingCase{c: c, proto: proto, typ: typ, b: s.ResourceTypes[typ].Block, tg: tg}
}

func (tc *thingCase) config(attrs map[string]cty.Value) cty.Value { return fill(tc.b, attrs) }

// plan plans config against prior (null for a create).
func (tc *thingCase) plan(t *testing.T, prior, config cty.Value) *PlanResponse {
	t.Helper()
	if prior == cty.NilVal {
		prior = cty.NullVal(tc.b.ImpliedType())
	}
	resp, err := tc.c.PlanResourceChange(testCtx(t), PlanRequest{
		TypeName: tc.typ, Prior: prior, Proposed: proposedNew(tc.b, prior, config), Config: config,
	})
	if err != nil {
		t.Fatalf("PlanResourceChange: %v", err)
	}
	return resp
}

// apply plans and applies config; it returns the new state.
func (tc *thingCase) apply(t *testing.T, prior, config cty.Value) (cty.Value, error) {
	t.Helper()
	if prior == cty.NilVal {
		prior = cty.NullVal(tc.b.ImpliedType())
	}
	p := tc.plan(t, prior, config)
	resp, err := tc.c.ApplyResourceChange(testCtx(t), ApplyRequest{
		TypeName: tc.typ, Prior: prior, Planned: p.Planned, Config: config, PlannedPrivate: p.PlannedPrivate,
	})
	if err != nil {
		return cty.NilVal, err
	}
	return resp.New, nil
}

func str(v cty.Value, name string) string {
	a := v.GetAttr(name)
	if a.IsNull() || !a.IsKnown() {
		return fmt.Sprintf("<%s>", map[bool]string{true: "null", false: "unknown"}[a.IsNull()])
	}
	return a.AsString()
}

func TestLifecycle(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			tg := target{region: "eu-west-1", prefix: "t1-", dir: t.TempDir()}
			tc := newThingCase(t, proto, tg)
			ctx := testCtx(t)
			cfg := tc.config(map[string]cty.Value{
				"name":    cty.StringVal("web"),
				"content": cty.StringVal("hello"),
				"secret":  cty.StringVal("hunter2").Mark("sensitive"),
				"tag": cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
					"key": cty.StringVal("env"), "value": cty.StringVal("prod"),
				})}),
			})

			// Create.
			p := tc.plan(t, cty.NilVal, cfg)
			if p.Planned.GetAttr("id").IsKnown() {
				t.Errorf("planned id = %#v, want unknown before create", p.Planned.GetAttr("id"))
			}
			if got := str(p.Planned, "region"); got != "eu-west-1" {
				t.Errorf("planned region = %s, want the target's eu-west-1", got)
			}
			if len(p.RequiresReplace) != 0 {
				t.Errorf("create plan RequiresReplace = %v, want none", p.RequiresReplace)
			}
			state, err := tc.apply(t, cty.NilVal, cfg)
			if err != nil {
				t.Fatalf("apply create: %v", err)
			}
			if got := str(state, "id"); got != "t1-web" {
				t.Errorf("id = %s, want t1-web (prefix from the provider configuration)", got)
			}
			if got := str(state, "mode"); got != "0644" {
				t.Errorf("mode = %s, want the computed default 0644", got)
			}
			obj := readObject(t, tg.dir, "t1-web")
			if obj["region"] != "eu-west-1" || obj["content"] != "hello" || obj["secret"] != "hunter2" {
				t.Errorf("object written = %v", obj)
			}

			// Update in place.
			cfg2 := tc.config(map[string]cty.Value{
				"name": cty.StringVal("web"), "content": cty.StringVal("bye"),
				"secret": cty.StringVal("hunter2"), "tag": cfg.GetAttr("tag"),
			})
			p = tc.plan(t, state, cfg2)
			if len(p.RequiresReplace) != 0 {
				t.Errorf("update plan RequiresReplace = %v, want none", p.RequiresReplace)
			}
			if got := str(p.Planned, "id"); got != "t1-web" {
				t.Errorf("planned id on update = %s, want t1-web", got)
			}
			if state, err = tc.apply(t, state, cfg2); err != nil {
				t.Fatalf("apply update: %v", err)
			}
			if got := readObject(t, tg.dir, "t1-web")["content"]; got != "bye" {
				t.Errorf("content after update = %v, want bye", got)
			}

			// Replace: name has RequiresReplace.
			cfg3 := tc.config(map[string]cty.Value{"name": cty.StringVal("web2"), "content": cty.StringVal("bye")})
			p = tc.plan(t, state, cfg3)
			var rr []string
			for _, path := range p.RequiresReplace {
				rr = append(rr, provider.FormatPath(path))
			}
			if !contains(rr, "name") {
				t.Errorf("replace plan RequiresReplace = %v, want it to name name", rr)
			}

			// Read: unchanged, changed out of band, deleted out of band.
			read := func() cty.Value {
				t.Helper()
				// As Terraform does, the recorded identity goes with the
				// state (p6's things have one: their id).
				ident := cty.NilVal
				if s, _ := tc.c.Schema(ctx); s != nil && s.Identities[tc.typ] != nil {
					ident = cty.ObjectVal(map[string]cty.Value{"id": state.GetAttr("id")})
				}
				r, err := tc.c.ReadResource(ctx, ReadRequest{TypeName: tc.typ, Current: state, CurrentIdentity: ident})
				if err != nil {
					t.Fatalf("ReadResource: %v", err)
				}
				return r.New
			}
			if got := read(); str(got, "content") != "bye" {
				t.Errorf("read content = %s, want bye", str(got, "content"))
			}
			file := filepath.Join(tg.dir, "t1-web.json")
			b, _ := os.ReadFile(file)
			if err := os.WriteFile(file, []byte(strings.Replace(string(b), `"bye"`, `"drifted"`, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := read(); str(got, "content") != "drifted" {
				t.Errorf("read after an out-of-band change: content = %s, want drifted", str(got, "content"))
			}
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			if got := read(); !got.IsNull() {
				t.Errorf("read after an out-of-band delete = %#v, want null", got)
			}

			// Delete: apply a null plan.
			if state, err = tc.apply(t, cty.NilVal, cfg); err != nil {
				t.Fatal(err)
			}
			resp, err := tc.c.ApplyResourceChange(ctx, ApplyRequest{TypeName: tc.typ, Prior: state,
				Planned: cty.NullVal(tc.b.ImpliedType()), Config: cty.NullVal(tc.b.ImpliedType())})
			if err != nil {
				t.Fatalf("apply delete: %v", err)
			}
			if !resp.New.IsNull() {
				t.Errorf("state after delete = %#v, want null", resp.New)
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("object file after delete: %v, want it gone", err)
			}
		})
	}
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

// TestConfigurePerTarget configures two processes of one provider for two
// targets: each writes with its own region, prefix and directory.
func TestConfigurePerTarget(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			targets := []target{
				{region: "eu-west-1", prefix: "a-", dir: t.TempDir()},
				{region: "us-east-2", prefix: "b-", dir: t.TempDir()},
			}
			for _, tg := range targets {
				tc := newThingCase(t, proto, tg)
				if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("x")})); err != nil {
					t.Fatal(err)
				}
			}
			for _, tg := range targets {
				if got := readObject(t, tg.dir, tg.prefix+"x")["region"]; got != tg.region {
					t.Errorf("object of %s has region %v", tg.region, got)
				}
			}
		})
	}
}

func TestDataSource(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			tc := newThingCase(t, proto, target{region: "eu-west-1", dir: t.TempDir()})
			if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{
				"name": cty.StringVal("db"), "content": cty.StringVal("rows"),
			})); err != nil {
				t.Fatal(err)
			}
			s, _ := tc.c.Schema(testCtx(t))
			dtyp := prefixOf[proto] + "_object"
			db := s.DataSources[dtyp].Block
			resp, err := tc.c.ReadDataSource(testCtx(t), dtyp, fill(db, map[string]cty.Value{"id": cty.StringVal("db")}))
			if err != nil {
				t.Fatalf("ReadDataSource: %v", err)
			}
			if str(resp.State, "content") != "rows" || str(resp.State, "region") != "eu-west-1" {
				t.Errorf("data source state = %#v", resp.State)
			}
			_, err = tc.c.ReadDataSource(testCtx(t), dtyp, fill(db, map[string]cty.Value{"id": cty.StringVal("missing")}))
			var de *DiagnosticsError
			if !errors.As(err, &de) || provider.FormatPath(de.Diagnostics[0].Attribute) != "id" {
				t.Errorf("ReadDataSource(missing) = %v, want a diagnostic on id", err)
			}
		})
	}
}

func TestUpgradeResourceState(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			tc := newThingCase(t, proto, target{region: "eu-west-1", dir: t.TempDir()})
			v0 := `{"id":"old","name":"old","text":"from v0","mode":"0600","region":"eu-west-1","tag":[]}`
			resp, err := tc.c.UpgradeResourceState(testCtx(t), tc.typ, 0, []byte(v0))
			if err != nil {
				t.Fatalf("UpgradeResourceState: %v", err)
			}
			if got := str(resp.Upgraded, "content"); got != "from v0" {
				t.Errorf("upgraded content = %s, want the v0 text", got)
			}
			if got := str(resp.Upgraded, "mode"); got != "0600" {
				t.Errorf("upgraded mode = %s, want 0600", got)
			}
			// A state of the current version goes through unchanged.
			v1 := `{"id":"new","name":"new","content":"v1","mode":"0600","region":"eu-west-1","tag":[]}`
			resp, err = tc.c.UpgradeResourceState(testCtx(t), tc.typ, 1, []byte(v1))
			if err != nil || str(resp.Upgraded, "content") != "v1" {
				t.Errorf("UpgradeResourceState(v1) = %v, %v", resp, err)
			}
		})
	}
}

func TestImportResourceState(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			tg := target{region: "eu-west-1", dir: t.TempDir()}
			tc := newThingCase(t, proto, tg)
			if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{
				"name": cty.StringVal("adopted"), "content": cty.StringVal("made elsewhere"),
			})); err != nil {
				t.Fatal(err)
			}
			resp, err := tc.c.ImportResourceState(testCtx(t), tc.typ, "adopted")
			if err != nil {
				t.Fatalf("ImportResourceState: %v", err)
			}
			if len(resp.Imported) != 1 || resp.Imported[0].TypeName != tc.typ {
				t.Fatalf("imported = %+v, want one %s", resp.Imported, tc.typ)
			}
			imp := resp.Imported[0]
			if got := str(imp.State, "id"); got != "adopted" {
				t.Errorf("imported id = %s", got)
			}
			r, err := tc.c.ReadResource(testCtx(t), ReadRequest{TypeName: tc.typ, Current: imp.State, Private: imp.Private})
			if err != nil {
				t.Fatal(err)
			}
			if str(r.New, "content") != "made elsewhere" || str(r.New, "name") != "adopted" {
				t.Errorf("read after import = %#v", r.New)
			}
		})
	}
}

func TestApplyFailDiagnostic(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			tg := target{region: "eu-west-1", dir: t.TempDir()}
			tc := newThingCase(t, proto, tg)
			_, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{
				"name": cty.StringVal("bad"), "fail": cty.True, "secret": cty.StringVal("hunter2"),
			}))
			var de *DiagnosticsError
			if !errors.As(err, &de) {
				t.Fatalf("apply with fail = true: %v, want a *DiagnosticsError", err)
			}
			d := de.Diagnostics[0]
			if d.Severity != SeverityError || d.Summary != "Failure requested" || provider.FormatPath(d.Attribute) != "fail" {
				t.Errorf("diagnostic = %+v", d)
			}
			if errors.Is(err, ErrProviderExited) {
				t.Errorf("a failed apply is not an exited provider: %v", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q leaks the sensitive value", err)
			}
			// The provider keeps working.
			if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("good")})); err != nil {
				t.Errorf("apply after a failure: %v", err)
			}
		})
	}
}

func TestProviderCrash(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			tc := newThingCase(t, proto, target{region: "eu-west-1", dir: t.TempDir()})
			pid := tc.c.PID()
			_, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("boom"), "crash": cty.True}))
			if !errors.Is(err, ErrProviderExited) {
				t.Fatalf("apply with crash = true: %v, want ErrProviderExited", err)
			}
			if !strings.Contains(err.Error(), "exit status 2") {
				t.Errorf("error %q should give the exit status", err)
			}
			select {
			case <-tc.c.Exited():
			default:
				t.Error("Exited() not closed after the crash")
			}
			if _, err := tc.c.Schema(testCtx(t)); err != nil {
				t.Errorf("cached schema after a crash: %v", err)
			}
			_, err = tc.c.ReadResource(testCtx(t), ReadRequest{TypeName: tc.typ, Current: cty.NullVal(tc.b.ImpliedType())})
			if !errors.Is(err, ErrProviderExited) {
				t.Errorf("call after the crash: %v, want ErrProviderExited", err)
			}
			if err := tc.c.Close(); err != nil {
				t.Errorf("Close after a crash: %v", err)
			}
			if processAlive(pid) {
				t.Errorf("process %d still alive", pid)
			}
		})
	}
}

func TestCloseEndsProcess(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			tc := newThingCase(t, proto, target{region: "eu-west-1", dir: t.TempDir()})
			pid := tc.c.PID()
			if !processAlive(pid) {
				t.Fatalf("process %d not running", pid)
			}
			if err := tc.c.Close(); err != nil {
				t.Fatal(err)
			}
			if processAlive(pid) {
				t.Errorf("process %d still alive after Close", pid)
			}
			if err := tc.c.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := tc.c.ConfigureProvider(testCtx(t), tc.tg.value()); !errors.Is(err, ErrClosed) {
				t.Errorf("call after Close: %v, want ErrClosed", err)
			}
		})
	}
}

func TestContextCancelled(t *testing.T) {
	tc := newThingCase(t, 6, target{region: "eu-west-1", dir: t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tc.c.PlanResourceChange(ctx, PlanRequest{TypeName: tc.typ, Prior: cty.NullVal(tc.b.ImpliedType()),
		Proposed: tc.config(map[string]cty.Value{"name": cty.StringVal("x")}),
		Config:   tc.config(map[string]cty.Value{"name": cty.StringVal("x")})})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("plan with a cancelled context: %v, want context.Canceled", err)
	}
	if errors.Is(err, ErrProviderExited) {
		t.Errorf("a cancelled call is not an exited provider: %v", err)
	}
	if _, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{"name": cty.StringVal("after")})); err != nil {
		t.Errorf("apply after a cancelled call: %v", err)
	}
}

// TestConcurrentCalls runs plans, applies and reads of many objects on
// one client at once (run with -race).
func TestConcurrentCalls(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(prefixOf[proto], func(t *testing.T) {
			tg := target{region: "eu-west-1", dir: t.TempDir()}
			tc := newThingCase(t, proto, tg)
			const n = 16
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name := fmt.Sprintf("obj-%d", i)
					state, err := tc.apply(t, cty.NilVal, tc.config(map[string]cty.Value{
						"name": cty.StringVal(name), "content": cty.StringVal(name),
					}))
					if err != nil {
						errs <- err
						return
					}
					r, err := tc.c.ReadResource(testCtx(t), ReadRequest{TypeName: tc.typ, Current: state})
					if err != nil {
						errs <- err
						return
					}
					if got := str(r.New, "content"); got != name {
						errs <- fmt.Errorf("%s: read content %s", name, got)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			entries, _ := os.ReadDir(tg.dir)
			if len(entries) != n {
				t.Errorf("%d objects written, want %d", len(entries), n)
			}
		})
	}
}

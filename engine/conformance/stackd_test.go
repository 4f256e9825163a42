package conformance

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/engine/provider/tfplugin/install"
)

// stackd's side: each case is the template of a stack set named "default"
// (so terraform.workspace means the same in both) deployed to one target,
// planned and applied through the engine as the reconciler does it.

// The target every case is deployed to.
var target = config.Target{Region: "eu-west-1", Account: "111111111111"}

const stackSetName = "default"

// stackSetHCL is the definitions file naming the template; world, when
// not empty, is given as variable "world".
func stackSetHCL(world string) string {
	vars := ""
	if world != "" {
		vars = fmt.Sprintf("  vars = { world = %q }\n", world)
	}
	return fmt.Sprintf(`stack_set %q {
  template = "./template"
%s  deployment_targets {
    regions  = [%q]
    accounts = [%q]
  }
}
`, stackSetName, vars, target.Region, target.Account)
}

// definitions is the definitions repository's tree for a step.
func definitions(files map[string][]byte, world string) fstest.MapFS {
	fsys := fstest.MapFS{"stacksets.hcl": &fstest.MapFile{Data: []byte(stackSetHCL(world))}}
	for name, b := range files {
		fsys[path.Join("template", name)] = &fstest.MapFile{Data: b}
	}
	return fsys
}

// journal is the engine's view of recorded state, kept in memory: the
// suite is about the language, not the state store.
type journal struct {
	mu   sync.Mutex
	recs map[string]engine.ResourceState
}

func (j *journal) Save(_ context.Context, r engine.ResourceState) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recs[r.Address] = r
	return nil
}

func (j *journal) Remove(_ context.Context, addr string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.recs, addr)
	return nil
}

func (j *journal) list() []engine.ResourceState {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]engine.ResourceState, 0, len(j.recs))
	for _, r := range j.recs {
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Address < out[b].Address })
	return out
}

// newEngine is an engine as the daemon wires it for these cases: the
// built-in providers and the Terraform providers of pluginDir (no
// registry). The returned func ends the provider processes.
func newEngine(t *testing.T) (*engine.Engine, func()) {
	t.Helper()
	e := engine.New(builtins())
	e.SetLogger(zerolog.Nop())
	pool, err := tfplugin.NewPool(tfplugin.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &tfplugin.Resolver{
		Installer: &install.Installer{PluginDirs: []string{pluginDir}, CacheDir: dir + "/cache", DisableRegistry: true},
		LockFile:  dir + "/.terraform.lock.hcl",
		Pool:      pool,
		Log:       zerolog.Nop(),
	}
	e.SetPluginResolver(r)
	return e, func() {
		r.Close()
		pool.Close()
	}
}

// builtins are the daemon's built-in providers the cases may use.
func builtins() provider.Registry { return provider.Registry{} }

// failure is stackd refusing a case: where, and the diagnostics.
type failure struct {
	stage string
	msg   string
	// first is the summary of the first error: what the manifest lists
	// by default.
	first string
	// unclear lists error diagnostics without a source range: a refusal
	// must say where.
	unclear []string
}

func (f *failure) Error() string { return f.stage + ": " + f.msg }

// diagFailure is the failure of diags at stage, nil without errors.
func diagFailure(stage string, diags hcl.Diagnostics) *failure {
	if !diags.HasErrors() {
		return nil
	}
	f := &failure{stage: stage}
	var parts []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		if f.first == "" {
			f.first = d.Summary
		}
		where := "(no source range)"
		if d.Subject != nil {
			where = fmt.Sprintf("%s:%d", d.Subject.Filename, d.Subject.Start.Line)
		} else {
			f.unclear = append(f.unclear, d.Summary)
		}
		parts = append(parts, fmt.Sprintf("%s: %s; %s", where, d.Summary, d.Detail))
	}
	f.msg = strings.Join(parts, " | ")
	return f
}

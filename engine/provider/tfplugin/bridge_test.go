package tfplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
	"github.com/stackd/stackd/engine/provider/tfplugin/install"
)

// pluginDir lays the test provider of proto out in a plugin directory as
// `terraform providers mirror` writes it, at version 1.0.0.
func pluginDir(t *testing.T, proto int) string {
	t.Helper()
	if buildSkip != "" {
		t.Skip(buildSkip)
	}
	dir := t.TempDir()
	typ := prefixOf[proto]
	pkg := filepath.Join(dir, "registry.example.com", "stackd", typ, "1.0.0", runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(providers[proto])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "terraform-provider-"+typ+"_v1.0.0"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// memJournal records what an apply journals.
type memJournal struct {
	mu   sync.Mutex
	recs map[string]engine.ResourceState
}

func (j *memJournal) Save(_ context.Context, r engine.ResourceState) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recs[r.Address] = r
	return nil
}

func (j *memJournal) Remove(_ context.Context, addr string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.recs, addr)
	return nil
}

func (j *memJournal) list() []engine.ResourceState {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []engine.ResourceState
	for _, r := range j.recs {
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Address < out[b].Address })
	return out
}

const bridgeTemplate = `
terraform {
  required_providers {
    p6 = { source = "registry.example.com/stackd/p6", version = "~> 1.0" }
  }
}
variable "dir" { type = string }
variable "name" { type = string }
variable "content" { type = string }

provider "p6" {
  region = target.region
  dir    = "${var.dir}/${target.account}"
  prefix = "pre"
  token  = "provider-token-secret"
}

resource "p6_thing" "a" {
  name    = "${var.name}-${target.region}"
  content = var.content
  secret  = "resource-secret"
  tag {
    key   = "env"
    value = "${var.content}-tag"
  }
  tag {
    key = "team"
  }
}

output "id" { value = p6_thing.a.id }
output "region" { value = p6_thing.a.region }

data "p6_object" "seen" {
  id = p6_thing.a.id
}
output "seen_content" { value = data.p6_object.seen.content }
`

func bridgeDefs(dir, name, content string) fstest.MapFS { return bridgeDefsFor(6, dir, name, content) }

// bridgeDefsFor is bridgeDefs for the test provider of protocol proto.
func bridgeDefsFor(proto int, dir, name, content string) fstest.MapFS {
	return fstest.MapFS{
		"d.hcl": {Data: []byte(`stack_set "s" {
  template = "./t"
  vars = {
    dir     = "` + dir + `"
    name    = "` + name + `"
    content = "` + content + `"
  }
  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = ["111", "222"]
  }
}`)},
		"t/main.hcl": {Data: []byte(strings.ReplaceAll(bridgeTemplate, "p6", prefixOf[proto]))},
	}
}

func newBridgeEngine(t *testing.T, proto int) (*engine.Engine, *Pool, string) {
	t.Helper()
	return newBridgeEngineWith(t, proto, PoolOptions{})
}

// newBridgeEngineWith is newBridgeEngine with a Pool of opts.
func newBridgeEngineWith(t *testing.T, proto int, opts PoolOptions) (*engine.Engine, *Pool, string) {
	t.Helper()
	pool, err := NewPool(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	lock := filepath.Join(t.TempDir(), ".terraform.lock.hcl")
	e := engine.New(provider.Registry{"file": file.New(file.Options{Root: t.TempDir()})})
	r := &Resolver{
		Installer: &install.Installer{PluginDirs: []string{pluginDir(t, proto)}, CacheDir: t.TempDir(), DisableRegistry: true, Log: zerolog.Nop()},
		LockFile:  lock, Pool: pool, Log: zerolog.Nop(),
	}
	t.Cleanup(func() { r.Close() })
	e.SetPluginResolver(r)
	return e, pool, lock
}

// TestBridgeLifecycle drives the protocol 6 test provider through the
// engine for one target: create with nested blocks and per-target
// provider configuration, an in-place update, a replacement the provider
// asks for, drift, and a delete after the template is gone.
func TestBridgeLifecycle(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(fmt.Sprintf("protocol %d", proto), func(t *testing.T) { testBridgeLifecycle(t, proto) })
	}
}

func testBridgeLifecycle(t *testing.T, proto int) {
	pfx := prefixOf[proto]
	e, pool, lock := newBridgeEngine(t, proto)
	world := t.TempDir()
	for _, acct := range []string{"111", "222"} {
		if err := os.MkdirAll(filepath.Join(world, acct), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	load := func(name, content string) *engine.Instance {
		t.Helper()
		defs, diags := e.Load(bridgeDefsFor(proto, world, name, content), ".")
		if diags.HasErrors() {
			t.Fatalf("load: %s", diags.Error())
		}
		return &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	}
	ctx := testCtx(t)
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	apply := func(inst *engine.Instance) (*engine.InstancePlan, *engine.ApplyResult) {
		t.Helper()
		p, diags := e.PlanContext(ctx, inst, j.list())
		if diags.HasErrors() {
			t.Fatalf("plan: %s", diags.Error())
		}
		res, err := e.Apply(ctx, p, j, nil)
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		return p, res
	}
	object := func(id string) map[string]any {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(world, "111", id+".json"))
		if err != nil {
			t.Fatalf("object %s: %v", id, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	p, res := apply(load("a", "one"))
	if res.Created != 1 {
		t.Fatalf("create: %+v", res)
	}
	recs := j.list()
	if len(recs) != 1 || recs[0].Provider != pfx+"|registry.example.com/stackd/"+pfx+"|1.0.0" || len(recs[0].ProviderConfig) == 0 {
		t.Fatalf("recorded: %+v", recs)
	}
	id := res.Outputs["id"].AsString()
	obj := object(id)
	if obj["region"] != "eu-west-1" || obj["content"] != "one" || obj["name"] != "a-eu-west-1" {
		t.Errorf("the object written: %v", obj)
	}
	if res.Outputs["region"].AsString() != "eu-west-1" {
		t.Errorf("computed attribute region = %v", res.Outputs["region"])
	}
	// The data source read what the resource wrote, once it existed.
	if v := res.Outputs["seen_content"]; !v.IsKnown() || v.AsString() != "one" {
		t.Errorf("data source output = %#v, want \"one\"", v)
	}
	// A create is planned by the provider, as Terraform plans it: what
	// it fills in (region) is known at plan.
	if v := p.Outputs["region"]; !v.IsKnown() || v.IsNull() || v.AsString() != "eu-west-1" {
		t.Errorf("at plan time the provider plans region; output = %#v", v)
	}
	if v := p.Outputs["seen_content"]; v.IsKnown() {
		t.Errorf("at plan time the data source's id is unknown, so must be its content: %#v", v)
	}
	// The change set never shows a sensitive value.
	text, _ := json.Marshal(p.Changes())
	if strings.Contains(string(text), "resource-secret") || strings.Contains(string(text), "provider-token-secret") {
		t.Errorf("a secret is in the change set: %s", text)
	}
	if b, err := os.ReadFile(lock); err != nil || !strings.Contains(string(b), `provider "registry.example.com/stackd/`+pfx+`"`) || !strings.Contains(string(b), `version     = "1.0.0"`) {
		t.Errorf("lock file: %v\n%s", err, b)
	}

	// No change: nothing to do, and no provider call needed.
	p, _ = apply(load("a", "one"))
	for _, rp := range p.Resources {
		if rp.Action != engine.NoOp {
			t.Errorf("unchanged: %s %s", rp.Address, rp.Action)
		}
	}

	// content changes in place.
	p, res = apply(load("a", "two"))
	if res.Updated != 1 || p.Resources[0].Replacement != "False" {
		t.Errorf("in-place update: %+v, replacement %s", res, p.Resources[0].Replacement)
	}
	if obj := object(id); obj["content"] != "two" {
		t.Errorf("after the update: %v", obj)
	}
	// A nested block's change is named by its path.
	var names []string
	for _, c := range p.Changes() {
		for _, pc := range c.ResourceChange.PropertyChanges {
			names = append(names, pc.Name)
			if pc.Name == "tag.0.value" && (pc.BeforeValue != "one-tag" || pc.AfterValue != "two-tag") {
				t.Errorf("tag.0.value: %v -> %v", pc.BeforeValue, pc.AfterValue)
			}
		}
	}
	if strings.Join(names, ",") != "content,tag.0.value" {
		t.Errorf("property changes %v, want content and tag.0.value", names)
	}

	// name requires replacement (the provider says so).
	p, res = apply(load("b", "two"))
	if res.Replaced != 1 || p.Resources[0].Replacement != "True" {
		t.Errorf("replacement: %+v, replacement %s", res, p.Resources[0].Replacement)
	}
	newID := res.Outputs["id"].AsString()
	if _, err := os.Stat(filepath.Join(world, "111", id+".json")); !os.IsNotExist(err) {
		t.Errorf("the replaced object is still there (%v)", err)
	}

	// Drift: the object changed out of band.
	obj = object(newID)
	obj["content"] = "edited"
	b, _ := json.Marshal(obj)
	if err := os.WriteFile(filepath.Join(world, "111", newID+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := e.CheckDrift(ctx, load("b", "two"), j.list(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != engine.DriftDrifted {
		t.Errorf("drift after an edit: %+v", d)
	}

	// Deleted with the template gone: what the resource recorded is enough.
	e2, _, _ := newBridgeEngine(t, proto)
	dp := engine.PlanDestroy(&engine.Instance{Name: "s", StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}, j.list())
	if _, err := e2.Apply(ctx, dp, j, nil); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(world, "111", newID+".json")); !os.IsNotExist(err) {
		t.Errorf("the object outlived its destroy (%v)", err)
	}
	// One configured process, and the unconfigured one that validates.
	if pool.Len() != 2 {
		t.Errorf("%d provider processes for one configuration, want 2 (one validates)", pool.Len())
	}
}

// oneTargetHead requires p6 and configures it for the target.
const oneTargetHead = `terraform {
  required_providers {
    p6 = { source = "registry.example.com/stackd/p6" }
  }
}
provider "p6" {
  region = target.region
  dir    = "/nonexistent"
}
`

// oneTargetStackSet is a stack set "s" of one target (eu-west-1, 111)
// whose template is ./t.
const oneTargetStackSet = `stack_set "s" {
  template = "./t"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111"]
  }
}`

// oneTargetDefs is oneTargetStackSet with a template of oneTargetHead and
// body.
func oneTargetDefs(body string) fstest.MapFS {
	return fstest.MapFS{
		"d.hcl":      {Data: []byte(oneTargetStackSet)},
		"t/main.hcl": {Data: []byte(oneTargetHead + body)},
	}
}

// TestBridgeDiagnostics: resources, nested blocks, data sources and
// provider blocks are validated against the provider's schema when the
// definitions load, with file:line diagnostics; a provider alias without
// its block when the instance plans.
func TestBridgeDiagnostics(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	defs := oneTargetDefs
	for _, tc := range []struct {
		body, at, want string
	}{
		{"resource \"p6_thing\" \"a\" {\n  name  = \"x\"\n  color = \"red\"\n}", "t/main.hcl:12,", `An argument named "color" is not expected here`},
		{"resource \"p6_thing\" \"a\" {\n  content = \"x\"\n}", "t/main.hcl:10,", `The argument "name" is required`},
		{"resource \"p6_thing\" \"a\" {\n  name = \"x\"\n  tag {\n    value = \"v\"\n  }\n}", "t/main.hcl:12,", `The argument "key" is required`},
		{"data \"p6_nope\" \"x\" {}", "t/main.hcl:10,", "Unknown data source"},
		{"provider \"p7\" {}", "t/main.hcl:10,", "Provider not required"},
		{"provider \"p6\" {\n  alias = \"west\"\n  region = 3\n  bogus = 1\n}", "t/main.hcl:13,", `An argument named "bogus" is not expected here`},
	} {
		_, diags := e.Load(defs(tc.body), ".")
		if !diags.HasErrors() {
			t.Errorf("%s: no error", tc.body)
			continue
		}
		found := false
		for _, d := range diags {
			if d.Subject != nil && strings.HasPrefix(d.Subject.String(), tc.at) && strings.Contains(d.Summary+" "+d.Detail, tc.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s:\n got %s\nwant %s %s", tc.body, diags.Error(), tc.at, tc.want)
		}
	}
	// The provider's own validators run when the instance plans. Each
	// diagnostic is at what it is about (the provider's attribute path),
	// and a validator that quotes the value it refuses does not show one
	// the provider's schema calls sensitive.
	for _, tc := range []struct {
		name, body string
		at         string // the diagnostic's start
		want       []string
	}{
		// A tag key must match ^[a-z]+$: at the key of the block named.
		{"tag key", "resource \"p6_thing\" \"a\" {\n  name = \"x\"\n  tag {\n    key = \"ok\"\n  }\n  tag {\n    key = \"Not-Lower\"\n  }\n}",
			"t/main.hcl:16,11", []string{"p6_thing.a.tag[1].key", "does not match"}},
		{"sensitive value", "resource \"p6_thing\" \"a\" {\n  name   = \"x\"\n  secret = \"hunter2 with spaces\"\n}",
			"t/main.hcl:12,", []string{"p6_thing.a.secret", "does not match"}},
		// A data block's object id is lower case.
		{"data block", "data \"p6_object\" \"x\" {\n  id = \"Not Lower\"\n}",
			"t/main.hcl:11,8", []string{"data.p6_object.x.id", "does not match"}},
	} {
		bad, diags := e.Load(defs(tc.body), ".")
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		_, diags = e.PlanContext(testCtx(t), &engine.Instance{StackSet: bad.StackSet("s"), StackSetID: "ss", Target: config.Target{Region: "eu-west-1", Account: "111"}}, nil)
		ok := diags.HasErrors() && diags[0].Subject != nil && strings.HasPrefix(diags[0].Subject.String(), tc.at) && !strings.Contains(diags.Error(), "hunter2")
		for _, w := range tc.want {
			ok = ok && strings.Contains(diags.Error(), w)
		}
		if !ok {
			t.Errorf("%s the provider's validator refuses: %v; want it at %s, saying %q, without a sensitive value", tc.name, diags, tc.at, tc.want)
		}
	}
	// And its validators of the provider block: region must look like
	// eu-west-1, and target "moon" does not.
	moon := defs("resource \"p6_thing\" \"a\" {\n  name = \"x\"\n}")
	moon["d.hcl"] = &fstest.MapFile{Data: []byte(strings.Replace(string(moon["d.hcl"].Data), `["eu-west-1"]`, `["moon"]`, 1))}
	md, diags := e.Load(moon, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = e.PlanContext(testCtx(t), &engine.Instance{StackSet: md.StackSet("s"), StackSetID: "ss", Target: config.Target{Region: "moon", Account: "111"}}, nil)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "provider p6.region") || !strings.Contains(diags.Error(), `"moon" does not match`) ||
		diags[0].Subject == nil || !strings.HasPrefix(diags[0].Subject.String(), "t/main.hcl:7,") {
		t.Errorf("a provider block the provider's validators refuse: %v, want it at its region, t/main.hcl:7", diags)
	}
	defsOK, diags := e.Load(defs("resource \"p6_thing\" \"a\" {\n  name     = \"x\"\n  provider = p6.west\n}"), ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = e.PlanContext(testCtx(t), &engine.Instance{StackSet: defsOK.StackSet("s"), StackSetID: "ss", Target: config.Target{Region: "eu-west-1", Account: "111"}}, nil)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "p6.west") || diags[0].Subject == nil || !strings.HasPrefix(diags[0].Subject.String(), "t/main.hcl:10,") {
		t.Errorf("provider = p6.west without its block: %v, want it at the resource (t/main.hcl:10)", diags)
	}
}

// TestBridgeValidatesAConfigurationOnce: a resource configuration the
// provider's validators accepted is not sent to them again (an instance
// is planned for its change set and again right before it is applied),
// while one they refused is refused again with the provider's reason.
func TestBridgeValidatesAConfigurationOnce(t *testing.T) {
	log := filepath.Join(t.TempDir(), "validations")
	t.Setenv("P6_VALIDATION_LOG", log)
	e, _, _ := newBridgeEngine(t, 6)
	load := func(key string) *config.StackSet {
		defs, diags := e.Load(oneTargetDefs("resource \"p6_thing\" \"a\" {\n  name = \"x\"\n  tag {\n    key = \""+key+"\"\n  }\n}\n"), ".")
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return defs.StackSet("s")
	}
	plan := func(ss *config.StackSet) hcl.Diagnostics {
		_, diags := e.PlanContext(testCtx(t), &engine.Instance{StackSet: ss, StackSetID: "ss", Target: config.Target{Region: "eu-west-1", Account: "111"}}, nil)
		return diags
	}
	count := func(value string) int {
		b, err := os.ReadFile(log)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return strings.Count(string(b), value+"\n")
	}
	good, bad := load("good"), load("Bad")
	for range 3 {
		if diags := plan(good); diags.HasErrors() {
			t.Fatal(diags)
		}
		if diags := plan(bad); !diags.HasErrors() || !strings.Contains(diags.Error(), "does not match") {
			t.Fatalf("a tag key the provider refuses: %v", diags)
		}
	}
	if n := count("good"); n != 1 {
		t.Errorf("an accepted configuration planned 3 times was validated %d times, want 1", n)
	}
	if n := count("Bad"); n != 3 {
		t.Errorf("a refused configuration planned 3 times was validated %d times, want 3 (refusals are not remembered)", n)
	}
}

// TestBridgeUpgradesOldState: a resource recorded with an older schema
// version is upgraded by the provider (UpgradeResourceState) before it is
// read, updated or deleted.
func TestBridgeUpgradesOldState(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	defs, diags := e.Load(bridgeDefs(world, "a", "one"), ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	ctx := testCtx(t)
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	p, diags := e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatal(err)
	}
	// Record it as version 0 wrote it: "content" was "text".
	rec := j.recs["p6_thing.a"]
	attrs, err := config.DecodeValue(rec.Attributes)
	if err != nil {
		t.Fatal(err)
	}
	m := attrs.AsValueMap()
	m["text"] = m["content"]
	delete(m, "content")
	if rec.Attributes, err = config.EncodeValue(cty.ObjectVal(m)); err != nil {
		t.Fatal(err)
	}
	rec.SchemaVersion = 0
	j.recs[rec.Address] = rec
	d, err := e.CheckDrift(ctx, inst, j.list(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != engine.DriftInSync {
		t.Errorf("a version 0 record read through the upgrade: %+v", d.Resources)
	}
	// An update works from the upgraded state and records version 1.
	defs, _ = e.Load(bridgeDefs(world, "a", "two"), ".")
	inst.StackSet = defs.StackSet("s")
	p, diags = e.PlanContext(ctx, inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatalf("update of a version 0 record: %v", err)
	}
	if got := j.recs["p6_thing.a"].SchemaVersion; got != 1 {
		t.Errorf("recorded schema version %d after the update, want 1", got)
	}
}

// TestBridgeImport: an import block adopts an existing object (made by
// someone else) instead of creating one, and brings it to the
// configuration.
func TestBridgeImport(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	// Someone made the object by hand (here: an apply whose record is
	// then forgotten).
	defs, diags := e.Load(bridgeDefs(world, "a", "old"), ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	p, _ := e.PlanContext(ctx, inst, nil)
	if _, err := e.Apply(ctx, p, &memJournal{recs: map[string]engine.ResourceState{}}, nil); err != nil {
		t.Fatal(err)
	}
	files := bridgeDefs(world, "a", "new")
	files["t/import.hcl"] = &fstest.MapFile{Data: []byte(`import {
  to = p6_thing.a
  id = "pre${var.name}-${target.region}"
}
`)}
	defs, diags = e.Load(files, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst.StackSet = defs.StackSet("s")
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	p, diags = e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	chs := p.Changes()
	if len(chs) != 1 || chs[0].ResourceChange.Action != "Import" || chs[0].ResourceChange.PhysicalResourceId != "prea-eu-west-1" {
		t.Fatalf("plan of an import: %+v", chs)
	}
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatalf("apply of an import: %v", err)
	}
	if rec := j.recs["p6_thing.a"]; rec.PhysicalID != "prea-eu-west-1" {
		t.Errorf("recorded after the import: %+v", rec)
	}
	b, err := os.ReadFile(filepath.Join(world, "111", "prea-eu-west-1.json"))
	if err != nil || !strings.Contains(string(b), `"content":"new"`) {
		t.Errorf("the imported object was not brought to the configuration: %v %s", err, b)
	}
	// An import of something that does not exist fails the plan, as in
	// Terraform: the plan imports the object to plan its change.
	files["t/import.hcl"] = &fstest.MapFile{Data: []byte(`import {
  to = p6_thing.a
  id = "nothing-here"
}
`)}
	defs, _ = e.Load(files, ".")
	inst.StackSet = defs.StackSet("s")
	if _, diags := e.PlanContext(ctx, inst, nil); !diags.HasErrors() || !strings.Contains(diags.Error(), "no such object") {
		t.Errorf("import of a missing object: %v", diags)
	}
	// An import block for an undeclared resource is a diagnostic.
	files["t/import.hcl"] = &fstest.MapFile{Data: []byte("import {\n  to = p6_thing.b\n  id = \"x\"\n}\n")}
	if _, diags := e.Load(files, "."); !strings.Contains(diags.Error(), "Import of an undeclared resource") {
		t.Errorf("import to an undeclared resource: %v", diags)
	}
}

// savesJournal is a memJournal that keeps every record saved, in order.
type savesJournal struct {
	memJournal
	saves []engine.ResourceState
}

func (j *savesJournal) Save(ctx context.Context, r engine.ResourceState) error {
	j.mu.Lock()
	j.saves = append(j.saves, r)
	j.mu.Unlock()
	return j.memJournal.Save(ctx, r)
}

// TestBridgeAdoptsWhatAnInterruptedCreateMade: a provider that plans the
// id of the object it creates (p6's named objects) has it journaled with
// the pending create before anything is made; a create a crash
// interrupted after the object was made then adopts it (import, read)
// instead of failing on the existing object or making a second one, and
// creates anew when nothing was made.
func TestBridgeAdoptsWhatAnInterruptedCreateMade(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := bridgeDefs(world, "a", "one")
	files["t/main.hcl"].Data = []byte(strings.Replace(string(files["t/main.hcl"].Data), "  content = var.content\n", "  content = var.content\n  named   = true\n", 1))
	defs, diags := e.Load(files, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	ctx := testCtx(t)
	object := filepath.Join(world, "111", "prea-eu-west-1.json")

	j := &savesJournal{memJournal: memJournal{recs: map[string]engine.ResourceState{}}}
	p, diags := e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatal(err)
	}
	// The journal as a crash during ApplyResourceChange would have left
	// it: the last pending record, which names the planned id.
	var pending engine.ResourceState
	for _, r := range j.saves {
		if r.Status == engine.StatusPendingCreate {
			pending = r
		}
	}
	if string(pending.Adopt) != `{"identity":{"id":"prea-eu-west-1"},"id":"prea-eu-west-1"}` {
		t.Fatalf("pending create journaled with adoption %q, want the planned identity and id", pending.Adopt)
	}
	if rec := j.recs["p6_thing.a"]; rec.Status != engine.StatusApplied || len(rec.Adopt) != 0 || string(rec.Identity) != `{"id":"prea-eu-west-1"}` {
		t.Errorf("record after the create: status %v, adoption %q, identity %q; want applied, no adoption kept, its identity", rec.Status, rec.Adopt, rec.Identity)
	}
	// The recorded identity goes back to the provider: an object deleted
	// by hand reads as gone (without it this provider's framework fails
	// the read: "Missing Resource Identity After Read").
	if err := os.Rename(object, object+".away"); err != nil {
		t.Fatal(err)
	}
	d, err := e.CheckDrift(ctx, inst, j.list(), nil)
	if err != nil || len(d.Resources) != 1 || !d.Resources[0].Deleted {
		t.Errorf("drift check of an object deleted by hand: %v %+v", err, d)
	}
	if err := os.Rename(object+".away", object); err != nil {
		t.Fatal(err)
	}
	resume := func(rec engine.ResourceState) (*memJournal, error) {
		t.Helper()
		p, diags := e.PlanContext(ctx, inst, []engine.ResourceState{rec})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		j := &memJournal{recs: map[string]engine.ResourceState{}}
		_, err := e.Apply(ctx, p, j, nil)
		return j, err
	}

	// Without an adoption the repeated create meets the object it made.
	blind := pending
	blind.Adopt = nil
	if _, err := resume(blind); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("a repeated create without adoption: %v, want the provider's \"already exists\"", err)
	}
	// With it, the object is adopted.
	j2, err := resume(pending)
	if err != nil {
		t.Fatalf("resumed create: %v", err)
	}
	if rec := j2.recs["p6_thing.a"]; rec.Status != engine.StatusApplied || rec.PhysicalID != "prea-eu-west-1" {
		t.Errorf("recorded after the adoption: %+v", rec)
	}
	// Nothing was made: created anew.
	if err := os.Remove(object); err != nil {
		t.Fatal(err)
	}
	j3, err := resume(pending)
	if err != nil {
		t.Fatalf("resumed create that had made nothing: %v", err)
	}
	if rec := j3.recs["p6_thing.a"]; rec.Status != engine.StatusApplied {
		t.Errorf("recorded after creating anew: %+v", rec)
	}
	if b, err := os.ReadFile(object); err != nil || !strings.Contains(string(b), `"content":"one"`) {
		t.Errorf("object after creating anew: %v %s", err, b)
	}
}

// TestBridgeModuleProviders: a module uses the provider configurations
// its call passes (providers = { p6 = p6.west }), inherits its caller's
// default ones, and passes them on to the modules it calls; a module that
// configures a provider itself, a call passing a configuration the
// template does not have, and a module resource using an aliased
// configuration it was not passed are diagnostics.
func TestBridgeModuleProviders(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	const require = `terraform {
  required_providers {
    p6 = { source = "registry.example.com/stackd/p6" }
  }
}
`
	provider := func(alias, prefix string) string {
		a := ""
		if alias != "" {
			a = "  alias  = \"" + alias + "\"\n"
		}
		return "provider \"p6\" {\n" + a + "  region = target.region\n  dir    = \"" + world + "/${target.account}\"\n  prefix = \"" + prefix + "\"\n}\n"
	}
	files := func(root, module string) fstest.MapFS {
		return fstest.MapFS{
			"d.hcl":            {Data: []byte(oneTargetStackSet)},
			"t/main.hcl":       {Data: []byte(require + provider("", "d-") + provider("west", "w-") + provider("east", "e-") + root)},
			"t/m/main.hcl":     {Data: []byte(require + module)},
			"t/inner/main.hcl": {Data: []byte(require + "resource \"p6_thing\" \"y\" {\n  name = \"inner\"\n}\n")},
		}
	}
	const calls = `module "a" {
  source    = "./m"
  providers = { p6 = p6.west }
}
module "b" {
  source    = "./m"
  providers = { p6 = p6.east }
}
module "c" {
  source = "./m"
}
`
	const module = `resource "p6_thing" "x" {
  name = "obj"
}
module "inner" {
  source = "../inner"
}
`
	defs, diags := e.Load(files(calls, module), ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ctx := testCtx(t)
	inst := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	p, diags := e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := e.Apply(ctx, p, &memJournal{recs: map[string]engine.ResourceState{}}, nil); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(world, "111"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range entries {
		got = append(got, en.Name())
	}
	want := []string{"d-inner.json", "d-obj.json", "e-inner.json", "e-obj.json", "w-inner.json", "w-obj.json"}
	if !slices.Equal(got, want) {
		t.Errorf("objects made through the modules' providers: %v, want %v", got, want)
	}

	for _, tc := range []struct {
		name, root, module, at, want string
		plan                         bool
	}{
		{"a module configuring a provider", calls, provider("", "m-") + module, "t/m/main.hcl:6,", "Provider configuration in a module", false},
		{"a call passing what the template does not have", "module \"a\" {\n  source    = \"./m\"\n  providers = { p6 = p6.nope }\n}\n", module, "t/main.hcl:", "Provider configuration not present", true},
		{"a module using an alias it was not passed", "module \"a\" {\n  source = \"./m\"\n}\n", "resource \"p6_thing\" \"x\" {\n  name     = \"obj\"\n  provider = p6.west\n}\n", "t/m/main.hcl:", "Provider configuration not passed", true},
	} {
		defs, diags := e.Load(files(tc.root, tc.module), ".")
		if tc.plan && !diags.HasErrors() {
			_, diags = e.PlanContext(ctx, &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}, nil)
		}
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) || diags[0].Subject == nil || !strings.HasPrefix(diags[0].Subject.String(), tc.at) {
			t.Errorf("%s: %v, want %q at %s", tc.name, diags, tc.want, tc.at)
		}
	}
}

// TestBridgeCreateBeforeDestroy: a replacement with
// lifecycle.create_before_destroy creates the new object first, then
// deletes the old one through the provider, with the state, private
// bytes and configuration it was recorded with.
func TestBridgeCreateBeforeDestroy(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	load := func(name string) *config.StackSet {
		t.Helper()
		files := bridgeDefs(world, name, "one")
		files["t/main.hcl"].Data = []byte(strings.Replace(string(files["t/main.hcl"].Data), "  content = var.content\n",
			"  content = var.content\n  lifecycle {\n    create_before_destroy = true\n  }\n", 1))
		defs, diags := e.Load(files, ".")
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return defs.StackSet("s")
	}
	ctx := testCtx(t)
	inst := &engine.Instance{StackSet: load("old"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	for _, name := range []string{"old", "new"} {
		inst.StackSet = load(name)
		p, diags := e.PlanContext(ctx, inst, j.list())
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if _, err := e.Apply(ctx, p, j, nil); err != nil {
			t.Fatalf("apply %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(world, "111", "prenew-eu-west-1.json")); err != nil {
		t.Errorf("the replacement: %v", err)
	}
	if _, err := os.Stat(filepath.Join(world, "111", "preold-eu-west-1.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the replaced object after create_before_destroy: %v, want it deleted", err)
	}
	if rec := j.recs["p6_thing.a"]; rec.Deposed != nil || rec.PhysicalID != "prenew-eu-west-1" {
		t.Errorf("record after the replacement: %+v", rec)
	}
}

// TestBridgeUntrustedRefs: a ref that is not the deploy branch may only
// use providers the lock file holds (no download of a provider of its
// choosing) and makes no provider call beyond the schema: no data source
// is read into its change set, no configuration validated or planned.
func TestBridgeUntrustedRefs(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := bridgeDefs(world, "a", "one")
	if _, diags := e.LoadUntrusted(files, "."); !strings.Contains(diags.Error(), "is not locked") {
		t.Fatalf("an untrusted ref requiring an unlocked provider: %v", diags)
	}
	// The deploy branch installs and locks it, and creates the object.
	defs, diags := e.Load(files, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ctx := testCtx(t)
	inst := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	p, _ := e.PlanContext(ctx, inst, nil)
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatal(err)
	}
	// A branch reading a file of the daemon's host through a data source.
	files["t/steal.hcl"] = &fstest.MapFile{Data: []byte(`data "p6_object" "lit" {
  id = "prea-eu-west-1"
}
output "stolen" { value = data.p6_object.lit.content }
`)}
	trusted, diags := e.Load(files, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tp, _ := e.PlanContext(ctx, &engine.Instance{StackSet: trusted.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}, j.list())
	if v := tp.Outputs["stolen"]; !v.IsKnown() || v.AsString() != "one" {
		t.Fatalf("the deploy branch reads data sources at plan time: %#v", v)
	}
	untrusted, diags := e.LoadUntrusted(files, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	up, diags := e.PlanContext(ctx, &engine.Instance{StackSet: untrusted.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}, Untrusted: true}, j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if v := up.Outputs["stolen"]; v.IsKnown() {
		t.Errorf("an untrusted ref read a data source: %#v", v)
	}
}

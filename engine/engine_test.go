package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// recorder is a provider at the true edge of the engine: it keeps its
// "world" in a map and records every call.
type recorder struct {
	mu     sync.Mutex
	world  map[string]cty.Value // physical id -> properties
	calls  []string
	failOn string // logical id whose Create fails
	// failDelete is a physical id whose Delete fails.
	failDelete string
}

func newRecorder() *recorder { return &recorder{world: map[string]cty.Value{}} }

func (r *recorder) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{
			"name":    {Type: cty.String, Required: true, Recreation: provider.Always},
			"content": {Type: cty.String, Recreation: provider.Never},
			"secret":  {Type: cty.String, Sensitive: true},
			"tags":    {Type: cty.Map(cty.String), Recreation: provider.Conditionally},
		},
		Attributes: []string{"id", "digest"},
	}
}

func (r *recorder) log(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recorder) Create(_ context.Context, req provider.Request) (provider.Result, error) {
	r.log("create %s %s", req.LogicalID, req.RequestID)
	if req.LogicalID == r.failOn {
		return provider.Result{}, errors.New("boom")
	}
	id := "phys-" + req.Properties.GetAttr("name").AsString()
	r.mu.Lock()
	r.world[id] = req.Properties
	r.mu.Unlock()
	return provider.Result{PhysicalID: id, Attributes: map[string]cty.Value{"id": cty.StringVal(id), "digest": cty.StringVal("d-" + id)}}, nil
}

func (r *recorder) Read(_ context.Context, req provider.Request) (provider.Result, error) {
	return provider.Result{PhysicalID: req.PhysicalID}, nil
}

func (r *recorder) Update(_ context.Context, req provider.Request) (provider.Result, error) {
	r.log("update %s %s", req.LogicalID, req.PhysicalID)
	r.mu.Lock()
	r.world[req.PhysicalID] = req.Properties
	r.mu.Unlock()
	return provider.Result{PhysicalID: req.PhysicalID, Attributes: map[string]cty.Value{"id": cty.StringVal(req.PhysicalID), "digest": cty.StringVal("d2-" + req.PhysicalID)}}, nil
}

func (r *recorder) Delete(_ context.Context, req provider.Request) error {
	r.log("delete %s %s", req.LogicalID, req.PhysicalID)
	if req.PhysicalID != "" && req.PhysicalID == r.failDelete {
		return errors.New("delete refused")
	}
	r.mu.Lock()
	delete(r.world, req.PhysicalID)
	r.mu.Unlock()
	return nil
}

// memJournal is the engine's view of recorded state, kept in memory.
type memJournal struct {
	mu   sync.Mutex
	recs map[string]ResourceState
	// crashAfter makes Save fail after n saves (simulated crash).
	crashAfter int
	saves      int
}

func newJournal() *memJournal { return &memJournal{recs: map[string]ResourceState{}, crashAfter: -1} }

var errCrash = errors.New("crash")

func (j *memJournal) Save(_ context.Context, r ResourceState) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.crashAfter >= 0 && j.saves >= j.crashAfter {
		return errCrash
	}
	j.saves++
	j.recs[r.Address] = r
	return nil
}

func (j *memJournal) Remove(_ context.Context, addr string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.recs, addr)
	return nil
}

func (j *memJournal) list() []ResourceState {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []ResourceState
	for _, r := range j.recs {
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Address < out[b].Address })
	return out
}

const defsHCL = `
stack_set "web" {
  template = "./tmpl"
  vars = {
    image    = "nginx:1"
    replicas = 2
    password = "hunter2"
  }
  deployment_targets {
    regions  = ["eu", "us"]
    accounts = ["111", "222"]
  }
}
`

const tmplHCL = `
variable "image" { type = string }
variable "replicas" {
  type    = number
  default = 1
}
variable "password" {
  type      = string
  sensitive = true
}
locals { prefix = "${stack_set.name}-${target.region}-${target.account}" }

resource "rec" "config" {
  name    = "${local.prefix}-config"
  content = "image=${var.image}"
  secret  = var.password
}

resource "rec" "worker" {
  count   = var.replicas
  name    = "${local.prefix}-worker-${count.index}"
  content = rec.config.digest
}

output "config_id" { value = rec.config.id }
`

func load(t *testing.T, files map[string]string, reg provider.Registry) (*config.Definitions, hcl.Diagnostics) {
	t.Helper()
	fsys := fstest.MapFS{}
	for n, c := range files {
		fsys[n] = &fstest.MapFile{Data: []byte(c)}
	}
	return config.Load(fsys, ".", reg)
}

func mustLoad(t *testing.T, files map[string]string, reg provider.Registry) *config.Definitions {
	t.Helper()
	defs, diags := load(t, files, reg)
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	return defs
}

func planApply(t *testing.T, e *Engine, inst *Instance, j *memJournal) *InstancePlan {
	t.Helper()
	p, diags := e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatalf("plan: %s", diags.Error())
	}
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return p
}

func actions(p *InstancePlan) map[string]string {
	out := map[string]string{}
	for _, r := range p.Resources {
		out[r.Address] = r.Action.String()
	}
	return out
}

func TestPlanApplyLifecycle(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	files := map[string]string{"web.hcl": defsHCL, "tmpl/main.hcl": tmplHCL}
	defs := mustLoad(t, files, reg)
	ss := defs.StackSet("web")
	if got := len(ss.Targets()); got != 4 {
		t.Fatalf("targets: got %d, want 4", got)
	}
	inst := &Instance{StackSet: ss, StackSetID: "id-1", Target: config.Target{Region: "eu", Account: "111"}}
	j := newJournal()

	// Create: the worker's content depends on config's digest, known after apply.
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := map[string]string{"rec.config": "Create", "rec.worker[0]": "Create", "rec.worker[1]": "Create"}
	if diff := cmp.Diff(want, actions(p)); diff != "" {
		t.Fatalf("actions (-want +got):\n%s", diff)
	}
	for _, c := range p.Changes() {
		for _, pc := range c.ResourceChange.PropertyChanges {
			if pc.Name == "secret" && pc.AfterValue != SensitivePlaceholder {
				t.Errorf("secret shown as %v", pc.AfterValue)
			}
			if c.ResourceChange.LogicalResourceId == "rec.worker[0]" && pc.Name == "content" && pc.AfterValue != KnownAfterApplyPlaceholder {
				t.Errorf("worker content: got %v, want known after apply", pc.AfterValue)
			}
		}
	}
	res, err := e.Apply(context.Background(), p, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Outputs["config_id"].AsString(); got != "phys-web-eu-111-config" {
		t.Errorf("output: got %q", got)
	}
	if got := rec.world["phys-web-eu-111-worker-1"].GetAttr("content").AsString(); got != "d-phys-web-eu-111-config" {
		t.Errorf("worker content after apply: got %q", got)
	}
	for _, r := range j.list() {
		if r.Status != StatusApplied {
			t.Errorf("%s: status %s", r.Address, r.Status)
		}
		if strings.Contains(string(r.Inputs), "hunter2") && !contains(r.Sensitive, "secret") {
			t.Errorf("%s: secret stored without a sensitive mark", r.Address)
		}
	}

	// No changes.
	p, _ = e.Plan(inst, j.list())
	if p.HasChanges() {
		t.Fatalf("second plan has changes: %v", actions(p))
	}

	// Variable change: only config's content changes in place; workers
	// depend on config's digest which changes on update → Dynamic.
	files["web.hcl"] = strings.Replace(defsHCL, "nginx:1", "nginx:2", 1)
	files["web.hcl"] = strings.Replace(files["web.hcl"], "replicas = 2", "replicas = 1", 1)
	ss = mustLoad(t, files, reg).StackSet("web")
	inst.StackSet = ss
	p, _ = e.Plan(inst, j.list())
	want = map[string]string{"rec.config": "Update", "rec.worker[0]": "Update", "rec.worker[1]": "Delete"}
	if diff := cmp.Diff(want, actions(p)); diff != "" {
		t.Fatalf("actions (-want +got):\n%s", diff)
	}
	var cfg changeset.ResourceChange
	for _, c := range p.Changes() {
		if c.ResourceChange.LogicalResourceId == "rec.config" {
			cfg = c.ResourceChange
		}
	}
	wantCfg := changeset.ResourceChange{
		Action: "Modify", LogicalResourceId: "rec.config", PhysicalResourceId: "phys-web-eu-111-config",
		ResourceType: "rec", Replacement: "False", Scope: []string{"Properties"},
		Details: []changeset.ResourceChangeDetail{{ChangeSource: "ParameterReference", CausingEntity: ptr("var.image"), Evaluation: "Static",
			Target: changeset.ResourceTargetDefinition{Attribute: "Properties", Name: "content", RequiresRecreation: "Never"}}},
		PropertyChanges: []changeset.ResourcePropertyChange{{Name: "content", BeforeValue: "image=nginx:1", AfterValue: "image=nginx:2"}},
	}
	if diff := cmp.Diff(wantCfg, cfg); diff != "" {
		t.Errorf("config change (-want +got):\n%s", diff)
	}
	if p.Resources[0].Action != Delete {
		t.Errorf("removals must come first, got %s %s", p.Resources[0].Address, p.Resources[0].Action)
	}
	rec.calls = nil
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	wantCalls := []string{"delete rec.worker[1] phys-web-eu-111-worker-1", "update rec.config phys-web-eu-111-config", "update rec.worker[0] phys-web-eu-111-worker-0"}
	if diff := cmp.Diff(wantCalls, rec.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if got := rec.world["phys-web-eu-111-worker-0"].GetAttr("content").AsString(); got != "d2-phys-web-eu-111-config" {
		t.Errorf("worker content: got %q", got)
	}
}

func ptr(s string) *string { return &s }

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

func TestReplacementAndConditional(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	tmpl := `
variable "n" { type = string }
variable "t" { type = string }
resource "rec" "a" {
  name = var.n
  tags = { t = var.t }
}
resource "rec" "b" {
  name    = "b"
  content = rec.a.id
}
`
	defs := func(n, tag string) *config.StackSet {
		return mustLoad(t, map[string]string{
			"d.hcl": fmt.Sprintf(`stack_set "s" {
  template = "./t"
  vars = { n = %q, t = %q }
  deployment_targets {
    regions  = ["r"]
    accounts = ["a"]
  }
}`, n, tag),
			"t/main.hcl": tmpl,
		}, reg).StackSet("s")
	}
	j := newJournal()
	inst := &Instance{StackSet: defs("one", "x"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
	planApply(t, e, inst, j)

	inst.StackSet = defs("one", "y")
	p, _ := e.Plan(inst, j.list())
	if got := p.Resources[0].Replacement; got != changeset.ReplacementConditional {
		t.Errorf("tags change: replacement %s, want Conditional", got)
	}

	inst.StackSet = defs("two", "x")
	p, _ = e.Plan(inst, j.list())
	got := actions(p)
	if got["rec.a"] != "Replace" || got["rec.b"] != "Update" {
		t.Fatalf("actions: %v", got)
	}
	for _, c := range p.Changes() {
		rc := c.ResourceChange
		if rc.LogicalResourceId == "rec.b" {
			// rec.b references rec.a's physical id: a ResourceReference.
			d := rc.Details[0]
			if d.Evaluation != "Dynamic" || d.ChangeSource != changeset.SourceResourceReference || *d.CausingEntity != "rec.a" || rc.PropertyChanges[0].AfterValue != KnownAfterApplyPlaceholder {
				t.Errorf("rec.b change: %+v", rc)
			}
		}
		if rc.LogicalResourceId == "rec.a" && rc.Replacement != changeset.ReplacementTrue {
			t.Errorf("rec.a replacement %q", rc.Replacement)
		}
	}
	rec.calls = nil
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 3 || !strings.HasPrefix(rec.calls[0], "delete rec.a phys-one") || !strings.HasPrefix(rec.calls[1], "create rec.a") || rec.calls[2] != "update rec.b phys-b" {
		t.Errorf("calls: %v", rec.calls)
	}
}

func TestCrashResumeReusesRequestID(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	defs := mustLoad(t, map[string]string{"web.hcl": defsHCL, "tmpl/main.hcl": tmplHCL}, reg)
	inst := &Instance{StackSet: defs.StackSet("web"), StackSetID: "i", Target: config.Target{Region: "eu", Account: "111"}}
	j := newJournal()
	// The first Save (pending create of rec.config) succeeds, the settle
	// fails: the daemon "dies" after the provider call.
	j.crashAfter = 1
	p, _ := e.Plan(inst, nil)
	if _, err := e.Apply(context.Background(), p, j, nil); !errors.Is(err, errCrash) && !strings.Contains(fmt.Sprint(err), "crash") {
		t.Fatalf("apply: got %v, want crash", err)
	}
	first := j.list()[0]
	if first.Status != StatusPendingCreate || first.RequestID == "" {
		t.Fatalf("journal: %+v", first)
	}
	j.crashAfter = -1
	p, _ = e.Plan(inst, j.list())
	if p.Resources[0].RequestID != first.RequestID {
		t.Fatalf("resume request id %q, want %q", p.Resources[0].RequestID, first.RequestID)
	}
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	var creates []string
	for _, c := range rec.calls {
		if strings.HasPrefix(c, "create rec.config ") {
			creates = append(creates, c)
		}
	}
	if len(creates) != 2 || creates[0] != creates[1] {
		t.Errorf("creates of rec.config: %v (want the same request id twice)", creates)
	}
}

func TestForEachAndDestroyAll(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	defs := mustLoad(t, map[string]string{
		"d.hcl": `stack_set "s" {
  template = "./t"
  deployment_targets {
    regions  = ["r"]
    accounts = ["a"]
  }
}`,
		"t/main.hcl": `
resource "rec" "m" {
  for_each = toset(["x", "y"])
  name     = "m-${each.key}"
}
resource "rec" "after" {
  name       = "after"
  depends_on = [rec.m]
}`,
	}, reg)
	j := newJournal()
	inst := &Instance{StackSet: defs.StackSet("s"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
	p := planApply(t, e, inst, j)
	if diff := cmp.Diff(map[string]string{`rec.m["x"]`: "Create", `rec.m["y"]`: "Create", "rec.after": "Create"}, actions(p)); diff != "" {
		t.Fatal(diff)
	}
	// Destroying everything deletes dependents first.
	p = PlanDestroy(inst, j.list())
	rec.calls = nil
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 3 || !strings.HasPrefix(rec.calls[0], "delete rec.after") {
		t.Errorf("calls: %v", rec.calls)
	}
	if len(j.list()) != 0 || len(rec.world) != 0 {
		t.Errorf("left behind: %v %v", j.list(), rec.world)
	}
}

func TestDiagnostics(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	ss := func(body string) string {
		return `stack_set "s" {
  template = "./t"
` + body + `
  deployment_targets {
    regions  = ["r"]
    accounts = ["a"]
  }
}`
	}
	cases := []struct {
		name, defs, tmpl string
		want             string // substring of "file:line,col: summary; detail"
	}{
		{"syntax", ss(""), "resource \"rec\" \"a\" {\n  name = \n}", "t/main.hcl:2,"},
		{"unknown resource type", ss(""), `resource "nope" "a" {}`, "t/main.hcl:1,10: Unknown resource type"},
		{"unknown attribute", ss(""), "resource \"rec\" \"a\" {\n  name = \"x\"\n  colour = 1\n}", "t/main.hcl:3,3: Unsupported argument"},
		{"missing required", ss(""), `resource "rec" "a" {}`, "Missing required argument"},
		{"undeclared var", ss(""), "resource \"rec\" \"a\" {\n  name = var.nope\n}", "t/main.hcl:2,10: Reference to undeclared input variable"},
		{"missing resource", ss(""), "resource \"rec\" \"a\" {\n  name = rec.b.id\n}", "Reference to undeclared resource"},
		{"cycle", ss(""), "resource \"rec\" \"a\" {\n  name = rec.b.id\n}\nresource \"rec\" \"b\" {\n  name = rec.a.id\n}", "Dependency cycle"},
		{"unknown stack set var", ss(`  vars = { zzz = 1 }`), `variable "a" {
  default = 1
}`, "d.hcl:3,12: Unknown variable"},
		{"required var", ss(""), `variable "a" { type = string }`, "No value for required variable"},
		{"var type", ss(`  vars = { a = [1] }`), `variable "a" { type = number }`, "Invalid value for variable"},
		{"huge count", ss(""), "resource \"rec\" \"a\" {\n  count = 1000000000\n  name = \"x\"\n}", ""},
		{"count from resource", ss(""), "resource \"rec\" \"a\" {\n  name = \"x\"\n}\nresource \"rec\" \"b\" {\n  count = length(rec.a.id)\n  name = \"y\"\n}", "t/main.hcl:5,11: Invalid count argument"},
		{"template escape", `stack_set "s" {
  template = "../../etc"
  deployment_targets {
    regions  = ["r"]
    accounts = ["a"]
  }
}`, `variable "a" {}`, "leaves the repository"},
		{"strict tolerance", ss(`  operation_preferences {
    max_concurrent_count = 3
  }`), `variable "a" {
  default = 1
}`, "max_concurrent_count too large"},
		{"duplicate region", `stack_set "s" {
  template = "./t"
  deployment_targets {
    regions  = ["r", "r"]
    accounts = ["a"]
  }
}`, `variable "a" {
  default = 1
}`, "Duplicate regions entry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defs, diags := load(t, map[string]string{"d.hcl": tc.defs, "t/main.hcl": tc.tmpl}, reg)
			if tc.name == "huge count" || tc.name == "count from resource" {
				// Valid statically; evaluation rejects it (a count known
				// only after apply, as Terraform does, at plan).
				if diags.HasErrors() {
					t.Fatal(diags.Error())
				}
				_, diags = New(reg).Plan(&Instance{StackSet: defs.StackSet("s"), Target: config.Target{Region: "r", Account: "a"}}, nil)
				if tc.name == "huge count" {
					tc.want = "t/main.hcl:2,11: Invalid count argument"
				}
			}
			if !diags.HasErrors() {
				t.Fatalf("no error, want %q", tc.want)
			}
			var got []string
			for _, d := range config.DiagnosticsJSON(diags) {
				got = append(got, d.String())
			}
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("diagnostics:\n%s\nwant one containing %q", strings.Join(got, "\n"), tc.want)
			}
		})
	}
}

func TestParseAccountsCSV(t *testing.T) {
	cases := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"111,222\n333\r\n", []string{"111", "222", "333"}, ""},
		{"\ufeff111, 222 ,\n\n", []string{"111", "222"}, ""},
		{"111\n111", nil, "listed twice"},
		{"111;222", nil, "not an account id"},
		{"\xff\xfe", nil, "UTF-8"},
		{"", nil, "no accounts"},
		{strings.Repeat("1", config.MaxAccountsFileSize+1), nil, "100 KB"},
		{"\"111\",\"222\"\r\n\" 333 \"\r\n", []string{"111", "222", "333"}, ""},
		{"Account ID\n111\n222\n", nil, `line 1: "Account ID" looks like a column header`},
		{"\ufeff\"account_id\"\r\n111\r\n", nil, "column header"},
		{"\n\nAccountId,Name\n111,prod\n", nil, "line 3: \"AccountId\" looks like a column header"},
		{"111\naccounts\n", []string{"111", "accounts"}, ""}, // not first: an account named so
		{"\"111", nil, "not an account id"},
		{"\"\"", nil, "no accounts"},
	}
	for _, tc := range cases {
		got, err := config.ParseAccountsCSV([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: got err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("%q: got %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}

// oneTarget is a stack set "s" of template ./t at one target, r/a.
const oneTarget = `stack_set "s" {
  template = "./t"
  deployment_targets {
    regions  = ["r"]
    accounts = ["a"]
  }
}`

// A plan reports every independent error of an instance in one pass, as
// Terraform's validation does, and none of the nodes that use a failed
// one (their errors would only repeat it); an apply is not made of it.
func TestPlanReportsEveryIndependentError(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	defs := mustLoad(t, map[string]string{
		"d.hcl": oneTarget,
		"t/main.hcl": `locals {
  bad = 1 + "x"
}
resource "rec" "uses_bad" {
  name = "n-${local.bad}"
}
resource "rec" "indirect" {
  name = rec.uses_bad.id
}
resource "rec" "after" {
  name       = "after"
  depends_on = [rec.uses_bad]
}
resource "rec" "count" {
  count = -1
  name  = "c"
}
resource "rec" "fine" {
  name = "fine"
}
output "o" { value = upper(5 + "y") }
`,
	}, reg)
	_, diags := New(reg).Plan(&Instance{StackSet: defs.StackSet("s"), Target: config.Target{Region: "r", Account: "a"}}, nil)
	var got []string
	for _, d := range config.DiagnosticsJSON(diags) {
		got = append(got, fmt.Sprintf("%s:%d", d.File, d.Line))
	}
	slices.Sort(got)
	if want := []string{"t/main.hcl:15", "t/main.hcl:2", "t/main.hcl:21"}; !slices.Equal(got, want) {
		t.Errorf("errors at %v, want %v (one per independent error, none for rec.uses_bad, rec.indirect and rec.after):\n%s", got, want, diags.Error())
	}
}

// A template with more failing blocks than MaxPlanErrors: the plan stops
// there and says so, so that a branch cannot make megabytes of
// diagnostics.
func TestPlanErrorsBounded(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	var tmpl strings.Builder
	for i := range config.MaxPlanErrors + 10 {
		fmt.Fprintf(&tmpl, "resource \"rec\" \"r%d\" {\n  name = 1 + \"x\"\n}\n", i)
	}
	defs := mustLoad(t, map[string]string{
		"d.hcl":      oneTarget,
		"t/main.hcl": tmpl.String(),
	}, reg)
	_, diags := New(reg).Plan(&Instance{StackSet: defs.StackSet("s"), Target: config.Target{Region: "r", Account: "a"}}, nil)
	if n := len(diags.Errs()); n != config.MaxPlanErrors+1 || diags[len(diags)-1].Summary != "Too many errors" {
		t.Errorf("%d errors, the last %q; want %d and \"Too many errors\"", n, diags[len(diags)-1].Summary, config.MaxPlanErrors+1)
	}
}

// One block's diagnostics are bounded too: a string template with
// thousands of failing interpolations reports MaxNodeDiagnostics of them
// and how many more there were.
func TestBlockDiagnosticsBounded(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	defs := mustLoad(t, map[string]string{
		"d.hcl":      oneTarget,
		"t/main.hcl": "resource \"rec\" \"r\" {\n  name = \"" + strings.Repeat(`${tobool("x")}`, 5000) + "\"\n}\n",
	}, reg)
	_, diags := New(reg).Plan(&Instance{StackSet: defs.StackSet("s"), Target: config.Target{Region: "r", Account: "a"}}, nil)
	last := diags[len(diags)-1]
	if len(diags) != config.MaxNodeDiagnostics+1 || last.Summary != "Too many diagnostics" || !strings.Contains(last.Detail, fmt.Sprintf("%d more", 5000-config.MaxNodeDiagnostics)) || last.Subject == nil {
		t.Errorf("%d diagnostics, the last %q: %q", len(diags), last.Summary, last.Detail)
	}
}

// The bound holds across modules: a module called many times, each call
// failing in many blocks, stops the plan at MaxPlanErrors too.
func TestPlanErrorsBoundedAcrossModules(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	var mod, root strings.Builder
	for i := range 20 {
		fmt.Fprintf(&mod, "resource \"rec\" \"r%d\" {\n  name = 1 + \"x\"\n}\n", i)
		fmt.Fprintf(&root, "module \"m%d\" {\n  source = \"./m\"\n}\n", i)
	}
	defs := mustLoad(t, map[string]string{
		"d.hcl":        oneTarget,
		"t/main.hcl":   root.String(),
		"t/m/main.hcl": mod.String(),
	}, reg)
	_, diags := New(reg).Plan(&Instance{StackSet: defs.StackSet("s"), Target: config.Target{Region: "r", Account: "a"}}, nil)
	tooMany := 0
	for _, d := range diags {
		if d.Summary == "Too many errors" {
			tooMany++
		}
	}
	if n := len(diags.Errs()); n > config.MaxPlanErrors+1 || tooMany != 1 {
		t.Errorf("%d errors, %d saying there were too many; want at most %d and one", n, tooMany, config.MaxPlanErrors+1)
	}
}

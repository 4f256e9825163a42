package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/command"
)

// provFixture is an engine with the recorder and a real command
// provider rooted in a temporary directory; dir is the instance's
// directory (where local-exec runs), log what the engine logged.
type provFixture struct {
	reg  provider.Registry
	e    *Engine
	rec  *recorder
	dir  string
	log  *lockedBuffer
	inst *Instance
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newProvFixture(t *testing.T, tmpl string, allow bool) *provFixture {
	t.Helper()
	root := t.TempDir()
	rec := newRecorder()
	reg := provider.Registry{"command": command.New(command.Options{Root: root, Enabled: allow}), "rec": rec}
	e := New(reg)
	buf := &lockedBuffer{}
	e.SetLogger(zerolog.New(buf))
	_, inst := sensDefs(t, reg, tmpl)
	return &provFixture{reg: reg, e: e, rec: rec, dir: filepath.Join(root, "111", "eu"), log: buf, inst: inst}
}

// reload makes tmpl the instance's template.
func (f *provFixture) reload(t *testing.T, tmpl string) {
	t.Helper()
	_, f.inst = sensDefs(t, f.reg, tmpl)
}

// callsOf is what the recorder was asked, one call a line.
func callsOf(r *recorder) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.calls, "\n")
}

func (f *provFixture) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func (f *provFixture) exists(name string) bool {
	_, err := os.Stat(filepath.Join(f.dir, name))
	return err == nil
}

func (f *provFixture) planApply(t *testing.T, j *memJournal) (*InstancePlan, error) {
	t.Helper()
	p, diags := f.e.Plan(f.inst, j.list())
	if diags.HasErrors() {
		t.Fatalf("plan: %s", diags.Error())
	}
	_, err := f.e.Apply(context.Background(), p, j, nil)
	return p, err
}

// Create-time provisioners run once, right after the object is created,
// in order, with self, count.index, variables and the environment; an
// update does not run them again.
func TestLocalExecRunsAtCreate(t *testing.T) {
	tmpl := `variable "greeting" { default = "hello" }
resource "rec" "a" {
  count   = 2
  name    = "a${count.index}"
  content = "v1"
  provisioner "local-exec" {
    command     = "echo \"${self.id} ${self.name} $GREETING ${var.greeting} ${count.index}\" > out-${count.index}.txt"
    working_dir = "prov"
    environment = { GREETING = "env-hi" }
  }
  provisioner "local-exec" {
    command     = "echo second >> prov/out-${count.index}.txt; printf '%s' \"$0\" > shell-${count.index}.txt"
    interpreter = ["/bin/sh", "-c"]
  }
}
`
	f := newProvFixture(t, tmpl, true)
	j := newJournal()
	if _, err := f.planApply(t, j); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"phys-a0 a0 env-hi hello 0\nsecond\n", "phys-a1 a1 env-hi hello 1\nsecond\n"} {
		if got := f.read(t, filepath.Join("prov", "out-"+string(rune('0'+i))+".txt")); got != want {
			t.Errorf("out-%d.txt: got %q, want %q", i, got, want)
		}
	}
	if got := f.read(t, "shell-0.txt"); got != "/bin/sh" {
		t.Errorf("interpreter: $0 is %q, want /bin/sh", got)
	}
	if !strings.Contains(f.log.String(), `"provisioner":"local-exec"`) {
		t.Errorf("the runs are not logged:\n%s", f.log)
	}
	if err := os.RemoveAll(filepath.Join(f.dir, "prov")); err != nil {
		t.Fatal(err)
	}
	f.reload(t, strings.Replace(tmpl, `"v1"`, `"v2"`, 1))
	p, err := f.planApply(t, j)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(p)["rec.a[0]"]; got != "Update" {
		t.Fatalf("rec.a[0]: %s, want Update", got)
	}
	if f.exists(filepath.Join("prov", "out-0.txt")) {
		t.Error("an update ran the create-time provisioner again")
	}
}

// A create-time provisioner that fails fails the apply and taints the
// object: the next plan replaces it, and a provisioner that then succeeds
// leaves it untainted. on_failure = continue only warns.
func TestFailingProvisionerTaints(t *testing.T) {
	f := newProvFixture(t, `resource "rec" "a" {
  name = "a"
  provisioner "local-exec" {
    command = "test -f ok || { echo not yet >&2; exit 3; }"
  }
}
resource "rec" "b" {
  name = "b"
  provisioner "local-exec" {
    command    = "exit 4"
    on_failure = continue
  }
}
`, true)
	j := newJournal()
	_, err := f.planApply(t, j)
	if err == nil || !strings.Contains(err.Error(), "tainted") || !strings.Contains(err.Error(), "code 3") {
		t.Fatalf("apply: got %v, want a failure that says the object is tainted", err)
	}
	recs := map[string]ResourceState{}
	for _, r := range j.list() {
		recs[r.Address] = r
	}
	if a, ok := recs["rec.a"]; !ok || !a.Tainted || a.Status != StatusApplied || a.PhysicalID != "phys-a" {
		t.Fatalf("rec.a after the failed provisioner: %+v, want recorded, applied and tainted", a)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "ok"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p, diags := f.e.Plan(f.inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := actions(p)["rec.a"]; got != "Replace" {
		t.Fatalf("rec.a: %s, want Replace (tainted)", got)
	}
	var detail string
	for _, c := range p.Changes() {
		if c.ResourceChange.LogicalResourceId == "rec.a" {
			for _, d := range c.ResourceChange.Details {
				detail += d.Target.Name
			}
		}
	}
	if !strings.Contains(detail, "tainted") {
		t.Errorf("the replacement does not say why: details %q", detail)
	}
	if _, err := f.e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range j.list() {
		if r.Tainted {
			t.Errorf("%s still tainted after its replacement", r.Address)
		}
	}
	if !strings.Contains(callsOf(f.rec), "delete rec.a phys-a") {
		t.Errorf("the tainted object was not deleted: %s", callsOf(f.rec))
	}
	if !strings.Contains(f.log.String(), "on_failure = continue") {
		t.Errorf("the continued failure is not logged:\n%s", f.log)
	}
	p, err = f.planApply(t, j)
	if err != nil || p.HasChanges() {
		t.Fatalf("third plan: changes %v, err %v; want none", actions(p), err)
	}
}

// Destroy-time provisioners run before the object is destroyed, with
// self and count.index; one that fails keeps the object. None runs for
// a resource removed from the template.
func TestDestroyProvisioner(t *testing.T) {
	tmpl := `variable "n" { default = 2 }
resource "rec" "a" {
  count = var.n
  name  = "a${count.index}"
  provisioner "local-exec" {
    when    = destroy
    command = "test ! -f refuse || exit 5; echo ${self.id} > gone-${count.index}.txt"
  }
}
`
	f := newProvFixture(t, tmpl, true)
	j := newJournal()
	if _, err := f.planApply(t, j); err != nil {
		t.Fatal(err)
	}
	if f.exists("gone-0.txt") || f.exists("gone-1.txt") {
		t.Fatal("a destroy-time provisioner ran at create")
	}
	f.reload(t, strings.Replace(tmpl, "default = 2", "default = 1", 1))
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "refuse"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := f.planApply(t, j)
	if err == nil || !strings.Contains(err.Error(), "not destroyed") {
		t.Fatalf("apply: got %v, want the failed destroy provisioner", err)
	}
	if len(j.list()) != 2 || strings.Contains(callsOf(f.rec), "delete") {
		t.Fatalf("the object was destroyed although its provisioner failed: %v", callsOf(f.rec))
	}
	if err := os.Remove(filepath.Join(f.dir, "refuse")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.planApply(t, j); err != nil {
		t.Fatal(err)
	}
	if got := f.read(t, "gone-1.txt"); got != "phys-a1\n" {
		t.Errorf("gone-1.txt: %q, want phys-a1", got)
	}
	if len(j.list()) != 1 {
		t.Errorf("got %d records, want 1", len(j.list()))
	}
}

// A provisioner whose arguments hold a sensitive value has its output
// suppressed in the log and in errors; others' output is logged.
func TestProvisionerOutputOfSensitiveValues(t *testing.T) {
	f := newProvFixture(t, `resource "rec" "loud" {
  name = "loud"
  provisioner "local-exec" {
    command = "echo plain-output-here"
  }
}
resource "rec" "secret" {
  name       = "secret"
  depends_on = [rec.loud]
  provisioner "local-exec" {
    command = "echo the key is ${var.k}; echo also $K >&2; exit 7"
    environment = { K = var.k }
  }
}
`, true)
	j := newJournal()
	_, err := f.planApply(t, j)
	if err == nil {
		t.Fatal("apply succeeded; want the failing provisioner")
	}
	all := err.Error() + f.log.String()
	if strings.Contains(all, sensSecret) {
		t.Fatalf("the sensitive value leaked:\n%s", all)
	}
	if !strings.Contains(err.Error(), "output suppressed due to sensitive value in config") || !strings.Contains(err.Error(), "code 7") {
		t.Errorf("error: %v, want the exit code and the output suppressed", err)
	}
	if !strings.Contains(f.log.String(), "plain-output-here") {
		t.Errorf("the plain provisioner's output is not logged:\n%s", f.log)
	}
}

// With the command provider disabled (--allow-command=false), a template
// with a local-exec provisioner does not plan.
func TestProvisionerNeedsCommands(t *testing.T) {
	f := newProvFixture(t, `resource "rec" "a" {
  name = "a"
  provisioner "local-exec" { command = "true" }
}
`, false)
	_, diags := f.e.Plan(f.inst, nil)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "--allow-command=false") || !strings.Contains(diags.Error(), "t/main.hcl:7") {
		t.Fatalf("plan: got %v, want an error at the provisioner saying commands are disabled", diags)
	}
}

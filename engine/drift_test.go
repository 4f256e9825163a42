package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/command"
	"github.com/stackd/stackd/engine/provider/file"
)

// driftTmpl has files (one sensitive), a command with a read script and
// one without.
const driftTmpl = `
resource "file" "conf" {
  path    = "app.conf"
  content = "port=80\n"
}
resource "file" "secret" {
  path    = "secret.txt"
  content = var.k
  mode    = "0600"
}
resource "file" "gone" {
  path    = "gone.txt"
  content = "x"
}
resource "command" "svc" {
  create = "echo '{\"state\": \"running\"}'"
  read   = "cat svc.state 2>/dev/null || echo '{\"state\": \"running\"}'"
}
resource "command" "blind" {
  create = "true"
}
`

func driftFixture(t *testing.T) (*Engine, *Instance, *memJournal, string) {
	t.Helper()
	root := t.TempDir()
	reg := provider.Registry{
		"file":    file.New(file.Options{Root: root}),
		"command": command.New(command.Options{Root: root, Enabled: true}),
	}
	e := New(reg)
	_, inst := sensDefs(t, reg, driftTmpl)
	j := newJournal()
	planApply(t, e, inst, j)
	return e, inst, j, filepath.Join(root, "111", "eu")
}

func resourceDrift(t *testing.T, d InstanceDrift, addr string) ResourceDrift {
	t.Helper()
	for _, r := range d.Resources {
		if r.Address == addr {
			return r
		}
	}
	t.Fatalf("no drift result for %s in %+v", addr, d.Resources)
	return ResourceDrift{}
}

func TestCheckDrift(t *testing.T) {
	e, inst, j, dir := driftFixture(t)
	ctx := context.Background()

	d, err := e.CheckDrift(ctx, inst, j.list(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != DriftInSync {
		t.Fatalf("fresh instance: %s, want IN_SYNC: %+v", d.Status, d.Resources)
	}
	if r := resourceDrift(t, d, "command.blind"); r.Status != DriftNotChecked || !strings.Contains(r.Reason, "read script") {
		t.Errorf("command without read: %+v, want NOT_CHECKED saying why", r)
	}

	// Edit, chmod, delete, and make the read command report otherwise.
	if err := os.WriteFile(filepath.Join(dir, "app.conf"), []byte("port=8080\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("leaked-elsewhere"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "secret.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "svc.state"), []byte(`{"state": "stopped"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err = e.CheckDrift(ctx, inst, j.list(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != DriftDrifted {
		t.Fatalf("status %s, want DRIFTED", d.Status)
	}
	conf := resourceDrift(t, d, "file.conf")
	if conf.Status != DriftDrifted || len(conf.Differences) != 1 || conf.Differences[0].Property != "content" ||
		conf.Differences[0].Expected != "port=80\n" || conf.Differences[0].Actual != "port=8080\n" {
		t.Errorf("edited file: %+v", conf)
	}
	sec := resourceDrift(t, d, "file.secret")
	got := map[string]PropertyDifference{}
	for _, pd := range sec.Differences {
		got[pd.Property] = pd
	}
	if got["content"].Actual != SensitivePlaceholder || got["content"].Expected != SensitivePlaceholder {
		t.Errorf("a sensitive property's values are shown: %+v", got["content"])
	}
	if got["mode"].Expected != "0600" || got["mode"].Actual != "0644" {
		t.Errorf("chmod: %+v, want 0600 → 0644", got["mode"])
	}
	if g := resourceDrift(t, d, "file.gone"); g.Status != DriftDrifted || !g.Deleted {
		t.Errorf("deleted file: %+v", g)
	}
	svc := resourceDrift(t, d, "command.svc")
	if svc.Status != DriftDrifted || len(svc.Differences) != 1 || svc.Differences[0].Property != "state" || svc.Differences[0].Actual != "stopped" {
		t.Errorf("read command reporting otherwise: %+v", svc)
	}

	// Ignore rules: a whole resource, one property, a pattern.
	d2, err := e.CheckDrift(ctx, inst, j.list(), []string{"file.conf", "file.secret.mode", "command.*"})
	if err != nil {
		t.Fatal(err)
	}
	if r := resourceDrift(t, d2, "file.conf"); r.Status != DriftNotChecked {
		t.Errorf("ignored resource: %+v", r)
	}
	if r := resourceDrift(t, d2, "file.secret"); len(r.Differences) != 1 || r.Differences[0].Property != "content" {
		t.Errorf("ignored property still compared: %+v", r)
	}
	if r := resourceDrift(t, d2, "command.svc"); r.Status != DriftNotChecked {
		t.Errorf("pattern command.* does not ignore command.svc: %+v", r)
	}

	// Refresh, plan: the changes correct the drift, BeforeValue found.
	refreshed, drifted := d.Refresh(j.list())
	inst.Drifted = drifted
	p, diags := e.Plan(inst, refreshed)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	acts := actions(p)
	if acts["file.conf"] != "Update" || acts["file.gone"] != "Create" || acts["command.svc"] != "Update" || acts["file.secret"] != "Update" || acts["command.blind"] != "NoOp" {
		t.Errorf("plan after refresh: %v", acts)
	}
	for _, c := range p.Changes() {
		rc := c.ResourceChange
		switch rc.LogicalResourceId {
		case "file.conf":
			if rc.ResourceDriftStatus != "MODIFIED" || rc.PropertyChanges[0].BeforeValue != "port=8080\n" || rc.Details[0].ChangeSource != changeset.SourceDrift {
				t.Errorf("file.conf change: %+v", rc)
			}
		case "file.gone":
			if rc.ResourceDriftStatus != "DELETED" {
				t.Errorf("file.gone change: %+v", rc)
			}
		}
	}
	if text := renderAll(t, p, nil); strings.Contains(text, "leaked-elsewhere") || !strings.Contains(text, "changed outside stackd (drift)") {
		t.Errorf("rendered drift-correcting plan:\n%s", text)
	}

	// Applying it corrects the world; the next check is IN_SYNC.
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "svc.state")); err != nil {
		t.Fatal(err)
	}
	d, err = e.CheckDrift(ctx, inst, j.list(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != DriftInSync {
		t.Errorf("after the correction: %s %+v", d.Status, d.Resources)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "app.conf")); string(b) != "port=80\n" {
		t.Errorf("app.conf after the correction: %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dir, "secret.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret.txt after the correction: %v %v", fi, err)
	}
}

func TestCheckDriftStopsWithItsContext(t *testing.T) {
	e, inst, j, _ := driftFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.CheckDrift(ctx, inst, j.list(), nil); err == nil {
		t.Error("a cancelled check returned no error")
	}
}

func TestDriftBlock(t *testing.T) {
	files := func(block string) map[string]string {
		return map[string]string{
			"d.hcl": `stack_set "s" {
  template = "./t"
  ` + block + `
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`,
			"t/main.hcl": `resource "file" "f" {
  path    = "f"
  content = "x"
}`,
		}
	}
	reg := provider.Registry{"file": file.New(file.Options{Root: t.TempDir()})}
	for _, tc := range []struct{ block, want string }{
		{`drift { mode = "fix" }`, "Invalid drift mode"},
		{`drift { interval = "5s" }`, "Invalid drift interval"},
		{`drift { ignore = ["[bad"] }`, "Invalid drift ignore rule"},
		{"drift {}\n  drift {}", "Duplicate drift block"},
	} {
		_, diags := load(t, files(tc.block), reg)
		if !strings.Contains(diags.Error(), tc.want) || !strings.Contains(diags.Error(), "d.hcl:") {
			t.Errorf("%s: %v, want %q at d.hcl", tc.block, diags, tc.want)
		}
	}
	defs := mustLoad(t, files(`drift {
    interval = "1h"
    mode     = "correct"
    ignore   = ["file.f.mode"]
  }`), reg)
	d := defs.StackSet("s").Drift
	if d == nil || d.Interval.String() != "1h0m0s" || d.Mode != config.DriftModeCorrect || len(d.Ignore) != 1 {
		t.Errorf("drift block: %+v", d)
	}
}

// A long string is shown in a drift difference by its size and hash, as
// the file provider shows long content found: drift goes into every
// status commit.
func TestDriftShowsLongValuesShort(t *testing.T) {
	long := strings.Repeat("x", maxDriftValue+1)
	got := shortValue(cty.StringVal(long).Mark("m"))
	if v, marks := got.Unmark(); !strings.HasPrefix(v.AsString(), fmt.Sprintf("(%d bytes, sha256 ", len(long))) || len(marks) != 1 {
		t.Errorf("shortValue of %d bytes = %#v", len(long), got)
	}
	short := cty.StringVal(strings.Repeat("x", maxDriftValue))
	if got := shortValue(short); !got.RawEquals(short) {
		t.Errorf("a value of %d bytes was shortened", maxDriftValue)
	}
}

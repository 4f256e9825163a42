package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// The attribution cases of docs/design.md §4 (issue 16, item 7): each resource of
// this template changes for one reason between v1 and v2.
const attributionTmpl = `
variable "image"    { type = string }
variable "tag"      { type = string }
variable "basename" { type = string }

locals {
  label = "app-${var.tag}"
}

# A literal edit beside an unchanged variable: DirectModification, null.
resource "rec" "literal" {
  name    = "literal"
  content = "image=${var.image} LITERAL"
}

# A variable reached through a local: ParameterReference var.tag.
resource "rec" "vialocal" {
  name    = "vialocal"
  content = local.label
}

# Two variables, one changed: only var.tag is blamed.
resource "rec" "several" {
  name    = "several"
  content = "${var.image}/${var.tag}"
}

# A literal edit and a changed variable: both are named.
resource "rec" "both" {
  name    = "both"
  content = "${var.tag}-BOTH"
}

# Replaced when basename changes: its physical id changes.
resource "rec" "base" {
  name = var.basename
}

# A reference to another resource's physical id: ResourceReference.
resource "rec" "ref" {
  name    = "ref"
  content = rec.base.id
}

# Only the last member changes (through var.tag).
resource "rec" "cnt" {
  count   = 3
  name    = "cnt${count.index}"
  content = count.index == 2 ? var.tag : "fixed"
}

# Members reading their counterpart's attribute keep the index.
resource "rec" "user" {
  count   = 3
  name    = "user${count.index}"
  content = rec.cnt[count.index].digest
}

resource "rec" "pinned" {
  name    = "pinned"
  content = "x-${rec.cnt[2].digest}"
}

# Metadata edited by hand: DirectModification with its values.
resource "rec" "meta" {
  name     = "meta"
  metadata = { team = "METATEAM", image = var.image }
}
`

func attributionFiles(version string) map[string]string {
	tag, basename := "blue", "b1"
	if version == "v2" {
		tag, basename = "green", "b2"
	}
	tmpl := attributionTmpl
	if version == "v2" {
		tmpl = strings.NewReplacer("LITERAL", "EDITED", "-BOTH", "-BOTH2", "METATEAM", "sre").Replace(tmpl)
	}
	return map[string]string{
		"app.hcl": `
stack_set "app" {
  template = "./tmpl"
  vars = {
    image    = "nginx:1.25"
    tag      = "` + tag + `"
    basename = "` + basename + `"
  }
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}
`,
		"tmpl/main.hcl": tmpl,
	}
}

// details returns, per full address, the "ChangeSource CausingEntity" of
// each detail of its Properties or Metadata targets.
func details(changes []changeset.Change) map[string][]string {
	out := map[string][]string{}
	for _, c := range changes {
		rc := c.ResourceChange
		for _, d := range rc.Details {
			ent := "null"
			if d.CausingEntity != nil {
				ent = *d.CausingEntity
			}
			out[rc.FullAddress()] = append(out[rc.FullAddress()], d.Target.Attribute+":"+d.Target.Name+" "+d.ChangeSource+" "+ent)
		}
	}
	return out
}

func TestChangeAttribution(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	v1 := mustLoad(t, attributionFiles("v1"), reg).StackSet("app")
	v2 := mustLoad(t, attributionFiles("v2"), reg).StackSet("app")
	target := config.Target{Region: "eu", Account: "111"}
	j := newJournal()
	planApply(t, e, &Instance{StackSet: v1, StackSetID: "ss-1", Target: target}, j)

	p, diags := e.Plan(&Instance{StackSet: v2, StackSetID: "ss-1", Target: target, Prior: v1}, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	changes := p.Changes()
	want := map[string][]string{
		"rec.literal":  {"Properties:content DirectModification null"},
		"rec.vialocal": {"Properties:content ParameterReference var.tag"},
		"rec.several":  {"Properties:content ParameterReference var.tag"},
		"rec.both":     {"Properties:content DirectModification null", "Properties:content ParameterReference var.tag"},
		"rec.base":     {"Properties:name ParameterReference var.basename"},
		"rec.ref":      {"Properties:content ResourceReference rec.base"},
		"rec.cnt[2]":   {"Properties:content ParameterReference var.tag"},
		"rec.user[2]":  {"Properties:content ResourceAttribute rec.cnt[2].digest"},
		"rec.pinned":   {"Properties:content ResourceAttribute rec.cnt[2].digest"},
		"rec.meta":     {"Metadata: DirectModification null"},
	}
	if diff := cmp.Diff(want, details(changes)); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
	checkReplacementFollowsDetails(t, changes)
	for _, c := range changes {
		rc := c.ResourceChange
		if rc.LogicalResourceId != "rec.meta" {
			continue
		}
		want := []changeset.ResourcePropertyChange{{Name: "Metadata",
			BeforeValue: map[string]any{"image": "nginx:1.25", "team": "METATEAM"},
			AfterValue:  map[string]any{"image": "nginx:1.25", "team": "sre"}}}
		if diff := cmp.Diff(want, rc.PropertyChanges); diff != "" {
			t.Errorf("metadata values (-want +got):\n%s", diff)
		}
	}

	// The golden change set of these cases, in every renderer.
	cs := &changeset.StackSetChangeSet{StackSetName: "app", StackSetId: "ss-1", Revision: "2b2b2b2b2b2b", Action: changeset.InstanceUpdate}
	cs.Add(changeset.InstanceChangeSet{Region: "eu", Account: "111", Action: changeset.InstanceUpdate, Changes: changes})
	for _, r := range goldenRenderers {
		checkGolden(t, "attribution."+r.ext, func(b *bytes.Buffer) error { return r.render(b, cs) })
	}

	// Without the prior stack set the variables last applied are unknown:
	// every variable reached is blamed, and a literal edit that reaches
	// none is still DirectModification.
	p, _ = e.Plan(&Instance{StackSet: v2, StackSetID: "ss-1", Target: target}, j.list())
	got := details(p.Changes())
	if diff := cmp.Diff([]string{"Properties:content ParameterReference var.image", "Properties:content ParameterReference var.tag"}, got["rec.several"]); diff != "" {
		t.Errorf("without Prior, rec.several (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Properties:content ResourceReference rec.base"}, got["rec.ref"]); diff != "" {
		t.Errorf("without Prior, rec.ref (-want +got):\n%s", diff)
	}
}

// TestAttributionSensitiveUntrusted: for a ref that is not the deploy
// branch, a sensitive variable is always blamed when reached, never
// compared with the value last applied (the answer would tell whether a
// guess of the secret is right).
func TestAttributionSensitiveUntrusted(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	files := func(secret, suffix string) map[string]string {
		return map[string]string{
			"app.hcl": `
stack_set "app" {
  template = "./tmpl"
  vars = { pw = "` + secret + `" }
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}
`,
			"tmpl/main.hcl": `
variable "pw" {
  type      = string
  sensitive = true
}
resource "rec" "s" {
  name   = "s"
  secret = "${var.pw}` + suffix + `"
}
`,
		}
	}
	v1 := mustLoad(t, files("hunter2", ""), reg).StackSet("app")
	target := config.Target{Region: "eu", Account: "111"}
	j := newJournal()
	planApply(t, e, &Instance{StackSet: v1, StackSetID: "ss-1", Target: target}, j)

	// The right guess with a literal edit: a trusted plan says only the
	// template changed; an untrusted one must not be able to tell.
	guess := mustLoad(t, files("hunter2", "!"), reg).StackSet("app")
	p, diags := e.Plan(&Instance{StackSet: guess, StackSetID: "ss-1", Target: target, Prior: v1}, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if diff := cmp.Diff([]string{"Properties:secret DirectModification null"}, details(p.Changes())["rec.s"]); diff != "" {
		t.Errorf("trusted (-want +got):\n%s", diff)
	}
	wrong := mustLoad(t, files("letmein", "!"), reg).StackSet("app")
	var seen []map[string][]string
	for _, ss := range []*config.StackSet{guess, wrong} {
		p, diags := e.Plan(&Instance{StackSet: ss, StackSetID: "ss-1", Target: target, Prior: v1, Untrusted: true}, j.list())
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		seen = append(seen, details(p.Changes()))
	}
	if diff := cmp.Diff(seen[0], seen[1]); diff != "" {
		t.Errorf("an untrusted plan tells a right guess of the secret from a wrong one (-right +wrong):\n%s", diff)
	}
}

// checkGolden compares what render writes with testdata/golden/NAME.golden
// (rewritten with -update).
func checkGolden(t *testing.T, name string, render func(*bytes.Buffer) error) {
	t.Helper()
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden", name+".golden")
	if *updateGolden {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./engine -run %s -update to create it)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("%s differs (-want +got; rerun with -update and review the diff):\n%s", path, diff)
	}
}

// TestSystemDetailTarget: an update a crash interrupted is repeated with
// the seed's System source, one well-formed Properties target (with its
// Name) per property it sends.
func TestSystemDetailTarget(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	ss := mustLoad(t, attributionFiles("v1"), reg).StackSet("app")
	inst := &Instance{StackSet: ss, StackSetID: "ss-1", Target: config.Target{Region: "eu", Account: "111"}, Prior: ss}
	j := newJournal()
	planApply(t, e, inst, j)
	r := j.recs["rec.literal"]
	r.Status, r.RequestID = StatusPendingUpdate, "req-1"
	j.recs["rec.literal"] = r

	p, diags := e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got := details(p.Changes())
	want := map[string][]string{"rec.literal": {
		"Properties:content System rec.literal",
		"Properties:name System rec.literal",
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestTypeHierarchy: one type per module level, split back on "/".
func TestTypeHierarchy(t *testing.T) {
	for _, tc := range []struct {
		sources []string
		want    string
	}{
		{[]string{"./modules/monitoring", "./modules/alerts"}, "MODULE::modules::monitoring/MODULE::modules::alerts"},
		{[]string{"../shared/x"}, "MODULE::..::shared::x"},
		{[]string{"./a:b/c%d"}, "MODULE::a%3Ab::c%25d"},
	} {
		got := typeHierarchy(tc.sources)
		if got != tc.want {
			t.Errorf("typeHierarchy(%q) = %q, want %q", tc.sources, got, tc.want)
		}
		if n := len(strings.Split(got, "/")); n != len(tc.sources) {
			t.Errorf("%q splits into %d levels, want %d", got, n, len(tc.sources))
		}
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
)

// The change sets of docs/design.md §4 (issue 16, items 7–12), through the CLI on
// real repositories.

// csFixture is a repository holding files (committed on main) with
// stackd's state and targets beside it.
func csFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{
		repo:    filepath.Join(dir, "repo"),
		state:   filepath.Join(dir, "stackd", "state"),
		targets: filepath.Join(dir, "targets"),
	}
	writeTree(t, f.repo, files)
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "initial definitions")
	return f
}

// change writes files into the fixture's repository and commits them.
func (f *fixture) change(t *testing.T, files map[string]string) {
	t.Helper()
	writeTree(t, f.repo, files)
	f.commit(t, "change")
}

// planJSON runs `stackd plan -o json` and decodes the result.
func (f *fixture) planJSON(t *testing.T) reconciler.PlanResult {
	t.Helper()
	res := mustStackd(t, append([]string{"plan", "-o", "json"}, f.flags()...)...)
	var pr reconciler.PlanResult
	if err := json.Unmarshal([]byte(res.stdout), &pr); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, res.stdout)
	}
	return pr
}

// planText runs `stackd plan` (text) and returns what it printed.
func (f *fixture) planText(t *testing.T) string {
	t.Helper()
	return mustStackd(t, append([]string{"plan"}, f.flags()...)...).stdout
}

// changesOf returns the resource changes of one instance by full address.
func changesOf(t *testing.T, pr reconciler.PlanResult, region, account string) map[string]changeset.ResourceChange {
	t.Helper()
	out := map[string]changeset.ResourceChange{}
	for _, cs := range pr.ChangeSets {
		for _, ic := range cs.Instances {
			if ic.Region != region || ic.Account != account {
				continue
			}
			for _, c := range ic.Changes {
				out[c.ResourceChange.FullAddress()] = c.ResourceChange
			}
		}
	}
	return out
}

const csStackSet = `
stack_set "app" {
  template = "./tmpl"
  vars = {
    image = "nginx:1.25"
    tag   = "blue"
  }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`

const csTemplate = `
variable "image" { type = string }
variable "tag"   { type = string }

resource "file" "config" {
  path    = "app/config"
  content = "image=${var.image}\n"
}
`

// TestPlanDetailedExitcode: with --detailed-exitcode, `stackd plan` exits
// 2 when something changes, 0 when nothing does, 1 on an error; without it,
// 0 whenever it could plan.
func TestPlanDetailedExitcode(t *testing.T) {
	t.Parallel()
	f := csFixture(t, map[string]string{"app.hcl": csStackSet, "tmpl/main.hcl": csTemplate})
	plan := func(extra ...string) cliResult {
		return stackd(t, append(append([]string{"plan"}, f.flags()...), extra...)...)
	}
	if res := plan("--detailed-exitcode"); res.code() != 2 {
		t.Fatalf("a plan that creates: exit %d, want 2\n%s", res.code(), res)
	}
	if res := plan(); res.code() != 0 {
		t.Fatalf("without --detailed-exitcode: exit %d, want 0\n%s", res.code(), res)
	}
	f.mustApply(t)
	if res := plan("--detailed-exitcode"); res.code() != 0 {
		t.Fatalf("a plan without changes: exit %d, want 0\n%s", res.code(), res)
	}
	f.change(t, map[string]string{"tmpl/main.hcl": strings.Replace(csTemplate, `"image=`, `"img=`, 1)})
	if res := plan("--detailed-exitcode", "-o", "json"); res.code() != 2 {
		t.Fatalf("a plan that modifies: exit %d, want 2\n%s", res.code(), res)
	}
	f.change(t, map[string]string{"tmpl/main.hcl": csTemplate + "\nresource \"file\" {\n"})
	if res := plan("--detailed-exitcode"); res.code() != 1 {
		t.Fatalf("definitions that do not validate: exit %d, want 1\n%s", res.code(), res)
	}
}

// TestPlanNamesTheRealCause: `stackd plan` compares against the revision
// each instance last applied, so a literal edit beside an unchanged
// variable is DirectModification, a variable reached through a local is
// blamed by name, only the variable that changed is blamed, and a counted
// member keeps its index.
func TestPlanNamesTheRealCause(t *testing.T) {
	t.Parallel()
	const tmpl = `
variable "image" { type = string }
variable "tag"   { type = string }

locals { label = "tag=${var.tag}" }

resource "file" "literal" {
  path    = "app/literal"
  content = "image=${var.image} v1\n"
}

resource "file" "label" {
  path    = "app/label"
  content = local.label
}

resource "file" "both" {
  path    = "app/both"
  content = "${var.image}/${var.tag}"
}

resource "file" "cnt" {
  count   = 3
  path    = "app/cnt${count.index}"
  content = count.index == 2 ? var.tag : "fixed"
}

resource "file" "sum" {
  count   = 3
  path    = "app/sum${count.index}"
  content = file.cnt[count.index].sha256
}
`
	f := csFixture(t, map[string]string{"app.hcl": csStackSet, "tmpl/main.hcl": tmpl})
	f.mustApply(t)
	f.change(t, map[string]string{
		"tmpl/main.hcl": strings.Replace(tmpl, "v1", "v2", 1),
		"app.hcl":       strings.Replace(csStackSet, `"blue"`, `"green"`, 1),
	})
	got := map[string][]string{}
	for addr, rc := range changesOf(t, f.planJSON(t), "eu-west-1", "111111111111") {
		for _, d := range rc.Details {
			ent := "null"
			if d.CausingEntity != nil {
				ent = *d.CausingEntity
			}
			got[addr] = append(got[addr], d.Target.Name+" "+d.ChangeSource+" "+ent)
		}
	}
	want := map[string][]string{
		"file.literal": {"content DirectModification null"},
		"file.label":   {"content ParameterReference var.tag"},
		"file.both":    {"content ParameterReference var.tag"},
		"file.cnt[2]":  {"content ParameterReference var.tag"},
		"file.sum[2]":  {"content ResourceAttribute file.cnt[2].sha256"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
}

// TestPlanRetainAndMetadata: a resource removed under deletion_policy =
// "Retain" is shown as retained and not counted as a destroy; a metadata
// change shows its values before and after.
func TestPlanRetainAndMetadata(t *testing.T) {
	t.Parallel()
	const tmpl = `
variable "image" { type = string }
variable "tag"   { type = string }

resource "file" "kept" {
  path            = "app/kept"
  content         = "kept\n"
  deletion_policy = "Retain"
}

resource "file" "gone" {
  path    = "app/gone"
  content = "gone\n"
}

resource "file" "labelled" {
  path     = "app/labelled"
  content  = "x\n"
  metadata = { owner = "team-a", image = var.image }
}
`
	f := csFixture(t, map[string]string{"app.hcl": csStackSet, "tmpl/main.hcl": tmpl})
	f.mustApply(t)
	next := tmpl[:strings.Index(tmpl, `resource "file" "kept"`)] + tmpl[strings.Index(tmpl, `resource "file" "labelled"`):]
	f.change(t, map[string]string{"tmpl/main.hcl": strings.Replace(next, "team-a", "team-b", 1)})

	pr := f.planJSON(t)
	if len(pr.ChangeSets) != 1 {
		t.Fatalf("got %d change sets", len(pr.ChangeSets))
	}
	s := pr.ChangeSets[0].Summary
	if s.ResourcesToRemove != 1 || s.ResourcesToRetain != 1 || s.ResourcesToModify != 1 {
		t.Errorf("summary: %+v, want 1 to remove, 1 to retain, 1 to modify", s)
	}
	changes := changesOf(t, pr, "eu-west-1", "111111111111")
	if rc := changes["file.kept"]; !rc.Retained() || rc.Action != "Remove" {
		t.Errorf("file.kept: %+v, want a retained Remove", rc)
	}
	if rc := changes["file.gone"]; rc.Retained() {
		t.Errorf("file.gone: %+v, want a Remove that destroys", rc)
	}
	rc := changes["file.labelled"]
	wantPC := []changeset.ResourcePropertyChange{{Name: "Metadata",
		BeforeValue: map[string]any{"image": "nginx:1.25", "owner": "team-a"},
		AfterValue:  map[string]any{"image": "nginx:1.25", "owner": "team-b"}}}
	if diff := cmp.Diff(wantPC, rc.PropertyChanges); diff != "" {
		t.Errorf("metadata values (-want +got):\n%s", diff)
	}
	if len(rc.Details) != 1 || rc.Details[0].Target.Attribute != "Metadata" || rc.Details[0].ChangeSource != changeset.SourceDirectModification || rc.Details[0].CausingEntity != nil {
		t.Errorf("metadata details: %+v", rc.Details)
	}

	text := f.planText(t)
	for _, want := range []string{
		`. file.kept will be retained: removed from the stack, not destroyed (deletion_policy = "Retain")`,
		"- file.gone\n",
		`~ Metadata = {"image":"nginx:1.25","owner":"team-a"} -> {"image":"nginx:1.25","owner":"team-b"}`,
		"1 to destroy, 1 to retain (removed, not destroyed).",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
	md := mustStackd(t, append([]string{"plan", "-o", "markdown"}, f.flags()...)...).stdout
	if !strings.Contains(md, "`.` `file.kept` — **retained**") || !strings.Contains(md, "| `-` to destroy | 1 |") {
		t.Errorf("plan markdown does not show the retained removal apart:\n%s", md)
	}
	// Applying keeps the file in the world and deletes the other.
	f.mustApply(t)
	if got := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "app", "kept")); got != "kept\n" {
		t.Errorf("retained file: %q", got)
	}
}

// TestPlanModuleAddresses: resources inside nested modules are printed by
// their full address, and their removals carry the module types too, one
// per level, even when the module itself is removed.
func TestPlanModuleAddresses(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"app.hcl": csStackSet,
		"tmpl/main.hcl": csTemplate + `
module "outer" {
  source = "./modules/outer"
  tag    = var.tag
}
`,
		"tmpl/modules/outer/main.hcl": `
variable "tag" { type = string }
module "inner" {
  source = "./inner"
  tag    = var.tag
}
`,
		"tmpl/modules/outer/inner/main.hcl": `
variable "tag" { type = string }
resource "file" "i" {
  count   = 2
  path    = "inner/${count.index}"
  content = var.tag
}
`,
	}
	f := csFixture(t, files)
	f.mustApply(t)
	// One member fewer, the other changed through the variable.
	f.change(t, map[string]string{
		"app.hcl":                           strings.Replace(csStackSet, `"blue"`, `"green"`, 1),
		"tmpl/modules/outer/inner/main.hcl": strings.Replace(files["tmpl/modules/outer/inner/main.hcl"], "count   = 2", "count   = 1", 1),
	})
	const types = "MODULE::modules::outer/MODULE::inner"
	changes := changesOf(t, f.planJSON(t), "eu-west-1", "111111111111")
	for _, addr := range []string{"module.outer.module.inner.file.i[0]", "module.outer.module.inner.file.i[1]"} {
		rc, ok := changes[addr]
		if !ok {
			t.Fatalf("no change of %s: %v", addr, keys(changes))
		}
		if rc.ModuleInfo == nil || rc.ModuleInfo.LogicalIdHierarchy != "outer/inner" || rc.ModuleInfo.TypeHierarchy != types {
			t.Errorf("%s (%s): ModuleInfo %+v, want outer/inner and %s", addr, rc.Action, rc.ModuleInfo, types)
		}
	}
	text := f.planText(t)
	for _, want := range []string{"~ module.outer.module.inner.file.i[0]\n", "- module.outer.module.inner.file.i[1]\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "  file.i") {
		t.Errorf("plan text prints a bare name:\n%s", text)
	}

	// The module is removed altogether: its types come from the revision
	// last applied.
	f.mustApply(t)
	f.change(t, map[string]string{"tmpl/main.hcl": csTemplate})
	changes = changesOf(t, f.planJSON(t), "eu-west-1", "111111111111")
	rc := changes["module.outer.module.inner.file.i[0]"]
	if rc.Action != "Remove" || rc.ModuleInfo == nil || rc.ModuleInfo.TypeHierarchy != types {
		t.Errorf("removal with its module: %+v (ModuleInfo %+v), want TypeHierarchy %s", rc, rc.ModuleInfo, types)
	}
}

// fleetStackSet is csStackSet over 2 regions × n accounts, with extra
// blocks inside the stack_set block.
func fleetStackSet(n int, image, extra string) string {
	accounts := make([]string, n)
	for i := range accounts {
		accounts[i] = fmt.Sprintf(`"%012d"`, 100000000000+i)
	}
	return `
stack_set "app" {
  template = "./tmpl"
  vars = {
    image = "` + image + `"
    tag   = "blue"
  }
  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = [` + strings.Join(accounts, ", ") + `]
  }
  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 10
    failure_tolerance_count = 9
  }
` + extra + `
}
`
}

// TestPlanGroupsOnlyEqualChanges: instances are grouped, in Markdown and
// in text, only when their changes are equal including values. An override
// that sends one account to another image is a group of its own, and the
// text plan of many equal instances is a screen, not a page per instance.
func TestPlanGroupsOnlyEqualChanges(t *testing.T) {
	t.Parallel()
	const n = 20 // accounts: 40 instances
	f := csFixture(t, map[string]string{"app.hcl": fleetStackSet(n, "nginx:1.25", ""), "tmpl/main.hcl": csTemplate})
	f.mustApply(t)
	f.change(t, map[string]string{"app.hcl": fleetStackSet(n, "nginx:1.27", `
  instance_override {
    accounts           = ["100000000007"]
    vars               = { image = "nginx:1.28-rc" }
    use_stack_set_vars = ["tag"]
  }
`)})

	md := mustStackd(t, append([]string{"plan", "-o", "markdown"}, f.flags()...)...).stdout
	for _, want := range []string{
		"#### `~` 38 of 40 instances will be updated\n",
		"#### `~` 2 of 40 instances will be updated\n\n`eu-west-1/100000000007`, `us-east-1/100000000007`\n",
		" and 28 more (eu-west-1: 19 of 20; us-east-1: 19 of 20)\n",
		`+ image=nginx:1.28-rc`,
		`+ image=nginx:1.27`,
	} {
		if !strings.Contains(md, want) {
			t.Errorf("plan markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "values of their own") || strings.Contains(md, "values of its own") {
		t.Errorf("a group hides values that differ:\n%s", md)
	}

	text := f.planText(t)
	for _, want := range []string{
		"~ 38 instances will be updated in place, each with the same changes: eu-west-1/100000000000, ",
		" and 28 more (eu-west-1: 19 of 20; us-east-1: 19 of 20)\n",
		"~ 2 instances will be updated in place, each with the same changes: eu-west-1/100000000007, us-east-1/100000000007\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("plan text lacks %q:\n%s", want, text)
		}
	}
	if lines := strings.Count(text, "\n"); lines > 30 {
		t.Errorf("the text plan of 40 instances in 2 groups has %d lines:\n%s", lines, text)
	}
}

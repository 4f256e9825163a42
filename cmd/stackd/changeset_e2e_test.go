package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/reconciler"
)

// The change sets of DESIGN §4 (issue 16, items 7–12), through the CLI on
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
func changesOf(t *testing.T, pr reconciler.PlanResult, region, account string) map[string]engine.ResourceChange {
	t.Helper()
	out := map[string]engine.ResourceChange{}
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

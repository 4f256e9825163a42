package engine

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// changeOf returns the change of the resource at addr.
func changeOf(t *testing.T, p *InstancePlan, addr string) changeset.ResourceChange {
	t.Helper()
	for _, c := range p.Changes() {
		if c.ResourceChange.FullAddress() == addr {
			return c.ResourceChange
		}
	}
	t.Fatalf("no change of %s in the plan", addr)
	return changeset.ResourceChange{}
}

// resourcePlanOf returns the plan of the resource at addr.
func resourcePlanOf(t *testing.T, p *InstancePlan, addr string) *ResourcePlan {
	t.Helper()
	for _, rp := range p.Resources {
		if rp.Address == addr {
			return rp
		}
	}
	t.Fatalf("no plan of %s", addr)
	return nil
}

// checkReplacementFollowsDetails checks the seed's rule on every Modify:
// Replacement is what its details' targets say, the strongest winning.
func checkReplacementFollowsDetails(t *testing.T, changes []changeset.Change) {
	t.Helper()
	for _, c := range changes {
		rc := c.ResourceChange
		if rc.Action != changeset.Modify || len(rc.Details) == 0 {
			continue
		}
		if want := changeset.ReplacementOf(rc.Details); rc.Replacement != want {
			t.Errorf("%s: Replacement %s next to details %+v, want %s", rc.FullAddress(), rc.Replacement, rc.Details, want)
		}
	}
}

// TestRepeatedUpdateAfterCrash: an update a crash interrupted is repeated
// with its request id. When the template gives the properties it started
// from, the change is the seed's System source, one target per property
// sent again; none changed, so none claims to require recreation (rec's
// name is Always, tags Conditionally for a change), and Replacement
// follows: False. The change says it repeats an interrupted update.
func TestRepeatedUpdateAfterCrash(t *testing.T) {
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	files := func(content string) map[string]string {
		return map[string]string{
			"app.hcl": `
stack_set "app" {
  template = "./tmpl"
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}
`,
			"tmpl/main.hcl": `
resource "rec" "slow" {
  name    = "slow"
  content = "` + content + `"
  tags    = { team = "a" }
}
`,
		}
	}
	v1 := mustLoad(t, files("one"), reg).StackSet("app")
	target := config.Target{Region: "eu", Account: "111"}
	inst := &Instance{StackSet: v1, StackSetID: "ss-1", Target: target, Prior: v1}
	j := newJournal()
	planApply(t, e, inst, j)
	// The crash: the update was journaled, its answer never recorded (the
	// journal keeps the properties it started from).
	r := j.recs["rec.slow"]
	r.Status, r.RequestID = StatusPendingUpdate, "req-1"
	j.recs["rec.slow"] = r

	t.Run("same template", func(t *testing.T) {
		p, diags := e.Plan(inst, j.list())
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		rp := resourcePlanOf(t, p, "rec.slow")
		if rp.Action != Update || rp.RequestID != "req-1" {
			t.Errorf("plan: %s with request id %q, want Update repeating req-1", rp.Action, rp.RequestID)
		}
		rc := changeOf(t, p, "rec.slow")
		e := "rec.slow"
		detail := func(name string) changeset.ResourceChangeDetail {
			return changeset.ResourceChangeDetail{ChangeSource: changeset.SourceSystem, CausingEntity: &e, Evaluation: "Static",
				Target: changeset.ResourceTargetDefinition{Attribute: "Properties", Name: name, RequiresRecreation: "Never"}}
		}
		want := changeset.ResourceChange{
			Action: changeset.Modify, LogicalResourceId: "rec.slow", PhysicalResourceId: "phys-slow", ResourceType: "rec",
			Replacement: changeset.ReplacementFalse, Scope: []string{"Properties"},
			Details:                  []changeset.ResourceChangeDetail{detail("content"), detail("name"), detail("tags")},
			RepeatsInterruptedUpdate: true,
		}
		if diff := cmp.Diff(want, rc); diff != "" {
			t.Errorf("change (-want +got):\n%s", diff)
		}
		checkReplacementFollowsDetails(t, p.Changes())
	})

	t.Run("template changed since", func(t *testing.T) {
		// The properties changed since the interrupted update began: the
		// update is repeated with the new ones, the change named as usual.
		v2 := mustLoad(t, files("two"), reg).StackSet("app")
		p, diags := e.Plan(&Instance{StackSet: v2, StackSetID: "ss-1", Target: target, Prior: v1}, j.list())
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		rc := changeOf(t, p, "rec.slow")
		if !rc.RepeatsInterruptedUpdate || rc.Replacement != changeset.ReplacementFalse {
			t.Errorf("change: repeats %v, Replacement %s; want a repeated update, Replacement False", rc.RepeatsInterruptedUpdate, rc.Replacement)
		}
		if diff := cmp.Diff([]string{"Properties:content DirectModification null"}, details(p.Changes())["rec.slow"]); diff != "" {
			t.Errorf("details (-want +got):\n%s", diff)
		}
		checkReplacementFollowsDetails(t, p.Changes())
	})

	t.Run("now a replacement", func(t *testing.T) {
		// A change of name requires recreation: a replacement, not the
		// interrupted update repeated.
		v3 := mustLoad(t, map[string]string{"app.hcl": files("")["app.hcl"], "tmpl/main.hcl": strings.Replace(files("one")["tmpl/main.hcl"], `name    = "slow"`, `name    = "slow2"`, 1)}, reg).StackSet("app")
		p, diags := e.Plan(&Instance{StackSet: v3, StackSetID: "ss-1", Target: target, Prior: v1}, j.list())
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		if a := resourcePlanOf(t, p, "rec.slow").Action; a != Replace {
			t.Errorf("plan: %s, want Replace", a)
		}
		rc := changeOf(t, p, "rec.slow")
		if rc.RepeatsInterruptedUpdate || rc.Replacement != changeset.ReplacementTrue {
			t.Errorf("change: repeats %v, Replacement %s; want a replacement (True), no repeated update", rc.RepeatsInterruptedUpdate, rc.Replacement)
		}
		checkReplacementFollowsDetails(t, p.Changes())
	})

	t.Run("rendered", func(t *testing.T) {
		p, diags := e.Plan(inst, j.list())
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		cs := &changeset.StackSetChangeSet{StackSetName: "app", StackSetId: "ss-1", Revision: "3c3c3c3c3c3c", Action: changeset.InstanceUpdate}
		cs.Add(changeset.InstanceChangeSet{Region: "eu", Account: "111", Action: changeset.InstanceUpdate, Changes: p.Changes()})
		for _, r := range goldenRenderers {
			checkGolden(t, "repeated_update."+r.ext, func(b *bytes.Buffer) error { return r.render(b, cs) })
		}
	})

	// Applied, the update is repeated once with its request id, and the
	// resource is applied again.
	p, diags := e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	rec.calls = nil
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"update rec.slow phys-slow"}, rec.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if got := j.recs["rec.slow"]; got.Status != StatusApplied || got.RequestID != "req-1" {
		t.Errorf("after the repeated update: %s with request id %q, want %s with req-1", got.Status, got.RequestID, StatusApplied)
	}
}

// planningRecorder is the recorder as a provider that plans its own
// changes (as Terraform providers do): a change of content replaces.
type planningRecorder struct{ *recorder }

var _ provider.ChangePlanner = planningRecorder{}

func (planningRecorder) PlanChange(_ context.Context, req provider.Request) (provider.PlannedChange, error) {
	return provider.PlannedChange{RequiresReplace: []string{"content"}}, nil
}

// TestPlannedReplacementInDetails: what the provider says replaces is in
// the details' targets, and for a ref that makes no provider call the
// changes may replace (Conditionally); Replacement follows the details.
func TestPlannedReplacementInDetails(t *testing.T) {
	rec := planningRecorder{newRecorder()}
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	v1 := mustLoad(t, attributionFiles("v1"), reg).StackSet("app")
	v2 := mustLoad(t, attributionFiles("v2"), reg).StackSet("app")
	target := config.Target{Region: "eu", Account: "111"}
	j := newJournal()
	planApply(t, e, &Instance{StackSet: v1, StackSetID: "ss-1", Target: target}, j)
	for _, tc := range []struct {
		name        string
		untrusted   bool
		requires    string
		replacement string
	}{
		{name: "deploy branch", requires: "Always", replacement: changeset.ReplacementTrue},
		{name: "untrusted ref", untrusted: true, requires: "Conditionally", replacement: changeset.ReplacementConditional},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, diags := e.Plan(&Instance{StackSet: v2, StackSetID: "ss-1", Target: target, Prior: v1, Untrusted: tc.untrusted}, j.list())
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			rc := changeOf(t, p, "rec.vialocal")
			if rc.Replacement != tc.replacement {
				t.Errorf("Replacement %s, want %s", rc.Replacement, tc.replacement)
			}
			for _, d := range rc.Details {
				if d.Target.RequiresRecreation != tc.requires {
					t.Errorf("%s: RequiresRecreation %s, want %s", d.Target.Name, d.Target.RequiresRecreation, tc.requires)
				}
			}
			checkReplacementFollowsDetails(t, p.Changes())
		})
	}
}

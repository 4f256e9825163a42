package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/provider"
)

func TestReplaceTriggeredBy(t *testing.T) {
	// rec.src's content is Never-recreation: changing it updates rec.src.
	tmpl := func(srcContent, srcTags, trigger string) map[string]string {
		return map[string]string{"main.tf": `
resource "rec" "src" {
  count   = 2
  name    = "src${count.index}"
  content = "` + srcContent + `"
  tags    = { v = "` + srcTags + `" }
}
resource "rec" "other" { name = "other" }
resource "rec" "dst" {
  count = 2
  name  = "dst${count.index}"
  lifecycle {
    replace_triggered_by = [` + trigger + `]
  }
}
`}
	}
	cases := []struct {
		name             string
		trigger          string
		content, tags    string
		wantDst0, wantD1 string
		cause            string
	}{
		{"whole resource updated", "rec.src", "new", "a", "Replace", "Replace", "rec.src[0]"},
		{"nothing changed", "rec.src", "old", "a", "NoOp", "NoOp", ""},
		{"instance by count.index", "rec.src[count.index]", "new", "a", "Replace", "Replace", "rec.src[0]"},
		{"literal instance", "rec.src[1]", "new", "a", "Replace", "Replace", "rec.src[1]"},
		{"attribute changed", "rec.src[count.index].content", "new", "a", "Replace", "Replace", "rec.src[0].content"},
		{"other attribute changed", "rec.src[count.index].content", "old", "b", "NoOp", "NoOp", ""},
		{"unrelated resource", "rec.other", "new", "a", "NoOp", "NoOp", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newRefactorEnv(t)
			p, _ := env.plan(tmpl("old", "a", tc.trigger))
			env.apply(p)
			env.calls()
			after := tmpl(tc.content, tc.tags, tc.trigger)
			p, _ = env.plan(after)
			got := actions(p)
			if got["rec.dst[0]"] != tc.wantDst0 || got["rec.dst[1]"] != tc.wantD1 {
				t.Fatalf("actions: got %v, want rec.dst[0] %s, rec.dst[1] %s", got, tc.wantDst0, tc.wantD1)
			}
			if tc.cause != "" {
				var rc *changeset.ResourceChange
				for _, c := range p.Changes() {
					if c.ResourceChange.LogicalResourceId == "rec.dst[0]" {
						rc = &c.ResourceChange
					}
				}
				caused := false
				for _, d := range rcDetails(rc) {
					caused = caused || d.CausingEntity != nil && *d.CausingEntity == tc.cause
				}
				if rc == nil || rc.Replacement != changeset.ReplacementTrue || !caused {
					t.Fatalf("change of rec.dst[0]: got %+v, want a replacement caused by %s", rc, tc.cause)
				}
			}
			env.apply(p)
			calls := strings.Join(env.calls(), "; ")
			if replaced := strings.Contains(calls, "delete rec.dst[0]") && strings.Contains(calls, "create rec.dst[0]"); replaced != (tc.wantDst0 == "Replace") {
				t.Errorf("provider calls %q: rec.dst[0] replaced %v, want %v", calls, replaced, tc.wantDst0 == "Replace")
			}
			if again, _ := env.plan(after); again.HasChanges() {
				t.Errorf("plan after apply: got %v, want no changes", actions(again))
			}
		})
	}
}

func TestReplaceTriggeredByDiagnostics(t *testing.T) {
	cases := []struct{ name, trigger, want string }{
		{"variable", "var.x", "Only managed resources"},
		{"self", "rec.dst", "cannot be replaced by changes to itself"},
		{"literal", `"rec.a"`, "must reference a managed resource"},
		{"undeclared", "rec.nope", "rec.nope, which is not declared"},
		{"function", "upper(rec.a.name)", "A replace_triggered_by entry is a reference"},
	}
	reg := provider.Registry{"rec": newRecorder()}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := "variable \"x\" {\n  default = 1\n}\nresource \"rec\" \"a\" { name = \"a\" }\nresource \"rec\" \"dst\" {\n  name = \"d\"\n  lifecycle {\n    replace_triggered_by = [" + tc.trigger + "]\n  }\n}\n"
			_, diags := load(t, map[string]string{"web.hcl": dynamicDefs, "tmpl/main.tf": tmpl}, reg)
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) || !strings.Contains(diags.Error(), "tmpl/main.tf:") {
				t.Fatalf("got %v, want an error at tmpl/main.tf saying %q", diags, tc.want)
			}
		})
	}
}

func TestReplaceTriggeredByOrdersAfterTrigger(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	defs := mustLoad(t, map[string]string{"web.hcl": dynamicDefs, "tmpl/main.tf": `
resource "rec" "dst" {
  name = "d"
  lifecycle {
    replace_triggered_by = [rec.a.content]
  }
}
resource "rec" "a" { name = "a" }
`}, reg)
	if got := defs.StackSet("web").Template.Resources["rec.dst"].Deps; !cmp.Equal(got, []string{"rec.a"}) {
		t.Errorf("deps of rec.dst: got %v, want [rec.a]", got)
	}
}

func rcDetails(rc *changeset.ResourceChange) []changeset.ResourceChangeDetail {
	if rc == nil {
		return nil
	}
	return rc.Details
}

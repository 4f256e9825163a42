package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// The renderers of engine/changeset over change sets the engine plans.

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenRenderers are the three change-set renderers, by golden file extension.
var goldenRenderers = []struct {
	ext    string
	render func(io.Writer, *changeset.StackSetChangeSet) error
}{
	{"json", func(w io.Writer, cs *changeset.StackSetChangeSet) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(cs)
	}},
	{"txt", func(w io.Writer, cs *changeset.StackSetChangeSet) error { return changeset.RenderText(w, cs, false) }},
	{"md", func(w io.Writer, cs *changeset.StackSetChangeSet) error {
		return changeset.RenderMarkdown(w, cs, changeset.MarkdownOptions{Branch: "feature/tls"})
	}},
}

// fakeSecret is a distinctive value given to sensitive variables: no
// renderer may print it, or anything but the placeholder in its place.
const fakeSecret = "s3cr3t-DO-NOT-PRINT-7c1f9e"

// TestSensitiveNeverRendered plans real instances whose properties come
// from a sensitive variable (whole, and inside a multi-line string), creates
// them, changes the secret, plans again, and renders both change sets (and
// 1,000 instances of the second) with every renderer.
func TestSensitiveNeverRendered(t *testing.T) {
	defs := func(secret string) string {
		return `
stack_set "vault" {
  template = "./tmpl"
  vars = { password = "` + secret + `" }
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}
`
	}
	const tmpl = `
variable "password" {
  type      = string
  sensitive = true
}
resource "rec" "config" {
  name    = "cfg"
  content = "user=admin\npassword=${var.password}\nport=80\n"
  secret  = var.password
  tags    = { pw = var.password, team = "sre" }
}
`
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	e := New(reg)
	files := map[string]string{"vault.hcl": defs(fakeSecret), "tmpl/main.hcl": tmpl}
	inst := &Instance{StackSet: mustLoad(t, files, reg).StackSet("vault"), StackSetID: "ss-1", Target: config.Target{Region: "eu", Account: "111"}}
	j := newJournal()

	var sets []*changeset.StackSetChangeSet
	plan := func(action changeset.InstanceAction) *InstancePlan {
		p, diags := e.Plan(inst, j.list())
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		cs := &changeset.StackSetChangeSet{StackSetName: "vault", StackSetId: "ss-1", Revision: "abc", Action: action}
		cs.Add(changeset.InstanceChangeSet{Region: "eu", Account: "111", Action: action, Changes: p.Changes()})
		sets = append(sets, cs)
		return p
	}
	p := plan(changeset.InstanceCreate)
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	files["vault.hcl"] = defs(fakeSecret + "-rotated")
	inst.StackSet = mustLoad(t, files, reg).StackSet("vault")
	p = plan(changeset.InstanceUpdate)
	if !p.HasChanges() {
		t.Fatal("rotating the secret changes nothing")
	}
	many := &changeset.StackSetChangeSet{StackSetName: "vault", Revision: "abc", Action: changeset.InstanceUpdate}
	for i := range 1000 {
		many.Add(changeset.InstanceChangeSet{Region: "eu", Account: fmt.Sprint(i), Action: changeset.InstanceUpdate, Changes: sets[1].Instances[0].Changes})
	}
	sets = append(sets, many)

	placeholders := 0
	for i, cs := range sets {
		for _, r := range goldenRenderers {
			var buf bytes.Buffer
			if err := r.render(&buf, cs); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			// Any fragment of the secret would betray it, as would its
			// length or a diff of its lines.
			for _, frag := range []string{"s3cr3t", "DO-NOT-PRINT", "7c1f9e", "rotated"} {
				if strings.Contains(out, frag) {
					t.Errorf("change set %d, %s: the secret (%q) is printed:\n%s", i, r.ext, frag, out)
				}
			}
			placeholders += strings.Count(out, SensitivePlaceholder) + strings.Count(out, "(sensitive)")
		}
	}
	if placeholders == 0 {
		t.Error("no sensitive placeholder rendered: the test does not exercise sensitive values")
	}
}

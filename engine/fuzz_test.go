package engine

import (
	"bytes"
	"encoding/json"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Fuzz targets of the parsers: whatever the input, no panic, and errors
// are diagnostics. Seeds are here and in testdata/fuzz; CI runs the seeds.
// The engine turns a panic into an "Internal error" diagnostic (limits.go)
// and works within the limits of limits.go; the targets fail on such a
// diagnostic all the same, since it is a bug.

// noPanic fails on a panic the engine contained.
func noPanic(t *testing.T, diags hcl.Diagnostics) {
	t.Helper()
	for _, d := range diags {
		if d.Summary == "Internal error" {
			t.Fatalf("the engine panicked: %s", d.Detail)
		}
	}
}

func FuzzLoadDefinitions(f *testing.F) {
	f.Add([]byte(`stack_set "s" {
  template = "./t"
  vars = { a = "x" }
  deployment_targets {
    regions  = ["r"]
    accounts = ["1"]
  }
}`), []byte(`variable "a" { type = string }
resource "rec" "x" {
  count   = 2
  name    = "x-${count.index}-${var.a}"
  content = upper(var.a)
}
output "o" { value = rec.x[0].id }`))
	f.Add([]byte(`stack_set "s" { template = "./t" }`), []byte(`resource "rec" "a" { name = rec.a.id }`))
	f.Add([]byte("stack_set \"s\" {\n  template = \"../..\"\n}"), []byte(""))
	f.Add([]byte(`organization { management_account = "0" }`), []byte(`locals { a = local.a }`))
	reg := provider.Registry{"rec": newRecorder()}
	f.Fuzz(func(t *testing.T, defs, tmpl []byte) {
		fsys := fstest.MapFS{"d.hcl": {Data: defs}, "t/main.hcl": {Data: tmpl}}
		e := New(reg)
		e.SetLogger(zerolog.Nop())
		d, diags := e.Load(fsys, ".")
		if d == nil {
			t.Fatal("Load returned nil definitions")
		}
		noPanic(t, diags)
		if diags.HasErrors() {
			for _, dj := range config.DiagnosticsJSON(diags) {
				if dj.Summary == "" {
					t.Fatalf("diagnostic without a summary: %+v", dj)
				}
			}
			return
		}
		// Valid definitions must evaluate without panicking (the engine
		// would contain a panic; the fuzzer must still find it).
		for _, ss := range d.StackSets {
			// One target each: the others differ only in target.*.
			if tgs := ss.Targets(); len(tgs) > 0 {
				p, pdiags := e.Plan(&Instance{StackSet: ss, StackSetID: "id", Target: tgs[0]}, nil)
				noPanic(t, pdiags)
				if !pdiags.HasErrors() && p == nil {
					t.Fatal("nil plan without errors")
				}
			}
		}
	})
}

func FuzzRenderChangeSet(f *testing.F) {
	f.Add("file.config", "a\nb\n", "a\nc\n", "True", "eu", "1")
	f.Add("x|y`<z>", "<sensitive>", "<known_after_apply>", "Conditional", "r", "2")
	f.Add("", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, id, before, after, repl, region, account string) {
		cs := &changeset.StackSetChangeSet{StackSetName: "s", Revision: "0123456789"}
		for i := 0; i < 3; i++ {
			cs.Add(changeset.InstanceChangeSet{Region: region, Account: account, Action: changeset.InstanceUpdate, Changes: []changeset.Change{{Type: "Resource", ResourceChange: changeset.ResourceChange{
				Action: "Modify", LogicalResourceId: id, ResourceType: "file", Replacement: repl,
				PropertyChanges: []changeset.ResourcePropertyChange{{Name: "content", BeforeValue: before, AfterValue: after}},
			}}}})
		}
		var b bytes.Buffer
		if err := changeset.RenderText(&b, cs, false); err != nil {
			t.Fatal(err)
		}
		b.Reset()
		if err := changeset.RenderMarkdown(&b, cs, changeset.MarkdownOptions{MaxBytes: 4000}); err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(cs); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzPlanTemplate evaluates fuzzed templates under a fixed, valid stack
// set: loading alone rejects most inputs of FuzzLoadDefinitions before
// evaluation, so this one reaches expressions, functions, count/for_each
// and references with a variable value of any shape.
func FuzzPlanTemplate(f *testing.F) {
	f.Add([]byte(`variable "v" {}
locals { n = length(var.v) }
resource "rec" "x" {
  count   = local.n % 5
  name    = "x-${count.index}"
  content = jsonencode(var.v)
}
output "o" { value = rec.x[*].id }`), []byte(`["a", "b"]`))
	f.Add([]byte(`variable "v" {}
resource "rec" "m" {
  for_each = toset(var.v)
  name     = each.key
  content  = format("%s=%s", each.key, each.value)
}`), []byte(`["k1", "k2"]`))
	f.Add([]byte(`variable "v" {}
resource "rec" "a" {
  name    = upper(var.v)
  content = replace(var.v, "/[a-z]+/", "x")
}`), []byte(`"abc"`))
	f.Add([]byte(`variable "v" {}
output "o" { value = [for k, x in var.v : "${k}${x}" if x != null] }`), []byte(`{"a": 1, "b": null}`))
	reg := provider.Registry{"rec": newRecorder()}
	e := New(reg)
	e.SetLogger(zerolog.Nop())
	f.Fuzz(func(t *testing.T, tmpl, varJSON []byte) {
		defs := []byte("stack_set \"s\" {\n  template = \"./t\"\n  vars = { v = jsondecode(file_v) }\n  deployment_targets {\n    regions  = [\"r\"]\n    accounts = [\"1\"]\n  }\n}\n")
		// vars cannot call functions over files, so the value is spliced in
		// as an HCL literal when it is valid JSON (JSON is valid HCL).
		if !json.Valid(varJSON) || bytes.ContainsAny(varJSON, "${}%") && !bytes.HasPrefix(bytes.TrimSpace(varJSON), []byte("{")) {
			varJSON = []byte(`"x"`)
		}
		defs = bytes.Replace(defs, []byte("jsondecode(file_v)"), varJSON, 1)
		fsys := fstest.MapFS{"d.hcl": {Data: defs}, "t/main.hcl": {Data: tmpl}}
		d, diags := e.Load(fsys, ".")
		if d == nil {
			t.Fatal("Load returned nil definitions")
		}
		noPanic(t, diags)
		if diags.HasErrors() {
			return
		}
		for _, ss := range d.StackSets {
			for _, tg := range ss.Targets() {
				p, pdiags := e.Plan(&Instance{StackSet: ss, StackSetID: "id", Target: tg}, nil)
				noPanic(t, pdiags)
				if pdiags.HasErrors() {
					for _, dj := range config.DiagnosticsJSON(pdiags) {
						if dj.Summary == "" {
							t.Fatalf("diagnostic without a summary: %+v", dj)
						}
					}
					continue
				}
				if p == nil {
					t.Fatal("nil plan without errors")
				}
				// A plan with no recorded state creates every resource.
				for _, rp := range p.Resources {
					if rp.Action != Create {
						t.Fatalf("%s: action %s on an empty state", rp.Address, rp.Action)
					}
				}
			}
		}
	})
}

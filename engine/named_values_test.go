package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// path.module, path.root, path.cwd and terraform.workspace mean what they
// mean in Terraform, relative to the template's directory in the
// definitions' tree: a module reads its own files through path.module, in
// the tree, whatever directory the daemon runs in.
func TestPathAndWorkspaceValues(t *testing.T) {
	files := map[string]string{
		"d.hcl": `stack_set "web" {
  template = "./templates/web"
  deployment_targets {
    regions  = ["r"]
    accounts = ["a"]
  }
}`,
		"templates/web/main.tf": `
module "leaf" { source = "./modules/leaf" }
module "shared" { source = "../shared" }
resource "rec" "app" {
  name    = "app-${terraform.workspace}"
  content = file("${path.module}/root.txt")
}
output "root" {
  value = { module = path.module, root = path.root, cwd = path.cwd, ws = terraform.workspace }
}
output "leaf" { value = module.leaf.paths }
output "shared" { value = module.shared.paths }
`,
		"templates/web/root.txt": "root file",
		"templates/web/modules/leaf/main.tf": `
output "paths" {
  value = {
    module = path.module
    root   = path.root
    ws     = terraform.workspace
    file   = file("${path.module}/data.txt")
    set    = fileset(path.module, "*.txt")
    abs    = file("${path.cwd}/${path.module}/data.txt")
  }
}`,
		"templates/web/modules/leaf/data.txt": "leaf data",
		"templates/shared/main.tf": `
output "paths" {
  value = { module = path.module, file = file("${path.module}/s.txt") }
}`,
		"templates/shared/s.txt": "shared",
	}
	rec := newRecorder()
	reg := provider.Registry{"rec": rec}
	inst := &Instance{StackSet: mustLoad(t, files, reg).StackSet("web"), StackSetID: "i", Target: config.Target{Region: "r", Account: "a"}}
	p, diags := New(reg).Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got := map[string]any{}
	for name, v := range p.Outputs {
		got[name] = plain(v)
	}
	want := map[string]any{
		"root": map[string]any{"module": ".", "root": ".", "cwd": "/templates/web", "ws": "web"},
		"leaf": map[string]any{
			"module": "modules/leaf", "root": ".", "ws": "web", "file": "leaf data",
			"set": []any{"data.txt"}, "abs": "leaf data",
		},
		"shared": map[string]any{"module": "../shared", "file": "shared"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("outputs (-want +got):\n%s", d)
	}
	for _, r := range p.Resources {
		if r.Address != "rec.app" {
			continue
		}
		if n := r.After.GetAttr("name"); n.AsString() != "app-web" {
			t.Errorf("name = %#v, want app-web", n)
		}
		if c := r.After.GetAttr("content"); c.AsString() != "root file" {
			t.Errorf("content = %#v, want the root's file", c)
		}
	}
}

// plain is v as Go values (strings, lists, maps) for cmp.
func plain(v cty.Value) any {
	v, _ = v.UnmarkDeep()
	switch {
	case v.IsNull():
		return nil
	case v.Type() == cty.String:
		return v.AsString()
	case v.Type().IsObjectType() || v.Type().IsMapType():
		out := map[string]any{}
		for k, e := range v.AsValueMap() {
			out[k] = plain(e)
		}
		return out
	case v.Type().IsListType() || v.Type().IsSetType() || v.Type().IsTupleType():
		out := []any{}
		for _, e := range v.AsValueSlice() {
			out = append(out, plain(e))
		}
		return out
	}
	return v.GoString()
}

// Attributes path and terraform do not have are diagnostics naming the
// reference and what exists, as in Terraform.
func TestPathAndWorkspaceInvalidAttributes(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"path.nope", `"path" object does not have an attribute named "nope"`},
		{"terraform.env", "terraform.workspace"},
		{"terraform.version", `does not have an attribute named "version"`},
		{`path["module"]`, "cannot be accessed directly"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			files := map[string]string{
				"d.hcl":      strings.Replace(modDefs, `vars     = { level = "warn" }`, "", 1),
				"t/main.hcl": "output \"x\" {\n  value = " + tc.expr + "\n}\n",
			}
			_, diags := load(t, files, provider.Registry{"rec": newRecorder()})
			if !diags.HasErrors() {
				t.Fatal("loaded without an error")
			}
			d := diags[0]
			if !strings.Contains(d.Detail, tc.want) {
				t.Errorf("detail %q, want it to say %q", d.Detail, tc.want)
			}
			if d.Subject == nil || d.Subject.Filename != "t/main.hcl" || d.Subject.Start.Line != 2 {
				t.Errorf("subject %v, want t/main.hcl:2", d.Subject)
			}
		})
	}
}

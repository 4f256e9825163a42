package tfplugin

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
)

// TestBridgeModuleForEachProviders: a module called with for_each is
// passed its providers as Terraform passes them, an aliased one through
// the module's configuration_aliases (providers = { p6 = p6.east,
// p6.second = p6.west }): each instance's resources are made through the
// configurations passed, and their addresses carry the instance key.
func TestBridgeModuleForEachProviders(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	provider := func(alias, prefix string) string {
		return "provider \"p6\" {\n  alias  = \"" + alias + "\"\n  region = target.region\n  dir    = \"" + world + "/${target.account}\"\n  prefix = \"" + prefix + "\"\n}\n"
	}
	fsys := fstest.MapFS{
		"d.hcl": {Data: []byte(oneTargetStackSet)},
		"t/main.hcl": {Data: []byte(`terraform {
  required_providers {
    p6 = { source = "registry.example.com/stackd/p6" }
  }
}
` + provider("east", "e-") + provider("west", "w-") + `
module "pair" {
  for_each  = toset(["one", "two"])
  source    = "./m"
  name      = each.key
  providers = {
    p6        = p6.east
    p6.second = p6.west
  }
}
output "ids" { value = { for k, m in module.pair : k => m.ids } }
`)},
		"t/m/main.hcl": {Data: []byte(`terraform {
  required_providers {
    p6 = {
      source                = "registry.example.com/stackd/p6"
      configuration_aliases = [p6.second]
    }
  }
}
variable "name" { type = string }
resource "p6_thing" "first" {
  name = "first-${var.name}"
}
resource "p6_thing" "second" {
  provider = p6.second
  name     = "second-${var.name}"
}
output "ids" { value = [p6_thing.first.id, p6_thing.second.id] }
`)},
	}
	defs, diags := e.Load(fsys, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ctx := testCtx(t)
	inst := &engine.Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	p, diags := e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var addrs []string
	for _, rp := range p.Resources {
		addrs = append(addrs, rp.Address)
	}
	slices.Sort(addrs)
	want := []string{`module.pair["one"].p6_thing.first`, `module.pair["one"].p6_thing.second`, `module.pair["two"].p6_thing.first`, `module.pair["two"].p6_thing.second`}
	if !slices.Equal(addrs, want) {
		t.Fatalf("planned %v, want %v", addrs, want)
	}
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	res, err := e.Apply(ctx, p, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(world, "111"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range entries {
		got = append(got, en.Name())
	}
	if w := []string{"e-first-one.json", "e-first-two.json", "w-second-one.json", "w-second-two.json"}; !slices.Equal(got, w) {
		t.Errorf("objects made through the providers passed: %v, want %v", got, w)
	}
	if ids := res.Outputs["ids"]; !ids.IsWhollyKnown() || ids.GetAttr("two").Index(cty.NumberIntVal(1)).AsString() != "w-second-two" {
		t.Errorf("output ids = %#v, want the instances' ids by key", ids)
	}
	again, diags := e.PlanContext(ctx, inst, j.list())
	if diags.HasErrors() || again.HasChanges() {
		t.Errorf("plan after apply: %v, changes %v; want none", diags, again.Changes())
	}
}

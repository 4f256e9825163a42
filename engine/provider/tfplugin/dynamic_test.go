package tfplugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/config"
)

// TestBridgeDynamicBlocks: dynamic blocks generate the nested blocks of a
// Terraform provider's schema; the provider receives them, and a second
// plan is a no-op.
func TestBridgeDynamicBlocks(t *testing.T) {
	e, _, _ := newBridgeEngine(t, 6)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	defs := fstest.MapFS{
		"d.hcl": {Data: []byte(`stack_set "s" {
  template = "./t"
  vars = { dir = "` + world + `" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111"]
  }
}`)},
		"t/main.tf": {Data: []byte(`
terraform {
  required_providers {
    p6 = { source = "registry.example.com/stackd/p6", version = "~> 1.0" }
  }
}
variable "dir" { type = string }
variable "tags" {
  type    = map(string)
  default = { env = "prod", team = "web" }
}
provider "p6" {
  region = target.region
  dir    = "${var.dir}/${target.account}"
  prefix = "pre"
  token  = "provider-token-secret"
}
resource "p6_thing" "a" {
  name = "dyn"
  dynamic "tag" {
    for_each = var.tags
    iterator = t
    content {
      key   = t.key
      value = "${t.value}-${target.region}"
    }
  }
}
`)},
	}
	loaded, diags := e.Load(defs, ".")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	inst := &engine.Instance{StackSet: loaded.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	p, diags := e.PlanContext(ctx, inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	j := &memJournal{recs: map[string]engine.ResourceState{}}
	if _, err := e.Apply(ctx, p, j, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(world, "111", "predyn.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"key":"env"`, `"value":"prod-eu-west-1"`, `"key":"team"`, `"value":"web-eu-west-1"`} {
		if !strings.Contains(strings.ReplaceAll(string(b), " ", ""), want) {
			t.Errorf("object written by the provider: %s, want %s", b, want)
		}
	}
	again, diags := e.PlanContext(ctx, inst, j.list())
	if diags.HasErrors() || again.HasChanges() {
		t.Errorf("plan after apply: %v, changes %v; want none", diags, again.Changes())
	}
}

package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/engine/provider/tfplugin/install"
)

// implicitP6Dir builds the protocol 6 test provider of
// engine/provider/tfplugin/testdata into a plugin directory as
// hashicorp/p6 1.0.0: the provider Terraform implies for a resource type
// p6_… without a required_providers entry.
func implicitP6Dir(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the Go toolchain is not on PATH: the test provider cannot be built")
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "registry.terraform.io", "hashicorp", "p6", "1.0.0", runtime.GOOS+"_"+runtime.GOARCH)
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "build", "-o", filepath.Join(pkg, "terraform-provider-p6_v1.0.0"), ".")
	cmd.Dir = filepath.Join("provider", "tfplugin", "testdata", "p6provider")
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test provider: %v\n%s", err, out)
	}
	return dir
}

// A template of plain *.tf files — no terraform block, an implicit
// provider, a provider block, variable files, an override file — plans and
// applies with the provider Terraform implies (hashicorp/p6, from a plugin
// directory), and its lock file pins the provider's version.
func TestPlainTerraformFilesWithImplicitProvider(t *testing.T) {
	pool, err := tfplugin.NewPool(tfplugin.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	e := New(provider.Registry{"file": file.New(file.Options{Root: t.TempDir()})})
	r := &tfplugin.Resolver{
		Installer: &install.Installer{PluginDirs: []string{implicitP6Dir(t)}, CacheDir: t.TempDir(), DisableRegistry: true, Log: zerolog.Nop()},
		LockFile:  filepath.Join(t.TempDir(), ".terraform.lock.hcl"), Pool: pool, Log: zerolog.Nop(),
	}
	t.Cleanup(func() { r.Close() })
	e.SetPluginResolver(r)
	world := t.TempDir()
	if err := os.MkdirAll(filepath.Join(world, "111"), 0o755); err != nil {
		t.Fatal(err)
	}
	defs := func(lock string) fstest.MapFS {
		fsys := fstest.MapFS{
			"d.hcl": {Data: []byte(`stack_set "s" {
  template = "./t"
  vars     = { dir = "` + world + `" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111"]
  }
}`)},
			"t/providers.tf": {Data: []byte(`provider "p6" {
  region = target.region
  dir    = "${var.dir}/${target.account}"
}
`)},
			"t/variables.tf": {Data: []byte(`variable "dir" { type = string }
variable "name" { type = string }
variable "content" {
  type    = string
  default = "default"
}
`)},
			"t/main.tf": {Data: []byte(`resource "p6_thing" "a" {
  name    = var.name
  content = var.content
}
output "id" { value = p6_thing.a.id }
`)},
			"t/main_override.tf":  {Data: []byte("output \"id\" { value = \"${p6_thing.a.id}\" }\n")},
			"t/terraform.tfvars":  {Data: []byte("name = \"from-tfvars\"\n")},
			"t/web.auto.tfvars":   {Data: []byte("content = \"from-auto\"\n")},
			"t/README.md":         {Data: []byte("# not configuration\n")},
			"t/.terraform/x.tf":   {Data: []byte("not HCL {")},
			"t/terraform.tfstate": {Data: []byte("{}")},
		}
		if lock != "" {
			fsys["t/.terraform.lock.hcl"] = &fstest.MapFile{Data: []byte(lock)}
		}
		return fsys
	}
	loaded, diags := e.Load(defs(""), ".")
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	ss := loaded.StackSet("s")
	if got := config.RequirementNames(ss.Template.RequiredProviders); got != "p6 (hashicorp/p6)" {
		t.Errorf("required providers: got %s, want p6 (hashicorp/p6)", got)
	}
	inst := &Instance{StackSet: ss, StackSetID: "ss-1", Target: config.Target{Region: "eu-west-1", Account: "111"}}
	j := newJournal()
	ctx := context.Background()
	p, diags := e.PlanContext(ctx, inst, j.list())
	if diags.HasErrors() {
		t.Fatalf("plan: %s", diags.Error())
	}
	if got := actions(p); got["p6_thing.a"] != "Create" {
		t.Fatalf("plan: got %v, want p6_thing.a Create", got)
	}
	res, err := e.Apply(ctx, p, j, nil)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	recs := j.list()
	if len(recs) != 1 || recs[0].Provider != "p6|registry.terraform.io/hashicorp/p6|1.0.0" {
		t.Fatalf("recorded: %+v, want one p6_thing from registry.terraform.io/hashicorp/p6 1.0.0", recs)
	}
	id := res.Outputs["id"]
	if id.Type() != cty.String || !id.IsKnown() {
		t.Fatalf("output id: %#v", id)
	}
	b, err := os.ReadFile(filepath.Join(world, "111", id.AsString()+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "from-tfvars") || !strings.Contains(s, "from-auto") {
		t.Errorf("the object written: %s, want the tfvars name and the auto.tfvars content", s)
	}
	again, diags := e.PlanContext(ctx, inst, j.list())
	if diags.HasErrors() || again.HasChanges() {
		t.Errorf("plan after apply: %v %s, want no changes", actions(again), diags.Error())
	}

	// The template's lock file pins the version: a lock of another version
	// than the plugin directory holds is refused when loading.
	_, diags = e.Load(defs(`provider "registry.terraform.io/hashicorp/p6" {
  version = "1.0.1"
}
`), ".")
	found := false
	for _, d := range diags {
		found = found || d.Severity == hcl.DiagError && strings.Contains(d.Detail, "1.0.1")
	}
	if !found {
		t.Errorf("lock of 1.0.1: got %v, want an error naming the locked version", diags)
	}
}

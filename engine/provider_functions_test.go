package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/engine/provider/tfplugin/install"
)

// provider::NAME::FUNC in a template calls the provider's function (the
// protocol 6 test provider's provider::p6::label) in any expression, in
// the root template and in a module: a known result in the plan, an
// unknown one for an unknown argument, a sensitive one for a sensitive
// argument; a function the provider lacks, a provider the template does
// not require and an error of the function are diagnostics where the
// call is.
func TestProviderDefinedFunctions(t *testing.T) {
	pool, err := tfplugin.NewPool(tfplugin.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	e := New(provider.Registry{})
	r := &tfplugin.Resolver{
		Installer: &install.Installer{PluginDirs: []string{implicitP6Dir(t)}, CacheDir: t.TempDir(), DisableRegistry: true, Log: zerolog.Nop()},
		LockFile:  filepath.Join(t.TempDir(), ".terraform.lock.hcl"), Pool: pool, Log: zerolog.Nop(),
	}
	t.Cleanup(func() { r.Close() })
	e.SetPluginResolver(r)
	const required = `terraform {
  required_providers {
    p6 = { source = "hashicorp/p6" }
  }
}
`
	load := func(main, mod string) (*Instance, error) {
		fsys := fstest.MapFS{
			"d.hcl": {Data: []byte(`stack_set "web" {
  template = "./t"
  vars     = { secret = "s3cr3t" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111"]
  }
}`)},
			"t/main.tf": {Data: []byte(main)},
		}
		if mod != "" {
			fsys["t/mod/main.tf"] = &fstest.MapFile{Data: []byte(mod)}
		}
		defs, diags := e.Load(fsys, ".")
		if diags.HasErrors() {
			return nil, diags
		}
		return &Instance{StackSet: defs.StackSet("web"), StackSetID: "ss", Target: config.Target{Region: "eu-west-1", Account: "111"}}, nil
	}

	inst, err := load(required+`
variable "secret" {
  type      = string
  sensitive = true
}
resource "terraform_data" "d" {
  input = provider::p6::label("web", target.region)
}
module "m" { source = "./mod" }
output "plain" { value = provider::p6::label("web", "eu", "1") }
output "secret" {
  value     = provider::p6::label("web", var.secret)
  sensitive = true
}
output "unknown" { value = provider::p6::label("x", terraform_data.d.id) }
output "input" { value = terraform_data.d.input }
output "mod" { value = module.m.label }
`, required+`
output "label" { value = provider::p6::label("mod", path.module) }
`)
	if err != nil {
		t.Fatal(err)
	}
	p, diags := e.PlanContext(context.Background(), inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for name, want := range map[string]cty.Value{
		"plain":   cty.StringVal("WEB-EU-1"),
		"secret":  cty.StringVal("WEB-S3CR3T").Mark(provider.SensitiveMark),
		"unknown": cty.UnknownVal(cty.String),
		"mod":     cty.StringVal("MOD-MOD"),
		"input":   cty.StringVal("WEB-EU-WEST-1"),
	} {
		got := p.Outputs[name]
		if got == cty.NilVal {
			t.Errorf("output %s: none, want %#v", name, want)
			continue
		}
		if !got.IsKnown() && !want.IsKnown() {
			continue
		}
		if !got.RawEquals(want) {
			t.Errorf("output %s = %#v, want %#v", name, got, want)
		}
	}

	for _, tc := range []struct{ name, main, wantErr, where string }{
		{"function the provider lacks", required + "output \"x\" {\n  value = provider::p6::nope(\"a\")\n}\n",
			`offers no function named "nope" (its functions: label)`, "t/main.tf:7"},
		{"provider not required", "output \"x\" {\n  value = provider::p7::label(\"a\")\n}\n",
			`provider name "p7" is declared in this module's required_providers block`, "t/main.tf:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.main, "")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.where) {
				t.Fatalf("got %v, want an error at %s saying %q", err, tc.where, tc.wantErr)
			}
		})
	}

	t.Run("error of the function", func(t *testing.T) {
		inst, err := load(required+"variable \"secret\" {}\noutput \"x\" {\n  value = provider::p6::label(\"\", \"a\")\n}\n", "")
		if err != nil {
			t.Fatal(err)
		}
		_, diags := e.PlanContext(context.Background(), inst, nil)
		if !diags.HasErrors() || !strings.Contains(diags.Error(), "the prefix must not be empty") || !strings.Contains(diags.Error(), "t/main.tf:8") {
			t.Fatalf("got %v, want the function's error at t/main.tf:8", diags)
		}
	})
}

package engine

import (
	"strings"
	"testing"
)

// provider "terraform" {} configures Terraform's built-in provider: it is
// accepted, with or without a required_providers entry for
// terraform.io/builtin/terraform, and what the built-in provider cannot
// take (arguments, an alias) is a diagnostic naming the line.
func TestBuiltinTerraformProviderBlock(t *testing.T) {
	const use = `
resource "terraform_data" "d" { input = "x" }
output "out" { value = terraform_data.d.output }
`
	const required = `
terraform {
  required_providers {
    terraform = { source = "terraform.io/builtin/terraform" }
  }
}
`
	for _, tc := range []struct {
		name, tmpl, wantErr string
		wantLine            int
	}{
		{name: "empty block", tmpl: "provider \"terraform\" {}\n" + use},
		{name: "with its required_providers entry", tmpl: required + "provider \"terraform\" {}\n" + use},
		{name: "an argument", tmpl: "provider \"terraform\" {\n  region = \"x\"\n}\n" + use, wantErr: "takes no configuration", wantLine: 2},
		{name: "an alias", tmpl: "provider \"terraform\" {\n  alias = \"b\"\n}\n" + use, wantErr: "takes no alias", wantLine: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(nil)
			inst, err := builtinInstance(t, e, map[string]string{"d.hcl": webDefs("{}"), "t/main.tf": tc.tmpl})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error saying %q", err, tc.wantErr)
				}
				if want := "t/main.tf:" + string(rune('0'+tc.wantLine)); !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say where (%s)", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, diags := e.Plan(inst, nil)
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if got := actions(p)["terraform_data.d"]; got != "Create" {
				t.Errorf("terraform_data.d: %q, want Create", got)
			}
		})
	}
}

package config

// provider "terraform" {}: the block of Terraform's built-in provider
// (terraform_data, terraform_remote_state), which stackd has built in.
// Terraform accepts the block, whose configuration schema is empty, with
// or without a required_providers entry terraform = { source =
// "terraform.io/builtin/terraform" }; so does stackd. An argument or a
// nested block is refused as Terraform refuses it; so is an alias: stackd
// has one built-in terraform provider, which no resource can select
// with a provider meta-argument.

import "github.com/hashicorp/hcl/v2"

// isBuiltinProviderBlock reports whether b configures Terraform's built-in
// provider: provider "terraform", unless required_providers gives the
// local name terraform another source.
func isBuiltinProviderBlock(b *hcl.Block, required map[string]*RequiredProvider) bool {
	if b.Labels[0] != "terraform" {
		return false
	}
	rp := required["terraform"]
	return rp == nil || IsBuiltinTerraform(rp.Source)
}

// checkBuiltinProviderBlock checks a provider "terraform" block: it may be
// empty, nothing else.
func checkBuiltinProviderBlock(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "alias"}}})
	if diags.HasErrors() {
		for _, d := range diags {
			if d.Severity == hcl.DiagError {
				d.Detail += " Terraform's built-in provider \"terraform\" takes no configuration: its block must be empty."
			}
		}
		return diags
	}
	if a := content.Attributes["alias"]; a != nil {
		return diags.Append(Errorf(a.NameRange, "Aliased built-in provider",
			"stackd has one built-in terraform provider (%s), used by every terraform_data and terraform_remote_state; it takes no alias. Remove the alias and the provider arguments that select it: the provider needs no configuration, so the result is the same.", BuiltinTerraformSource))
	}
	return diags
}

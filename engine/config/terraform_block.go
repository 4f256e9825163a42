package config

// The terraform block of a template, as Terraform 1.11 reads it, and the
// providers a template requires: its required_providers entries and the
// providers its resource, data and provider blocks imply.

import (
	"fmt"
	"strings"

	goversion "github.com/hashicorp/go-version"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// TerraformVersion is the version of the Terraform language stackd
// implements: a template's required_version is checked against it.
const TerraformVersion = "1.11.4"

// BuiltinTerraformSource is the source address of Terraform's built-in
// provider (terraform_data, terraform_remote_state), which stackd has
// built in: it is never installed.
const BuiltinTerraformSource = "terraform.io/builtin/terraform"

var terraformVersion = goversion.Must(goversion.NewVersion(TerraformVersion))

var terraformBlockSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "required_version"}, {Name: "experiments"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "required_providers"},
		{Type: "backend", LabelNames: []string{"type"}},
		{Type: "cloud"},
		{Type: "provider_meta", LabelNames: []string{"provider"}},
	},
}

// RequiredProvider is one entry of a template's required_providers.
type RequiredProvider struct {
	provider.ProviderRequirement
	// ConfigurationAliases are the aliased configurations ("aws.west") a
	// module expects its caller to pass (configuration_aliases).
	ConfigurationAliases []string
	DeclRange            hcl.Range
}

// terraformSettings is what a template's terraform blocks say.
type terraformSettings struct {
	required map[string]*RequiredProvider
	// versions are the required_version attributes in force (an override
	// file's replace the primary files').
	versions []*hcl.Attribute
}

// readTerraformBlocks reads the terraform blocks of the primary files,
// then those of the override files (whose required_version replaces the
// primary ones and whose required_providers entries replace the entries of
// their names, as Terraform merges them).
func readTerraformBlocks(primary, overrides []*hcl.Block) (*terraformSettings, hcl.Diagnostics) {
	ts := &terraformSettings{required: map[string]*RequiredProvider{}}
	var diags hcl.Diagnostics
	var overVersions []*hcl.Attribute
	for i, b := range append(append([]*hcl.Block(nil), primary...), overrides...) {
		override := i >= len(primary)
		content, d := b.Body.Content(terraformBlockSchema)
		diags = append(diags, d...)
		if a := content.Attributes["required_version"]; a != nil {
			if override {
				overVersions = append(overVersions, a)
			} else {
				ts.versions = append(ts.versions, a)
			}
		}
		if a := content.Attributes["experiments"]; a != nil {
			diags = diags.Append(Errorf(a.NameRange, "Experiments are not supported",
				"stackd implements the Terraform %s language without its experiments; remove the experiments argument (it also makes Terraform refuse the configuration outside alpha builds).", TerraformVersion))
		}
		for _, blk := range content.Blocks {
			switch blk.Type {
			case "required_providers":
				diags = append(diags, ts.readRequiredProviders(blk, override)...)
			case "backend", "cloud":
				what := "backend \"" + strings.Join(blk.Labels, "") + "\""
				if blk.Type == "cloud" {
					what = "cloud"
				}
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagWarning, Summary: "Backend configuration ignored",
					Detail:  fmt.Sprintf("The %s block is ignored: stackd keeps each stack instance's state itself, so no backend is used (adopt an existing workspace's state with stackd import-state).", what),
					Subject: blk.DefRange.Ptr(),
				})
			case "provider_meta":
				diags = diags.Append(Errorf(blk.DefRange, "provider_meta is not supported",
					"stackd does not send module metadata to providers: remove the provider_meta %q block (it only informs the provider which module calls it).", blk.Labels[0]))
			}
		}
	}
	if len(overVersions) > 0 {
		ts.versions = overVersions
	}
	return ts, diags
}

// readRequiredProviders reads one required_providers block: entries are
// objects { source, version, configuration_aliases } or, as Terraform
// still accepts, a version constraint string.
func (ts *terraformSettings) readRequiredProviders(blk *hcl.Block, override bool) hcl.Diagnostics {
	attrs, diags := blk.Body.JustAttributes()
	for _, name := range SortedKeys(attrs) {
		a := attrs[name]
		if prev := ts.required[name]; prev != nil && !override {
			diags = diags.Append(Errorf(a.NameRange, "Duplicate required provider",
				"Provider %q is required twice; the other entry is at %s.", name, prev.DeclRange))
			continue
		}
		if !validProviderName(name) {
			diags = diags.Append(Errorf(a.NameRange, "Invalid provider local name",
				"%q is not a valid provider local name: it must start with a letter and hold only lower-case letters, digits and dashes.", name))
			continue
		}
		rp := &RequiredProvider{ProviderRequirement: provider.ProviderRequirement{LocalName: name}, DeclRange: a.NameRange}
		pairs, pdiags := hcl.ExprMap(a.Expr)
		if pdiags.HasErrors() {
			// The legacy form: name = "~> 1.0".
			v, d := a.Expr.Value(nil)
			if d.HasErrors() || v.Type() != cty.String || v.IsNull() {
				diags = diags.Append(Errorf(a.Expr.Range(), "Invalid required_providers object",
					"required_providers entries must be objects like { source = \"hashicorp/%s\", version = \"~> 1.0\" }.", name))
				continue
			}
			rp.Version = v.AsString()
		}
		for _, kv := range pairs {
			key := hcl.ExprAsKeyword(kv.Key)
			if key == "" {
				if v, d := kv.Key.Value(nil); !d.HasErrors() && v.Type() == cty.String && !v.IsNull() {
					key = v.AsString()
				}
			}
			switch key {
			case "source", "version":
				v, d := kv.Value.Value(nil)
				if d.HasErrors() || v.Type() != cty.String || v.IsNull() {
					diags = diags.Append(Errorf(kv.Value.Range(), "Invalid required_providers object", "The %s of provider %q must be a string.", key, name))
					continue
				}
				if key == "source" {
					rp.Source = v.AsString()
				} else {
					rp.Version = v.AsString()
				}
			case "configuration_aliases":
				exprs, d := hcl.ExprList(kv.Value)
				if d.HasErrors() {
					diags = diags.Append(Errorf(kv.Value.Range(), "Invalid configuration_aliases", "configuration_aliases takes a list of provider references without quotes: [%s.west].", name))
					continue
				}
				for _, e := range exprs {
					key, d := providerKey(e)
					n, alias, _ := strings.Cut(key, ".")
					switch {
					case d.HasErrors() || alias == "":
						diags = diags.Append(Errorf(e.Range(), "Invalid configuration_aliases", "configuration_aliases takes references NAME.ALIAS, like %s.west.", name))
					case n != name:
						diags = diags.Append(Errorf(e.Range(), "Invalid configuration alias",
							"configuration_aliases of provider %q may only name configurations of %q, not %s.", name, name, key))
					default:
						rp.ConfigurationAliases = append(rp.ConfigurationAliases, key)
					}
				}
			default:
				diags = diags.Append(Errorf(kv.Key.Range(), "Invalid required_providers object",
					"required_providers objects can only contain \"version\", \"source\" and \"configuration_aliases\" attributes; %q is not one of them.", key))
			}
		}
		if rp.Source == "" {
			rp.Source = impliedSource(name)
		}
		ts.required[name] = rp
	}
	return diags
}

// validProviderName reports whether name is a provider local name
// Terraform accepts.
func validProviderName(name string) bool {
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// impliedSource is the provider a local name means without a
// required_providers entry: hashicorp/NAME, or the built-in terraform one.
func impliedSource(name string) string {
	if name == "terraform" {
		return BuiltinTerraformSource
	}
	return "hashicorp/" + name
}

// IsBuiltinTerraform reports whether a requirement is Terraform's
// built-in provider, which stackd provides and never installs.
func IsBuiltinTerraform(source string) bool {
	return strings.EqualFold(source, BuiltinTerraformSource)
}

// checkRequiredVersion checks the template's required_version
// constraints against TerraformVersion.
func (ts *terraformSettings) checkRequiredVersion(dir string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, a := range ts.versions {
		v, d := a.Expr.Value(nil)
		if d.HasErrors() || v.Type() != cty.String || v.IsNull() {
			diags = diags.Append(Errorf(a.Expr.Range(), "Invalid required_version", "required_version takes a version constraint string, like \">= 1.5\"."))
			continue
		}
		cons, err := goversion.NewConstraint(v.AsString())
		if err != nil {
			diags = diags.Append(Errorf(a.Expr.Range(), "Invalid required_version", "%q is not a version constraint: %s.", v.AsString(), err))
			continue
		}
		pre := false
		for _, c := range cons {
			if c.Prerelease() {
				pre = true
				diags = diags.Append(Errorf(a.Expr.Range(), "Invalid required_version constraint",
					"Prerelease version constraints are not supported: %s. Remove the prerelease information from the constraint.", c))
			}
		}
		if !pre && !cons.Check(terraformVersion) {
			diags = diags.Append(Errorf(a.Expr.Range(), "Unsupported Terraform Core version",
				"The template in %s requires Terraform %s; stackd implements the Terraform %s language, which does not satisfy it. Relax required_version to admit %s if the configuration works with it.",
				dir, v.AsString(), TerraformVersion, TerraformVersion))
		}
	}
	return diags
}

// providerRequirements is what the template requires: its
// required_providers entries and, as Terraform implies them, a provider
// for each local name a resource or data block (by the type's prefix up to
// the first "_", or its provider meta-argument), a provider block or a
// module call's providers argument uses without an entry: hashicorp/NAME.
// builtin reports the resource types stackd has built in. The built-in
// terraform provider is left out: stackd provides it.
//
// explicit are the requirements of required_providers entries; implied
// the others, each with the block that first implies it.
func (ts *terraformSettings) providerRequirements(contents []*hcl.BodyContent, providerBlocks []*hcl.Block, builtin func(typ string) bool) (explicit, implied []provider.ProviderRequirement, impliedBy map[string]hcl.Range) {
	names := map[string]hcl.Range{}
	use := func(n string, rng hcl.Range) {
		if _, ok := names[n]; !ok {
			names[n] = rng
		}
	}
	for n, rp := range ts.required {
		use(n, rp.DeclRange)
	}
	for _, b := range providerBlocks {
		use(b.Labels[0], b.DefRange)
	}
	for _, c := range contents {
		for _, b := range c.Blocks {
			switch b.Type {
			case "resource", "data":
				if ref, ok := metaProvider(b.Body); ok {
					use(ref, b.DefRange)
				} else if !builtin(b.Labels[0]) {
					n, _, _ := strings.Cut(b.Labels[0], "_")
					use(n, b.DefRange)
				}
			case "module":
				if a, ok := moduleProvidersAttr(b.Body); ok {
					pairs, _ := hcl.ExprMap(a.Expr)
					for _, kv := range pairs {
						if key, d := providerKey(kv.Value); !d.HasErrors() {
							n, _, _ := strings.Cut(key, ".")
							use(n, kv.Value.Range())
						}
					}
				}
			}
		}
	}
	impliedBy = map[string]hcl.Range{}
	for _, n := range SortedKeys(names) {
		if rp := ts.required[n]; rp != nil {
			if !IsBuiltinTerraform(rp.Source) {
				explicit = append(explicit, rp.ProviderRequirement)
			}
			continue
		}
		if n == "terraform" {
			continue // built in
		}
		implied = append(implied, provider.ProviderRequirement{LocalName: n, Source: impliedSource(n)})
		impliedBy[n] = names[n]
	}
	return explicit, implied, impliedBy
}

// metaProvider is the local name a block's provider meta-argument names.
func metaProvider(body hcl.Body) (string, bool) {
	c, _, _ := body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "provider"}}})
	a := c.Attributes["provider"]
	if a == nil {
		return "", false
	}
	key, d := providerKey(a.Expr)
	if d.HasErrors() {
		return "", false
	}
	n, _, _ := strings.Cut(key, ".")
	return n, true
}

// moduleProvidersAttr is a module block's providers argument.
func moduleProvidersAttr(body hcl.Body) (*hcl.Attribute, bool) {
	c, _, _ := body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "providers"}}})
	a := c.Attributes["providers"]
	return a, a != nil
}

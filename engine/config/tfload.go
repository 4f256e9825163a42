package config

// Reading a template directory into the blocks loadTemplate decodes: its
// files (tffiles.go) with the override files merged (tfoverride.go), its
// terraform blocks (terraform_block.go), the providers it requires —
// explicit, implied and pinned by its lock file (tflock.go) — and the
// values of its variable files (tfvars.go).

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/stackd/stackd/engine/provider"
)

// templateSource is a template directory read and merged.
type templateSource struct {
	files *templateFiles
	hash  string
	// contents are the primary files' contents, overrides merged into
	// their blocks.
	contents       []*hcl.BodyContent
	providerBlocks []*hcl.Block
	settings       *terraformSettings
	tfvars         map[string]TFVar
	funcs          map[string]bool
	// tfRange is where the template's provider requirements are (its
	// first terraform block, else where the template is named).
	tfRange hcl.Range
}

// readTemplate reads the template in dir.
func readTemplate(ld *loader, dir string, rng *hcl.Range) (*templateSource, hcl.Diagnostics) {
	ts := &templateSource{funcs: map[string]bool{}, settings: &terraformSettings{required: map[string]*RequiredProvider{}}}
	if rng != nil {
		ts.tfRange = *rng
	}
	files, diags := readTemplateFiles(ld.parser, ld.fsys, dir, rng)
	if files == nil {
		return ts, diags
	}
	ts.files, ts.hash = files, files.hash
	if len(files.primary) == 0 && !diags.HasErrors() {
		what := "no *.tf, *.tf.json or *.hcl files"
		if len(files.override) > 0 {
			what = "only override files, which need primary files to override"
		}
		diags = diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Empty template",
			Detail:   fmt.Sprintf("The template directory %q holds %s.", dir, what),
			Subject:  rng,
		})
	}
	for n := range files.jsonFuncs {
		ts.funcs[n] = true
	}
	var tfBlocks []*hcl.Block
	for _, f := range append(append([]*hcl.File(nil), files.primary...), files.override...) {
		if body, ok := f.Body.(*hclsyntax.Body); ok {
			hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
				if c, ok := n.(*hclsyntax.FunctionCallExpr); ok {
					ts.funcs[c.Name] = true
				}
				return nil
			})
		}
	}
	for _, f := range files.primary {
		content, cdiags := f.Body.Content(templateSchema)
		diags = append(diags, cdiags...)
		ts.contents = append(ts.contents, content)
		for _, b := range content.Blocks {
			switch b.Type {
			case "terraform":
				tfBlocks = append(tfBlocks, b)
			case "provider":
				ts.providerBlocks = append(ts.providerBlocks, b)
			}
		}
	}
	om := newOverrideMerge(ts.contents, ts.providerBlocks)
	for _, f := range files.override {
		content, cdiags := f.Body.Content(templateSchema)
		diags = append(diags, cdiags...)
		diags = append(diags, om.apply(content)...)
	}
	ts.providerBlocks = om.providers
	if len(tfBlocks) > 0 {
		ts.tfRange = tfBlocks[0].DefRange
	}
	settings, sdiags := readTerraformBlocks(tfBlocks, om.tfOverrides)
	diags = append(diags, sdiags...)
	ts.settings = settings
	diags = append(diags, settings.checkRequiredVersion(dir)...)
	tfvars, vdiags := readTFVarsFiles(files.tfvars)
	diags = append(diags, vdiags...)
	ts.tfvars = tfvars
	return ts, diags
}

// resolveProviders resolves the providers the template requires and sets
// t.RequiredProviders. reg is the registry to validate the template
// against (nil: unchanged); stop says the template's blocks are not worth
// checking against providers that could not be installed.
func (ts *templateSource) resolveProviders(ld *loader, t *Template, reg provider.Registry) (provider.Registry, hcl.Diagnostics, bool) {
	var diags hcl.Diagnostics
	builtin := func(typ string) bool {
		if _, ok := reg[typ]; !ok {
			return false
		}
		return ld.e == nil || ld.e.TypeOwner(typ) == ""
	}
	explicit, implied, impliedBy := ts.settings.providerRequirements(ts.contents, ts.providerBlocks, builtin)
	for _, rp := range ts.settings.required {
		t.ConfigurationAliases = append(t.ConfigurationAliases, rp.ConfigurationAliases...)
	}
	if ts.files != nil && ts.files.lock != nil {
		locks, ldiags := parseLockFile(ts.files.lock, ts.files.lockName)
		diags = append(diags, ldiags...)
		diags = append(diags, pinLocked(explicit, locks, ts.tfRange)...)
		diags = append(diags, pinLocked(implied, locks, ts.tfRange)...)
	}
	if diags.HasErrors() {
		return nil, diags, true
	}
	t.RequiredProviders = append(append([]provider.ProviderRequirement(nil), explicit...), implied...)
	if ld.e == nil {
		// Without plugins an implied provider is an unknown resource type,
		// reported as such where it is used.
		if len(explicit) > 0 {
			diags = diags.Append(Errorf(ts.tfRange, "Terraform providers are not enabled", "This template requires providers (%s), which this loader cannot install.", RequirementNames(explicit)))
		}
		return nil, diags, false
	}
	var out provider.Registry
	if len(explicit) > 0 {
		r, pdiags := ld.e.ResolvePlugins(explicit, ts.tfRange, ld.untrusted)
		if pdiags.HasErrors() {
			// That one error says it: the template's provider blocks,
			// resources and data blocks are not checked against providers
			// that could not be installed.
			return nil, append(diags, pdiags...), true
		}
		out = r
	}
	// Each implied provider on its own: one that cannot be installed (a
	// misspelt resource type, often) leaves the others' types known, and
	// the blocks using it are reported where they are.
	for _, req := range implied {
		r, pdiags := ld.e.ResolvePlugins([]provider.ProviderRequirement{req}, impliedBy[req.LocalName], ld.untrusted)
		if pdiags.HasErrors() {
			for _, d := range pdiags {
				if d.Severity == hcl.DiagError {
					d.Detail = fmt.Sprintf("No required_providers entry names %q, so, as in Terraform, it means %s. %s", req.LocalName, req.Source, d.Detail)
				}
			}
			diags = append(diags, pdiags...)
			continue
		}
		out = r
	}
	return out, diags, false
}

// checkConfigurationAliases reports module calls that do not pass the
// aliased configurations their module declares in configuration_aliases,
// as Terraform does.
func (t *Template) checkConfigurationAliases() hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, name := range SortedKeys(t.Modules) {
		mc := t.Modules[name]
		if mc.Template == nil {
			continue
		}
		for _, alias := range mc.Template.ConfigurationAliases {
			if _, ok := mc.Providers[alias]; !ok {
				diags = diags.Append(Errorf(mc.DeclRange, "Missing required provider configuration",
					"Module %q (%s) declares configuration_aliases = [%s]: its call must pass it, as in providers = { %s = %s }.", name, mc.Template.Dir, alias, alias, alias))
			}
		}
	}
	return diags
}

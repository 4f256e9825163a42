package config

// A template directory's .terraform.lock.hcl: the provider versions
// `terraform init` selected for it. It is read as a lock file (never as
// configuration): each provider the template requires and the file locks
// is pinned to the locked version, and a locked version its constraints
// no longer admit is an error, as `terraform plan` reports it.

import (
	"fmt"
	"strings"

	goversion "github.com/hashicorp/go-version"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// lockedProvider is one provider block of a lock file.
type lockedProvider struct {
	Version   string
	DeclRange hcl.Range
}

var lockFileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "provider", LabelNames: []string{"source"}}}}

var lockProviderSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "version", Required: true}, {Name: "constraints"}, {Name: "hashes"},
}}

// parseLockFile reads the provider versions of a lock file, by normalized
// source address (normalizeSource).
func parseLockFile(src []byte, name string) (map[string]lockedProvider, hcl.Diagnostics) {
	if d := checkNesting(src, name); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	f, diags := hclparse.NewParser().ParseHCL(src, name)
	if diags.HasErrors() {
		return nil, diags
	}
	content, d := f.Body.Content(lockFileSchema)
	diags = append(diags, d...)
	out := map[string]lockedProvider{}
	for _, b := range content.Blocks {
		c, d := b.Body.Content(lockProviderSchema)
		diags = append(diags, d...)
		a := c.Attributes["version"]
		if a == nil {
			continue
		}
		v, d := a.Expr.Value(nil)
		if d.HasErrors() || v.Type() != cty.String || v.IsNull() {
			diags = diags.Append(Errorf(a.Expr.Range(), "Invalid provider lock", "The version of a locked provider must be a string."))
			continue
		}
		if _, err := goversion.NewVersion(v.AsString()); err != nil {
			diags = diags.Append(Errorf(a.Expr.Range(), "Invalid provider lock", "%q is not a version: %s.", v.AsString(), err))
			continue
		}
		key := normalizeSource(b.Labels[0])
		if prev, ok := out[key]; ok {
			diags = diags.Append(Errorf(b.DefRange, "Duplicate provider lock", "Provider %s is locked twice; the other block is at %s.", b.Labels[0], prev.DeclRange))
			continue
		}
		out[key] = lockedProvider{Version: v.AsString(), DeclRange: b.DefRange}
	}
	return out, diags
}

// normalizeSource is a provider source address in full and lower case:
// "hashicorp/random" is "registry.terraform.io/hashicorp/random".
func normalizeSource(s string) string {
	s = strings.ToLower(s)
	if strings.Count(s, "/") == 1 {
		s = "registry.terraform.io/" + s
	}
	return s
}

// pinLocked pins each requirement the lock file locks to its locked
// version, refusing one whose own constraints exclude it.
func pinLocked(reqs []provider.ProviderRequirement, locks map[string]lockedProvider, rng hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for i, req := range reqs {
		lp, ok := locks[normalizeSource(req.Source)]
		if !ok {
			continue
		}
		if req.Version != "" {
			cons, err := goversion.NewConstraint(req.Version)
			if err != nil {
				diags = diags.Append(Errorf(rng, "Invalid provider version constraint", "Provider %s: %q is not a version constraint: %s.", req.LocalName, req.Version, err))
				continue
			}
			if !cons.Check(goversion.Must(goversion.NewVersion(lp.Version))) {
				diags = diags.Append(Errorf(lp.DeclRange, "Provider lock does not match the version constraints",
					"The locked version of provider %s (%s) is %s, which its version constraints %q do not admit. Run terraform init -upgrade and commit the new .terraform.lock.hcl, or change the constraints.",
					req.LocalName, req.Source, lp.Version, req.Version))
				continue
			}
		}
		reqs[i].Version = fmt.Sprintf("= %s", lp.Version)
	}
	return diags
}

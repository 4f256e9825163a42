package config

// The module lock: the file of the definitions directory that pins every
// remote module source the templates call to one commit (Git) or one
// archive digest, so that a revision of the definitions plans against the
// same module code however often, wherever and whenever it is planned.
// Terraform re-resolves module sources at each `terraform init` and keeps
// what it installed until `init -upgrade`; stackd plans revisions on
// several machines and months apart, so it keeps the choice in Git, next
// to the definitions, as .terraform.lock.hcl keeps providers': `stackd
// modules lock` writes it (resolving only what is not pinned yet),
// `stackd modules lock --upgrade` moves every pin, and a plan never
// resolves a source by itself.

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"

	version "github.com/hashicorp/go-version"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// ModuleLockFileName is the module lock's name in the definitions
// directory.
const ModuleLockFileName = ".stackd-modules.lock"

// ModulePin is what a remote module package is pinned to.
type ModulePin struct {
	// Version is the version a registry source resolved to, Constraints
	// the constraint it was resolved for and Location where the registry
	// said that version is (a Git or archive address).
	Version     string `hcl:"version,optional"`
	Constraints string `hcl:"constraints,optional"`
	Location    string `hcl:"location,optional"`
	// Commit is the commit of a Git package (a Git source's, or a
	// registry location's); SHA256 the hex digest of an archive.
	Commit string `hcl:"commit,optional"`
	SHA256 string `hcl:"sha256,optional"`
}

// IsZero reports whether p pins nothing.
func (p ModulePin) IsZero() bool { return p.Commit == "" && p.SHA256 == "" }

// ID is the content address p pins: the commit or the archive's digest.
func (p ModulePin) ID() string {
	if p.Commit != "" {
		return "commit " + p.Commit
	}
	return "sha256 " + p.SHA256
}

// ModuleLock maps a package address (ModuleSource.Package) to its pin.
type ModuleLock map[string]ModulePin

var (
	commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256Re = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ParseModuleLock reads a module lock's source.
func ParseModuleLock(src []byte, filename string) (ModuleLock, hcl.Diagnostics) {
	if d := checkNesting(src, filename); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	f, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diags
	}
	content, cdiags := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "module", LabelNames: []string{"package"}}}})
	if diags = append(diags, cdiags...); cdiags.HasErrors() {
		return nil, diags
	}
	lock := ModuleLock{}
	for _, b := range content.Blocks {
		var pin ModulePin
		if d := gohcl.DecodeBody(b.Body, nil, &pin); d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		pkg := b.Labels[0]
		switch {
		case pin.Commit != "" && !commitRe.MatchString(pin.Commit):
			diags = diags.Append(Errorf(b.DefRange, "Invalid module lock", "Module %q: commit %q is not a full, lower-case 40-digit hash.", pkg, pin.Commit))
		case pin.SHA256 != "" && !sha256Re.MatchString(pin.SHA256):
			diags = diags.Append(Errorf(b.DefRange, "Invalid module lock", "Module %q: sha256 %q is not 64 lower-case hex digits.", pkg, pin.SHA256))
		case (pin.Commit == "") == (pin.SHA256 == ""):
			diags = diags.Append(Errorf(b.DefRange, "Invalid module lock", "Module %q must be pinned by exactly one of commit (a Git package) and sha256 (an archive).", pkg))
		case pin.Version != "":
			if _, err := version.NewVersion(pin.Version); err != nil || pin.Location == "" {
				diags = diags.Append(Errorf(b.DefRange, "Invalid module lock", "Module %q: a registry pin needs a valid version (%q) and the location it was found at.", pkg, pin.Version))
			}
		}
		if _, dup := lock[pkg]; dup {
			diags = diags.Append(Errorf(b.DefRange, "Duplicate module lock entry", "Module %q is pinned twice in %s.", pkg, filename))
		}
		lock[pkg] = pin
	}
	return lock, diags
}

// Format writes the lock as stackd modules lock writes it: sorted, one
// block per package.
func (l ModuleLock) Format() []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			body.AppendNewline()
		}
		p := l[k]
		b := body.AppendNewBlock("module", []string{k}).Body()
		for _, kv := range [][2]string{{"version", p.Version}, {"constraints", p.Constraints}, {"location", p.Location}, {"commit", p.Commit}, {"sha256", p.SHA256}} {
			if kv[1] != "" {
				b.SetAttributeValue(kv[0], cty.StringVal(kv[1]))
			}
		}
	}
	var out bytes.Buffer
	out.WriteString("# This file is maintained by \"stackd modules lock\": it pins every remote module\n")
	out.WriteString("# source of these definitions' templates to one commit or archive digest.\n")
	out.WriteString("# Commit it; \"stackd modules lock --upgrade\" moves the pins.\n\n")
	out.Write(hclwrite.Format(f.Bytes()))
	return out.Bytes()
}

// satisfies reports whether a registry pin's version meets constraints
// (go-version syntax, as Terraform's version arguments).
func (p ModulePin) satisfies(constraints string) (bool, error) {
	if constraints == "" {
		return true, nil
	}
	c, err := version.NewConstraint(constraints)
	if err != nil {
		return false, fmt.Errorf("version constraint %q is not valid: %w", constraints, err)
	}
	v, err := version.NewVersion(p.Version)
	if err != nil {
		return false, err
	}
	return c.Check(v), nil
}

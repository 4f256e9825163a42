package config

// The blocks of a template that concern Terraform providers: terraform
// { required_providers }, provider, data and import blocks.

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// Plugins is what loading asks of the engine about provider plugins:
// resolving a template's required_providers and the resource types, data
// sources and provider blocks they bring. A nil Plugins has none: a
// template that requires a provider is refused.
type Plugins interface {
	// ResolvePlugins installs or finds the required providers (only
	// locked ones when untrusted) and returns their resource types.
	ResolvePlugins(reqs []provider.ProviderRequirement, rng hcl.Range, untrusted bool) (provider.Registry, hcl.Diagnostics)
	// TypeOwner is the local name of the provider of a plugin resource
	// type, "" for a built-in one.
	TypeOwner(typ string) string
	// ProviderConfigSchema is the schema of a provider block.
	ProviderConfigSchema(name string) (provider.Schema, bool)
	// DataSource is the data source of a type.
	DataSource(typ string) (provider.DataSource, bool)
	// Registry is every resource type known, built-in and plugin.
	Registry() provider.Registry
	// Lookup is the provider of a resource type.
	Lookup(typ string) (provider.Provider, bool)
}

// ProviderBlock is a provider block of a template: the configuration of
// one provider (or of one alias of it), evaluated per target.
type ProviderBlock struct {
	Name, Alias string
	Properties  map[string]*hcl.Attribute
	DeclRange   hcl.Range
}

// Key is "NAME" or "NAME.ALIAS", as resources name it.
func (p *ProviderBlock) Key() string {
	if p.Alias == "" {
		return p.Name
	}
	return p.Name + "." + p.Alias
}

// addProvider records a provider block, its properties decoded against the
// provider's configuration schema.
func (t *Template) addProvider(e Plugins, b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	schema, ok := e.ProviderConfigSchema(name)
	if !ok {
		return hcl.Diagnostics{Errorf(b.LabelRanges[0], "Provider not required",
			"provider %q is configured, but no required_providers entry declares it; add it to terraform { required_providers { %s = { source = \"…\" } } }.", name, name)}
	}
	bs, blocks := bodySchema(schema, "alias")
	content, diags := b.Body.Content(bs)
	pb := &ProviderBlock{Name: name, DeclRange: b.DefRange}
	if a := content.Attributes["alias"]; a != nil {
		diags = append(diags, stringAttr(a, &pb.Alias)...)
	}
	diags = append(diags, checkBlocks(content, blocks)...)
	pb.Properties = properties(schema, content, blocks)
	if t.Providers == nil {
		t.Providers = map[string]*ProviderBlock{}
	}
	if prev, ok := t.Providers[pb.Key()]; ok {
		return diags.Append(duplicate("provider", pb.Key(), prev.DeclRange, b.DefRange))
	}
	t.Providers[pb.Key()] = pb
	return diags
}

// providerRef reads a resource's provider meta-argument: NAME or
// NAME.ALIAS.
func providerRef(a *hcl.Attribute) (string, hcl.Diagnostics) {
	return providerKey(a.Expr)
}

// moduleProviders reads a module call's providers argument into m: the
// module's provider (key) each of the caller's serves (value), both NAME
// or NAME.ALIAS.
func moduleProviders(a *hcl.Attribute, m map[string]string) hcl.Diagnostics {
	pairs, diags := hcl.ExprMap(a.Expr)
	if diags.HasErrors() {
		return hcl.Diagnostics{Errorf(a.Expr.Range(), "Invalid providers argument", "providers takes a map of the module's providers to the caller's, without quotes: providers = { aws = aws.west }.")}
	}
	for _, kv := range pairs {
		child, kd := providerKey(kv.Key)
		parent, vd := providerKey(kv.Value)
		if kd.HasErrors() || vd.HasErrors() {
			diags = append(diags, kd...)
			diags = append(diags, vd...)
			continue
		}
		c, _, _ := strings.Cut(child, ".")
		if p, _, _ := strings.Cut(parent, "."); c != p {
			diags = diags.Append(Errorf(kv.Value.Range(), "Invalid providers argument",
				"The module's provider %s can only be served by a configuration of provider %s, not %s.", child, c, parent))
			continue
		}
		m[child] = parent
	}
	return diags
}

// providerKey reads a provider reference: NAME or NAME.ALIAS, a bare
// traversal.
func providerKey(expr hcl.Expression) (string, hcl.Diagnostics) {
	tr, diags := hcl.AbsTraversalForExpr(expr)
	if diags.HasErrors() || len(tr) < 1 || len(tr) > 2 {
		return "", hcl.Diagnostics{Errorf(expr.Range(), "Invalid provider reference", "provider takes a provider name or NAME.ALIAS, without quotes (provider = aws.west).")}
	}
	key := tr.RootName()
	if len(tr) == 2 {
		step, ok := tr[1].(hcl.TraverseAttr)
		if !ok {
			return "", hcl.Diagnostics{Errorf(expr.Range(), "Invalid provider reference", "provider takes NAME or NAME.ALIAS.")}
		}
		key += "." + step.Name
	}
	return key, nil
}

// addData records a data block: a data source of a required provider,
// read at plan and apply time; its attributes are data.TYPE.NAME.ATTR.
func (t *Template) addData(e Plugins, b *hcl.Block) hcl.Diagnostics {
	typ, name := b.Labels[0], b.Labels[1]
	addr := "data." + typ + "." + name
	if prev, ok := t.Data[addr]; ok {
		return hcl.Diagnostics{duplicate("data", addr, prev.DeclRange, b.DefRange)}
	}
	var ds provider.DataSource
	ok := false
	if e != nil {
		ds, ok = e.DataSource(typ)
	}
	if !ok {
		return hcl.Diagnostics{Errorf(b.LabelRanges[0], "Unknown data source", "There is no data source %q in the providers this template requires.", typ)}
	}
	schema := ds.Schema()
	bs, blocks := bodySchema(schema, "provider", "depends_on")
	bs.Blocks = append(bs.Blocks, hcl.BlockHeaderSchema{Type: "lifecycle"})
	content, diags := b.Body.Content(bs)
	r := &Resource{Type: typ, Name: name, DeclRange: b.DefRange, refs: map[string][]string{}}
	diags = append(diags, r.Lifecycle.decodeDataLifecycle(content)...)
	diags = append(diags, checkBlocks(content, blocks)...)
	r.Properties = properties(schema, content, blocks)
	if a := content.Attributes["provider"]; a != nil {
		key, pdiags := providerRef(a)
		diags = append(diags, pdiags...)
		r.Provider = key
	}
	if a := content.Attributes["depends_on"]; a != nil {
		deps, ddiags := dependsOn(a.Expr, e.Registry())
		diags = append(diags, ddiags...)
		r.DependsOn = deps
	}
	if t.Data == nil {
		t.Data = map[string]*Resource{}
	}
	t.Data[addr] = r
	return diags
}

// Import is an import block: the existing object of ID becomes the
// resource at To when it has none recorded (Terraform's import blocks).
type Import struct {
	To        string
	ID        hcl.Expression
	DeclRange hcl.Range
	// ForEach, Resource and Key are an import block's for_each, the
	// resource ("TYPE.NAME") its to names and the expression of its
	// instance key (import_foreach.go); Provider its provider argument.
	ForEach, Key hcl.Expression
	Resource     string
	Provider     string
}

var importSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "to", Required: true}, {Name: "id", Required: true}, {Name: "for_each"}, {Name: "provider"}}}

// addImport records an import block; what it imports to is checked once
// the template's resources are known (checkImports).
func (t *Template) addImport(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(importSchema)
	if diags.HasErrors() {
		return diags
	}
	if content.Attributes["for_each"] != nil || content.Attributes["provider"] != nil {
		return append(diags, t.addImportForEach(b, content)...) // import_foreach.go
	}
	tr, d := hcl.AbsTraversalForExpr(content.Attributes["to"].Expr)
	if d.HasErrors() || len(tr) < 2 {
		return diags.Append(Errorf(content.Attributes["to"].Expr.Range(), "Invalid import address", "to takes a resource address without quotes: to = aws_s3_bucket.logs (or aws_s3_bucket.logs[0])."))
	}
	to := tr.RootName()
	for _, step := range tr[1:] {
		switch s := step.(type) {
		case hcl.TraverseAttr:
			to += "." + s.Name
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String {
				to += fmt.Sprintf("[%q]", s.Key.AsString())
			} else {
				to += "[" + s.Key.AsBigFloat().String() + "]"
			}
		}
	}
	if t.Imports == nil {
		t.Imports = map[string]*Import{}
	}
	if prev, ok := t.Imports[to]; ok {
		return diags.Append(duplicate("import", to, prev.DeclRange, b.DefRange))
	}
	t.Imports[to] = &Import{To: to, ID: content.Attributes["id"].Expr, DeclRange: b.DefRange}
	return diags
}

// checkImports reports import blocks whose resource is not declared or
// cannot import.
func (t *Template) checkImports(e Plugins) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, to := range SortedKeys(t.Imports) {
		im := t.Imports[to]
		base := to
		if i := strings.IndexByte(base, '['); i > 0 {
			base = base[:i]
		}
		r, ok := t.Resources[base]
		if !ok {
			diags = diags.Append(Errorf(im.DeclRange, "Import of an undeclared resource", "import to = %s: the template declares no resource %s.", to, base))
			continue
		}
		var p provider.Provider
		if e != nil {
			p, _ = e.Lookup(r.Type)
		}
		if im, ok := p.(provider.Importer); !ok || !im.CanImport() {
			diags = diags.Append(Errorf(t.Imports[to].DeclRange, "Resource type cannot import", "%s resources cannot adopt existing objects; only Terraform providers' resource types can.", r.Type))
		}
		diags = append(diags, im.check(r, e)...) // import_foreach.go
		for _, tr := range im.ID.Variables() {
			if root := tr.RootName(); root != "var" && root != "target" && root != "stack_set" && root != "local" && (root != "each" || im.ForEach == nil) {
				diags = diags.Append(Errorf(tr.SourceRange(), "Invalid import id", "An import id may use var, local, target and stack_set only: it must be known when the instance is planned."))
			}
		}
	}
	return diags
}

func RequirementNames(reqs []provider.ProviderRequirement) string {
	names := make([]string, len(reqs))
	for i, r := range reqs {
		names[i] = r.LocalName + " (" + r.Source + ")"
	}
	return strings.Join(names, ", ")
}

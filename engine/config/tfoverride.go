package config

// Override files (override.tf, *_override.tf and their .tf.json forms),
// merged into the blocks of the primary files as Terraform 1.11 merges
// them (configs.Module.mergeFile): each block of an override file names a
// block of the same type and labels in a primary file, and every argument
// it sets replaces that block's; a nested block type it has replaces all of
// the base block's blocks of that type, except a resource's lifecycle,
// whose arguments are merged one by one. A local value replaces the local
// of its name. Where Terraform would drop something of an override file
// without a word (depends_on, validation, precondition and postcondition
// blocks), stackd refuses it.

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// mergedBody is a block body with an override body merged over it.
type mergedBody struct {
	base, over hcl.Body
	// perArgument are the nested block types whose arguments are merged
	// one by one rather than replaced whole (a resource's lifecycle).
	perArgument map[string]bool
}

var _ hcl.Body = (*mergedBody)(nil)

// relaxed is s with no attribute required: either body alone may lack what
// the two have together.
func relaxed(s *hcl.BodySchema) *hcl.BodySchema {
	r := &hcl.BodySchema{Blocks: s.Blocks, Attributes: make([]hcl.AttributeSchema, len(s.Attributes))}
	for i, a := range s.Attributes {
		r.Attributes[i] = hcl.AttributeSchema{Name: a.Name}
	}
	return r
}

func (m *mergedBody) Content(s *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	r := relaxed(s)
	bc, diags := m.base.Content(r)
	oc, odiags := m.over.Content(r)
	diags = append(diags, odiags...)
	c := m.merge(bc, oc)
	for _, a := range s.Attributes {
		if _, ok := c.Attributes[a.Name]; a.Required && !ok {
			diags = diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Missing required argument",
				Detail:  fmt.Sprintf("The argument %q is required, but neither the block nor its override sets it.", a.Name),
				Subject: m.base.MissingItemRange().Ptr(),
			})
		}
	}
	return c, diags
}

func (m *mergedBody) PartialContent(s *hcl.BodySchema) (*hcl.BodyContent, hcl.Body, hcl.Diagnostics) {
	r := relaxed(s)
	bc, brest, diags := m.base.PartialContent(r)
	oc, orest, odiags := m.over.PartialContent(r)
	diags = append(diags, odiags...)
	c := m.merge(bc, oc)
	for _, a := range s.Attributes {
		if _, ok := c.Attributes[a.Name]; a.Required && !ok {
			diags = diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Missing required argument",
				Detail:  fmt.Sprintf("The argument %q is required, but neither the block nor its override sets it.", a.Name),
				Subject: m.base.MissingItemRange().Ptr(),
			})
		}
	}
	return c, &mergedBody{base: brest, over: orest, perArgument: m.perArgument}, diags
}

func (m *mergedBody) JustAttributes() (hcl.Attributes, hcl.Diagnostics) {
	attrs, diags := m.base.JustAttributes()
	over, odiags := m.over.JustAttributes()
	diags = append(diags, odiags...)
	out := hcl.Attributes{}
	for n, a := range attrs {
		out[n] = a
	}
	for n, a := range over {
		out[n] = a
	}
	return out, diags
}

func (m *mergedBody) MissingItemRange() hcl.Range { return m.base.MissingItemRange() }

// merge is base's content with over's arguments and nested block types in
// place of base's.
func (m *mergedBody) merge(base, over *hcl.BodyContent) *hcl.BodyContent {
	c := &hcl.BodyContent{Attributes: hcl.Attributes{}, MissingItemRange: base.MissingItemRange}
	for n, a := range base.Attributes {
		c.Attributes[n] = a
	}
	for n, a := range over.Attributes {
		c.Attributes[n] = a
	}
	overTypes := map[string]bool{}
	for _, b := range over.Blocks {
		overTypes[b.Type] = true
	}
	firstBase := map[string]*hcl.Block{}
	for _, b := range base.Blocks {
		if !overTypes[b.Type] {
			c.Blocks = append(c.Blocks, b)
		} else if firstBase[b.Type] == nil {
			firstBase[b.Type] = b
		}
	}
	for _, b := range over.Blocks {
		if bb := firstBase[b.Type]; bb != nil && m.perArgument[b.Type] {
			merged := *bb
			merged.Body = &mergedBody{base: bb.Body, over: b.Body}
			c.Blocks = append(c.Blocks, &merged)
			continue
		}
		c.Blocks = append(c.Blocks, b)
	}
	return c
}

// attrsBody is a body of the given attributes only: the local values of
// an override file that replace one primary locals block's.
type attrsBody struct {
	attrs hcl.Attributes
	rng   hcl.Range
}

func (a attrsBody) Content(s *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	c, _, d := a.PartialContent(s)
	return c, d
}

func (a attrsBody) PartialContent(s *hcl.BodySchema) (*hcl.BodyContent, hcl.Body, hcl.Diagnostics) {
	c := &hcl.BodyContent{Attributes: hcl.Attributes{}, MissingItemRange: a.rng}
	rest := attrsBody{attrs: hcl.Attributes{}, rng: a.rng}
	want := map[string]bool{}
	for _, s := range s.Attributes {
		want[s.Name] = true
	}
	for n, at := range a.attrs {
		if want[n] {
			c.Attributes[n] = at
		} else {
			rest.attrs[n] = at
		}
	}
	return c, rest, nil
}

func (a attrsBody) JustAttributes() (hcl.Attributes, hcl.Diagnostics) { return a.attrs, nil }
func (a attrsBody) MissingItemRange() hcl.Range                       { return a.rng }

// blockKey identifies a block by type and labels.
func blockKey(b *hcl.Block) string { return b.Type + "\x00" + strings.Join(b.Labels, "\x00") }

// overrideMerge merges override files into the primary files' content.
type overrideMerge struct {
	blocks map[string]*hcl.Block // primary blocks by blockKey (the first of each)
	locals map[string]*hcl.Block // the primary locals block defining each name
	// providers are the primary provider blocks (merged into in place) and
	// the default configurations override files add.
	providers []*hcl.Block
	// tfOverrides are the override files' terraform blocks, in order.
	tfOverrides []*hcl.Block
}

func newOverrideMerge(contents []*hcl.BodyContent, providers []*hcl.Block) *overrideMerge {
	om := &overrideMerge{blocks: map[string]*hcl.Block{}, locals: map[string]*hcl.Block{}, providers: providers}
	for _, c := range contents {
		for _, b := range c.Blocks {
			switch b.Type {
			case "locals":
				attrs, _ := b.Body.JustAttributes()
				for n := range attrs {
					if om.locals[n] == nil {
						om.locals[n] = b
					}
				}
			case "provider", "terraform":
			default:
				if k := blockKey(b); om.blocks[k] == nil {
					om.blocks[k] = b
				}
			}
		}
	}
	return om
}

// providerAlias is the alias a provider block sets, "" without one.
func providerAlias(b *hcl.Block) string {
	c, _, _ := b.Body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "alias"}}})
	if a := c.Attributes["alias"]; a != nil {
		if v, d := a.Expr.Value(nil); !d.HasErrors() && v.Type().FriendlyName() == "string" && v.IsKnown() && !v.IsNull() {
			return v.AsString()
		}
	}
	return ""
}

// has reports whether body sets the attribute name, and where.
func has(body hcl.Body, name string) (hcl.Range, bool) {
	c, _, _ := body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: name}}})
	if a := c.Attributes[name]; a != nil {
		return a.NameRange, true
	}
	return hcl.Range{}, false
}

// nested is the blocks of type typ (with labels) in body.
func nested(body hcl.Body, typ string, labels ...string) []*hcl.Block {
	c, _, _ := body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: typ, LabelNames: labels}}})
	return c.Blocks
}

// dropped refuses what Terraform would drop of an override block: blocks
// of the given types (at path inside body).
func dropped(body hcl.Body, what string, types ...string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, typ := range types {
		for _, b := range nested(body, typ) {
			diags = diags.Append(Errorf(b.DefRange, "Unsupported override",
				"A %s block in an override file is not merged by Terraform (it would be ignored); stackd refuses it. Put it in the %s in a primary configuration file.", typ, what))
		}
	}
	return diags
}

// apply merges the blocks of one override file.
func (om *overrideMerge) apply(content *hcl.BodyContent) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, b := range content.Blocks {
		switch b.Type {
		case "terraform":
			om.tfOverrides = append(om.tfOverrides, b)
		case "locals":
			attrs, d := b.Body.JustAttributes()
			diags = append(diags, d...)
			for _, n := range SortedKeys(attrs) {
				base := om.locals[n]
				if base == nil {
					diags = diags.Append(Errorf(attrs[n].NameRange, "Missing base local value definition to override",
						"There is no local value named %q. An override file can only override a local value that was already defined in a primary configuration file.", n))
					continue
				}
				base.Body = &mergedBody{base: base.Body, over: attrsBody{attrs: hcl.Attributes{n: attrs[n]}, rng: b.DefRange}}
			}
		case "provider":
			alias := providerAlias(b)
			var base *hcl.Block
			for _, p := range om.providers {
				if p.Labels[0] == b.Labels[0] && providerAlias(p) == alias {
					base = p
					break
				}
			}
			switch {
			case base != nil:
				base.Body = &mergedBody{base: base.Body, over: b.Body}
			case alias == "":
				// As Terraform: an absent default configuration is an
				// empty one, which the override then sets.
				om.providers = append(om.providers, b)
			default:
				diags = diags.Append(Errorf(b.DefRange, "Missing base provider configuration for override",
					"There is no %s provider configuration with the alias %q. An override file can only override an aliased provider configuration that was already defined in a primary configuration file.", b.Labels[0], alias))
			}
		case "variable", "output", "module", "resource", "data":
			diags = append(diags, om.block(b)...)
		default:
			diags = diags.Append(Errorf(b.DefRange, fmt.Sprintf("Cannot override '%s' blocks", b.Type),
				"%s blocks can appear only in primary configuration files, not in override files.", b.Type))
		}
	}
	return diags
}

// block merges an override of a variable, output, module, resource or
// data block.
func (om *overrideMerge) block(b *hcl.Block) hcl.Diagnostics {
	base := om.blocks[blockKey(b)]
	if base == nil {
		var summary, detail string
		switch b.Type {
		case "variable":
			summary, detail = "Missing base variable declaration to override", fmt.Sprintf("There is no variable named %q. An override file can only override a variable that was already declared in a primary configuration file.", b.Labels[0])
		case "output":
			summary, detail = "Missing base output definition to override", fmt.Sprintf("There is no output named %q. An override file can only override an output that was already defined in a primary configuration file.", b.Labels[0])
		case "module":
			summary, detail = "Missing module call to override", fmt.Sprintf("There is no module call named %q. An override file can only override a module call that was defined in a primary configuration file.", b.Labels[0])
		case "resource":
			summary, detail = "Missing resource to override", fmt.Sprintf("There is no %s resource named %q. An override file can only override a resource block defined in a primary configuration file.", b.Labels[0], b.Labels[1])
		default:
			summary, detail = "Missing data resource to override", fmt.Sprintf("There is no %s data resource named %q. An override file can only override a data block defined in a primary configuration file.", b.Labels[0], b.Labels[1])
		}
		return hcl.Diagnostics{Errorf(b.DefRange, summary, "%s", detail)}
	}
	var diags hcl.Diagnostics
	noDependsOn := func(body hcl.Body) {
		if rng, ok := has(body, "depends_on"); ok {
			diags = diags.Append(Errorf(rng, "Unsupported override", "The depends_on argument may not be overridden."))
		}
	}
	notMerged := func(body hcl.Body, name string) {
		if rng, ok := has(body, name); ok {
			diags = diags.Append(Errorf(rng, "Unsupported override",
				"Terraform does not merge the %s argument of an override %s block (it would be ignored); stackd refuses it. Set it in the primary configuration file.", name, b.Type))
		}
	}
	var perArgument map[string]bool
	switch b.Type {
	case "variable":
		diags = append(diags, dropped(b.Body, "variable block", "validation")...)
		notMerged(b.Body, "ephemeral")
	case "output":
		noDependsOn(b.Body)
		diags = append(diags, dropped(b.Body, "output block", "precondition")...)
		notMerged(b.Body, "ephemeral")
	case "module":
		// Terraform refuses to override a module call that has
		// depends_on, and drops the override's own.
		if rng, ok := has(base.Body, "depends_on"); ok {
			diags = diags.Append(Errorf(rng, "Unsupported override", "The depends_on argument may not be overridden: module %q has depends_on, so an override file cannot override it.", b.Labels[0]))
		}
		noDependsOn(b.Body)
	case "resource", "data":
		noDependsOn(b.Body)
		for _, lc := range nested(b.Body, "lifecycle") {
			diags = append(diags, dropped(lc.Body, "lifecycle block of the resource", "precondition", "postcondition")...)
		}
		for _, d := range nested(b.Body, "dynamic", "type") {
			diags = diags.Append(Errorf(d.DefRange, "Unsupported override",
				"stackd does not merge dynamic blocks of an override file into the resource: write the block %q in the primary configuration file.", d.Labels[0]))
		}
		perArgument = map[string]bool{"lifecycle": true}
	}
	if diags.HasErrors() {
		return diags
	}
	base.Body = &mergedBody{base: base.Body, over: b.Body, perArgument: perArgument}
	return diags
}

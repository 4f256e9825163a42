package config

// Nested blocks of a provider schema (Terraform providers) as properties:
// their HCL schema, their static validation, and their value as one
// expression per block type.

import (
	"errors"
	"math/big"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// bodySchema is the HCL schema of a body holding a provider schema's
// properties (nested block types as blocks) and the extra attributes; the
// block types are returned by name.
func bodySchema(schema provider.Schema, extra ...string) (*hcl.BodySchema, map[string]provider.Property) {
	bs := &hcl.BodySchema{}
	blocks := map[string]provider.Property{}
	for _, n := range extra {
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: n})
	}
	for _, n := range SortedKeys(schema.Properties) {
		p := schema.Properties[n]
		if p.Block != nil {
			bs.Blocks = append(bs.Blocks, hcl.BlockHeaderSchema{Type: n})
			blocks[n] = p
			continue
		}
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: n, Required: p.Required})
	}
	return withDynamic(bs), blocks
}

// checkBlocks validates the nested blocks of content statically (their
// arguments and blocks, at any depth) against their specs.
func checkBlocks(content *hcl.BodyContent, blocks map[string]provider.Property) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, b := range content.Blocks {
		if b.Type == "dynamic" {
			diags = append(diags, checkDynamic(b, blockSpecs(blocks))...)
			continue
		}
		p, ok := blocks[b.Type]
		if !ok {
			continue
		}
		diags = append(diags, checkBlockBody(b.Body, nestedSpec(p.Block))...)
	}
	return diags
}

// checkBlockBody validates one block body against the object spec of its
// type, recursing into its nested blocks.
func checkBlockBody(body hcl.Body, spec hcldec.Spec) hcl.Diagnostics {
	if spec == nil {
		return nil
	}
	content, diags := body.Content(withDynamic(hcldec.ImpliedSchema(spec)))
	if obj, ok := spec.(hcldec.ObjectSpec); ok {
		for _, b := range content.Blocks {
			if b.Type == "dynamic" {
				diags = append(diags, checkDynamic(b, hcldec.ChildBlockTypes(spec))...)
				continue
			}
			if inner, ok := obj[b.Type]; ok {
				diags = append(diags, checkBlockBody(b.Body, nestedSpec(inner))...)
			}
		}
	}
	return diags
}

// nestedSpec is the spec of one block of a block spec.
func nestedSpec(spec hcldec.Spec) hcldec.Spec {
	switch s := spec.(type) {
	case *hcldec.BlockSpec:
		return s.Nested
	case *hcldec.BlockListSpec:
		return s.Nested
	case *hcldec.BlockSetSpec:
		return s.Nested
	case *hcldec.BlockMapSpec:
		return s.Nested
	case *hcldec.BlockTupleSpec:
		return s.Nested
	case *hcldec.BlockObjectSpec:
		return s.Nested
	}
	return nil
}

// properties are the attributes of content that are properties of schema,
// and its nested blocks as one expression per block type (blocksExpr).
func properties(schema provider.Schema, content *hcl.BodyContent, blocks map[string]provider.Property) map[string]*hcl.Attribute {
	out := map[string]*hcl.Attribute{}
	for n, a := range content.Attributes {
		if _, ok := schema.Properties[n]; ok {
			out[n] = a
		}
	}
	byType := map[string][]*hcl.Block{}
	for _, b := range content.Blocks {
		typ := b.Type
		if typ == "dynamic" {
			typ = b.Labels[0] // a dynamic block stands among the blocks it generates
		}
		if _, ok := blocks[typ]; ok {
			byType[typ] = append(byType[typ], b)
		}
	}
	for n, bl := range byType {
		out[n] = &hcl.Attribute{Name: n, Expr: &blocksExpr{spec: blocks[n].Block, blocks: bl}, Range: bl[0].DefRange, NameRange: bl[0].TypeRange}
	}
	return out
}

// blocksExpr is the nested blocks of one type in a resource or provider
// body as an expression: its value is the blocks decoded with the block
// type's spec, its variables those the blocks reference.
type blocksExpr struct {
	spec   hcldec.Spec
	blocks []*hcl.Block
}

func (x *blocksExpr) body() hcl.Body {
	// The blocks of one type, as a body holding only them.
	return &BlockList{blocks: x.blocks}
}

func (x *blocksExpr) Value(ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	return hcldec.Decode(expandDynamic(x.body(), ctx), x.spec, ctx)
}

func (x *blocksExpr) Variables() []hcl.Traversal { return dynamicVariables(x.body(), x.spec) }

func (x *blocksExpr) Range() hcl.Range { return x.blocks[0].DefRange }

func (x *blocksExpr) StartRange() hcl.Range { return x.blocks[0].TypeRange }

// blockList is an hcl.Body of some blocks: what hcldec's block specs
// decode.
type BlockList struct{ blocks []*hcl.Block }

func (b *BlockList) Content(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	c, _, d := b.PartialContent(schema)
	return c, d
}

func (b *BlockList) PartialContent(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Body, hcl.Diagnostics) {
	c := &hcl.BodyContent{Attributes: hcl.Attributes{}}
	for _, bl := range b.blocks {
		for _, s := range schema.Blocks {
			if s.Type == bl.Type {
				c.Blocks = append(c.Blocks, bl)
			}
		}
	}
	if len(b.blocks) > 0 {
		c.MissingItemRange = b.blocks[0].DefRange
	}
	return c, b, nil
}

func (b *BlockList) JustAttributes() (hcl.Attributes, hcl.Diagnostics) { return hcl.Attributes{}, nil }

func (b *BlockList) MissingItemRange() hcl.Range {
	if len(b.blocks) > 0 {
		return b.blocks[0].DefRange
	}
	return hcl.Range{}
}

// configDiags turns the error of a provider's validation of a resource's
// or data block's configuration into diagnostics: one per problem at the
// property it is about, when the provider says which (Terraform
// providers' diagnostics carry attribute paths), else one at the block.
//
// Validators quote the values they refuse (framework-validators do): the
// values of props marked sensitive (sensitive variables, attributes the
// provider's schema calls sensitive) are redacted from what they say.
func ConfigDiags(written map[string]*hcl.Attribute, block hcl.Range, addr, summary string, err error, props cty.Value) hcl.Diagnostics {
	red := provider.NewSecrets()
	red.AddMarked(props)
	if pf, ok := errors.AsType[provider.Failure](err); ok && pf.ProviderFailure() {
		return hcl.Diagnostics{Errorf(block, "Provider failed", "%s: %s.", addr, strings.TrimSuffix(red.Redact(err.Error()), "."))}
	}
	var ap provider.AttributeProblems
	if !errors.As(err, &ap) || len(ap.AttributeProblems()) == 0 {
		return hcl.Diagnostics{Errorf(block, summary, "%s: %s.", addr, strings.TrimSuffix(red.Redact(err.Error()), "."))}
	}
	var diags hcl.Diagnostics
	for _, p := range ap.AttributeProblems() {
		detail := p.Detail
		if detail == "" {
			detail = p.Summary
		}
		where := addr
		if len(p.Path) > 0 {
			where += "." + provider.FormatPath(p.Path)
		}
		diags = diags.Append(Errorf(propertyRange(written, block, p.Path), red.Redact(p.Summary), "%s: %s.", where, strings.TrimSuffix(red.Redact(detail), ".")))
	}
	return diags
}

// propertyRange is where the property at path is written among written
// (a block's properties): the attribute's expression, the nested block
// (the one indexed, when the path says), or an attribute inside it; block
// (the block's own range) when the path names nothing written there.
func propertyRange(written map[string]*hcl.Attribute, block hcl.Range, path cty.Path) hcl.Range {
	if len(path) == 0 {
		return block
	}
	first, ok := path[0].(cty.GetAttrStep)
	if !ok {
		return block
	}
	a := written[first.Name]
	if a == nil {
		return block
	}
	bx, ok := a.Expr.(*blocksExpr)
	if !ok {
		return a.Expr.Range()
	}
	b := bx.blocks[0]
	if len(path) > 1 {
		if ix, ok := path[1].(cty.IndexStep); ok && ix.Key.Type() == cty.Number && ix.Key.IsKnown() {
			if i, acc := ix.Key.AsBigFloat().Int64(); acc == big.Exact && i >= 0 && int(i) < len(bx.blocks) {
				b = bx.blocks[i]
			}
		}
	}
	if len(path) > 2 {
		inner, ok := path[2].(cty.GetAttrStep)
		if body, isSyntax := b.Body.(*hclsyntax.Body); ok && isSyntax {
			if ia := body.Attributes[inner.Name]; ia != nil {
				return ia.Expr.Range()
			}
		}
	}
	return b.DefRange
}

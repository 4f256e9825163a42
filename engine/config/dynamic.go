package config

// dynamic blocks (Terraform's): a dynamic "TYPE" block inside a resource,
// data or provider block stands for as many TYPE blocks as its for_each
// has elements. They are expanded with hcl's ext/dynblock when a block
// type's value is decoded (blocksExpr.Value), and their references —
// for_each, labels and content, without the iterator — enter the
// dependency graph through dynblock.VariablesHCLDec (blocksExpr.Variables).
// An unknown for_each makes the block type's whole value unknown, as in
// Terraform.

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/dynblock"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// dynamicHeader is the header of a dynamic block: dynamic "TYPE".
var dynamicHeader = hcl.BlockHeaderSchema{Type: "dynamic", LabelNames: []string{"type"}}

// dynamicSchema is the body of a dynamic block.
var dynamicSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "for_each", Required: true}, {Name: "iterator"}, {Name: "labels"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "content"}},
}

// metaBlockTypes are the blocks of a resource that Terraform never lets a
// dynamic block generate.
var metaBlockTypes = map[string]bool{"lifecycle": true, "provisioner": true, "connection": true, "update_pattern": true, "dynamic": true}

// withDynamic returns bs with the dynamic block header added.
func withDynamic(bs *hcl.BodySchema) *hcl.BodySchema {
	bs.Blocks = append(bs.Blocks, dynamicHeader)
	return bs
}

// checkDynamic validates one dynamic block of a body whose nested block
// types are blocks: its label names one of them, its body has for_each
// and one content block, and the content is a valid block of that type
// (nested dynamic blocks included).
func checkDynamic(b *hcl.Block, blocks map[string]hcldec.Spec) hcl.Diagnostics {
	typ := b.Labels[0]
	spec, ok := blocks[typ]
	if !ok {
		if metaBlockTypes[typ] {
			return hcl.Diagnostics{Errorf(b.LabelRanges[0], "Invalid dynamic block type",
				"A dynamic block cannot generate %q blocks: Terraform's meta-argument blocks are written literally.", typ)}
		}
		names := SortedKeys(blocks)
		want := "This block has no nested block types."
		if len(names) > 0 {
			want = "Its nested block types: " + strings.Join(names, ", ") + "."
		}
		return hcl.Diagnostics{Errorf(b.LabelRanges[0], "Unsupported block type",
			"Blocks of type %q are not expected here, so a dynamic block cannot generate them. %s", typ, want)}
	}
	content, diags := b.Body.Content(dynamicSchema)
	if a := content.Attributes["iterator"]; a != nil {
		if name := hcl.ExprAsKeyword(a.Expr); name == "" || !hclsyntaxValidIdentifier(name) {
			diags = diags.Append(Errorf(a.Expr.Range(), "Invalid dynamic iterator name",
				"iterator takes a name without quotes, like iterator = rule; the default is the block type, %s.", typ))
		}
	}
	contents := content.Blocks
	switch {
	case len(contents) == 0:
		diags = diags.Append(Errorf(b.DefRange, "Missing content block",
			"dynamic %q needs one content block: the body of each %s block it generates.", typ, typ))
	case len(contents) > 1:
		diags = diags.Append(Errorf(contents[1].DefRange, "Duplicate content block",
			"dynamic %q may have one content block; another is at %s.", typ, contents[0].DefRange))
	default:
		diags = append(diags, checkBlockBody(contents[0].Body, nestedSpec(spec))...)
	}
	return diags
}

// blockSpecs are the hcldec specs of the nested block types of blocks.
func blockSpecs(blocks map[string]provider.Property) map[string]hcldec.Spec {
	out := make(map[string]hcldec.Spec, len(blocks))
	for n, p := range blocks {
		out[n] = p.Block
	}
	return out
}

// expandDynamic is a body of blocks with its dynamic blocks expanded in
// ctx: each for_each at most MaxCount elements.
func expandDynamic(body hcl.Body, ctx *hcl.EvalContext) hcl.Body {
	return dynblock.Expand(body, ctx, dynblock.OptCheckForEach(checkDynamicForEach))
}

// checkDynamicForEach bounds a dynamic block's for_each as count and
// for_each are bounded, and refuses what Terraform refuses.
func checkDynamicForEach(v cty.Value, expr hcl.Expression, _ *hcl.EvalContext) hcl.Diagnostics {
	v, _ = v.Unmark()
	if v.IsNull() {
		return hcl.Diagnostics{Errorf(expr.Range(), "Invalid dynamic for_each value", "Cannot use a null value in for_each.")}
	}
	if !v.IsKnown() {
		return nil
	}
	if !v.CanIterateElements() {
		return hcl.Diagnostics{Errorf(expr.Range(), "Invalid dynamic for_each value",
			"Cannot use a %s value in for_each. An iterable collection is required.", v.Type().FriendlyName())}
	}
	if n := v.LengthInt(); n > MaxCount {
		return hcl.Diagnostics{Errorf(expr.Range(), "Invalid dynamic for_each value",
			"for_each has %d elements, more than the limit of %d blocks one dynamic block may generate.", n, MaxCount)}
	}
	return nil
}

// dynamicVariables are the references of a body of blocks, through its
// dynamic blocks (their iterators excluded).
func dynamicVariables(body hcl.Body, spec hcldec.Spec) []hcl.Traversal {
	return dynblock.VariablesHCLDec(body, spec)
}

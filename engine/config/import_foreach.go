package config

// import blocks with for_each (Terraform 1.7+) and the provider argument:
// to = TYPE.NAME[each.key] (or any key expression of each), id using
// each.key and each.value; the engine expands them per instance
// (engine/refactor.go).

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// addImportForEach records an import block with for_each or provider.
func (t *Template) addImportForEach(b *hcl.Block, content *hcl.BodyContent) hcl.Diagnostics {
	var diags hcl.Diagnostics
	toExpr := content.Attributes["to"].Expr
	im := &Import{ID: content.Attributes["id"].Expr, DeclRange: b.DefRange}
	if a := content.Attributes["for_each"]; a != nil {
		im.ForEach = a.Expr
		for _, tr := range a.Expr.Variables() {
			if root := tr.RootName(); root != "var" && root != "target" && root != "stack_set" && root != "local" {
				diags = diags.Append(Errorf(tr.SourceRange(), "Invalid import for_each", "An import's for_each may use var, local, target and stack_set only: it must be known when the instance is planned."))
			}
		}
	}
	if a := content.Attributes["provider"]; a != nil {
		key, d := providerKey(a.Expr)
		diags = append(diags, d...)
		im.Provider = key
	}
	key, attrs, ok := triggerKey(toExpr)
	tr, d := hcl.AbsTraversalForExpr(toExpr)
	switch {
	case ok && key != nil && len(attrs) == 0:
		// TYPE.NAME[expression]
		coll, _ := hcl.AbsTraversalForExpr(indexCollection(toExpr))
		im.Resource, im.Key = coll.RootName()+"."+coll[1].(hcl.TraverseAttr).Name, key
		if im.ForEach == nil {
			diags = diags.Append(Errorf(toExpr.Range(), "Invalid import address", "to = %s uses each, which only an import with for_each has.", im.Resource+"[…]"))
		}
	case !d.HasErrors() && (len(tr) == 2 || len(tr) == 3):
		im.Resource = tr.RootName() + "." + tr[1].(hcl.TraverseAttr).Name
		if len(tr) == 3 {
			ix, isIndex := tr[2].(hcl.TraverseIndex)
			k, err := InstanceKey(ix.Key)
			if !isIndex || err != nil {
				return diags.Append(Errorf(toExpr.Range(), "Invalid import address", "to takes a resource address without quotes: to = aws_s3_bucket.logs[each.key]."))
			}
			im.To = im.Resource + k
		} else {
			im.To = im.Resource
		}
		if im.ForEach != nil {
			diags = diags.Append(Errorf(toExpr.Range(), "Invalid import address",
				"An import with for_each imports one object per element: its to needs an instance key from each, like to = %s[each.key].", im.Resource))
		}
	default:
		return diags.Append(Errorf(toExpr.Range(), "Invalid import address", "to takes a resource address without quotes: to = aws_s3_bucket.logs, or with for_each to = aws_s3_bucket.logs[each.key]."))
	}
	if diags.HasErrors() {
		return diags
	}
	if t.Imports == nil {
		t.Imports = map[string]*Import{}
	}
	slot := im.To
	if im.ForEach != nil {
		// Keyed apart per block: several may import into one resource.
		slot = fmt.Sprintf("%s[for_each at %s]", im.Resource, b.DefRange)
		im.To = im.Resource + "[each]"
	}
	if prev, ok := t.Imports[slot]; ok {
		return diags.Append(duplicate("import", slot, prev.DeclRange, b.DefRange))
	}
	t.Imports[slot] = im
	return diags
}

// indexCollection is the collection of an index expression (possibly
// guarded).
func indexCollection(e hcl.Expression) hcl.Expression {
	if ix, ok := unwrapIndex(e); ok {
		return ix.Collection
	}
	return e
}

// check checks an import against the resource it imports to: its
// provider argument names the resource's provider configuration.
func (im *Import) check(r *Resource, e Plugins) hcl.Diagnostics {
	if im.Provider == "" || e == nil {
		return nil
	}
	want := r.Provider
	if want == "" {
		want = e.TypeOwner(r.Type)
	}
	if im.Provider != want {
		name, _, _ := strings.Cut(im.Provider, ".")
		if name != e.TypeOwner(r.Type) {
			return hcl.Diagnostics{Errorf(im.DeclRange, "Invalid import provider", "%s is a resource type of provider %q; provider = %s names another provider.", r.Type, e.TypeOwner(r.Type), im.Provider)}
		}
		return hcl.Diagnostics{Errorf(im.DeclRange, "Import provider differs from the resource's",
			"This import uses provider %s, but %s uses %s: stackd imports with the provider configuration of the resource. Set provider = %s on the resource or on the import.", im.Provider, r.Addr(), want, want)}
	}
	return nil
}

// unwrapIndex is e as an index expression, through guards.
func unwrapIndex(e hcl.Expression) (*hclsyntax.IndexExpr, bool) {
	ix, ok := hcl.UnwrapExpression(e).(*hclsyntax.IndexExpr)
	return ix, ok
}

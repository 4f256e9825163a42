package config

// lifecycle { replace_triggered_by = [...] } (Terraform's): the resource
// is replaced when a resource it names, or an attribute of one, is
// updated or replaced. The engine decides it (engine/refactor.go).

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/stackd/stackd/engine/provider"
)

// ReplaceTrigger is one entry of replace_triggered_by: a reference to a
// resource of the same template ("TYPE.NAME"), with an optional instance
// key expression (which may use count.index and each.key) and attribute
// path.
type ReplaceTrigger struct {
	Resource string
	// Key is the expression of the instance key (nil: the whole resource).
	Key hcl.Expression
	// Attr is the attribute path after the instance ("" for the resource).
	Attr  []string
	Range hcl.Range
}

// addReplaceTriggers reads replace_triggered_by into r; the resources it
// names become dependencies of r, as in Terraform.
func (r *Resource) addReplaceTriggers(a *hcl.Attribute, reg provider.Registry) hcl.Diagnostics {
	if a == nil {
		return nil
	}
	exprs, diags := hcl.ExprList(a.Expr)
	if diags.HasErrors() {
		return hcl.Diagnostics{Errorf(a.Expr.Range(), "Invalid replace_triggered_by", "replace_triggered_by takes a list of references to resources or their attributes: [aws_instance.a, aws_instance.b.id].")}
	}
	for _, e := range exprs {
		bad := func(detail string) {
			diags = diags.Append(Errorf(e.Range(), "Invalid replace_triggered_by expression", "%s", detail))
		}
		vars := e.Variables()
		if len(vars) == 0 {
			bad("Each entry of replace_triggered_by must reference a managed resource or one of its attributes, such as aws_instance.a or aws_instance.a.id.")
			continue
		}
		tr := vars[0]
		root := tr.RootName()
		ok := false
		if _, isType := reg[root]; !isType || root == "data" {
			bad("Only managed resources of this module, and their attributes, can be referenced in replace_triggered_by; " + root + " is not one.")
			continue
		}
		var name hcl.TraverseAttr
		if len(tr) >= 2 {
			name, ok = tr[1].(hcl.TraverseAttr)
		}
		if len(tr) < 2 || !ok {
			bad("A reference to a resource needs its name: TYPE.NAME.")
			continue
		}
		rt := ReplaceTrigger{Resource: root + "." + name.Name, Range: e.Range()}
		if rt.Resource == r.Addr() {
			bad(r.Addr() + " cannot be replaced by changes to itself.")
			continue
		}
		rest := tr[2:]
		key, attrs, keyed := triggerKey(e)
		switch {
		case !keyed:
			bad("A replace_triggered_by entry is a reference with an optional instance key, which may use count.index, each.key or a literal: aws_instance.a[count.index].id.")
			continue
		case key != nil:
			rt.Key = key
		default:
			for _, step := range rest {
				switch s := step.(type) {
				case hcl.TraverseAttr:
					rt.Attr = append(rt.Attr, s.Name)
				case hcl.TraverseIndex:
					if len(rt.Attr) == 0 {
						rt.Key = &hclsyntax.LiteralValueExpr{Val: s.Key, SrcRange: s.SrcRange}
						continue
					}
					bad("replace_triggered_by may name an attribute, not an element inside one.")
				}
			}
		}
		if key != nil {
			rt.Attr = attrs
		}
		r.Lifecycle.ReplaceTriggeredBy = append(r.Lifecycle.ReplaceTriggeredBy, rt)
		r.DependsOn = append(r.DependsOn, rt.Resource)
	}
	return diags
}

// triggerKey reads an entry indexed by an expression (TYPE.NAME[count.index]
// and attributes after it): its key expression and attribute names. key is
// nil for an entry that is a plain traversal; ok is false for anything
// else.
func triggerKey(e hcl.Expression) (key hcl.Expression, attrs []string, ok bool) {
	if _, d := hcl.AbsTraversalForExpr(e); !d.HasErrors() {
		return nil, nil, true
	}
	x := hcl.UnwrapExpression(e)
	var steps hcl.Traversal
	if rel, isRel := x.(*hclsyntax.RelativeTraversalExpr); isRel {
		x, steps = hcl.UnwrapExpression(rel.Source), rel.Traversal
	}
	ix, isIndex := x.(*hclsyntax.IndexExpr)
	if !isIndex {
		return nil, nil, false
	}
	if tr, d := hcl.AbsTraversalForExpr(ix.Collection); d.HasErrors() || len(tr) != 2 {
		return nil, nil, false
	}
	for _, s := range steps {
		a, isAttr := s.(hcl.TraverseAttr)
		if !isAttr {
			return nil, nil, false
		}
		attrs = append(attrs, a.Name)
	}
	for _, v := range ix.Key.Variables() {
		if root := v.RootName(); root != "count" && root != "each" {
			return nil, nil, false
		}
	}
	return ix.Key, attrs, true
}

// String is the entry as written, without its key's expression.
func (rt ReplaceTrigger) String() string {
	s := rt.Resource
	if rt.Key != nil {
		s += "[…]"
	}
	if len(rt.Attr) > 0 {
		s += "." + strings.Join(rt.Attr, ".")
	}
	return s
}

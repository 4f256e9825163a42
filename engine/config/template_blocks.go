package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/provider"
)

func duplicate(kind, name string, prev, cur hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Duplicate " + kind,
		Detail:   fmt.Sprintf("Only one %s named %q is allowed. Another was defined at %s.", kind, name, prev.String()),
		Subject:  cur.Ptr(),
	}
}

func (t *Template) addLocals(b *hcl.Block) hcl.Diagnostics {
	attrs, diags := b.Body.JustAttributes()
	for name, a := range attrs {
		if prev, ok := t.Locals[name]; ok {
			diags = diags.Append(duplicate("local value", name, prev.DeclRange, a.NameRange))
			continue
		}
		t.Locals[name] = &Local{Name: name, Expr: a.Expr, DeclRange: a.NameRange}
	}
	return diags
}

func (t *Template) addOutput(b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	var diags hcl.Diagnostics
	if prev, ok := t.Outputs[name]; ok {
		return diags.Append(duplicate("output", name, prev.DeclRange, b.DefRange))
	}
	content, cdiags := b.Body.Content(outputSchema)
	diags = append(diags, cdiags...)
	o := &Output{Name: name, DeclRange: b.DefRange}
	if a, ok := content.Attributes["value"]; ok {
		o.Expr = a.Expr
	}
	diags = append(diags, boolAttr(content.Attributes["sensitive"], &o.Sensitive)...)
	diags = append(diags, o.decodeOutputPreconditions(content)...)
	if o.Expr != nil {
		t.Outputs[name] = o
	}
	return diags
}

func (t *Template) addResource(b *hcl.Block, reg provider.Registry, e Plugins) hcl.Diagnostics {
	typ, name := b.Labels[0], b.Labels[1]
	var diags hcl.Diagnostics
	r := &Resource{Type: typ, Name: name, DeclRange: b.DefRange, DeletionPolicy: string(changeset.DeletionDelete), refs: map[string][]string{}}
	if prev, ok := t.Resources[r.Addr()]; ok {
		return diags.Append(duplicate("resource", r.Addr(), prev.DeclRange, b.DefRange))
	}
	if !hclsyntaxValidIdentifier(name) {
		diags = diags.Append(invalidName("resource", name, b.LabelRanges[1]))
	}
	p, ok := reg[typ]
	if !ok {
		return diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unknown resource type",
			Detail:   fmt.Sprintf("There is no provider for resource type %q. Available types: %s.", typ, strings.Join(registryNames(reg), ", ")),
			Subject:  b.LabelRanges[0].Ptr(),
		})
	}
	schema := p.Schema()
	bs := withDynamic(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "lifecycle"}, {Type: "update_pattern"},
		{Type: "provisioner", LabelNames: []string{"type"}}, {Type: "connection"}}})
	for _, m := range metaArguments {
		if _, shadowed := schema.Properties[m]; shadowed {
			// wait_condition's count is Heat's: the number of signals. A
			// provider property shadows the meta-argument of its name.
			continue
		}
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: m})
	}
	plugin := e != nil && e.TypeOwner(typ) != ""
	if plugin {
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: "provider"})
	}
	nested := map[string]provider.Property{}
	for _, n := range SortedKeys(schema.Properties) {
		if p := schema.Properties[n]; p.Block != nil {
			// A nested block type of a Terraform provider's schema.
			bs.Blocks = append(bs.Blocks, hcl.BlockHeaderSchema{Type: n})
			nested[n] = p
			continue
		}
		bs.Attributes = append(bs.Attributes, hcl.AttributeSchema{Name: n, Required: schema.Properties[n].Required})
	}
	content, cdiags := b.Body.Content(bs)
	diags = append(diags, cdiags...)
	diags = append(diags, checkBlocks(content, nested)...)
	r.Properties = properties(schema, content, nested)
	for n, a := range content.Attributes {
		if _, ok := schema.Properties[n]; ok {
			continue
		}
		switch n {
		case "provider":
			key, pdiags := providerRef(a)
			diags = append(diags, pdiags...)
			if name, _, _ := strings.Cut(key, "."); key != "" && name != e.TypeOwner(typ) {
				diags = diags.Append(Errorf(a.Expr.Range(), "Invalid provider for resource type",
					"%s is a resource type of provider %q; provider = %s names another provider.", typ, e.TypeOwner(typ), key))
			}
			r.Provider = key
		case "count":
			r.Count = a.Expr
		case "for_each":
			r.ForEach = a.Expr
		case "depends_on":
			deps, ddiags := dependsOn(a.Expr, reg)
			diags = append(diags, ddiags...)
			r.DependsOn = deps
		case "metadata":
			r.Metadata = a.Expr
		case "deletion_policy":
			diags = append(diags, stringAttr(a, &r.DeletionPolicy)...)
			if r.DeletionPolicy != string(changeset.DeletionDelete) && !changeset.Retains(r.DeletionPolicy) {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Invalid deletion_policy",
					Detail:  fmt.Sprintf("deletion_policy is %q; it must be \"Delete\" or \"Retain\".", r.DeletionPolicy),
					Subject: a.Expr.Range().Ptr(),
				})
			}
		default:
			r.Properties[n] = a
		}
	}
	if r.Count != nil && r.ForEach != nil {
		diags = diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Invalid combination of count and for_each",
			Detail:  "A resource may use count or for_each, not both.",
			Subject: r.ForEach.Range().Ptr(),
		})
	}
	for _, lb := range content.Blocks {
		if _, ok := nested[lb.Type]; ok || lb.Type == "dynamic" {
			continue // a property (properties above; dynamic blocks: dynamic.go)
		}
		if lb.Type == "provisioner" || lb.Type == "connection" {
			diags = append(diags, r.addProvisionerBlock(lb)...) // provisioners.go
			continue
		}
		if lb.Type == "update_pattern" {
			if r.UpdatePattern != nil {
				diags = diags.Append(Errorf(lb.DefRange, "Duplicate update_pattern block",
					"%s may have one update_pattern block; another is at %s.", r.Addr(), r.UpdatePattern.DeclRange))
				continue
			}
			var udiags hcl.Diagnostics
			r.UpdatePattern, udiags = loadUpdatePattern(r.Addr(), lb)
			diags = append(diags, udiags...)
			if r.Count == nil && r.ForEach == nil {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "update_pattern without count or for_each",
					Detail:  fmt.Sprintf("%s has an update_pattern block, which paces the members of a group; set count or for_each on the resource, or remove the block.", r.Addr()),
					Subject: lb.DefRange.Ptr(),
				})
			}
			continue
		}
		lc, ldiags := lb.Body.Content(lifecycleSchema)
		diags = append(diags, ldiags...)
		diags = append(diags, boolAttr(lc.Attributes["create_before_destroy"], &r.Lifecycle.CreateBeforeDestroy)...)
		diags = append(diags, boolAttr(lc.Attributes["prevent_destroy"], &r.Lifecycle.PreventDestroy)...)
		diags = append(diags, r.Lifecycle.decodeConditions(lc)...)
		diags = append(diags, r.addReplaceTriggers(lc.Attributes["replace_triggered_by"], reg)...) // replace_triggers.go
		if a, ok := lc.Attributes["ignore_changes"]; ok {
			exprs, ldiags := hcl.ExprList(a.Expr)
			diags = append(diags, ldiags...)
			for _, e := range exprs {
				name := hcl.ExprAsKeyword(e)
				if _, ok := schema.Properties[name]; !ok {
					diags = diags.Append(&hcl.Diagnostic{
						Severity: hcl.DiagError, Summary: "Invalid ignore_changes entry",
						Detail:  fmt.Sprintf("ignore_changes lists property names of the resource, without quotes; %q is not a property of %q.", name, typ),
						Subject: e.Range().Ptr(),
					})
					continue
				}
				r.Lifecycle.IgnoreChanges = append(r.Lifecycle.IgnoreChanges, name)
			}
		}
	}
	if w := r.impureArgWarning(); w != nil { // impure_args.go
		diags = diags.Append(w)
	}
	t.Resources[r.Addr()] = r
	return diags
}

func dependsOn(expr hcl.Expression, reg provider.Registry) ([]string, hcl.Diagnostics) {
	exprs, diags := hcl.ExprList(expr)
	var out []string
	for _, e := range exprs {
		tr, tdiags := hcl.AbsTraversalForExpr(e)
		if tdiags.HasErrors() || len(tr) != 2 {
			diags = diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Invalid depends_on reference",
				Detail:  "Each depends_on entry must name a resource, like file.config.",
				Subject: e.Range().Ptr(),
			})
			continue
		}
		a, ok := tr[1].(hcl.TraverseAttr)
		if !ok {
			continue
		}
		out = append(out, tr.RootName()+"."+a.Name)
	}
	return out, diags
}

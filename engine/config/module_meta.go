package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/internal/dag"
)

// The meta-arguments of a module call, as Terraform has them: count and
// for_each make one module instance per element (module.NAME[0],
// module.NAME["k"]; module.NAME is then a tuple or an object of the
// instances' outputs), depends_on makes everything in the module wait
// for what it names. The engine expands the instances (engine/expand.go);
// here they are read and their references checked.

// isModuleMeta reports whether a module call's argument is a
// meta-argument rather than one of the module's variables.
func isModuleMeta(name string) bool {
	return name == "count" || name == "for_each" || name == "depends_on"
}

// meta reads the call's count, for_each and depends_on.
func (mc *ModuleCall) meta(attrs hcl.Attributes) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if a := attrs["count"]; a != nil {
		mc.Count = a.Expr
	}
	if a := attrs["for_each"]; a != nil {
		mc.ForEach = a.Expr
		if mc.Count != nil {
			diags = diags.Append(Errorf(a.NameRange, `Invalid combination of "count" and "for_each"`,
				`The "count" and "for_each" meta-arguments are mutually-exclusive, only one should be used to be explicit about the number of module instances to be created (module %q).`, mc.Name))
		}
	}
	if a := attrs["depends_on"]; a != nil {
		exprs, d := hcl.ExprList(a.Expr)
		diags = append(diags, d...)
		for _, e := range exprs {
			node, ok := dependsOnNode(e)
			if !ok {
				diags = diags.Append(Errorf(e.Range(), "Invalid depends_on reference",
					"Each depends_on entry of module %q must name a resource (file.config), a data source (data.TYPE.NAME) or a module call (module.NAME), without instance keys or attributes.", mc.Name))
				continue
			}
			mc.DependsOn = append(mc.DependsOn, node)
		}
	}
	return diags
}

// dependsOnNode is the node a depends_on entry names: "TYPE.NAME",
// "data.TYPE.NAME" or "module.NAME".
func dependsOnNode(e hcl.Expression) (string, bool) {
	tr, diags := hcl.AbsTraversalForExpr(e)
	if diags.HasErrors() {
		return "", false
	}
	var names []string
	for _, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			names = append(names, s.Name)
		case hcl.TraverseAttr:
			names = append(names, s.Name)
		default:
			return "", false
		}
	}
	switch {
	case len(names) == 3 && names[0] == "data", len(names) == 2 && names[0] != "data":
		return strings.Join(names, "."), true
	}
	return "", false
}

// dependsOnDeclared reports whether a depends_on node is declared in t.
func (t *Template) dependsOnDeclared(node string) bool {
	if name, ok := strings.CutPrefix(node, "module."); ok {
		_, ok := t.Modules[name]
		return ok
	}
	if strings.HasPrefix(node, "data.") {
		_, ok := t.Data[node]
		return ok
	}
	_, ok := t.Resources[node]
	return ok
}

// analyzeModuleMeta checks the references of a module call's count and
// for_each (known at plan time: not to resources, as for a resource's)
// and connects it to what its depends_on names.
func (t *Template) analyzeModuleMeta(mc *ModuleCall, g *dag.Graph, check func(node string, expr hcl.Expression, allowCount, allowEach bool) []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	node := "module." + mc.Name
	for _, meta := range []hcl.Expression{mc.Count, mc.ForEach} {
		check(node, meta, false, false)
	}
	for _, d := range mc.DependsOn {
		if !t.dependsOnDeclared(d) {
			diags = diags.Append(Errorf(mc.DeclRange, "Reference to undeclared resource",
				"depends_on of module %q names %s, which is not declared in this template.", mc.Name, d))
			continue
		}
		if d != node {
			g.Connect(node, d)
		}
	}
	return diags
}

// resolveModuleRef checks a reference to a module call: module.NAME.OUTPUT,
// module.NAME[KEY].OUTPUT for a call with count or for_each, or the whole
// call (module.NAME, module.NAME[KEY]). It returns the entity named and
// the call's node.
func (t *Template) resolveModuleRef(tr hcl.Traversal) (ent, dep string, d *hcl.Diagnostic) {
	bad := func(summary, detail string) (string, string, *hcl.Diagnostic) {
		return "", "", &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: tr.SourceRange().Ptr()}
	}
	var n string
	if len(tr) > 1 {
		if a, ok := tr[1].(hcl.TraverseAttr); ok {
			n = a.Name
		}
	}
	mc, ok := t.Modules[n]
	if !ok {
		return bad("Reference to undeclared module", fmt.Sprintf("A module %q has not been declared in this template.", n))
	}
	node := "module." + n
	steps := tr[2:]
	if len(steps) > 0 {
		if _, isIndex := steps[0].(hcl.TraverseIndex); isIndex {
			if mc.Count == nil && mc.ForEach == nil {
				return bad("Unexpected module instance key", fmt.Sprintf("Module %q does not have count or for_each set, so it cannot be indexed: refer to it as module.%s.", n, n))
			}
			steps = steps[1:]
		}
	}
	if len(steps) == 0 {
		return node, node, nil
	}
	out := ""
	if a, ok := steps[0].(hcl.TraverseAttr); ok {
		out = a.Name
	}
	if _, ok := mc.Template.Outputs[out]; !ok {
		return bad("Unsupported attribute", fmt.Sprintf("Module %q has no output %q. Its outputs: %s.", n, out, strings.Join(SortedKeys(mc.Template.Outputs), ", ")))
	}
	return node + "." + out, node, nil
}

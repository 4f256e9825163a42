package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/dag"
)

// analyze resolves references, checks them, and orders all nodes.
func (t *Template) analyze(reg provider.Registry) hcl.Diagnostics {
	var diags hcl.Diagnostics
	g := dag.New()
	ranges := map[string]hcl.Range{}
	t.Refs = map[string][]NodeRef{}
	t.Referenced = map[string]bool{}
	t.Needs = map[string][]string{}
	// signalers: per waiter, the nodes that reference it immediately.
	signalers := map[string][]string{}
	need := func(node, dep string) {
		if !slices.Contains(t.Needs[node], dep) {
			t.Needs[node] = append(t.Needs[node], dep)
		}
	}
	check := func(node string, expr hcl.Expression, allowCount, allowEach bool) []string {
		var ents []string
		if expr == nil {
			return nil
		}
		for _, tr := range expr.Variables() {
			ent, dep, d := t.resolve(tr, reg, allowCount, allowEach)
			if d != nil {
				diags = diags.Append(d)
				continue
			}
			if ent != "" {
				ents = append(ents, ent)
			}
			if dep != "" {
				root, name, _ := strings.Cut(dep, ".")
				t.Refs[node] = append(t.Refs[node], NodeRef{root, name})
				t.Referenced[dep] = true
				if w, ok := reg[root].(provider.Waiter); ok && dep != node {
					if immediateRef(tr, w) {
						if !slices.Contains(signalers[dep], node) {
							signalers[dep] = append(signalers[dep], node)
						}
					} else {
						need(node, dep)
					}
				}
			}
			if dep != "" && dep != node {
				g.Connect(node, dep)
			} else if dep == node {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Self-referential block",
					Detail:  fmt.Sprintf("%s cannot refer to itself.", node),
					Subject: tr.SourceRange().Ptr(),
				})
			}
		}
		return ents
	}
	for name, l := range t.Locals {
		node := "local." + name
		g.Add(node)
		ranges[node] = l.DeclRange
		check(node, l.Expr, false, false)
	}
	for addr, r := range t.Resources {
		g.Add(addr)
		ranges[addr] = r.DeclRange
		for _, meta := range []hcl.Expression{r.Count, r.ForEach} {
			// Other resources may be referred to, as in Terraform: the
			// engine refuses a count, or for_each keys, that are unknown
			// at plan time (engine/expand.go).
			check(addr, meta, false, false)
		}
		for pname, a := range r.Properties {
			r.refs[pname] = check(addr, a.Expr, r.Count != nil, r.ForEach != nil)
		}
		if r.Metadata != nil {
			r.refs[metadataRef] = check(addr, r.Metadata, r.Count != nil, r.ForEach != nil)
		}
		for _, e := range r.Lifecycle.ConditionExprs() {
			check(addr, e, r.Count != nil, r.ForEach != nil)
		}
		for _, e := range r.ProvisionerRefs() { // provisioners.go
			check(addr, e, r.Count != nil, r.ForEach != nil)
		}
		for _, d := range r.DependsOn {
			if _, isRes := t.Resources[d]; !isRes && d != addr && t.dependsOnDeclared(d) {
				g.Connect(addr, d) // a module call or a data source (module_meta.go)
				continue
			}
			if _, ok := t.Resources[d]; !ok {
				diags = diags.Append(&hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Reference to undeclared resource",
					Detail:  fmt.Sprintf("depends_on names %s, which is not declared in this template.", d),
					Subject: r.DeclRange.Ptr(),
				})
				continue
			}
			if d == addr {
				continue
			}
			g.Connect(addr, d)
			if _, ok := reg[t.Resources[d].Type].(provider.Waiter); ok {
				need(addr, d)
			}
		}
	}
	for addr, r := range t.Data {
		g.Add(addr)
		ranges[addr] = r.DeclRange
		for _, a := range r.Properties {
			check(addr, a.Expr, false, false)
		}
		for _, e := range r.Lifecycle.ConditionExprs() {
			check(addr, e, false, false)
		}
		for _, d := range r.DependsOn {
			if _, ok := t.Resources[d]; ok && d != addr {
				g.Connect(addr, d)
			}
		}
	}
	for name, mc := range t.Modules {
		node := "module." + name
		g.Add(node)
		ranges[node] = mc.DeclRange
		for _, a := range mc.Inputs {
			check(node, a.Expr, mc.Count != nil, mc.ForEach != nil)
		}
		diags = append(diags, t.analyzeModuleMeta(mc, g, check)...) // module_meta.go
	}
	for name, o := range t.Outputs {
		node := "output." + name
		g.Add(node)
		ranges[node] = o.DeclRange
		check(node, o.Expr, false, false)
		for _, c := range o.Preconditions {
			for _, e := range c.Exprs() {
				check(node, e, false, false)
			}
		}
	}
	t.ephemeral = t.ephemeral || t.modulesReturnEphemeral()
	for _, cn := range t.conditionNodes() {
		g.Add(cn.node)
		ranges[cn.node] = cn.rng
		for _, e := range cn.exprs {
			check(cn.node, e, false, false)
		}
	}
	diags = append(diags, t.checkScopedRefs(ranges)...)
	if diags.HasErrors() {
		return diags
	}
	// What needs a wait condition complete goes after what can complete
	// it (references its handle_url): otherwise the wait could block
	// before the signalers ran. A signaler that itself depends on such a
	// node can never signal in time: that is reported as a cycle.
	waitEdges := map[[2]string]string{}
	for node, deps := range t.Needs {
		for _, dep := range deps {
			for _, s := range signalers[dep] {
				if s != node && !slices.Contains(t.Needs[s], dep) {
					g.Connect(node, s)
					waitEdges[[2]string{node, s}] = dep
				}
			}
		}
	}
	order, cycle := g.Order()
	// Over a cycle through a wait condition's handle_url, say so.
	for i, n := range cycle {
		next := cycle[(i+1)%len(cycle)]
		if w, ok := waitEdges[[2]string{n, next}]; ok {
			return diags.Append(&hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Wait condition can never complete",
				Detail: fmt.Sprintf("%s needs %s complete, so it must run after %s, which references %s's handle_url to signal it; but %s depends on %s (cycle: %s). Remove that dependency, or have %s read only handle_url.",
					n, w, next, w, next, n, dag.CycleString(cycle), n),
				Subject: ptrRange(ranges[next]),
			})
		}
	}
	if cycle != nil {
		return diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Dependency cycle",
			Detail:  fmt.Sprintf("These blocks depend on each other in a cycle: %s. Break the cycle by removing a reference or a depends_on entry.", dag.CycleString(cycle)),
			Subject: ptrRange(ranges[cycle[0]]),
		})
	}
	t.Order = order
	for addr, r := range t.Resources {
		// dependencies through locals count as direct dependencies
		seen := map[string]bool{}
		var visit func(n string)
		visit = func(n string) {
			for d := range g.Deps[n] {
				if seen[d] {
					continue
				}
				seen[d] = true
				if _, ok := t.Resources[d]; ok {
					r.Deps = append(r.Deps, d)
				} else {
					visit(d)
				}
			}
		}
		visit(addr)
		sort.Strings(r.Deps)
	}
	return diags
}

// immediateRef tells whether a reference to a waiter resource reads only
// attributes usable before it completes (wait_condition.x.handle_url, or
// wait_condition.x[0].handle_url): the signalers of a wait condition
// reference it so, and must not wait for it.
func immediateRef(tr hcl.Traversal, w provider.Waiter) bool {
	for _, step := range tr[2:] {
		switch s := step.(type) {
		case hcl.TraverseIndex:
			continue
		case hcl.TraverseAttr:
			return slices.Contains(w.ImmediateAttributes(), s.Name)
		}
		return false
	}
	return false
}

// resolve checks one traversal and returns the entity it names (for change
// sources), the graph node it depends on (if any) or a diagnostic.
func (t *Template) resolve(tr hcl.Traversal, reg provider.Registry, allowCount, allowEach bool) (ent, dep string, d *hcl.Diagnostic) {
	root := tr.RootName()
	attr := func(i int) string {
		if len(tr) > i {
			if a, ok := tr[i].(hcl.TraverseAttr); ok {
				return a.Name
			}
		}
		return ""
	}
	bad := func(summary, detail string) (string, string, *hcl.Diagnostic) {
		return "", "", &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: tr.SourceRange().Ptr()}
	}
	if d, ok := resolveNamedValue(tr); ok { // path.*, terraform.workspace (path_values.go)
		return "", "", d
	}
	switch root {
	case "var":
		n := attr(1)
		if _, ok := t.Variables[n]; !ok {
			return bad("Reference to undeclared input variable", fmt.Sprintf("An input variable named %q is not declared. Declared variables: %s.", n, strings.Join(SortedKeys(t.Variables), ", ")))
		}
		return "var." + n, "", nil
	case "local":
		n := attr(1)
		if _, ok := t.Locals[n]; !ok {
			return bad("Reference to undeclared local value", fmt.Sprintf("A local value named %q is not declared.", n))
		}
		return "local." + n, "local." + n, nil
	case "target":
		switch n := attr(1); n {
		case "region", "account", "ou":
			return "target." + n, "", nil
		default:
			return bad("Unsupported attribute", fmt.Sprintf("target has the attributes region, account and ou; %q is not one of them.", n))
		}
	case "stack_set":
		switch n := attr(1); n {
		case "name", "id":
			return "stack_set." + n, "", nil
		default:
			return bad("Unsupported attribute", fmt.Sprintf("stack_set has the attributes name and id; %q is not one of them.", n))
		}
	case "count":
		if !allowCount {
			return bad("Reference to \"count\" in non-counted context", "count.index is only available in a resource that sets count.")
		}
		if attr(1) != "index" {
			return bad("Unsupported attribute", "count has the attribute index only.")
		}
		return "", "", nil
	case "each":
		if !allowEach {
			return bad("Reference to \"each\" in a context without for_each", "each.key and each.value are only available in a resource that sets for_each.")
		}
		if n := attr(1); n != "key" && n != "value" {
			return bad("Unsupported attribute", "each has the attributes key and value.")
		}
		return "", "", nil
	}
	if root == "data" {
		typ, n := attr(1), attr(2)
		addr := "data." + typ + "." + n
		if _, ok := t.Data[addr]; !ok {
			return bad("Reference to undeclared data source", fmt.Sprintf("A data block %s has not been declared in this template.", addr))
		}
		return entityPath(addr, tr[3:]), addr, nil
	}
	if root == "module" {
		return t.resolveModuleRef(tr) // module_meta.go
	}
	if _, ok := reg[root]; ok {
		n := attr(1)
		if n == "" {
			return bad("Invalid reference", fmt.Sprintf("A reference to a resource needs a name: %s.NAME.", root))
		}
		addr := root + "." + n
		if _, ok := t.Resources[addr]; !ok {
			return bad("Reference to undeclared resource", fmt.Sprintf("A resource %s has not been declared in this template.", addr))
		}
		return entityPath(addr, tr[2:]), addr, nil
	}
	return bad("Unknown reference", fmt.Sprintf("%q is not something a template can refer to. Valid roots are var, local, target, stack_set, path, terraform, count, each, module, data and resource types (%s).", root, strings.Join(registryNames(reg), ", ")))
}

func registryNames(reg provider.Registry) []string { return SortedKeys(reg) }

// entityPath is the entity a reference names: the address of what it
// refers to, then the attributes it steps through ("file.config.id").
func entityPath(addr string, steps hcl.Traversal) string {
	for _, step := range steps {
		if a, ok := step.(hcl.TraverseAttr); ok {
			addr += "." + a.Name
		}
	}
	return addr
}

func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

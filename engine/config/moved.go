package config

// Refactoring blocks, as Terraform 1.11 has them: moved { from, to } says
// that what is recorded at one address is now at another (a resource, one
// of its instances, or a module call), and removed { from, lifecycle {
// destroy } } that a resource or module left the configuration, its
// objects kept in the world (destroy = false) or destroyed. The engine
// applies them to an instance's recorded resources (engine/refactor.go).

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Endpoint is one side of a moved block or the from of a removed block,
// relative to the template that holds the block.
type Endpoint struct {
	// Module is the module path: "module.a.module.b." ("" for the
	// template's own resources). For a module endpoint it is the whole
	// address.
	Module string
	// Resource is "TYPE.NAME"; "" for a module endpoint.
	Resource string
	// Key is the instance key as addresses carry it ("[0]", "[\"a\"]");
	// "" for a whole resource (or module).
	Key   string
	Range hcl.Range
}

// IsModule reports whether the endpoint is a module call.
func (e Endpoint) IsModule() bool { return e.Resource == "" }

// String is the endpoint's address as Terraform prints it.
func (e Endpoint) String() string {
	if e.IsModule() {
		return strings.TrimSuffix(e.Module, ".")
	}
	return e.Module + e.Resource + e.Key
}

// Moved is a moved block.
type Moved struct {
	From, To  Endpoint
	DeclRange hcl.Range
}

// Removed is a removed block: the recorded objects of From leave the
// instance, destroyed only when Destroy.
type Removed struct {
	From      Endpoint
	Destroy   bool
	DeclRange hcl.Range
}

var movedSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "from", Required: true}, {Name: "to", Required: true}}}

var removedSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "from", Required: true}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "lifecycle"}, {Type: "provisioner", LabelNames: []string{"type"}}, {Type: "connection"}},
}

var removedLifecycleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "destroy"}}}

// parseEndpoint reads a moved or removed address: module.NAME (repeated),
// then TYPE.NAME and an optional instance key.
func parseEndpoint(expr hcl.Expression, what string) (Endpoint, *hcl.Diagnostic) {
	ep := Endpoint{Range: expr.Range()}
	bad := func(detail string) (Endpoint, *hcl.Diagnostic) {
		return ep, Errorf(expr.Range(), "Invalid "+what+" address", "%s", detail)
	}
	tr, diags := hcl.AbsTraversalForExpr(expr)
	if diags.HasErrors() {
		return bad(what + " takes an address without quotes: a resource (random_pet.a), one instance of it (random_pet.a[0], random_pet.a[\"k\"]) or a module call (module.net).")
	}
	var names []string
	keys := map[int]string{}
	for i, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			names = append(names, s.Name)
		case hcl.TraverseAttr:
			names = append(names, s.Name)
		case hcl.TraverseIndex:
			k, err := InstanceKey(s.Key)
			if err != nil || len(names) == 0 || keys[len(names)-1] != "" {
				return bad(fmt.Sprintf("%s: an instance key is a whole number or a string (step %d).", what, i+1))
			}
			keys[len(names)-1] = k
		default:
			return bad(what + " takes an address like random_pet.a or module.net.")
		}
	}
	i := 0
	for i+1 < len(names) && names[i] == "module" {
		// A module instance (module.a[0]) as Terraform names it; the key
		// of the last module step is also the key of a module endpoint.
		ep.Module += "module." + names[i+1] + keys[i+1] + "."
		ep.Key = keys[i+1]
		i += 2
	}
	switch rest := names[i:]; len(rest) {
	case 0:
		if ep.Module == "" {
			return bad(what + " needs an address.")
		}
	case 2:
		ep.Key = ""
		if rest[0] == "data" {
			return bad("Data sources cannot be named in " + what + " blocks: they record nothing to keep.")
		}
		if keys[i] != "" {
			return bad(fmt.Sprintf("%s: a resource address is TYPE.NAME, with the instance key after the name.", what))
		}
		ep.Resource = rest[0] + "." + rest[1]
		ep.Key = keys[i+1]
	default:
		if len(rest) > 0 && rest[0] == "data" {
			return bad("Data sources cannot be named in " + what + " blocks: they record nothing to keep.")
		}
		return bad(what + " takes an address like random_pet.a, random_pet.a[0] or module.net.module.db.random_pet.a.")
	}
	return ep, nil
}

// InstanceKey formats an index as addresses carry it.
func InstanceKey(v cty.Value) (string, error) {
	switch {
	case v.IsNull() || !v.IsKnown():
		return "", fmt.Errorf("null or unknown key")
	case v.Type() == cty.String:
		return "[" + strconv.Quote(v.AsString()) + "]", nil
	case v.Type() == cty.Number:
		bf := v.AsBigFloat()
		if !bf.IsInt() || bf.Sign() < 0 {
			return "", fmt.Errorf("not a whole number")
		}
		return "[" + bf.Text('f', 0) + "]", nil
	}
	return "", fmt.Errorf("not a key")
}

// addMoved records a moved block; checkRefactoring checks it once the
// template's resources and modules are known.
func (t *Template) addMoved(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(movedSchema)
	if diags.HasErrors() {
		return diags
	}
	from, d1 := parseEndpoint(content.Attributes["from"].Expr, "moved")
	to, d2 := parseEndpoint(content.Attributes["to"].Expr, "moved")
	for _, d := range []*hcl.Diagnostic{d1, d2} {
		if d != nil {
			diags = diags.Append(d)
		}
	}
	if diags.HasErrors() {
		return diags
	}
	t.Moved = append(t.Moved, &Moved{From: from, To: to, DeclRange: b.DefRange})
	return diags
}

// addRemoved records a removed block.
func (t *Template) addRemoved(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(removedSchema)
	if diags.HasErrors() {
		return diags
	}
	from, d := parseEndpoint(content.Attributes["from"].Expr, "removed")
	if d != nil {
		return diags.Append(d)
	}
	if from.Key != "" {
		return diags.Append(Errorf(from.Range, "Resource instance keys not allowed",
			"removed takes a whole resource or module (%s), not one instance of it: the resource's remaining instances are what its count or for_each say.", strings.TrimSuffix(from.String(), from.Key)))
	}
	rm := &Removed{From: from, Destroy: true, DeclRange: b.DefRange}
	var lifecycles int
	for _, inner := range content.Blocks {
		switch inner.Type {
		case "lifecycle":
			if lifecycles++; lifecycles > 1 {
				diags = diags.Append(Errorf(inner.DefRange, "Duplicate lifecycle block", "A removed block may have one lifecycle block."))
				continue
			}
			lc, ld := inner.Body.Content(removedLifecycleSchema)
			diags = append(diags, ld...)
			diags = append(diags, boolAttr(lc.Attributes["destroy"], &rm.Destroy)...)
		default:
			diags = diags.Append(Errorf(inner.DefRange, "Unsupported "+inner.Type+" block",
				"stackd does not run the provisioners of a removed block (Terraform runs its when = destroy provisioners as it destroys the object): a %s block here is refused rather than skipped. Keep the resource block, with its destroy-time provisioner, until its objects are destroyed (e.g. count = 0), then remove it.", inner.Type))
		}
	}
	t.Removed = append(t.Removed, rm)
	return diags
}

// checkRefactoring checks the moved and removed blocks of the template
// against its resources and module calls, as Terraform validates them.
func (t *Template) checkRefactoring() hcl.Diagnostics {
	var diags hcl.Diagnostics
	declared := func(ep Endpoint) (hcl.Range, bool) {
		if ep.Module != "" {
			tmpl, rng, ok := t.moduleAt(ep.Module)
			if !ok || ep.IsModule() {
				return rng, ok
			}
			if r, ok := tmpl.Resources[ep.Resource]; ok {
				return r.DeclRange, true
			}
			return hcl.Range{}, false
		}
		if r, ok := t.Resources[ep.Resource]; ok {
			return r.DeclRange, true
		}
		return hcl.Range{}, false
	}
	bySource := map[string]*Moved{}
	byDest := map[string]*Moved{}
	for _, m := range t.Moved {
		from, to := m.From, m.To
		switch {
		case from.IsModule() != to.IsModule():
			diags = diags.Append(Errorf(m.DeclRange, "Invalid \"moved\" addresses",
				"A moved block moves a resource to a resource or a module call to a module call; %s and %s are not of one kind.", from, to))
			continue
		case !from.IsModule() && strings.SplitN(from.Resource, ".", 2)[0] != strings.SplitN(to.Resource, ".", 2)[0]:
			diags = diags.Append(Errorf(m.DeclRange, "Resource type mismatch",
				"This statement declares a move from %s to %s, which is a resource of a different type. stackd moves objects between addresses of one resource type only; create the new resource and remove the old one instead.", from, to))
			continue
		case from.String() == to.String():
			diags = diags.Append(Errorf(m.DeclRange, "Redundant move statement", "This statement declares a move from %s to the same address.", from))
			continue
		}
		// A whole resource or module still declared cannot have moved
		// away, nor the instance without key of a resource declared
		// without count or for_each (a keyed instance: engine/refactor.go).
		if from.Key == "" {
			if rng, ok := declared(from); ok && (to.Key == "" || t.singleInstance(from)) {
				diags = diags.Append(Errorf(m.DeclRange, "Moved object still exists",
					"This statement declares a move from %s, but that %s is still declared at %s. Change your configuration so that it is declared as %s instead.", from, kindOf(from), rng, to))
				continue
			}
		}
		if prev, ok := bySource[from.String()]; ok && prev.To.String() != to.String() {
			diags = diags.Append(Errorf(m.DeclRange, "Ambiguous move statements",
				"A statement at %s declared that %s moved to %s, but this statement instead declares that it moved to %s. Each %s can move to only one destination address.", prev.DeclRange, from, prev.To, to, kindOf(from)))
			continue
		}
		if prev, ok := byDest[to.String()]; ok && prev.From.String() != from.String() {
			diags = diags.Append(Errorf(m.DeclRange, "Ambiguous move statements",
				"A statement at %s declared that %s moved to %s, but this statement instead declares that %s moved there. Each %s can have moved from only one source address.", prev.DeclRange, prev.From, to, from, kindOf(to)))
			continue
		}
		bySource[from.String()], byDest[to.String()] = m, m
	}
	// A chain of moves that comes back to where it started.
	for _, m := range t.Moved {
		seen := map[string]bool{m.From.String(): true}
		for at := m.To.String(); ; {
			next, ok := bySource[at]
			if !ok {
				break
			}
			if seen[at] {
				diags = diags.Append(Errorf(m.DeclRange, "Cyclic dependency in move statements",
					"The moved blocks starting at %s come back to an address they moved away from (%s): each object must end at one address.", m.From, at))
				break
			}
			seen[at] = true
			at = next.To.String()
		}
		if diags.HasErrors() {
			break
		}
	}
	for _, rm := range t.Removed {
		if rng, ok := declared(rm.From); ok {
			diags = diags.Append(Errorf(rm.DeclRange, "Removed "+kindOf(rm.From)+" still exists",
				"This statement declares that %s was removed, but it is still declared at %s. Remove the %s from the configuration, or remove this removed block.", rm.From, rng, kindOf(rm.From)))
		}
	}
	return diags
}

// moduleAt is the template of the module call at path ("module.a.module.b.")
// and where the call is declared.
func (t *Template) moduleAt(path string) (*Template, hcl.Range, bool) {
	cur := t
	var rng hcl.Range
	for _, part := range strings.Split(strings.TrimSuffix(path, "."), ".") {
		if part == "module" {
			continue
		}
		part, _, _ = strings.Cut(part, "[") // an instance of the call
		mc, ok := cur.Modules[part]
		if !ok || mc.Template == nil {
			return nil, hcl.Range{}, false
		}
		cur, rng = mc.Template, mc.DeclRange
	}
	return cur, rng, true
}

func kindOf(ep Endpoint) string {
	if ep.IsModule() {
		return "module call"
	}
	return "resource"
}

// singleInstance reports whether the resource of ep is declared without
// count and for_each.
func (t *Template) singleInstance(ep Endpoint) bool {
	tmpl := t
	if ep.Module != "" {
		var ok bool
		if tmpl, _, ok = t.moduleAt(ep.Module); !ok {
			return false
		}
	}
	if ep.IsModule() {
		// The module call itself: the last one of the path.
		path := strings.Split(strings.TrimSuffix(ep.Module, "."), ".")
		parent, _, ok := t.moduleAt(strings.Join(path[:len(path)-2], ".") + ".")
		if len(path) == 2 {
			parent, ok = t, true
		}
		name, _, _ := strings.Cut(path[len(path)-1], "[")
		mc := parent.Modules[name]
		return ok && mc != nil && mc.Count == nil && mc.ForEach == nil
	}
	r := tmpl.Resources[ep.Resource]
	return r != nil && r.Count == nil && r.ForEach == nil
}

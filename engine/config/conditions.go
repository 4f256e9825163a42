package config

import (
	"github.com/hashicorp/hcl/v2"
)

// Custom conditions as Terraform 1.11 has them: precondition and
// postcondition blocks in the lifecycle of resources and data sources,
// precondition blocks in outputs, and check blocks (assertions and a
// scoped data source) whose failures are warnings.

// Check is a check block: its assertions are evaluated for each instance
// at plan and at apply, and a false one is a warning, never an error.
// Data names its scoped data source ("data.TYPE.NAME"), if any: readable
// only from within the block, and a failure to read it is a warning too.
type Check struct {
	Name      string
	Asserts   []*CheckRule
	Data      string
	DeclRange hcl.Range
}

var conditionBlocks = []hcl.BlockHeaderSchema{{Type: "precondition"}, {Type: "postcondition"}}

// dataLifecycleSchema is the lifecycle block of a data source: conditions
// only, as in Terraform.
var dataLifecycleSchema = &hcl.BodySchema{Blocks: conditionBlocks}

var checkSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "data", LabelNames: []string{"type", "name"}}, {Type: "assert"}},
}

// decodeConditions adds the precondition and postcondition blocks of a
// lifecycle block's content.
func (l *Lifecycle) decodeConditions(content *hcl.BodyContent) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, b := range content.Blocks {
		rule, d := decodeCheckRule(b)
		diags = append(diags, d...)
		if rule == nil {
			continue
		}
		switch b.Type {
		case "precondition":
			l.Preconditions = append(l.Preconditions, rule)
		case "postcondition":
			l.Postconditions = append(l.Postconditions, rule)
		}
	}
	return diags
}

// decodeDataLifecycle decodes the lifecycle blocks of a data block's
// content (its schema has the lifecycle block type: dataSchema).
func (l *Lifecycle) decodeDataLifecycle(content *hcl.BodyContent) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, b := range content.Blocks {
		if b.Type != "lifecycle" {
			continue
		}
		lc, d := b.Body.Content(dataLifecycleSchema)
		diags = append(diags, d...)
		diags = append(diags, l.decodeConditions(lc)...)
	}
	return diags
}

// ConditionExprs are the expressions of the lifecycle's conditions, for
// reference analysis: self in postconditions is the resource itself, not
// a reference.
func (l *Lifecycle) ConditionExprs() []hcl.Expression {
	var out []hcl.Expression
	for _, r := range l.Preconditions {
		out = append(out, r.Exprs()...)
	}
	for _, r := range l.Postconditions {
		for _, e := range r.Exprs() {
			out = append(out, selfless{e})
		}
	}
	return out
}

// selfless is an expression whose references leave out self.
type selfless struct{ hcl.Expression }

func (s selfless) Variables() []hcl.Traversal {
	var out []hcl.Traversal
	for _, tr := range s.Expression.Variables() {
		if tr.RootName() != "self" {
			out = append(out, tr)
		}
	}
	return out
}

// decodeOutputPreconditions adds an output block's precondition blocks
// and its ephemeral argument.
func (o *Output) decodeOutputPreconditions(content *hcl.BodyContent) hcl.Diagnostics {
	diags := boolAttr(content.Attributes["ephemeral"], &o.Ephemeral)
	for _, b := range content.Blocks {
		if b.Type != "precondition" {
			continue
		}
		rule, d := decodeCheckRule(b)
		diags = append(diags, d...)
		if rule != nil {
			o.Preconditions = append(o.Preconditions, rule)
		}
	}
	return diags
}

// addCheck decodes a check block: its asserts and its scoped data source.
func (t *Template) addCheck(e Plugins, b *hcl.Block) hcl.Diagnostics {
	name := b.Labels[0]
	var diags hcl.Diagnostics
	if t.Checks == nil {
		t.Checks = map[string]*Check{}
	}
	if prev, ok := t.Checks[name]; ok {
		return diags.Append(duplicate("check", name, prev.DeclRange, b.DefRange))
	}
	if !hclsyntaxValidIdentifier(name) {
		diags = diags.Append(invalidName("check", name, b.LabelRanges[0]))
	}
	content, cdiags := b.Body.Content(checkSchema)
	diags = append(diags, cdiags...)
	c := &Check{Name: name, DeclRange: b.DefRange}
	for _, cb := range content.Blocks {
		switch cb.Type {
		case "assert":
			rule, d := decodeCheckRule(cb)
			diags = append(diags, d...)
			if rule != nil {
				c.Asserts = append(c.Asserts, rule)
			}
		case "data":
			if c.Data != "" {
				diags = diags.Append(Errorf(cb.DefRange, "Multiple data resource blocks",
					"A check block may contain at most one data block; check %q has %s already.", name, c.Data))
				continue
			}
			d := t.addData(e, cb)
			diags = append(diags, d...)
			if !d.HasErrors() {
				c.Data = "data." + cb.Labels[0] + "." + cb.Labels[1]
			}
		}
	}
	if len(c.Asserts) == 0 {
		diags = diags.Append(Errorf(b.DefRange, "Zero assert blocks",
			"Check blocks must have at least one assert block; check %q has none.", name))
	}
	t.Checks[name] = c
	return diags
}

// ScopedCheck is the check block whose scoped data source addr
// ("data.TYPE.NAME") is, or "".
func (t *Template) ScopedCheck(addr string) string {
	for name, c := range t.Checks {
		if c.Data == addr {
			return name
		}
	}
	return ""
}

// conditionNode is a node of the dependency graph that only evaluates
// conditions: a variable with validation blocks ("var.NAME"), or a check
// block ("check.NAME").
type conditionNode struct {
	node  string
	rng   hcl.Range
	exprs []hcl.Expression
}

// conditionNodes lists the template's condition nodes.
func (t *Template) conditionNodes() []conditionNode {
	var out []conditionNode
	for _, name := range SortedKeys(t.Variables) {
		v := t.Variables[name]
		if len(v.Validations) == 0 {
			continue
		}
		n := conditionNode{node: "var." + name, rng: v.DeclRange}
		for _, r := range v.Validations {
			n.exprs = append(n.exprs, r.Exprs()...)
		}
		out = append(out, n)
	}
	for _, name := range SortedKeys(t.Checks) {
		c := t.Checks[name]
		n := conditionNode{node: "check." + name, rng: c.DeclRange}
		for _, r := range c.Asserts {
			n.exprs = append(n.exprs, r.Exprs()...)
		}
		out = append(out, n)
	}
	return out
}

// checkScopedRefs reports references to a check block's scoped data
// source from outside the block, which Terraform refuses.
func (t *Template) checkScopedRefs(ranges map[string]hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if len(t.Checks) == 0 {
		return nil
	}
	for _, node := range SortedKeys(t.Refs) {
		for _, ref := range t.Refs[node] {
			if ref.Root != "data" {
				continue
			}
			addr := "data." + ref.Name
			check := t.ScopedCheck(addr)
			if check == "" || node == "check."+check || node == addr {
				continue
			}
			rng := ranges[node]
			diags = diags.Append(Errorf(rng, "Reference to scoped resource",
				"%s refers to %s, which is declared in check block %q and is not available from outside it. Declare the data source outside the check block to use it here.",
				node, addr, check))
		}
	}
	return diags
}

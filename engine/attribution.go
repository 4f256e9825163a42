package engine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Attribution: the seed's ChangeSource and CausingEntity of a change
// (docs/design.md §4). A property's change is blamed on
//
//   - the template itself (DirectModification, CausingEntity null) when its
//     expression, evaluated with the variables the instance last applied,
//     no longer gives the recorded value: a literal (or a local) was edited,
//     whatever unchanged variables the expression also references;
//   - each variable it reaches, directly or through locals, whose value
//     differs from the one last applied (ParameterReference "var.X");
//   - each changing resource it references: its physical id or the whole
//     resource (ResourceReference "TYPE.NAME"), another attribute
//     (ResourceAttribute "TYPE.NAME.ATTR"); a counted or for_each member
//     keeps its key ("file.cnt[2].sha256");
//   - each changing module whose output it reads (Automatic "module.NAME":
//     ROS's nested stack).
//
// Without Instance.Prior the variables last applied are unknown: every
// variable the expression reaches is blamed, and the template only when it
// reaches nothing that changes.

// cause is one reason a property changes.
type cause struct {
	source string
	entity *string
}

func causeOf(source, entity string) cause {
	if entity == "" {
		return cause{source: source}
	}
	return cause{source: source, entity: &entity}
}

// priorVars is the instance's variables as it last applied them, for the
// template t: nil when Instance.Prior is unknown. A variable the prior stack
// set did not have is unknown (it may have changed).
func priorVars(inst *Instance, t *config.Template) map[string]cty.Value {
	if inst == nil || inst.Prior == nil || inst.Prior.Template == nil {
		return nil
	}
	vals := inst.Prior.VarsFor(inst.Target)
	out := make(map[string]cty.Value, len(t.Variables))
	for name, decl := range t.Variables {
		v, ok := vals[name]
		if !ok {
			if pd := inst.Prior.Template.Variables[name]; pd != nil && pd.Default != cty.NilVal {
				v, ok = pd.Default, true
			}
		}
		if !ok {
			out[name] = cty.DynamicVal
			continue
		}
		if conv, err := decl.Convert(v); err == nil {
			v = conv
		}
		if decl.Sensitive || inst.StackSet != nil && inst.StackSet.SensitiveVar(name) {
			v = v.Mark(provider.SensitiveMark)
		}
		out[name] = v
	}
	return out
}

// priorModuleVars is a module's variables as the instance last applied
// them: its inputs evaluated with this walker's prior variables and the
// instance's count or each (nil when those are unknown).
func (w *walker) priorModuleVars(mc *config.ModuleCall, extra map[string]cty.Value) map[string]cty.Value {
	if w.prior == nil {
		return nil
	}
	out := make(map[string]cty.Value, len(mc.Template.Variables))
	for name, decl := range mc.Template.Variables {
		v := decl.Default
		if a, ok := mc.Inputs[name]; ok {
			val, diags := a.Expr.Value(w.priorCtx("module."+mc.Name, extra))
			conv, err := decl.Convert(val)
			if diags.HasErrors() || err != nil {
				v = cty.DynamicVal
			} else {
				v = conv
			}
		}
		if v == cty.NilVal {
			v = cty.DynamicVal
		}
		if decl.Sensitive {
			v = v.Mark(provider.SensitiveMark)
		}
		out[name] = v
	}
	return out
}

// priorCtx is the evaluation context of node with the prior variables and
// the locals evaluated with them (resources and modules as planned now).
func (w *walker) priorCtx(node string, extra map[string]cty.Value) *hcl.EvalContext {
	ctx := w.ctx(node)
	ctx.Variables["var"] = cty.ObjectVal(w.prior)
	locals := map[string]cty.Value{}
	for _, ref := range w.tmpl.Refs[node] {
		if ref.Root == "local" {
			locals[ref.Name] = w.priorLocal(ref.Name)
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(locals)
	return withExtra(ctx, extra)
}

// priorLocal is a local's value with the prior variables (unknown when it
// cannot be evaluated).
func (w *walker) priorLocal(name string) cty.Value {
	if v, ok := w.priorLocals[name]; ok {
		return v
	}
	if w.priorLocals == nil {
		w.priorLocals = map[string]cty.Value{}
	}
	w.priorLocals[name] = cty.DynamicVal // a guard; locals form no cycles
	l := w.tmpl.Locals[name]
	if l == nil {
		return cty.DynamicVal
	}
	v, diags := l.Expr.Value(w.priorCtx("local."+name, nil))
	if diags.HasErrors() {
		v = cty.DynamicVal
	}
	w.priorLocals[name] = v
	return v
}

// sameProperty compares a property's value evaluated with the prior
// variables (cv) with its recorded value (old): known reports whether the
// comparison can be made at all.
func sameProperty(cv, old cty.Value, ty cty.Type) (same, known bool) {
	if conv, err := convert.Convert(cv, ty); err == nil {
		cv = conv
	}
	if conv, err := convert.Convert(old, ty); err == nil {
		old = conv
	}
	if !cv.IsWhollyKnown() || !old.IsWhollyKnown() {
		return false, false
	}
	return valuesEqual(cv, old), true
}

// causes names what made the value of expr change for the member being
// diffed (w.extra). same compares the expression's value with the prior
// variables against the recorded value (see sameProperty).
func (w *walker) causes(node string, expr hcl.Expression, same func(cty.Value) (bool, bool)) []cause {
	if expr == nil {
		// A property no longer set: the template changed.
		return []cause{{source: changeset.SourceDirectModification}}
	}
	vars, res := w.reached(node, expr, w.extra, map[string]bool{})
	out := append([]cause{}, res...)
	var changedVars []string
	for _, v := range vars {
		if w.prior == nil || w.varChanged(v) {
			changedVars = append(changedVars, v)
		}
	}
	sort.Strings(changedVars)
	var pars []cause
	for _, v := range changedVars {
		pars = append(pars, causeOf(changeset.SourceParameterReference, "var."+v))
	}
	if w.prior == nil {
		out = append(pars, out...)
		if len(out) == 0 {
			return []cause{{source: changeset.SourceDirectModification}}
		}
		return out
	}
	direct := false
	if len(res) == 0 {
		// With the prior variables and the resources as they are (none of
		// those it references changes), does the expression still give
		// the recorded value? If not, the template was edited.
		cv, diags := expr.Value(w.priorCtx(node, w.extra))
		if diags.HasErrors() {
			direct = len(pars) == 0
		} else if w.inst.Untrusted && cv.ContainsMarked() {
			// A sensitive value is never compared for a ref that is not
			// the deploy branch: the answer would tell a secret apart.
			direct = len(pars) == 0
		} else if eq, known := same(cv); known {
			direct = !eq
		} else {
			direct = len(pars) == 0
		}
	}
	if direct {
		out = append([]cause{{source: changeset.SourceDirectModification}}, append(pars, out...)...)
	} else {
		out = append(pars, out...)
	}
	if len(out) == 0 {
		return []cause{{source: changeset.SourceDirectModification}}
	}
	return out
}

// varChanged reports whether variable name differs from the value the
// instance last applied. For a ref that is not the deploy branch, a
// sensitive variable is always said to change (never compared).
func (w *walker) varChanged(name string) bool {
	pv, ok := w.prior[name]
	if !ok || !pv.IsWhollyKnown() {
		return true
	}
	vars := w.base["var"]
	if !vars.Type().HasAttribute(name) {
		return true
	}
	cur := vars.GetAttr(name)
	if w.inst.Untrusted && (cur.ContainsMarked() || pv.ContainsMarked()) {
		return true
	}
	return !valuesEqual(cur, pv)
}

// reached lists the variables an expression reaches, directly or through
// locals, and the causes among the resources and modules it references
// that change.
func (w *walker) reached(node string, expr hcl.Expression, extra map[string]cty.Value, seenLocals map[string]bool) (vars []string, res []cause) {
	seenVar := map[string]bool{}
	seenRes := map[string]bool{}
	addVar := func(n string) {
		if n != "" && !seenVar[n] {
			seenVar[n] = true
			vars = append(vars, n)
		}
	}
	addRes := func(c cause) {
		k := c.source + " " + *c.entity
		if !seenRes[k] {
			seenRes[k] = true
			res = append(res, c)
		}
	}
	visitTraversal := func(tr hcl.Traversal) {
		attr := func(i int) string { return traversalAttr(tr, i) }
		switch root := tr.RootName(); root {
		case "var":
			addVar(attr(1))
		case "local":
			n := attr(1)
			if l := w.tmpl.Locals[n]; l != nil && !seenLocals[n] {
				seenLocals[n] = true
				lv, lr := w.reached("local."+n, l.Expr, nil, seenLocals)
				for _, v := range lv {
					addVar(v)
				}
				for _, c := range lr {
					addRes(c)
				}
			}
		case "module":
			if n := attr(1); n != "" && w.changing["module."+n] {
				addRes(causeOf(changeset.SourceAutomatic, "module."+n))
			}
		default:
			if c, ok := w.resourceCause(tr); ok {
				addRes(c)
			}
		}
	}
	syn, ok := expr.(hclsyntax.Expression)
	if !ok {
		for _, tr := range expr.Variables() {
			visitTraversal(tr)
		}
		return vars, res
	}
	// A member picked by an expression (file.cnt[count.index].sha256) is
	// an index expression, possibly under a relative traversal: its key is
	// evaluated for the member being diffed.
	handled := map[hclsyntax.Node]bool{}
	hclsyntax.VisitAll(syn, func(n hclsyntax.Node) hcl.Diagnostics {
		var ie *hclsyntax.IndexExpr
		var rest hcl.Traversal
		switch e := n.(type) {
		case *hclsyntax.RelativeTraversalExpr:
			ie, _ = e.Source.(*hclsyntax.IndexExpr)
			rest = e.Traversal
		case *hclsyntax.IndexExpr:
			if handled[e] {
				return nil
			}
			ie = e
		}
		if ie == nil {
			return nil
		}
		col, ok := ie.Collection.(*hclsyntax.ScopeTraversalExpr)
		if !ok || len(col.Traversal) != 2 || w.tmpl.Resources[col.Traversal.RootName()+"."+traversalAttr(col.Traversal, 1)] == nil {
			return nil
		}
		handled[ie] = true
		handled[col] = true
		key, diags := ie.Key.Value(withExtra(w.ctx(node), extra))
		idx := -2
		skey := ""
		if !diags.HasErrors() && key.IsWhollyKnown() && !key.IsNull() && !key.IsMarked() {
			switch key.Type() {
			case cty.Number:
				if i, acc := key.AsBigFloat().Int64(); acc == 0 {
					idx = int(i)
				}
			case cty.String:
				skey = key.AsString()
			}
		}
		a := ""
		if len(rest) > 0 {
			if ta, ok := rest[0].(hcl.TraverseAttr); ok {
				a = ta.Name
			}
		}
		tr := append(hcl.Traversal{}, col.Traversal...)
		switch {
		case idx >= 0:
			tr = append(tr, hcl.TraverseIndex{Key: cty.NumberIntVal(int64(idx))})
		case skey != "":
			tr = append(tr, hcl.TraverseIndex{Key: cty.StringVal(skey)})
		}
		if a != "" {
			tr = append(tr, hcl.TraverseAttr{Name: a})
		}
		if c, ok := w.resourceCause(tr); ok {
			addRes(c)
		}
		return nil
	})
	hclsyntax.VisitAll(syn, func(n hclsyntax.Node) hcl.Diagnostics {
		if st, ok := n.(*hclsyntax.ScopeTraversalExpr); ok && !handled[st] {
			visitTraversal(st.Traversal)
		}
		return nil
	})
	return vars, res
}

func traversalAttr(tr hcl.Traversal, i int) string {
	if len(tr) > i {
		if a, ok := tr[i].(hcl.TraverseAttr); ok {
			return a.Name
		}
	}
	return ""
}

// resourceCause is the cause a reference to a resource (TYPE.NAME, a
// member TYPE.NAME[KEY], then perhaps an attribute) names when what it
// references changes.
func (w *walker) resourceCause(tr hcl.Traversal) (cause, bool) {
	base := tr.RootName() + "." + traversalAttr(tr, 1)
	if w.tmpl.Resources[base] == nil || !w.changing[base] {
		return cause{}, false
	}
	ent := base
	i := 2
	if len(tr) > 2 {
		if ix, ok := tr[2].(hcl.TraverseIndex); ok {
			k := ix.Key
			switch {
			case k.Type() == cty.Number && k.IsKnown() && !k.IsNull():
				if n, acc := k.AsBigFloat().Int64(); acc == 0 {
					ent += fmt.Sprintf("[%d]", n)
				}
			case k.Type() == cty.String && k.IsKnown() && !k.IsNull():
				ent += "[" + strconv.Quote(k.AsString()) + "]"
			}
			i = 3
			if strings.HasSuffix(ent, "]") && !w.changedAddrs[w.prefix+ent] {
				// That member stays as it is.
				return cause{}, false
			}
		}
	}
	a := traversalAttr(tr, i)
	if a == "" || a == "id" {
		// The physical id, or the whole resource.
		return causeOf(changeset.SourceResourceReference, ent), true
	}
	return causeOf(changeset.SourceResourceAttribute, ent+"."+a), true
}

// sameMetadata compares metadata evaluated with the prior variables with
// the recorded metadata (JSON).
func sameMetadata(cv cty.Value, recorded []byte) (same, known bool) {
	if !cv.IsWhollyKnown() {
		return false, false
	}
	clean, _ := cv.UnmarkDeep()
	b, err := config.EncodeValue(clean)
	if err != nil {
		return false, false
	}
	return string(b) == string(recorded), true
}

// metadataChange is the before and after values of a resource's metadata
// (the Metadata scope), both "<sensitive>" when the metadata is derived
// from a sensitive value. Unset metadata is null.
func (w *walker) metadataChange(r *config.Resource, before, after []byte) changeset.ResourcePropertyChange {
	pc := changeset.ResourcePropertyChange{Name: "Metadata"}
	if r.Metadata != nil {
		if mv, diags := r.Metadata.Value(withExtra(w.ctx(r.Addr()), w.extra)); diags.HasErrors() || mv.ContainsMarked() {
			pc.BeforeValue, pc.AfterValue = SensitivePlaceholder, SensitivePlaceholder
			return pc
		}
	}
	decode := func(b []byte) any {
		if len(b) == 0 {
			return nil
		}
		v, err := config.DecodeValue(b)
		if err != nil || v == cty.NilVal {
			return nil
		}
		return jsonValue(v)
	}
	pc.BeforeValue, pc.AfterValue = decode(before), decode(after)
	return pc
}

// priorTemplate is the template the instance last applied, or nil.
func priorTemplate(inst *Instance) *config.Template {
	if inst == nil || inst.Prior == nil {
		return nil
	}
	return inst.Prior.Template
}

// stackSetTemplate is the template of the instance's stack set, or nil.
func stackSetTemplate(inst *Instance) *config.Template {
	if inst == nil || inst.StackSet == nil {
		return nil
	}
	return inst.StackSet.Template
}

package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Expansion of a resource into its count or for_each members, and of a
// module call into its instances; resource addresses with module
// instance keys.

type expansion struct {
	addr  string
	extra map[string]cty.Value // count / each
}

func (w *walker) expand(r *config.Resource) ([]expansion, hcl.Diagnostics) {
	if r.Count == nil && r.ForEach == nil {
		if d := w.countResources(r, 1, r.DeclRange); d != nil {
			return nil, hcl.Diagnostics{d}
		}
		return []expansion{{addr: r.Addr()}}, nil
	}
	return w.expandBy(r.Addr(), r.Count, r.ForEach, w.ctx(r.Addr()), func(n int, rng hcl.Range) *hcl.Diagnostic {
		return w.countResources(r, n, rng)
	})
}

// expandBy expands what addr names (a resource or a module call) by its
// count or for_each, evaluated in ctx; budget counts the instances
// against the limits before they are made.
func (w *walker) expandBy(addr string, count, forEach hcl.Expression, ctx *hcl.EvalContext, budget func(n int, rng hcl.Range) *hcl.Diagnostic) ([]expansion, hcl.Diagnostics) {
	switch {
	case count != nil:
		v, diags := count.Value(ctx)
		if diags.HasErrors() {
			return nil, diags
		}
		if !v.IsWhollyKnown() {
			return nil, diags.Append(config.Errorf(count.Range(), "Invalid count argument", "%s", unknownCountDetail))
		}
		if v.IsMarked() {
			return nil, diags.Append(config.Errorf(count.Range(), "Invalid count argument", "The count of %s is derived from a sensitive value; count must not be sensitive.", addr))
		}
		num, err := convert.Convert(v, cty.Number)
		if err != nil || num.IsNull() {
			return nil, diags.Append(config.Errorf(count.Range(), "Invalid count argument", "The count of %s must be a whole number.", addr))
		}
		bf := num.AsBigFloat()
		if !bf.IsInt() || bf.Sign() < 0 || bf.Cmp(big.NewFloat(config.MaxCount)) > 0 {
			return nil, diags.Append(config.Errorf(count.Range(), "Invalid count argument",
				"The count of %s is %s; it must be a whole number from 0 to %d.", addr, bf.Text('g', -1), config.MaxCount))
		}
		n, _ := bf.Int64()
		if d := budget(int(n), count.Range()); d != nil {
			return nil, diags.Append(d)
		}
		out := make([]expansion, n)
		for i := range out {
			out[i] = expansion{addr: fmt.Sprintf("%s[%d]", addr, i), extra: map[string]cty.Value{"count": cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(i))})}}
		}
		return out, diags
	case forEach != nil:
		v, diags := forEach.Value(ctx)
		if diags.HasErrors() {
			return nil, diags
		}
		bad := func(why string) ([]expansion, hcl.Diagnostics) {
			return nil, diags.Append(config.Errorf(forEach.Range(), "Invalid for_each argument", "The for_each of %s %s; it must be a map, or a set of strings, known at plan time and not sensitive.", addr, why))
		}
		if ty := v.Type(); !v.IsKnown() || !ty.IsMapType() && !ty.IsObjectType() && !v.IsWhollyKnown() {
			// A map's keys must be known, its values need not be (each.value
			// may be known only after apply); a set's elements are the keys.
			detail := unknownForEachMapDetail // what Terraform says but of a set
			if ty.IsSetType() || ty.IsListType() || ty.IsTupleType() {
				detail = unknownForEachSetDetail
			}
			return nil, diags.Append(config.Errorf(forEach.Range(), "Invalid for_each argument", "%s", detail))
		}
		sensitive := func() ([]expansion, hcl.Diagnostics) {
			return nil, diags.Append(config.Errorf(forEach.Range(), "Invalid for_each argument",
				"The for_each of %s uses a sensitive value. Sensitive values, or values derived from sensitive values, cannot be used as for_each arguments: the sensitive value could be exposed as a resource instance key.", addr))
		}
		if v.IsMarked() {
			return sensitive()
		}
		if v.IsNull() {
			return bad("is null")
		}
		ty := v.Type()
		if !ty.IsMapType() && !ty.IsObjectType() && v.ContainsMarked() {
			// The elements of a set or list become the keys. (Those of a
			// map are each.value, which may be sensitive.)
			return sensitive()
		}
		if v.CanIterateElements() && v.LengthInt() > config.MaxCount {
			return bad(fmt.Sprintf("has %d elements, more than the limit of %d", v.LengthInt(), config.MaxCount))
		}
		var keys []string
		vals := map[string]cty.Value{}
		switch {
		case ty.IsMapType() || ty.IsObjectType():
			for k, ev := range v.AsValueMap() {
				keys = append(keys, k)
				vals[k] = ev
			}
		case ty.IsSetType() || ty.IsListType() || ty.IsTupleType():
			if !ty.IsSetType() {
				if s, err := convert.Convert(v, cty.Set(cty.String)); err != nil || s.LengthInt() != v.LengthInt() {
					return bad("is a list with duplicate or non-string elements (use toset())")
				}
			}
			for it := v.ElementIterator(); it.Next(); {
				_, ev := it.Element()
				s, err := convert.Convert(ev, cty.String)
				if err != nil || s.IsNull() {
					return bad("holds a value that is not a string")
				}
				keys = append(keys, s.AsString())
				vals[s.AsString()] = s
			}
		default:
			return bad("is a " + ty.FriendlyName())
		}
		if d := budget(len(keys), forEach.Range()); d != nil {
			return nil, diags.Append(d)
		}
		sort.Strings(keys)
		out := make([]expansion, 0, len(keys))
		for _, k := range keys {
			out = append(out, expansion{addr: fmt.Sprintf("%s[%s]", addr, strconv.Quote(k)), extra: map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(k), "value": vals[k]})}})
		}
		return out, diags
	}
	return []expansion{{addr: addr}}, nil
}

// Terraform's words for a count or for_each known only after apply
// (without its suggestion of -target, an option stackd has not).
const (
	unknownCountDetail      = `The "count" value depends on resource attributes that cannot be determined until apply, so Terraform cannot predict how many instances will be created.`
	unknownForEachMapDetail = `The "for_each" map includes keys derived from resource attributes that cannot be determined until apply, and so Terraform cannot determine the full set of keys that will identify the instances of this resource.

When working with unknown values in for_each, it's better to define the map keys statically in your configuration and place apply-time results only in the map values.`
	unknownForEachSetDetail = `The "for_each" set includes values derived from resource attributes that cannot be determined until apply, and so Terraform cannot determine the full set of keys that will identify the instances of this resource.

When working with unknown values in for_each, it's better to use a map value where the keys are defined statically in your configuration and where only the values contain apply-time results.`
)

// countResources counts n more resource instances of the instance (across
// its modules), before they are expanded: over MaxResourcesPerInstance it
// is a diagnostic at rng.
func (w *walker) countResources(r *config.Resource, n int, rng hcl.Range) *hcl.Diagnostic {
	if total := w.meter.Resources + n; total > config.MaxResourcesPerInstance {
		return config.Errorf(rng, "Too many resources",
			"%s%s adds %d resources, bringing the instance to %d; an instance may have at most %d resources across all its modules. Use fewer resources, smaller counts, or more stack sets.",
			w.prefix, r.Addr(), n, total, config.MaxResourcesPerInstance)
	}
	w.meter.Resources += n
	return nil
}

// Placeholders printed instead of values (declared by the change set,
// which holds them in place of values).
const (
	SensitivePlaceholder       = changeset.SensitivePlaceholder
	KnownAfterApplyPlaceholder = changeset.KnownAfterApplyPlaceholder
)

// unmarkObject removes every mark from an object value and returns the names
// of its top-level attributes that were (or contained) sensitive values.
func unmarkObject(v cty.Value) (cty.Value, []string) {
	clean, pvm := v.UnmarkDeepWithPaths()
	seen := map[string]bool{}
	for _, p := range pvm {
		if _, ok := p.Marks[provider.SensitiveMark]; !ok {
			continue
		}
		if len(p.Path) == 0 {
			// the whole object is sensitive
			if clean.Type().IsObjectType() {
				for name := range clean.Type().AttributeTypes() {
					seen[name] = true
				}
			}
			continue
		}
		if ga, ok := p.Path[0].(cty.GetAttrStep); ok {
			seen[ga.Name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return clean, names
}

// markAttrs marks the named attributes of an object value sensitive.
func markAttrs(v cty.Value, names []string) cty.Value {
	if len(names) == 0 || v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() {
		return v
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	attrs := v.AsValueMap()
	for k, a := range attrs {
		if set[k] {
			attrs[k] = a.Mark(provider.SensitiveMark)
		}
	}
	return cty.ObjectVal(attrs)
}

// displayValue renders a value for humans and change sets: strings as they
// are, other values as compact JSON, sensitive values and unknowns as
// placeholders.
func displayValue(v cty.Value) string {
	if v == cty.NilVal || v.IsNull() && !v.IsMarked() {
		return ""
	}
	if provider.IsSensitive(v) {
		return SensitivePlaceholder
	}
	if !v.IsWhollyKnown() {
		return KnownAfterApplyPlaceholder
	}
	if v.Type() == cty.String {
		return v.AsString()
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// plainJSON renders a known, unmarked value as plain JSON (no type envelope),
// for outputs in status documents.
func plainJSON(v cty.Value) (json.RawMessage, error) {
	return ctyjson.Marshal(v, v.Type())
}

// jsonValue is a value for a change set: its plain JSON form as Go data
// (strings, json.Number, bools, []any, map[string]any, nil), or the
// placeholder strings for sensitive and unknown values.
func jsonValue(v cty.Value) any {
	if v == cty.NilVal {
		return nil
	}
	if provider.IsSensitive(v) {
		return SensitivePlaceholder
	}
	if !v.IsWhollyKnown() {
		return KnownAfterApplyPlaceholder
	}
	if v.IsNull() {
		return nil
	}
	if v.Type() == cty.String {
		return v.AsString()
	}
	b, err := plainJSON(v)
	if err != nil {
		return displayValue(v)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return displayValue(v)
	}
	return out
}

// ValueString renders a change-set value for text: strings as they are,
// everything else as compact JSON.
func ValueString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Module calls with count or for_each, as Terraform expands them: one
// module instance per element, its resources under module.NAME[0]. or
// module.NAME["k"]., count.index or each.key and each.value in the call's
// arguments; module.NAME is then a tuple (count) or an object (for_each)
// of the instances' outputs. A call's depends_on makes each resource in
// it depend on what it names.

// moduleCall evaluates a module call: each of its instances (module),
// then its value for references.
func (w *walker) moduleCall(mc *config.ModuleCall) hcl.Diagnostics {
	if mc.Count == nil && mc.ForEach == nil {
		v, diags := w.module(mc, expansion{addr: mc.Name})
		if !diags.HasErrors() {
			w.modules[mc.Name] = v
		}
		return diags
	}
	node := "module." + mc.Name
	// The instances' resources count against the limits as they are
	// planned; the number of instances is bounded as a resource's is.
	exps, diags := w.expandBy(node, mc.Count, mc.ForEach, w.ctx(node), func(int, hcl.Range) *hcl.Diagnostic { return nil })
	if diags.HasErrors() {
		return diags
	}
	vals := make([]cty.Value, 0, len(exps))
	keyed := make(map[string]cty.Value, len(exps))
	for _, ex := range exps {
		ex.addr = strings.TrimPrefix(ex.addr, "module.")
		v, d := w.module(mc, ex)
		diags = append(diags, d...)
		if d.HasErrors() {
			return diags
		}
		vals = append(vals, v)
		if each := ex.extra["each"]; each != cty.NilVal {
			keyed[each.GetAttr("key").AsString()] = v
		}
	}
	if mc.Count != nil {
		w.modules[mc.Name] = cty.TupleVal(vals)
	} else {
		w.modules[mc.Name] = cty.ObjectVal(keyed)
	}
	return diags
}

// moduleDeps are the full base addresses of the resources every resource
// in mc depends on: those its depends_on names (the resources of a module
// call it names, planned before it), and its caller's.
func (w *walker) moduleDeps(mc *config.ModuleCall) []string {
	if len(mc.DependsOn) == 0 {
		return w.callDeps
	}
	out := slices.Clone(w.callDeps)
	add := func(d string) {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, d := range mc.DependsOn {
		switch {
		case strings.HasPrefix(d, "data."):
			// Data sources are read, never applied: nothing to order.
		case strings.HasPrefix(d, "module."):
			for _, b := range w.moduleResources(d) {
				add(b)
			}
		default:
			add(w.prefix + d)
		}
	}
	return out
}

// moduleResources are the full base addresses of the resources planned
// in the module call node ("module.NAME") of this walker's template, all
// its instances and nested calls.
func (w *walker) moduleResources(node string) []string {
	in := w.prefix + node
	var out []string
	for _, rp := range *w.planned {
		if strings.HasPrefix(rp.Address, in+".") || strings.HasPrefix(rp.Address, in+"[") {
			if b := baseAddr(rp.Address); !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// dependsOnModules are the full base addresses of the resources of the
// module calls r's depends_on names.
func (w *walker) dependsOnModules(r *config.Resource) []string {
	var out []string
	for _, d := range r.DependsOn {
		if strings.HasPrefix(d, "module.") {
			out = append(out, w.moduleResources(d)...)
		}
	}
	return out
}

// Resource addresses as Terraform writes them, module instance keys
// included: module.net["eu"].module.sub[0].p6_thing.a["k.x"]. A key may
// hold dots and brackets inside its quotes, so addresses are split by
// scanning, never by strings.Split.

// addrSteps splits an address at the dots outside instance keys:
// module.a["x.y"].file.b[0] → module, a["x.y"], file, b[0].
func addrSteps(addr string) []string {
	var out []string
	start, depth, quoted, escaped := 0, 0, false, false
	for i := 0; i < len(addr); i++ {
		c := addr[i]
		switch {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"' && depth > 0:
			quoted = !quoted
		case quoted:
		case c == '[':
			depth++
		case c == ']' && depth > 0:
			depth--
		case c == '.' && depth == 0:
			out = append(out, addr[start:i])
			start = i + 1
		}
	}
	return append(out, addr[start:])
}

// keyStart is the index of the instance key a step ends with ("b[0]" →
// 1), or len(step) when it has none.
func keyStart(step string) int {
	if !strings.HasSuffix(step, "]") {
		return len(step)
	}
	quoted, escaped := false, false
	for i := 0; i < len(step); i++ {
		c := step[i]
		switch {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == '[':
			return i
		}
	}
	return len(step)
}

// trimInstanceKey is addr without the instance key of its last step:
// the resource's address with its module instances.
func trimInstanceKey(addr string) string {
	steps := addrSteps(addr)
	last := steps[len(steps)-1]
	return addr[:len(addr)-len(last)+keyStart(last)]
}

// configAddr is addr without any instance key: the address of the block
// that declares it, through module calls (module.a.file.b).
func configAddr(addr string) string {
	if !strings.HasPrefix(addr, "module.") {
		return baseAddr(addr) // no module: only its own key (and no allocation)
	}
	steps := addrSteps(addr)
	for i, s := range steps {
		steps[i] = s[:keyStart(s)]
	}
	return strings.Join(steps, ".")
}

// moduleSteps splits addr into the module instances it is in ("a",
// "b[0]", outermost first) and the rest (the resource's address inside
// its module: "file.x[1]").
func moduleSteps(addr string) (mods []string, rest string) {
	steps := addrSteps(addr)
	i := 0
	for i+2 < len(steps) && steps[i] == "module" {
		mods = append(mods, steps[i+1])
		i += 2
	}
	return mods, strings.Join(steps[i:], ".")
}

package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Expansion of a resource into its count or for_each members.

type expansion struct {
	addr  string
	extra map[string]cty.Value // count / each
}

func (w *walker) expand(r *config.Resource) ([]expansion, hcl.Diagnostics) {
	switch {
	case r.Count != nil:
		v, diags := r.Count.Value(w.ctx(r.Addr()))
		if diags.HasErrors() {
			return nil, diags
		}
		if !v.IsWhollyKnown() {
			return nil, diags.Append(config.Errorf(r.Count.Range(), "Invalid count argument", "The count of %s depends on values known only after apply; it must be known at plan time.", r.Addr()))
		}
		if v.IsMarked() {
			return nil, diags.Append(config.Errorf(r.Count.Range(), "Invalid count argument", "The count of %s is derived from a sensitive value; count must not be sensitive.", r.Addr()))
		}
		num, err := convert.Convert(v, cty.Number)
		if err != nil || num.IsNull() {
			return nil, diags.Append(config.Errorf(r.Count.Range(), "Invalid count argument", "The count of %s must be a whole number.", r.Addr()))
		}
		bf := num.AsBigFloat()
		if !bf.IsInt() || bf.Sign() < 0 || bf.Cmp(big.NewFloat(config.MaxCount)) > 0 {
			return nil, diags.Append(config.Errorf(r.Count.Range(), "Invalid count argument",
				"The count of %s is %s; it must be a whole number from 0 to %d.", r.Addr(), bf.Text('g', -1), config.MaxCount))
		}
		n, _ := bf.Int64()
		if d := w.countResources(r, int(n), r.Count.Range()); d != nil {
			return nil, diags.Append(d)
		}
		out := make([]expansion, n)
		for i := range out {
			out[i] = expansion{addr: fmt.Sprintf("%s[%d]", r.Addr(), i), extra: map[string]cty.Value{"count": cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(i))})}}
		}
		return out, diags
	case r.ForEach != nil:
		v, diags := r.ForEach.Value(w.ctx(r.Addr()))
		if diags.HasErrors() {
			return nil, diags
		}
		bad := func(why string) ([]expansion, hcl.Diagnostics) {
			return nil, diags.Append(config.Errorf(r.ForEach.Range(), "Invalid for_each argument", "The for_each of %s %s; it must be a map, or a set of strings, known at plan time and not sensitive.", r.Addr(), why))
		}
		if !v.IsWhollyKnown() {
			return bad("depends on values known only after apply")
		}
		sensitive := func() ([]expansion, hcl.Diagnostics) {
			return nil, diags.Append(config.Errorf(r.ForEach.Range(), "Invalid for_each argument",
				"The for_each of %s uses a sensitive value. Sensitive values, or values derived from sensitive values, cannot be used as for_each arguments: the sensitive value could be exposed as a resource instance key.", r.Addr()))
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
		if d := w.countResources(r, len(keys), r.ForEach.Range()); d != nil {
			return nil, diags.Append(d)
		}
		sort.Strings(keys)
		out := make([]expansion, 0, len(keys))
		for _, k := range keys {
			out = append(out, expansion{addr: fmt.Sprintf("%s[%s]", r.Addr(), strconv.Quote(k)), extra: map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(k), "value": vals[k]})}})
		}
		return out, diags
	}
	if d := w.countResources(r, 1, r.DeclRange); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	return []expansion{{addr: r.Addr()}}, nil
}

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

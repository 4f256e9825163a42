package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/provider"
)

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

package engine

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// markSensitive is the cty mark carried by values derived from sensitive
// variables and attributes.
const markSensitive = "sensitive"

// Placeholders printed instead of values.
const (
	SensitivePlaceholder       = "<sensitive>"
	KnownAfterApplyPlaceholder = "<known_after_apply>"
)

// EncodeValue encodes a cty value with its type (cty's typed JSON) so that it
// decodes back to exactly the same value. Marks must have been removed.
func EncodeValue(v cty.Value) (json.RawMessage, error) {
	if v == cty.NilVal {
		return nil, nil
	}
	return ctyjson.Marshal(v, cty.DynamicPseudoType)
}

// DecodeValue is the inverse of EncodeValue; empty input gives cty.NilVal.
func DecodeValue(b json.RawMessage) (cty.Value, error) {
	if len(b) == 0 {
		return cty.NilVal, nil
	}
	return ctyjson.Unmarshal(b, cty.DynamicPseudoType)
}

// isSensitive reports whether v or anything inside it is marked sensitive.
func isSensitive(v cty.Value) bool {
	if v.HasMark(markSensitive) {
		return true
	}
	_, pvm := v.UnmarkDeepWithPaths()
	for _, p := range pvm {
		if _, ok := p.Marks[markSensitive]; ok {
			return true
		}
	}
	return false
}

// unmarkObject removes every mark from an object value and returns the names
// of its top-level attributes that were (or contained) sensitive values.
func unmarkObject(v cty.Value) (cty.Value, []string) {
	clean, pvm := v.UnmarkDeepWithPaths()
	seen := map[string]bool{}
	for _, p := range pvm {
		if _, ok := p.Marks[markSensitive]; !ok {
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
			attrs[k] = a.Mark(markSensitive)
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
	if isSensitive(v) {
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

package provider

import (
	"encoding/json"
	"fmt"

	"github.com/zclconf/go-cty/cty"
)

// ValueFromJSON converts JSON decoded with json.Decoder.UseNumber (nil,
// string, bool, json.Number, []any, map[string]any) to a cty value: arrays
// become tuples, objects objects, numbers exact cty numbers. Providers use
// it for attributes they receive as JSON; the engine for recorded values.
func ValueFromJSON(v any) (cty.Value, error) {
	switch x := v.(type) {
	case nil:
		return cty.NullVal(cty.DynamicPseudoType), nil
	case string:
		return cty.StringVal(x), nil
	case bool:
		return cty.BoolVal(x), nil
	case json.Number:
		return cty.ParseNumberVal(string(x))
	case []any:
		if len(x) == 0 {
			return cty.EmptyTupleVal, nil
		}
		vals := make([]cty.Value, len(x))
		for i, e := range x {
			cv, err := ValueFromJSON(e)
			if err != nil {
				return cty.NilVal, err
			}
			vals[i] = cv
		}
		return cty.TupleVal(vals), nil
	case map[string]any:
		if len(x) == 0 {
			return cty.EmptyObjectVal, nil
		}
		attrs := make(map[string]cty.Value, len(x))
		for k, e := range x {
			cv, err := ValueFromJSON(e)
			if err != nil {
				return cty.NilVal, err
			}
			attrs[k] = cv
		}
		return cty.ObjectVal(attrs), nil
	}
	return cty.NilVal, fmt.Errorf("unexpected JSON value %T", v)
}

package tfplugin

import (
	"fmt"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"github.com/zclconf/go-cty/cty/msgpack"
)

// encodeValue converts v to ty and encodes it as MessagePack, the encoding
// every provider accepts. Marks (sensitive values) are dropped: the
// provider gets plain values and the schema says what is sensitive. A
// cty.NilType v (the zero cty.Value) stands for null.
func encodeValue(v cty.Value, ty cty.Type) ([]byte, error) {
	if v == cty.NilVal {
		v = cty.NullVal(ty)
	}
	v, _ = v.UnmarkDeep()
	cv, err := convert.Convert(v, ty)
	if err != nil {
		// convert's messages name types and attributes, never values.
		return nil, fmt.Errorf("value does not conform to the schema: %w", err)
	}
	b, err := msgpack.Marshal(cv, ty)
	if err != nil {
		return nil, fmt.Errorf("encode value: %w", err)
	}
	return b, nil
}

// decodeValue decodes a DynamicValue's MessagePack or, when a provider
// answered JSON, its JSON, against ty. Neither means null. Malformed input
// is an error, never a panic.
func decodeValue(mp, js []byte, ty cty.Type) (v cty.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = cty.NilVal, fmt.Errorf("decode value: malformed data from the provider (%v)", r)
		}
	}()
	switch {
	case len(mp) > 0:
		v, err = msgpack.Unmarshal(mp, ty)
	case len(js) > 0:
		v, err = ctyjson.Unmarshal(js, ty)
	default:
		return cty.NullVal(ty), nil
	}
	if err != nil {
		return cty.NilVal, fmt.Errorf("decode value: %w", err)
	}
	return v, nil
}

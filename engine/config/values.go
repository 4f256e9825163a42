package config

import (
	"bytes"
	"encoding/json"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/provider"
)

// EncodeValue encodes a cty value as plain JSON (objects, arrays, strings,
// numbers, booleans, null). Marks must have been removed. Types are not
// recorded: DecodeValue infers them and the engine converts recorded
// properties to their schema types, which keeps recorded state small and
// fast to read.
func EncodeValue(v cty.Value) (json.RawMessage, error) {
	if v == cty.NilVal {
		return nil, nil
	}
	return ctyjson.Marshal(v, v.Type())
}

// DecodeValue decodes JSON written by EncodeValue: objects become cty
// objects, arrays tuples, numbers exact cty numbers. Empty input gives
// cty.NilVal.
func DecodeValue(b json.RawMessage) (cty.Value, error) {
	if len(b) == 0 {
		return cty.NilVal, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return cty.NilVal, err
	}
	return provider.ValueFromJSON(raw)
}

package tfbuiltin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/internal/tfstate"
)

// Limits of a state file terraform_remote_state reads.
const (
	// MaxStateBytes is the largest state file read, as large as a
	// template file or a file a file function reads.
	MaxStateBytes = 4 << 20
	// MaxStateNesting bounds how deeply the state's JSON nests (arrays
	// and objects), like the nesting limit of definitions.
	MaxStateNesting = 512
)

// stateVersion is the state format version read: Terraform 0.12 to 1.11
// and OpenTofu write version 4.
const stateVersion = 4

// stateFile is the part of a state file terraform_remote_state reads.
type stateFile struct {
	Version *int64                 `json:"version"`
	Outputs map[string]stateOutput `json:"outputs"`
}

type stateOutput struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive"`
}

// readOutputs decodes the root outputs of a state file (format version
// 4), each of the type the state records, the sensitive ones marked.
// Bad input is an error, never a panic.
func readOutputs(src []byte) (outs map[string]cty.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, fmt.Errorf("the state file cannot be decoded")
		}
	}()
	if len(src) > MaxStateBytes {
		return nil, fmt.Errorf("the state file is %d bytes; at most %d are read", len(src), MaxStateBytes)
	}
	if d := tfstate.Nesting(src); d > MaxStateNesting {
		return nil, fmt.Errorf("the state file nests more than %d levels deep", MaxStateNesting)
	}
	var sf stateFile
	if err := json.Unmarshal(src, &sf); err != nil {
		return nil, fmt.Errorf("the file is not a Terraform state (JSON): %s", jsonError(err))
	}
	switch {
	case sf.Version == nil:
		return nil, fmt.Errorf("the file is not a Terraform state: it has no format version")
	case *sf.Version < stateVersion:
		return nil, fmt.Errorf("the state uses format version %d (Terraform 0.11 or older), which stackd does not read; Terraform 0.12 or newer rewrites it as version %d on its next apply", *sf.Version, stateVersion)
	case *sf.Version > stateVersion:
		return nil, fmt.Errorf("the state uses format version %d, which is not supported by Terraform 1.11 (it reads version %d)", *sf.Version, stateVersion)
	}
	outs = make(map[string]cty.Value, len(sf.Outputs))
	for name, o := range sf.Outputs {
		v, err := outputValue(o)
		if err != nil {
			return nil, fmt.Errorf("output %q of the state: %w", name, err)
		}
		if o.Sensitive {
			v = v.Mark(provider.SensitiveMark)
		}
		outs[name] = v
	}
	return outs, nil
}

// outputValue decodes one output: its value of its recorded type, or,
// when the state records no type, as JSON values decode.
func outputValue(o stateOutput) (cty.Value, error) {
	if len(o.Value) == 0 {
		return cty.NilVal, fmt.Errorf("it has no value")
	}
	if len(o.Type) == 0 {
		var raw any
		dec := json.NewDecoder(bytes.NewReader(o.Value))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return cty.NilVal, fmt.Errorf("invalid value: %s", jsonError(err))
		}
		return provider.ValueFromJSON(raw)
	}
	ty, err := ctyjson.UnmarshalType(o.Type)
	if err != nil {
		return cty.NilVal, fmt.Errorf("invalid type: %s", jsonError(err))
	}
	v, err := ctyjson.Unmarshal(o.Value, ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("the value does not match its type: %s", jsonError(err))
	}
	return v, nil
}

// jsonError is err's message without what it quotes of the file beyond
// its own words (a state's values may be secrets).
func jsonError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("a JSON %s where %s was expected", te.Value, te.Type)
	}
	var pe cty.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("at %s: %s", provider.FormatPath(pe.Path), pe.Error())
	}
	return err.Error()
}

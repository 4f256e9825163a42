package funcs

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"golang.org/x/text/encoding/ianaindex"
)

// base64DecodeFunc decodes base64 into a UTF-8 string; the result keeps
// the marks of its argument and errors do not quote a sensitive one.
var base64DecodeFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "str", Type: cty.String, AllowMarked: true}},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		s, marks := args[0].Unmark()
		b, err := base64.StdEncoding.DecodeString(s.AsString())
		if err != nil {
			if len(marks) > 0 {
				return cty.UnknownVal(cty.String), errors.New("failed to decode base64 data (sensitive value)")
			}
			return cty.UnknownVal(cty.String), fmt.Errorf("failed to decode base64 data %s", s.AsString())
		}
		if !utf8.Valid(b) {
			return cty.UnknownVal(cty.String), errors.New("the result of decoding the provided string is not valid UTF-8")
		}
		return cty.StringVal(string(b)).WithMarks(marks), nil
	},
})

var base64EncodeFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "str", Type: cty.String}},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(encBase64([]byte(args[0].AsString()))), nil
	},
})

// base64GzipFunc gzips a string and encodes the result in base64.
var base64GzipFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "str", Type: cty.String}},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		var b bytes.Buffer
		gz := gzip.NewWriter(&b)
		if _, err := gz.Write([]byte(args[0].AsString())); err != nil {
			return cty.UnknownVal(cty.String), fmt.Errorf("failed to write gzip raw data: %w", err)
		}
		// Terraform flushes before closing: the same bytes need the same
		// empty block before the trailer.
		if err := gz.Flush(); err != nil {
			return cty.UnknownVal(cty.String), fmt.Errorf("failed to flush gzip writer: %w", err)
		}
		if err := gz.Close(); err != nil {
			return cty.UnknownVal(cty.String), fmt.Errorf("failed to close gzip writer: %w", err)
		}
		return cty.StringVal(encBase64(b.Bytes())), nil
	},
})

var textEncodeBase64Func = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "string", Type: cty.String},
		{Name: "encoding", Type: cty.String},
	},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		enc, err := ianaindex.IANA.Encoding(args[1].AsString())
		if err != nil || enc == nil {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(1, "%q is not a supported IANA encoding name or alias in this Terraform version", args[1].AsString())
		}
		name, err := ianaindex.IANA.Name(enc)
		if err != nil {
			name = args[1].AsString()
		}
		b, err := enc.NewEncoder().Bytes([]byte(args[0].AsString()))
		if err != nil {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "the given string contains characters that cannot be represented in %s", name)
		}
		return cty.StringVal(encBase64(b)), nil
	},
})

var textDecodeBase64Func = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "source", Type: cty.String},
		{Name: "encoding", Type: cty.String},
	},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		enc, err := ianaindex.IANA.Encoding(args[1].AsString())
		if err != nil || enc == nil {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(1, "%q is not a supported IANA encoding name or alias in this Terraform version", args[1].AsString())
		}
		name, err := ianaindex.IANA.Name(enc)
		if err != nil {
			name = args[1].AsString()
		}
		raw, err := base64.StdEncoding.DecodeString(args[0].AsString())
		if err != nil {
			var corrupt base64.CorruptInputError
			if errors.As(err, &corrupt) {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "the given value is has an invalid base64 symbol at offset %d", int(corrupt))
			}
			return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "invalid source string: %w", err)
		}
		b, err := enc.NewDecoder().Bytes(raw)
		if err != nil || bytes.ContainsRune(b, utf8.RuneError) {
			return cty.UnknownVal(cty.String), function.NewArgErrorf(0, "the given string contains symbols that are not defined for %s", name)
		}
		return cty.StringVal(string(b)), nil
	},
})

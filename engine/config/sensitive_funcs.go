package config

import (
	"errors"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/stackd/stackd/engine/provider"
)

// Functions and sensitive arguments. go-cty's functions carry marks from
// their arguments to their results, so strrev(var.password) is sensitive.
// Their errors do not: parseint(var.password, 10) fails with `cannot parse
// "…" as a base 10 integer`, quoting the argument, and hcl puts that text
// in the diagnostic. Every function of the table is therefore wrapped: when
// a call with a sensitive argument (one holding the sensitive mark
// anywhere) fails, its error is replaced by a generic one. Whether to hide
// is decided by the marks, never by looking for the value in the text.

// ErrSensitiveArgument is the error of a function call that failed with a
// sensitive argument: hcl reports it as `Call to function "parseint"
// failed: the error message is hidden because an argument is sensitive.`
var ErrSensitiveArgument = errors.New("the error message is hidden because an argument is sensitive")

// hideSensitiveErrors returns f with the errors of calls that have a
// sensitive argument replaced by ErrSensitiveArgument; results, marks and
// the errors of other calls are f's own.
//
// The wrapper accepts everything (marked, unknown, null and dynamically
// typed arguments) and leaves their handling to f's own Call: the
// function package would otherwise answer unknown arguments itself,
// without the marks of the arguments it lets through marked.
func hideSensitiveErrors(f function.Function) function.Function {
	spec := permissiveSpec(f)
	spec.Type = func(args []cty.Value) (cty.Type, error) {
		ty, err := f.ReturnTypeForValues(args)
		return ty, hideIfSensitive(args, err)
	}
	spec.Impl = func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v, err := f.Call(args)
		return v, hideIfSensitive(args, err)
	}
	return function.New(spec)
}

// hideIfSensitive returns ErrSensitiveArgument for an error of a call with
// a sensitive argument, err otherwise.
func hideIfSensitive(args []cty.Value, err error) error {
	if err == nil {
		return nil
	}
	for _, a := range args {
		if provider.IsSensitive(a) {
			return ErrSensitiveArgument
		}
	}
	return err
}

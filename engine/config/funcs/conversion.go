package funcs

import (
	"strconv"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// anyParam accepts every value: null, unknown, marked, of any type.
func anyParam(name string) function.Parameter {
	return function.Parameter{
		Name: name, Type: cty.DynamicPseudoType,
		AllowNull: true, AllowUnknown: true, AllowMarked: true, AllowDynamicType: true,
	}
}

// containsMark is true when v holds mark at any depth.
func containsMark(v cty.Value, mark any) bool {
	if !v.ContainsMarked() {
		return false
	}
	_, pvm := v.UnmarkDeepWithPaths()
	for _, p := range pvm {
		if _, ok := p.Marks[mark]; ok {
			return true
		}
	}
	return false
}

// makeToFunc is an explicit conversion (tostring, tolist, …) with
// Terraform's error messages, which never quote a sensitive value.
func (t *table) makeToFunc(want cty.Type) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{anyParam("v")},
		Type: func(args []cty.Value) (cty.Type, error) {
			got := args[0].Type()
			if got.Equals(want) {
				return want, nil
			}
			if convert.GetConversionUnsafe(got, want) == nil {
				switch {
				case got.IsTupleType() && want.IsTupleType():
					return cty.NilType, function.NewArgErrorf(0, "incompatible tuple type for conversion: %s", convert.MismatchMessage(got, want))
				case got.IsObjectType() && want.IsObjectType():
					return cty.NilType, function.NewArgErrorf(0, "incompatible object type for conversion: %s", convert.MismatchMessage(got, want))
				}
				return cty.NilType, function.NewArgErrorf(0, "cannot convert %s to %s", got.FriendlyName(), want.FriendlyNameForConstraint())
			}
			return want, nil
		},
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			if !args[0].IsKnown() {
				return cty.UnknownVal(retType).WithSameMarks(args[0]), nil
			}
			v, err := convert.Convert(args[0], retType)
			if err == nil {
				return v, nil
			}
			raw, _ := args[0].UnmarkDeep()
			got := raw.Type()
			what := "string"
			if got == cty.String && !raw.IsNull() {
				what = strconv.Quote(raw.AsString())
			}
			switch {
			case containsMark(args[0], t.o.SensitiveMark):
				return cty.NilVal, function.NewArgErrorf(0, "cannot convert this sensitive %s to %s", got.FriendlyName(), want.FriendlyNameForConstraint())
			case got == cty.String && want == cty.Bool:
				return cty.NilVal, function.NewArgErrorf(0, `cannot convert %s to bool; only the strings "true" or "false" are allowed`, what)
			case got == cty.String && want == cty.Number:
				return cty.NilVal, function.NewArgErrorf(0, `cannot convert %s to number; given string must be a decimal representation of a number`, what)
			}
			return cty.NilVal, function.NewArgErrorf(0, "cannot convert %s to %s", got.FriendlyName(), want.FriendlyNameForConstraint())
		},
	})
}

func sameType(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil }

// sensitiveFunc marks its argument sensitive.
func (t *table) sensitiveFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{anyParam("value")},
		Type:   sameType,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return args[0].Mark(t.o.SensitiveMark), nil
		},
	})
}

// nonsensitiveFunc removes the sensitive mark of its argument (not of the
// values inside it). As in Terraform 1.11, a value that is not sensitive
// is no error.
func (t *table) nonsensitiveFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{anyParam("value")},
		Type:   sameType,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v, m := args[0].Unmark()
			delete(m, t.o.SensitiveMark)
			return v.WithMarks(m), nil
		},
	})
}

// isSensitiveFunc is true when its argument itself is sensitive.
func (t *table) isSensitiveFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{anyParam("value")},
		Type:   function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			switch v := args[0]; {
			case v.HasMark(t.o.SensitiveMark):
				return cty.True, nil
			case !v.IsKnown():
				return cty.UnknownVal(cty.Bool), nil
			}
			return cty.False, nil
		},
	})
}

// ephemeralAsNullFunc replaces every ephemeral value inside its argument
// by a null (unknown stays unknown) of the same type, without the mark.
func (t *table) ephemeralAsNullFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{anyParam("value")},
		Type:   sameType,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.Transform(args[0], func(_ cty.Path, v cty.Value) (cty.Value, error) {
				_, marks := v.Unmark()
				if _, ok := marks[t.o.EphemeralMark]; !ok {
					return v, nil
				}
				delete(marks, t.o.EphemeralMark)
				if !v.IsKnown() {
					return cty.UnknownVal(v.Type()).WithMarks(marks), nil
				}
				return cty.NullVal(v.Type()).WithMarks(marks), nil
			})
		},
	})
}

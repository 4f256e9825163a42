package funcs

import (
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

func refineNotNull(b *cty.RefinementBuilder) *cty.RefinementBuilder { return b.NotNull() }

// lengthFunc counts the elements of a collection or structure, or the
// characters (grapheme clusters) of a string.
var lengthFunc = function.New(&function.Spec{
	Params: []function.Parameter{{
		Name: "value", Type: cty.DynamicPseudoType,
		AllowDynamicType: true, AllowUnknown: true, AllowMarked: true,
	}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		if ty == cty.String || ty == cty.DynamicPseudoType || ty.IsCollectionType() ||
			ty.IsTupleType() || ty.IsObjectType() {
			return cty.Number, nil
		}
		return cty.Number, errors.New("argument must be a string, a collection type, or a structural type")
	},
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		ty := v.Type()
		switch {
		case ty == cty.DynamicPseudoType:
			return cty.UnknownVal(cty.Number).WithMarks(v.Marks()), nil
		case ty.IsTupleType():
			return cty.NumberIntVal(int64(len(ty.TupleElementTypes()))).WithMarks(v.Marks()), nil
		case ty.IsObjectType():
			return cty.NumberIntVal(int64(len(ty.AttributeTypes()))).WithMarks(v.Marks()), nil
		case ty == cty.String:
			return stdlib.Strlen(v)
		default:
			return v.Length(), nil
		}
	},
})

// allTrueFunc is true when every element of a list of bools is true.
var allTrueFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:         function.StaticReturnType(cty.Bool),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		for it := args[0].ElementIterator(); it.Next(); {
			_, v := it.Element()
			switch {
			case !v.IsKnown():
				return cty.UnknownVal(cty.Bool), nil
			case v.IsNull() || v.False():
				return cty.False, nil
			}
		}
		return cty.True, nil
	},
})

// anyTrueFunc is true when an element of a list of bools is true.
var anyTrueFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "list", Type: cty.List(cty.Bool)}},
	Type:         function.StaticReturnType(cty.Bool),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		unknown := false
		for it := args[0].ElementIterator(); it.Next(); {
			_, v := it.Element()
			switch {
			case !v.IsKnown():
				unknown = true
			case !v.IsNull() && v.True():
				return cty.True, nil
			}
		}
		if unknown {
			return cty.UnknownVal(cty.Bool), nil
		}
		return cty.False, nil
	},
})

// coalesceFunc returns the first argument that is neither null nor, when
// the arguments unify to strings, the empty string.
var coalesceFunc = function.New(&function.Spec{
	VarParam: &function.Parameter{
		Name: "vals", Type: cty.DynamicPseudoType,
		AllowUnknown: true, AllowDynamicType: true, AllowNull: true,
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		tys := make([]cty.Type, len(args))
		for i, a := range args {
			tys[i] = a.Type()
		}
		ty, _ := convert.UnifyUnsafe(tys)
		if ty == cty.NilType {
			return cty.NilType, errors.New("all arguments must have the same type")
		}
		return ty, nil
	},
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		for _, a := range args {
			v, err := convert.Convert(a, retType)
			if err != nil {
				return cty.NilVal, err
			}
			switch {
			case !v.IsKnown():
				return cty.UnknownVal(retType), nil
			case v.IsNull():
				continue
			case retType == cty.String && v.RawEquals(cty.StringVal("")):
				continue
			}
			return v, nil
		}
		return cty.NilVal, errors.New("no non-null, non-empty-string arguments")
	},
})

// indexFunc finds the index of a value in a list or tuple.
var indexFunc = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "list", Type: cty.DynamicPseudoType},
		{Name: "value", Type: cty.DynamicPseudoType},
	},
	Type:         function.StaticReturnType(cty.Number),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		list := args[0]
		if ty := list.Type(); !ty.IsListType() && !ty.IsTupleType() {
			return cty.NilVal, errors.New("argument must be a list or tuple")
		}
		if !list.IsKnown() {
			return cty.UnknownVal(cty.Number), nil
		}
		if list.LengthInt() == 0 {
			return cty.NilVal, errors.New("cannot search an empty list")
		}
		for it := list.ElementIterator(); it.Next(); {
			i, v := it.Element()
			eq, err := stdlib.Equal(v, args[1])
			if err != nil {
				return cty.NilVal, err
			}
			if !eq.IsKnown() {
				return cty.UnknownVal(cty.Number), nil
			}
			if eq.True() {
				return i, nil
			}
		}
		return cty.NilVal, errors.New("item not found")
	},
})

// lookupFunc reads a key of a map or an attribute of an object, with an
// optional default.
var lookupFunc = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "inputMap", Type: cty.DynamicPseudoType, AllowMarked: true, AllowUnknown: true},
		{Name: "key", Type: cty.String, AllowMarked: true, AllowUnknown: true},
	},
	VarParam: &function.Parameter{
		Name: "default", Type: cty.DynamicPseudoType,
		AllowUnknown: true, AllowDynamicType: true, AllowNull: true, AllowMarked: true,
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		if len(args) > 3 {
			return cty.NilType, fmt.Errorf("lookup() takes two or three arguments, got %d", len(args))
		}
		ty := args[0].Type()
		switch {
		case ty.IsObjectType():
			if !args[1].IsKnown() {
				return cty.DynamicPseudoType, nil
			}
			k, _ := args[1].Unmark()
			key := k.AsString()
			if ty.HasAttribute(key) {
				return args[0].GetAttr(key).Type(), nil
			}
			if len(args) == 3 {
				return args[2].Type(), nil
			}
			return cty.DynamicPseudoType, function.NewArgErrorf(0, "the given object has no attribute %q", key)
		case ty.IsMapType():
			if len(args) == 3 {
				if _, err := convert.Convert(args[2], ty.ElementType()); err != nil {
					return cty.NilType, function.NewArgErrorf(2, "the default value must have the same type as the map elements")
				}
			}
			return ty.ElementType(), nil
		}
		return cty.NilType, function.NewArgErrorf(0, "lookup() requires a map as the first argument")
	},
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		coll, collMarks := args[0].Unmark()
		key, keyMarks := args[1].Unmark()
		marks := []cty.ValueMarks{collMarks, keyMarks}
		if !coll.IsKnown() || !key.IsKnown() {
			return cty.UnknownVal(retType).WithMarks(marks...), nil
		}
		k := key.AsString()
		if coll.Type().IsObjectType() {
			if coll.Type().HasAttribute(k) {
				return coll.GetAttr(k).WithMarks(marks...), nil
			}
		} else if coll.HasIndex(cty.StringVal(k)) == cty.True {
			return coll.Index(cty.StringVal(k)).WithMarks(marks...), nil
		}
		if len(args) == 3 {
			d, err := convert.Convert(args[2], retType)
			if err != nil {
				return cty.NilVal, err
			}
			return d.WithMarks(marks...), nil
		}
		if len(keyMarks) > 0 {
			return cty.DynamicVal, errors.New("lookup failed to find key (sensitive value)")
		}
		return cty.DynamicVal, fmt.Errorf("lookup failed to find key %s", k)
	},
})

// matchkeysFunc keeps the values whose key (same index) is in searchset.
var matchkeysFunc = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "values", Type: cty.List(cty.DynamicPseudoType)},
		{Name: "keys", Type: cty.List(cty.DynamicPseudoType)},
		{Name: "searchset", Type: cty.List(cty.DynamicPseudoType)},
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		if ty, _ := convert.UnifyUnsafe([]cty.Type{args[1].Type(), args[2].Type()}); ty == cty.NilType {
			return cty.NilType, errors.New("keys and searchset must be of the same type")
		}
		return args[0].Type(), nil
	},
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		elem := retType.ElementType()
		if !args[0].IsKnown() {
			return cty.UnknownVal(retType), nil
		}
		if args[0].LengthInt() != args[1].LengthInt() {
			return cty.ListValEmpty(elem), errors.New("length of keys and values should be equal")
		}
		ty, _ := convert.UnifyUnsafe([]cty.Type{args[1].Type(), args[2].Type()})
		keys, _ := convert.Convert(args[1], ty)
		search, _ := convert.Convert(args[2], ty)
		if search.LengthInt() == 0 {
			return cty.ListValEmpty(elem), nil
		}
		if !args[0].IsWhollyKnown() || !keys.IsWhollyKnown() {
			return cty.UnknownVal(retType), nil
		}
		var out []cty.Value
		values := args[0].AsValueSlice()
		i := 0
		for it := keys.ElementIterator(); it.Next(); i++ {
			_, k := it.Element()
			for sit := search.ElementIterator(); sit.Next(); {
				_, s := sit.Element()
				eq, err := stdlib.Equal(k, s)
				if err != nil {
					return cty.NilVal, err
				}
				if !eq.IsKnown() {
					return cty.ListValEmpty(elem), nil
				}
				if eq.True() {
					out = append(out, values[i])
					break
				}
			}
		}
		if len(out) == 0 {
			return cty.ListValEmpty(elem), nil
		}
		return cty.ListVal(out), nil
	},
})

var errOne = function.NewArgErrorf(0, "must be a list, set, or tuple value with either zero or one elements")

// oneFunc returns the only element of a collection, or null when it is
// empty.
var oneFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		switch {
		case ty.IsListType() || ty.IsSetType():
			return ty.ElementType(), nil
		case ty.IsTupleType():
			switch etys := ty.TupleElementTypes(); len(etys) {
			case 0:
				return cty.DynamicPseudoType, nil
			case 1:
				return etys[0], nil
			}
		}
		return cty.NilType, errOne
	},
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		v := args[0]
		n := v.Length()
		if !n.IsKnown() {
			return cty.UnknownVal(retType), nil
		}
		switch v.LengthInt() {
		case 0:
			return cty.NullVal(retType), nil
		case 1:
			return v.AsValueSlice()[0], nil
		}
		return cty.NilVal, errOne
	},
})

var errSumType = function.NewArgErrorf(0, "argument must be list, set, or tuple of number values")

// sumFunc adds the numbers of a list, set or tuple.
var sumFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "list", Type: cty.DynamicPseudoType}},
	Type:         function.StaticReturnType(cty.Number),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (ret cty.Value, err error) {
		l := args[0]
		if !l.CanIterateElements() {
			return cty.NilVal, function.NewArgErrorf(0, "cannot sum noniterable")
		}
		if l.LengthInt() == 0 {
			return cty.NilVal, function.NewArgErrorf(0, "cannot sum an empty list")
		}
		ty := l.Type()
		if !ty.IsListType() && !ty.IsSetType() && !ty.IsTupleType() {
			return cty.NilVal, function.NewArgErrorf(0, "argument must be list, set, or tuple. Received %s", ty.FriendlyName())
		}
		if !l.IsWhollyKnown() {
			return cty.UnknownVal(cty.Number), nil
		}
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(big.ErrNaN); !ok {
					panic(r)
				}
				ret, err = cty.NilVal, errors.New("can't compute sum of opposing infinities")
			}
		}()
		var s cty.Value
		for i, v := range l.AsValueSlice() {
			if v.IsNull() {
				return cty.NilVal, errSumType
			}
			n, err := convert.Convert(v, cty.Number)
			if err != nil {
				return cty.NilVal, errSumType
			}
			if i == 0 {
				s = n
			} else {
				s = s.Add(n)
			}
		}
		return s, nil
	},
})

// transposeFunc swaps the keys and values of a map of lists of strings.
var transposeFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "values", Type: cty.Map(cty.List(cty.String))}},
	Type:         function.StaticReturnType(cty.Map(cty.List(cty.String))),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		in := args[0]
		if !in.IsWhollyKnown() {
			return cty.UnknownVal(retType), nil
		}
		out := map[string][]string{}
		for it := in.ElementIterator(); it.Next(); {
			k, l := it.Element()
			for lit := l.ElementIterator(); lit.Next(); {
				_, v := lit.Element()
				if v.IsNull() {
					return cty.MapValEmpty(cty.List(cty.String)), errors.New("input must be a map of lists of strings")
				}
				out[v.AsString()] = append(out[v.AsString()], k.AsString())
			}
		}
		if len(out) == 0 {
			return cty.MapValEmpty(cty.List(cty.String)), nil
		}
		m := make(map[string]cty.Value, len(out))
		for k, ks := range out {
			slices.Sort(ks)
			vals := make([]cty.Value, len(ks))
			for i, s := range ks {
				vals[i] = cty.StringVal(s)
			}
			m[k] = cty.ListVal(vals)
		}
		return cty.MapVal(m), nil
	},
})

// elementFunc is stdlib's element refusing negative indexes, which
// Terraform 1.11 (an older go-cty) fails on.
var elementFunc = function.New(&function.Spec{
	Params:       stdlib.ElementFunc.Params(),
	Type:         func(args []cty.Value) (cty.Type, error) { return stdlib.ElementFunc.ReturnTypeForValues(args) },
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		if i := args[1]; i.IsKnown() && !i.IsNull() && i.LessThan(cty.Zero).True() {
			return cty.DynamicVal, function.NewArgErrorf(1, "cannot use element function with a negative index")
		}
		return stdlib.ElementFunc.Call(args)
	},
})

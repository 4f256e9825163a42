package config

import (
	"fmt"
	"math"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
)

// resultSize is an estimate, made from a function's arguments, of the
// result it would build: elems, the elements of the collection it
// returns; bytes, the bytes of the strings in it;
// cost, what it counts against MaxBuiltBytes.
type resultSize struct {
	elems, bytes, cost int64
	deep               bool // JSON nested deeper than MaxNesting
}

// sizeOf estimates the results of the functions that build something.
// Functions missing here return a value of their arguments or a scalar.
// The estimates err on the large side and stop counting once over the
// limits, so that they cost no more than the result they guard.
var sizeOf = map[string]func(args []cty.Value) resultSize{
	"range": func(args []cty.Value) resultSize { return elems(rangeLength(args)) },
	"setproduct": func(args []cty.Value) resultSize {
		n := int64(1)
		for _, a := range args {
			n = satMul(n, length(a))
		}
		s := elems(n)
		s.cost = satMul(n, int64(len(args)+1)*elementCost)
		return s
	},
	"concat":   sumLengths,
	"merge":    sumLengths,
	"setunion": sumLengths,
	"flatten":  func(args []cty.Value) resultSize { return elems(leaves(args[0], MaxCollectionElements+1)) },
	"chunklist": func(args []cty.Value) resultSize {
		n, chunks := length(args[0]), int64(1)
		if size := numberArg(args[1]); size != nil && size.Sign() > 0 {
			if f, _ := size.Float64(); f >= 1 {
				chunks = int64(math.Ceil(float64(n) / f))
			}
		}
		return resultSize{elems: chunks, cost: satMul(satAdd(n, chunks), elementCost)}
	},
	"keys": firstLength, "values": firstLength, "zipmap": firstLength, "reverse": firstLength,
	"sort": firstLength, "compact": firstLength, "slice": firstLength, "coalescelist": firstLength,
	"setintersection": firstLength, "setsubtract": firstLength,
	"distinct": firstLength, // it compares every pair of elements
	"toset":    func(args []cty.Value) resultSize { return deepSize(args[0]) },
	"tolist":   func(args []cty.Value) resultSize { return deepSize(args[0]) },
	"tomap":    func(args []cty.Value) resultSize { return deepSize(args[0]) },
	"split": func(args []cty.Value) resultSize {
		sep, str := stringArg(args[0]), stringArg(args[1])
		n := int64(strings.Count(str, sep)) + 1
		return resultSize{elems: n, bytes: int64(len(str)), cost: n*elementCost + int64(len(str))}
	},
	"join": func(args []cty.Value) resultSize {
		sep := int64(len(stringArg(args[0])))
		var b, n int64
		for _, l := range args[1:] {
			b = satAdd(b, stringBytes(l, MaxFunctionStringBytes+1))
			n = satAdd(n, length(l))
		}
		return bytesOf(satAdd(b, satMul(sep, n)))
	},
	"format":     func(args []cty.Value) resultSize { return bytesOf(formatBytes(args, 1)) },
	"formatlist": formatListSize,
	"replace": func(args []cty.Value) resultSize {
		str, sub, repl := stringArg(args[0]), stringArg(args[1]), stringArg(args[2])
		if re, ok := replacePattern(sub); ok {
			return bytesOf(regexReplaceBytes(str, re, repl))
		}
		if sub == "" {
			return bytesOf(satAdd(int64(len(str)), satMul(int64(len(str))+1, int64(len(repl)))))
		}
		n := int64(strings.Count(str, sub))
		return bytesOf(satAdd(int64(len(str)), satMul(n, int64(len(repl)))))
	},
	"regex_replace": func(args []cty.Value) resultSize {
		return bytesOf(regexReplaceBytes(stringArg(args[0]), stringArg(args[1]), stringArg(args[2])))
	},
	"regexall": func(args []cty.Value) resultSize {
		n, b := regexMatches(stringArg(args[0]), stringArg(args[1]))
		return resultSize{elems: n, bytes: b, cost: satAdd(satMul(n, elementCost), b)}
	},
	"regex": func(args []cty.Value) resultSize { return bytesOf(int64(len(stringArg(args[1])))) },
	"indent": func(args []cty.Value) resultSize {
		str := stringArg(args[1])
		spaces := int64(0)
		if bf := numberArg(args[0]); bf != nil {
			if f, _ := bf.Float64(); f > 0 {
				spaces = int64(math.Min(f, MaxFunctionStringBytes+1))
			}
		}
		return bytesOf(satAdd(int64(len(str)), satMul(spaces, int64(strings.Count(str, "\n")))))
	},
	"strrev": firstStringBytes,
	"upper":  func(args []cty.Value) resultSize { return bytesOf(satMul(int64(len(stringArg(args[0]))), 3)) },
	"lower":  func(args []cty.Value) resultSize { return bytesOf(satMul(int64(len(stringArg(args[0]))), 3)) },
	"title":  func(args []cty.Value) resultSize { return bytesOf(satMul(int64(len(stringArg(args[0]))), 3)) },
	"chomp":  firstStringBytes, "trim": firstStringBytes, "trimprefix": firstStringBytes,
	"trimsuffix": firstStringBytes, "trimspace": firstStringBytes, "substr": firstStringBytes,
	"base64encode": func(args []cty.Value) resultSize {
		return bytesOf(satMul(int64(len(stringArg(args[0])))+2, 2))
	},
	"jsonencode": func(args []cty.Value) resultSize { return bytesOf(jsonBytes(args[0], MaxFunctionStringBytes+1)) },
	"jsondecode": func(args []cty.Value) resultSize { return jsonDecodeSize(stringArg(args[0])) },
	"yamlencode": encodedSize, "provider::terraform::encode_tfvars": encodedSize,
	"provider::terraform::encode_expr":   encodedSize,
	"yamldecode":                         func(args []cty.Value) resultSize { return yamlDecodeSize(stringArg(args[0])) },
	"provider::terraform::decode_tfvars": func(args []cty.Value) resultSize { return tfvarsDecodeSize(stringArg(args[0])) },
	"base64gzip": func(args []cty.Value) resultSize {
		n := int64(len(stringArg(args[0])))
		return bytesOf(base64Bytes(satAdd(satAdd(n, n/100), 64)))
	},
	"base64decode": func(args []cty.Value) resultSize { return bytesOf(int64(len(stringArg(args[0])))*3/4 + 3) },
	"textencodebase64": func(args []cty.Value) resultSize {
		return bytesOf(base64Bytes(satMul(int64(len(stringArg(args[0]))), 4)))
	},
	"textdecodebase64": func(args []cty.Value) resultSize { return bytesOf(satMul(int64(len(stringArg(args[0])))*3/4+3, 3)) },
	"urlencode":        func(args []cty.Value) resultSize { return bytesOf(satMul(int64(len(stringArg(args[0]))), 3)) },
	// A hash is a fixed-size string whatever it hashes (sha512's hex is the
	// longest, 128 bytes): hashing a large value is time, which the plan's
	// deadline bounds, not a value built.
	"base64sha256": hashSize, "base64sha512": hashSize, "md5": hashSize,
	"sha1": hashSize, "sha256": hashSize, "sha512": hashSize,
	"transpose": func(args []cty.Value) resultSize {
		n := int64(0)
		if v, ok := known(args[0]); ok && v.CanIterateElements() {
			for it := v.ElementIterator(); it.Next() && n <= MaxCollectionElements; {
				_, e := it.Element()
				n = satAdd(n, length(e))
			}
		}
		return resultSize{elems: n, cost: satMul(satMul(n, 2), elementCost)}
	},
	"matchkeys": firstLength,
	"csvdecode": func(args []cty.Value) resultSize {
		s := stringArg(args[0])
		n := int64(strings.Count(s, ",") + strings.Count(s, "\n") + 1)
		return resultSize{elems: n, bytes: int64(len(s)), cost: satAdd(satMul(n, elementCost), int64(len(s)))}
	},
}

// numberResults are the functions that can make a number out of range;
// their results are checked with numberOK.
var numberResults = map[string]bool{
	"pow": true, "parseint": true, "tonumber": true, "jsondecode": true, "log": true, "sum": true,
	"yamldecode": true, "provider::terraform::decode_tfvars": true,
}

// checkedAfter are the functions whose results no estimate from their
// arguments bounds (what they read from files, what a template renders):
// the result is checked against the function limits once it is built,
// and counted against MaxBuiltBytes. Their work before is bounded
// otherwise: files by MaxTemplateFileSize, templates by their guards.
var checkedAfter = map[string]bool{
	"file": true, "filebase64": true, "fileset": true, "templatefile": true, "templatestring": true,
}

// limitFunc returns f refusing results over the function limits, checked
// before f builds them (and numbers out of range, after). The check runs
// before f's own type checking: converting an argument can cost as much
// as building the result. Arguments f wants as a list, set or map of any
// type are converted by the wrapper (see fastConvert), not by hcl.
func limitFunc(name string, f function.Function) function.Function {
	est := sizeOf[name]
	checkNumbers := numberResults[name]
	after := checkedAfter[name]
	convs := argConversions(name, f)
	if est == nil && !checkNumbers && !after && convs == nil {
		return f
	}
	conv := func(args []cty.Value) ([]cty.Value, error) {
		if convs == nil {
			return args, nil
		}
		out := make([]cty.Value, len(args))
		for i, a := range args {
			ty := convs[min(i, len(convs)-1)]
			if ty == cty.NilType {
				out[i] = a
				continue
			}
			v, err := fastConvert(a, ty)
			if err != nil {
				return nil, function.NewArgError(i, err)
			}
			out[i] = v
		}
		return out, nil
	}
	before := func(args []cty.Value) error {
		if pat, str, ok := regexArgs(name, args); ok {
			// Go's regexp runs in time linear in pattern × string, but
			// that product can be hours, and no context can stop a match.
			if work := satMul(int64(len(pat)), int64(len(str))); work > MaxRegexWork {
				return fmt.Errorf("a pattern of %d bytes over a string of %d bytes is too much work (their product is %d; at most %d are allowed): use a shorter pattern or split the string", len(pat), len(str), work, int64(MaxRegexWork))
			}
		}
		if est != nil {
			if err := est(args).check(); err != nil {
				return err
			}
		}
		if name == "distinct" {
			if n := length(args[0]); n > MaxDistinctElements {
				return fmt.Errorf("distinct compares every pair of elements; it takes at most %d elements, not %d", MaxDistinctElements, n)
			}
		}
		if name == "parseint" || name == "tonumber" {
			// Reading a number of a million digits takes long already.
			if s := stringArg(args[0]); len(s) > 4*MaxNumberDigits {
				return fmt.Errorf("the number is %d characters long; numbers must be smaller than 1e%d", len(s), MaxNumberDigits)
			}
		}
		return nil
	}
	// Arguments this wrapper converts come as they are: hcl converts
	// arguments to the types of the parameters before the call.
	permissive := func(p function.Parameter, convert bool) function.Parameter {
		p.AllowMarked, p.AllowUnknown, p.AllowNull, p.AllowDynamicType = true, true, true, true
		if convert {
			p.Type = cty.DynamicPseudoType
		}
		return p
	}
	converted := func(i int) bool { return convs != nil && convs[min(i, len(convs)-1)] != cty.NilType }
	spec := &function.Spec{Description: f.Description()}
	for i, p := range f.Params() {
		spec.Params = append(spec.Params, permissive(p, converted(i)))
	}
	if vp := f.VarParam(); vp != nil {
		p := permissive(*vp, converted(len(spec.Params)))
		spec.VarParam = &p
	}
	spec.Type = func(args []cty.Value) (cty.Type, error) {
		args, err := conv(args)
		if err != nil {
			return cty.NilType, err
		}
		if err := before(args); err != nil {
			return cty.NilType, err
		}
		return f.ReturnTypeForValues(args)
	}
	spec.Impl = func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		args, err := conv(args)
		if err != nil {
			return cty.NilVal, err
		}
		v, err := f.Call(args)
		if err == nil && checkNumbers && badNumber(v) {
			return cty.NilVal, fmt.Errorf("the result is out of range: numbers must be smaller than 1e%d (and, unless zero, larger than 1e-%d) in magnitude", MaxNumberDigits, MaxNumberDigits)
		}
		if err == nil && after {
			if err := builtSize(v).check(); err != nil {
				return cty.NilVal, err
			}
		}
		return v, err
	}
	return function.New(spec)
}

// argConversions is, for the functions whose parameters are collections
// of any type (and tolist, toset, tomap), the type to convert each
// argument to (cty.NilType: none; the last stands for the variadic ones);
// nil for the others.
func argConversions(name string, f function.Function) []cty.Type {
	switch name {
	case "tolist":
		return []cty.Type{cty.List(cty.DynamicPseudoType)}
	case "toset":
		return []cty.Type{cty.Set(cty.DynamicPseudoType)}
	case "tomap":
		return []cty.Type{cty.Map(cty.DynamicPseudoType)}
	}
	ps := f.Params()
	if vp := f.VarParam(); vp != nil {
		ps = append(ps, *vp)
	}
	var out []cty.Type
	any := false
	for _, p := range ps {
		if p.Type.IsCollectionType() && p.Type.ElementType() == cty.DynamicPseudoType {
			out = append(out, p.Type)
			any = true
		} else {
			out = append(out, cty.NilType)
		}
	}
	if !any {
		return nil
	}
	return out
}

// fastConvert converts v to ty, a list, set or map of any type, as
// convert.Convert does; but a tuple (or object) whose elements all have
// one type is converted without unifying their types pair by pair, which
// go-cty does at a cost that grows with the square of their number.
func fastConvert(v cty.Value, ty cty.Type) (cty.Value, error) {
	u, marks := v.Unmark()
	if !u.IsKnown() || u.IsNull() || u.ContainsMarked() {
		return convert.Convert(v, ty)
	}
	var elems []cty.Value
	switch {
	case (ty.IsListType() || ty.IsSetType()) && u.Type().IsTupleType() && u.LengthInt() > 0:
		elems = u.AsValueSlice()
	case ty.IsMapType() && u.Type().IsObjectType() && u.LengthInt() > 0:
		for _, e := range u.AsValueMap() {
			elems = append(elems, e)
		}
	default:
		return convert.Convert(v, ty)
	}
	first := elems[0].Type()
	if first == cty.DynamicPseudoType {
		return convert.Convert(v, ty)
	}
	for _, e := range elems[1:] {
		if !e.Type().Equals(first) {
			return convert.Convert(v, ty)
		}
	}
	switch {
	case ty.IsListType():
		return cty.ListVal(elems).WithMarks(marks), nil
	case ty.IsSetType():
		return cty.SetVal(elems).WithMarks(marks), nil
	}
	return cty.MapVal(u.AsValueMap()).WithMarks(marks), nil
}

// check refuses a result over the function limits.
func (s resultSize) check() error {
	switch {
	case s.deep:
		return fmt.Errorf("the JSON nests more than %d levels deep", MaxNesting)
	case s.elems > MaxCollectionElements:
		return fmt.Errorf("the result would have %d elements; functions may build collections of at most %d elements", s.elems, MaxCollectionElements)
	case s.bytes > MaxFunctionStringBytes:
		return fmt.Errorf("the result would be %d bytes long; functions may build strings of at most %d bytes", s.bytes, MaxFunctionStringBytes)
	}
	return nil
}

// wrapFunc returns a function with f's signature that runs before (when
// set) ahead of f's own type checking, and impl to call it: its
// parameters accept everything (marked, unknown, null, dynamic) so that
// impl can hand the arguments to f.Call as they are, and f handles them
// as it always does.
func wrapFunc(f function.Function, before func(args []cty.Value) error, impl func(args []cty.Value) (cty.Value, error)) function.Function {
	spec := permissiveSpec(f)
	spec.Type = func(args []cty.Value) (cty.Type, error) {
		if before != nil {
			if err := before(args); err != nil {
				return cty.NilType, err
			}
		}
		return f.ReturnTypeForValues(args)
	}
	spec.Impl = func(args []cty.Value, _ cty.Type) (cty.Value, error) { return impl(args) }
	return function.New(spec)
}

// permissiveSpec is the spec of a wrapper of f: f's parameters, each
// accepting everything (marked, unknown, null and dynamically typed
// values), so that the wrapper hands f's own Call the arguments as they
// are. The caller sets Type and Impl.
func permissiveSpec(f function.Function) *function.Spec {
	permissive := func(p function.Parameter) function.Parameter {
		p.AllowMarked, p.AllowUnknown, p.AllowNull, p.AllowDynamicType = true, true, true, true
		return p
	}
	spec := &function.Spec{Description: f.Description()}
	for _, p := range f.Params() {
		spec.Params = append(spec.Params, permissive(p))
	}
	if vp := f.VarParam(); vp != nil {
		p := permissive(*vp)
		spec.VarParam = &p
	}
	return spec
}

// hashSize is the result of a hash function: at most 128 bytes.
func hashSize([]cty.Value) resultSize { return bytesOf(128) }

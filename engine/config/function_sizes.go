package config

import (
	"math"
	"math/big"
	"regexp"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

func elems(n int64) resultSize { return resultSize{elems: n, cost: satMul(n, elementCost)} }

func bytesOf(n int64) resultSize { return resultSize{bytes: n, cost: satAdd(n, elementCost)} }

func sumLengths(args []cty.Value) resultSize {
	var n int64
	for _, a := range args {
		n = satAdd(n, length(a))
	}
	return elems(n)
}

func firstLength(args []cty.Value) resultSize { return elems(length(args[0])) }

func firstStringBytes(args []cty.Value) resultSize { return bytesOf(int64(len(stringArg(args[0])))) }

// known returns v unmarked at its top level, and whether it is known and
// not null.
func known(v cty.Value) (cty.Value, bool) {
	v, _ = v.Unmark()
	return v, v.IsKnown() && !v.IsNull()
}

// length is the number of elements of a known collection (0 otherwise).
func length(v cty.Value) int64 {
	v, ok := known(v)
	if !ok || !v.CanIterateElements() {
		return 0
	}
	return int64(v.LengthInt())
}

// stringArg is a known string argument ("" otherwise).
func stringArg(v cty.Value) string {
	v, ok := known(v)
	if !ok || v.Type() != cty.String {
		return ""
	}
	return v.AsString()
}

// numberArg is a known number argument (nil otherwise).
func numberArg(v cty.Value) *big.Float {
	v, ok := known(v)
	if !ok || v.Type() != cty.Number {
		return nil
	}
	return v.AsBigFloat()
}

// stringBytes sums the lengths of the strings in a collection, stopping
// once over max.
func stringBytes(v cty.Value, max int64) int64 {
	v, ok := known(v)
	if !ok || !v.CanIterateElements() {
		return 0
	}
	var n int64
	for it := v.ElementIterator(); it.Next() && n <= max; {
		_, e := it.Element()
		n += int64(len(stringArg(e)))
	}
	return n
}

// leaves counts the elements flatten would return, stopping once over max.
func leaves(v cty.Value, max int64) int64 {
	v, ok := known(v)
	if !ok || !v.CanIterateElements() || !(v.Type().IsListType() || v.Type().IsTupleType() || v.Type().IsSetType()) {
		return 1
	}
	var n int64
	for it := v.ElementIterator(); it.Next() && n <= max; {
		_, e := it.Element()
		n += leaves(e, max-n)
	}
	return n
}

// deepSize is the size of a copy of v: conversions rebuild every level.
func deepSize(v cty.Value) resultSize {
	return resultSize{elems: length(v), cost: inspect(v, MaxBuiltBytes+1).cost}
}

// rangeLength is the number of elements range(args...) returns, as cty's
// RangeFunc counts them.
func rangeLength(args []cty.Value) int64 {
	nums := make([]*big.Float, len(args))
	for i, a := range args {
		if nums[i] = numberArg(a); nums[i] == nil {
			return 0
		}
	}
	start, end, step := new(big.Float), (*big.Float)(nil), big.NewFloat(1)
	switch len(nums) {
	case 1:
		end = nums[0]
	case 2:
		start, end = nums[0], nums[1]
	case 3:
		start, end, step = nums[0], nums[1], nums[2]
	default:
		return 0
	}
	if len(nums) < 3 && end.Cmp(start) < 0 {
		step = big.NewFloat(-1)
	}
	if step.Sign() == 0 {
		return 0
	}
	q := new(big.Float).Quo(new(big.Float).Sub(end, start), step)
	if q.Sign() <= 0 {
		return 0
	}
	if q.Cmp(big.NewFloat(MaxCollectionElements+1)) > 0 {
		return MaxCollectionElements + 1
	}
	f, _ := q.Float64()
	return int64(math.Ceil(f))
}

// formatBytes estimates the length of format's result (times the rows of
// formatlist): the format, every width and precision it sets, and every
// argument written out.
func formatBytes(args []cty.Value, rows int64) int64 {
	f := stringArg(args[0])
	n := int64(len(f))
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		// The numbers of a verb (%-10.5s): widths and precisions.
		for i++; i < len(f) && strings.IndexByte("+-# 0123456789.*[]", f[i]) >= 0; i++ {
			if f[i] >= '1' && f[i] <= '9' {
				w := int64(0)
				for ; i < len(f) && f[i] >= '0' && f[i] <= '9'; i++ {
					w = satAdd(satMul(w, 10), int64(f[i]-'0'))
				}
				n = satAdd(n, w)
				i--
			}
		}
	}
	n = satMul(n, rows)
	for _, a := range args[1:] {
		n = satAdd(n, jsonBytes(a, MaxFunctionStringBytes+1))
	}
	return n
}

func formatListSize(args []cty.Value) resultSize {
	rows := int64(0)
	for _, a := range args[1:] {
		if v, ok := known(a); ok && (v.Type().IsListType() || v.Type().IsTupleType()) {
			if l := length(v); l > rows {
				rows = l
			}
		}
	}
	b := formatBytes(args, max(rows, 1))
	return resultSize{elems: rows, bytes: b, cost: satAdd(satMul(rows, elementCost), b)}
}

// jsonBytes estimates the length of v written as JSON (or by format's %v),
// stopping once over max: strings may need escaping (6 bytes a byte).
func jsonBytes(v cty.Value, max int64) int64 {
	v, ok := known(v)
	if !ok {
		return 4
	}
	switch {
	case v.Type() == cty.String:
		return satMul(int64(len(v.AsString())), 6) + 2
	case v.Type() == cty.Number:
		return numberTextBytes(v.AsBigFloat())
	case v.CanIterateElements():
		n := int64(2)
		for it := v.ElementIterator(); it.Next() && n <= max; {
			k, e := it.Element()
			n += jsonBytes(e, max-n) + 1
			if v.Type().IsMapType() || v.Type().IsObjectType() {
				n += jsonBytes(k, max-n) + 1
			}
		}
		return n
	}
	return 8
}

// numberTextBytes bounds the length of a number written as decimal text.
func numberTextBytes(bf *big.Float) int64 {
	if bf.IsInf() || bf.Sign() == 0 {
		return 4
	}
	exp := bf.MantExp(nil)
	if exp < 0 {
		exp = -exp
	}
	return int64(exp)*3/10 + 170 // decimal digits of the exponent, and of 512 bits of mantissa
}

// regexArgs are the pattern and the string of a call of a regular
// expression function.
func regexArgs(name string, args []cty.Value) (pattern, str string, ok bool) {
	switch {
	case (name == "regex" || name == "regexall") && len(args) == 2:
		return stringArg(args[0]), stringArg(args[1]), true
	case name == "regex_replace" && len(args) == 3:
		return stringArg(args[1]), stringArg(args[0]), true
	case name == "replace" && len(args) == 3:
		if re, ok := replacePattern(stringArg(args[1])); ok {
			return re, stringArg(args[0]), true
		}
	}
	return "", "", false
}

// regexReplaceBytes computes the length of regex_replace's result,
// stopping once over MaxFunctionStringBytes; more than
// MaxCollectionElements replacements count as over it. An invalid pattern
// is the function's own error to report.
func regexReplaceBytes(str, pattern, repl string) int64 {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return 0
	}
	n := int64(len(str))
	var buf []byte
	matches := re.FindAllStringSubmatchIndex(str, MaxCollectionElements+1)
	if len(matches) > MaxCollectionElements {
		return MaxFunctionStringBytes + 1
	}
	for _, m := range matches {
		buf = re.ExpandString(buf[:0], repl, str, m)
		n += int64(len(buf)) - int64(m[1]-m[0])
		if n > MaxFunctionStringBytes {
			break
		}
	}
	return n
}

// regexMatches counts the matches of regexall (at most one over the
// limit) and the bytes of their captures.
func regexMatches(pattern, str string) (n, bytes int64) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return 0, 0
	}
	for _, m := range re.FindAllStringSubmatchIndex(str, MaxCollectionElements+1) {
		n++
		for i := 0; i+1 < len(m); i += 2 {
			if m[i] >= 0 {
				bytes += int64(m[i+1] - m[i])
			}
		}
	}
	return n, bytes
}

// jsonDecodeSize estimates jsondecode's result from the JSON text: an
// element per value, at most one per byte. JSON nested deeper than
// MaxNesting counts as over every limit (go-cty decodes it recursively).
func jsonDecodeSize(s string) resultSize {
	depth, n := 0, int64(1)
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > MaxNesting {
				return resultSize{deep: true}
			}
		case c == ']' || c == '}':
			depth--
		case c == ',' || c == ':':
			n++
		}
	}
	return resultSize{elems: n, bytes: int64(len(s)), cost: satAdd(satMul(n, elementCost), int64(len(s)))}
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// numberOK reports whether a number is within MaxNumberDigits: zero,
// infinite, or between 1e-1000 and 1e1000 in magnitude. Writing a number
// as text takes time and space proportional to its exponent.
func numberOK(bf *big.Float) bool {
	if bf.IsInf() || bf.Sign() == 0 {
		return true
	}
	// |bf| < 2^exp; 2^3322 > 1e1000 > 2^3321.
	exp := bf.MantExp(nil)
	return exp >= -3321 && exp <= 3322
}

// badNumber reports whether v holds a known number out of range.
func badNumber(v cty.Value) bool { return inspect(v, math.MaxInt64).badNumber }

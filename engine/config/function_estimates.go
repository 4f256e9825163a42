package config

import (
	"strings"

	"github.com/zclconf/go-cty/cty"
	yaml "go.yaml.in/yaml/v3"
)

// The estimates of the Terraform functions that came with package funcs
// (see sizeOf).

// replacePattern is the regular expression of replace's substring written
// "/re/", as Terraform reads it.
func replacePattern(sub string) (string, bool) {
	if len(sub) > 1 && sub[0] == '/' && sub[len(sub)-1] == '/' {
		return sub[1 : len(sub)-1], true
	}
	return "", false
}

// base64Bytes is the length of n bytes in base64.
func base64Bytes(n int64) int64 { return satMul((n+2)/3, 4) }

// encodedSize estimates yamlencode's, encode_tfvars' and encode_expr's
// results: JSON's length, plus the indentation of each value by its depth
// (YAML and HCL indent where JSON need not).
func encodedSize(args []cty.Value) resultSize {
	return bytesOf(indentedBytes(args[0], 0, MaxFunctionStringBytes+1))
}

func indentedBytes(v cty.Value, depth, max int64) int64 {
	v, ok := known(v)
	if !ok || !v.CanIterateElements() {
		return satAdd(jsonBytes(v, max), 2*depth+8)
	}
	n := 2*depth + 8
	for it := v.ElementIterator(); it.Next() && n <= max; {
		k, e := it.Element()
		n = satAdd(n, indentedBytes(e, depth+1, max-n))
		if v.Type().IsMapType() || v.Type().IsObjectType() {
			n = satAdd(n, jsonBytes(k, max-n)+2)
		}
	}
	return n
}

// builtSize is the size of a value a function built: its elements (a
// collection's), the bytes of the longest string, and its cost.
func builtSize(v cty.Value) resultSize {
	info := inspect(v, MaxBuiltBytes+1)
	s := resultSize{elems: length(v), cost: info.cost, deep: info.deep}
	if u, ok := known(v); ok && u.Type() == cty.String {
		s.bytes = int64(len(u.AsString()))
	}
	return s
}

// yamlDecodeSize estimates yamldecode's result: one element per node of
// the document with every alias expanded, as decoding expands them (a few
// anchors referring to each other make a document of a few hundred bytes
// decode to billions of values), and the bytes of the scalars, expanded
// alike. The document is parsed into nodes, which leaves aliases as
// references, and each node's expanded size computed once.
func yamlDecodeSize(s string) resultSize {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		// yamldecode reports what is wrong; a document this parser
		// refuses and that has aliases is not bounded here: refused.
		if strings.ContainsRune(s, '*') {
			return resultSize{elems: MaxCollectionElements + 1}
		}
		return resultSize{elems: int64(len(s)), bytes: int64(len(s)), cost: satAdd(satMul(int64(len(s)), elementCost), int64(len(s)))}
	}
	type size struct{ elems, bytes int64 }
	memo := map[*yaml.Node]size{}
	open := map[*yaml.Node]bool{}
	deep := false
	var walk func(n *yaml.Node, depth int) size
	walk = func(n *yaml.Node, depth int) size {
		if n == nil {
			return size{}
		}
		if depth > MaxNesting {
			deep = true
			return size{}
		}
		if got, ok := memo[n]; ok {
			return got
		}
		if open[n] {
			// An alias inside its own anchor: refused by the decoder; as
			// large as can be here.
			return size{elems: MaxCollectionElements + 1}
		}
		open[n] = true
		defer delete(open, n)
		var out size
		switch n.Kind {
		case yaml.AliasNode:
			out = walk(n.Alias, depth+1)
		case yaml.ScalarNode:
			out = size{elems: 1, bytes: int64(len(n.Value))}
		default:
			out.elems = 1
			for _, c := range n.Content {
				cs := walk(c, depth+1)
				out.elems, out.bytes = satAdd(out.elems, cs.elems), satAdd(out.bytes, cs.bytes)
				if deep {
					break
				}
			}
		}
		memo[n] = out
		return out
	}
	got := walk(&doc, 0)
	if deep {
		return resultSize{deep: true}
	}
	// Strings are checked one by one by MaxFunctionStringBytes; their sum
	// counts against MaxBuiltBytes.
	longest := int64(len(s))
	return resultSize{elems: got.elems, bytes: min(longest, got.bytes), cost: satAdd(satMul(got.elems, elementCost), got.bytes)}
}

// tfvarsDecodeSize estimates decode_tfvars' result as jsondecode's: one
// element per separator, also "=" and newlines.
func tfvarsDecodeSize(s string) resultSize {
	r := jsonDecodeSize(s)
	if r.deep {
		return r
	}
	n := int64(strings.Count(s, "=") + strings.Count(s, "\n"))
	r.elems = satAdd(r.elems, n)
	r.cost = satAdd(r.cost, satMul(n, elementCost))
	return r
}

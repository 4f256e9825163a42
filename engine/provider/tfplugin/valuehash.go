package tfplugin

import (
	"encoding/binary"
	"hash"
	"math/big"
	"slices"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// The hash of a configuration (validKey), written straight into the hash
// as the value is walked. MessagePack (which it used before) built the
// whole encoding first; with the plans kept for their applies a resource
// is hashed three or four times, and that encoding was a tenth of what a
// Terraform provider's resource allocated in stackd.

// Tags of the value encoding: every value starts with one, so that two
// different values of one type never write the same bytes.
const (
	tagNull byte = iota + 1
	tagTrue
	tagFalse
	tagString
	tagInt
	tagNumber
	tagList    // length, then the elements
	tagSet     // length, then the elements in cty's order
	tagTuple   // length, then the elements
	tagMap     // length, then key and element, by key
	tagObject  // the attributes, by name
	tagDynamic // a value of a dynamically typed place: its type, then it
)

// valueWriter writes values into a hash, through a buffer.
type valueWriter struct {
	h   hash.Hash
	n   int
	buf [512]byte
}

// write adds b to the buffer, flushing it to the hash when full.
func (w *valueWriter) write(b []byte) {
	for len(b) > 0 {
		if w.n == len(w.buf) {
			w.flush()
		}
		c := copy(w.buf[w.n:], b)
		w.n += c
		b = b[c:]
	}
}

func (w *valueWriter) writeString(s string) {
	for len(s) > 0 {
		if w.n == len(w.buf) {
			w.flush()
		}
		c := copy(w.buf[w.n:], s)
		w.n += c
		s = s[c:]
	}
}

func (w *valueWriter) flush() {
	w.h.Write(w.buf[:w.n])
	w.n = 0
}

// sum flushes the buffer and appends the hash to b.
func (w *valueWriter) sum(b []byte) []byte {
	w.flush()
	return w.h.Sum(b)
}

func (w *valueWriter) tag(t byte) { w.write([]byte{t}) }

func (w *valueWriter) uvarint(t byte, n uint64) {
	var b [binary.MaxVarintLen64 + 1]byte
	b[0] = t
	w.write(b[:1+binary.PutUvarint(b[1:], n)])
}

func (w *valueWriter) varint(t byte, n int64) {
	var b [binary.MaxVarintLen64 + 1]byte
	b[0] = t
	w.write(b[:1+binary.PutVarint(b[1:], n)])
}

func (w *valueWriter) str(t byte, s string) {
	w.uvarint(t, uint64(len(s)))
	w.writeString(s)
}

// value writes v, a wholly known unmarked value of type ty (the place's
// type: cty.DynamicPseudoType takes any); ok is false for a value that
// cannot be hashed (unknown, marked, a capsule), which is then not kept.
func (w *valueWriter) value(v cty.Value, ty cty.Type) bool {
	if !v.IsKnown() || v.IsMarked() {
		return false
	}
	if ty == cty.DynamicPseudoType {
		b, err := ctyjson.MarshalType(v.Type())
		if err != nil {
			return false
		}
		w.str(tagDynamic, string(b))
		ty = v.Type()
	}
	if v.IsNull() {
		w.tag(tagNull)
		return true
	}
	switch {
	case ty == cty.String:
		w.str(tagString, v.AsString())
	case ty == cty.Bool:
		if v.True() {
			w.tag(tagTrue)
		} else {
			w.tag(tagFalse)
		}
	case ty == cty.Number:
		bf := v.AsBigFloat()
		if i, acc := bf.Int64(); acc == big.Exact {
			w.varint(tagInt, i)
		} else {
			w.str(tagNumber, bf.Text('g', -1))
		}
	case ty.IsListType() || ty.IsSetType():
		t := tagList
		if ty.IsSetType() {
			t = tagSet
		}
		w.uvarint(t, uint64(v.LengthInt()))
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			if !w.value(ev, ty.ElementType()) {
				return false
			}
		}
	case ty.IsTupleType():
		w.uvarint(tagTuple, uint64(v.LengthInt()))
		for i, ety := range ty.TupleElementTypes() {
			if !w.value(v.Index(cty.NumberIntVal(int64(i))), ety) {
				return false
			}
		}
	case ty.IsMapType():
		w.uvarint(tagMap, uint64(v.LengthInt()))
		for it := v.ElementIterator(); it.Next(); { // by key
			k, ev := it.Element()
			w.str(tagString, k.AsString())
			if !w.value(ev, ty.ElementType()) {
				return false
			}
		}
	case ty.IsObjectType():
		return w.object(v, ty, nil)
	default:
		return false // capsules
	}
	return true
}

// object writes the attributes of v, an object of type ty, in the order
// of names (nil: sorted here).
func (w *valueWriter) object(v cty.Value, ty cty.Type, names []string) bool {
	if names == nil {
		names = sortedAttributes(ty)
	}
	w.uvarint(tagObject, uint64(len(names)))
	for _, name := range names {
		w.str(tagString, name)
		if !w.value(v.GetAttr(name), ty.AttributeType(name)) {
			return false
		}
	}
	return true
}

// sortedAttributes are the attribute names of the object type ty, sorted.
func sortedAttributes(ty cty.Type) []string {
	atys := ty.AttributeTypes()
	names := make([]string, 0, len(atys))
	for name := range atys {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

package tfplugin

import (
	"errors"
	"fmt"

	"github.com/zclconf/go-cty/cty"
)

// ProviderSchema is what GetProviderSchema answered, converted.
type ProviderSchema struct {
	// Provider is the schema of the provider block (never nil).
	Provider *Schema
	// ProviderMeta is the schema of a module's provider_meta block, nil if
	// the provider declares none.
	ProviderMeta *Schema
	// ResourceTypes and DataSources are keyed by type name ("aws_s3_bucket").
	ResourceTypes map[string]*Schema
	DataSources   map[string]*Schema
	// Identities are the resource types' identity schemas (resource
	// identity, Terraform 1.12+), by type name; none for older providers.
	Identities map[string]*IdentitySchema
	// PlanDestroy: the provider wants PlanResourceChange called for destroy
	// plans too (proposed new state null).
	PlanDestroy bool
	// Diagnostics are the warnings GetProviderSchema reported.
	Diagnostics Diagnostics
}

// IdentitySchema is a resource type's identity: the attributes by which
// its provider finds its object (ImportResourceState with an identity).
type IdentitySchema struct {
	Version    int64
	Attributes map[string]cty.Type
}

// identityAttribute is an attribute of an identity schema as either
// protocol's generated code has it.
type identityAttribute interface {
	GetName() string
	GetType() []byte
}

// identitySchema converts the identity schema of typeName (either
// protocol's attributes, whose types are JSON type specs).
func identitySchema[A identityAttribute](typeName string, version int64, attrs []A) (*IdentitySchema, error) {
	is := &IdentitySchema{Version: version, Attributes: make(map[string]cty.Type, len(attrs))}
	for _, a := range attrs {
		ty, err := parseType(a.GetType())
		if err != nil {
			return nil, fmt.Errorf("identity of %s: attribute %s: %w", typeName, a.GetName(), err)
		}
		is.Attributes[a.GetName()] = ty
	}
	return is, nil
}

// ImpliedType is the object type of the identity's values.
func (s *IdentitySchema) ImpliedType() cty.Type { return cty.Object(s.Attributes) }

// Schema is one versioned block schema: a resource type, a data source or
// the provider configuration.
type Schema struct {
	// Version of a resource type's state schema; a stored state of a lower
	// version goes through UpgradeResourceState.
	Version int64
	Block   *Block
}

// NestingMode says how a nested block or a nested attribute repeats.
type NestingMode int

const (
	// NestingSingle is one object, or null.
	NestingSingle NestingMode = iota + 1
	// NestingGroup is one object that is never null (blocks only): an
	// absent block is an object of null attributes.
	NestingGroup
	// NestingList is a list of objects.
	NestingList
	// NestingSet is a set of objects.
	NestingSet
	// NestingMap is a map of objects keyed by the block label.
	NestingMap
)

func (m NestingMode) String() string {
	switch m {
	case NestingSingle:
		return "single"
	case NestingGroup:
		return "group"
	case NestingList:
		return "list"
	case NestingSet:
		return "set"
	case NestingMap:
		return "map"
	default:
		return "invalid"
	}
}

// Block is a configuration block: attributes and nested blocks.
type Block struct {
	Attributes  map[string]*Attribute
	BlockTypes  map[string]*NestedBlock
	Description string
	Deprecated  bool

	// implied is ImpliedType, kept by seal once the schema is complete:
	// every call of a resource converts and encodes values against it,
	// and building it anew allocated more than any other part of a call.
	implied cty.Type
}

// seal keeps the implied types of b and its nested blocks. A schema is
// sealed once, before it is shared (Client.Schema); a Block made
// otherwise computes its type at every ImpliedType, as before.
func (b *Block) seal() {
	if b == nil {
		return
	}
	for _, nb := range b.BlockTypes {
		nb.Block.seal()
	}
	b.implied = cty.NilType
	b.implied = b.ImpliedType()
}

// seal keeps the implied types of every block of s.
func (s *ProviderSchema) seal() {
	for _, sc := range []*Schema{s.Provider, s.ProviderMeta} {
		if sc != nil {
			sc.Block.seal()
		}
	}
	for _, m := range []map[string]*Schema{s.ResourceTypes, s.DataSources} {
		for _, sc := range m {
			if sc != nil {
				sc.Block.seal()
			}
		}
	}
}

// Attribute is one attribute of a Block or of a nested attribute's Object.
// Exactly one of Type and NestedType is set.
type Attribute struct {
	// Type is the attribute's type (from the provider's cty JSON type);
	// cty.NilType when NestedType is set.
	Type cty.Type
	// NestedType is the object of a nested attribute (protocol 6 only).
	NestedType *Object

	Optional, Required, Computed, Sensitive bool
	// WriteOnly values are sent in configuration and never kept in state.
	WriteOnly   bool
	Deprecated  bool
	Description string
}

// Object is the type of a nested attribute (protocol 6): attributes nested
// as Nesting says.
type Object struct {
	Attributes map[string]*Attribute
	Nesting    NestingMode
}

// NestedBlock is a block type nested in a Block.
type NestedBlock struct {
	Block
	Nesting NestingMode
	// MinItems and MaxItems bound how many blocks a list or set takes;
	// 0 means no bound.
	MinItems, MaxItems int64
}

// ImpliedType is the object type of the values of b: the type values are
// encoded against on the wire, as Terraform derives it. A list or map of
// blocks that contains a dynamically typed attribute is
// cty.DynamicPseudoType (its elements may differ in type).
func (b *Block) ImpliedType() cty.Type {
	if b == nil {
		return cty.EmptyObject
	}
	if b.implied != cty.NilType {
		return b.implied
	}
	attrs := make(map[string]cty.Type, len(b.Attributes)+len(b.BlockTypes))
	for name, a := range b.Attributes {
		attrs[name] = a.ImpliedType()
	}
	for name, nb := range b.BlockTypes {
		ety := nb.Block.ImpliedType()
		switch nb.Nesting {
		case NestingSingle, NestingGroup:
			attrs[name] = ety
		case NestingList:
			if ety.HasDynamicTypes() {
				attrs[name] = cty.DynamicPseudoType
			} else {
				attrs[name] = cty.List(ety)
			}
		case NestingSet:
			attrs[name] = cty.Set(ety)
		case NestingMap:
			if ety.HasDynamicTypes() {
				attrs[name] = cty.DynamicPseudoType
			} else {
				attrs[name] = cty.Map(ety)
			}
		default:
			attrs[name] = cty.DynamicPseudoType
		}
	}
	return cty.Object(attrs)
}

// ImpliedType is the type of the attribute's values.
func (a *Attribute) ImpliedType() cty.Type {
	if a.NestedType != nil {
		return a.NestedType.ImpliedType()
	}
	if a.Type == cty.NilType {
		return cty.DynamicPseudoType
	}
	return a.Type
}

// ImpliedType is the type of a nested attribute's values.
func (o *Object) ImpliedType() cty.Type {
	attrs := make(map[string]cty.Type, len(o.Attributes))
	for name, a := range o.Attributes {
		attrs[name] = a.ImpliedType()
	}
	ety := cty.Object(attrs)
	switch o.Nesting {
	case NestingList:
		if ety.HasDynamicTypes() {
			return cty.DynamicPseudoType
		}
		return cty.List(ety)
	case NestingSet:
		return cty.Set(ety)
	case NestingMap:
		if ety.HasDynamicTypes() {
			return cty.DynamicPseudoType
		}
		return cty.Map(ety)
	default:
		return ety
	}
}

// IsSensitive reports whether the value at p (a path into a value of b's
// ImpliedType, e.g. settings.token or tag[0].value) is sensitive: it is, or
// is inside, an attribute the schema marks Sensitive. Index steps into
// lists, sets and maps of blocks or nested attributes may hold any key. A
// path the schema does not know is not sensitive.
func (b *Block) IsSensitive(p cty.Path) bool {
	attrs, blocks := b.Attributes, b.BlockTypes
	for i := 0; i < len(p); i++ {
		step, ok := p[i].(cty.GetAttrStep)
		if !ok {
			return false
		}
		if a, ok := attrs[step.Name]; ok {
			if a.Sensitive {
				return true
			}
			if a.NestedType == nil {
				return false
			}
			if a.NestedType.Nesting != NestingSingle && i+1 < len(p) {
				if _, idx := p[i+1].(cty.IndexStep); idx {
					i++
				}
			}
			attrs, blocks = a.NestedType.Attributes, nil
			continue
		}
		nb, ok := blocks[step.Name]
		if !ok {
			return false
		}
		if nb.Nesting != NestingSingle && nb.Nesting != NestingGroup && i+1 < len(p) {
			if _, idx := p[i+1].(cty.IndexStep); idx {
				i++
			}
		}
		attrs, blocks = nb.Attributes, nb.BlockTypes
	}
	return false
}

// SensitivePaths lists the paths of v (a value of b's ImpliedType) whose
// values are sensitive by the schema: one path per sensitive attribute
// present in v, with concrete indexes for lists, maps and sets of blocks
// and nested attributes. Null and unknown sensitive attributes are listed
// too (a value planned as unknown is still secret once known). The caller
// uses them to mark values it must never print.
func (b *Block) SensitivePaths(v cty.Value) []cty.Path {
	var out []cty.Path
	sensitivePathsBlock(b, v, nil, &out)
	return out
}

func sensitivePathsBlock(b *Block, v cty.Value, base cty.Path, out *[]cty.Path) {
	if b == nil || v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() {
		return
	}
	sensitivePathsAttrs(b.Attributes, v, base, out)
	for name, nb := range b.BlockTypes {
		if !v.Type().HasAttribute(name) {
			continue
		}
		p := appendPath(base, cty.GetAttrStep{Name: name})
		eachElement(v.GetAttr(name), nb.Nesting == NestingSingle || nb.Nesting == NestingGroup, p,
			func(ev cty.Value, ep cty.Path) { sensitivePathsBlock(&nb.Block, ev, ep, out) })
	}
}

func sensitivePathsAttrs(attrs map[string]*Attribute, v cty.Value, base cty.Path, out *[]cty.Path) {
	for name, a := range attrs {
		if !v.Type().HasAttribute(name) {
			continue
		}
		p := appendPath(base, cty.GetAttrStep{Name: name})
		if a.Sensitive {
			*out = append(*out, p)
			continue
		}
		if a.NestedType == nil {
			continue
		}
		nested := a.NestedType
		eachElement(v.GetAttr(name), nested.Nesting == NestingSingle, p, func(ev cty.Value, ep cty.Path) {
			if ev.IsNull() || !ev.IsKnown() || !ev.Type().IsObjectType() {
				return
			}
			sensitivePathsAttrs(nested.Attributes, ev, ep, out)
		})
	}
}

// eachElement calls f for v itself (single) or for each element of the
// collection v with its index step.
func eachElement(v cty.Value, single bool, p cty.Path, f func(cty.Value, cty.Path)) {
	if v.IsNull() || !v.IsKnown() {
		return
	}
	if single {
		f(v, p)
		return
	}
	ty := v.Type()
	if !ty.IsListType() && !ty.IsSetType() && !ty.IsMapType() && !ty.IsTupleType() && !ty.IsObjectType() {
		return
	}
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		f(ev, appendPath(p, cty.IndexStep{Key: k}))
	}
}

func appendPath(p cty.Path, s cty.PathStep) cty.Path {
	out := make(cty.Path, len(p), len(p)+1)
	copy(out, p)
	return append(out, s)
}

// nesting converts a protocol nesting mode (the same numbers in both
// protocols: 1 single, 2 list, 3 set, 4 map, 5 group for blocks only).
func nesting(m int32, block bool) (NestingMode, error) {
	switch m {
	case 1:
		return NestingSingle, nil
	case 2:
		return NestingList, nil
	case 3:
		return NestingSet, nil
	case 4:
		return NestingMap, nil
	case 5:
		if block {
			return NestingGroup, nil
		}
	}
	return 0, fmt.Errorf("invalid nesting mode %d", m)
}

// parseType reads an attribute's type, cty's JSON type notation.
func parseType(b []byte) (cty.Type, error) {
	var ty cty.Type
	if len(b) == 0 {
		return cty.NilType, errors.New("attribute has neither a type nor a nested type")
	}
	if err := ty.UnmarshalJSON(b); err != nil {
		return cty.NilType, fmt.Errorf("invalid type %s: %w", b, err)
	}
	return ty, nil
}

package tfplugin

// Between Terraform's schemas and values and stackd's: provider schemas
// from blocks, hcldec specs of nested blocks, whole objects from
// properties, and the proposed new state.

import (
	"errors"
	"sort"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/stackd/stackd/engine/provider"
)

// blockSchema is a Terraform block schema as a stackd provider schema:
// every attribute that can be set is a property (required, sensitive as
// declared), every nested block type a property decoded by its spec;
// with resource set, the computed attributes are attributes.
func blockSchema(b *Block, resource bool) provider.Schema {
	s := provider.Schema{Properties: map[string]provider.Property{}}
	for name, a := range b.Attributes {
		if a.Required || a.Optional {
			s.Properties[name] = provider.Property{Type: a.ImpliedType(), Constraint: a.constraint(), Required: a.Required, Sensitive: a.Sensitive, Recreation: provider.Never}
		}
		if resource && a.Computed {
			s.Attributes = append(s.Attributes, name)
		}
	}
	for name, nb := range b.BlockTypes {
		spec := blockSpec(name, nb)
		s.Properties[name] = provider.Property{Type: hcldec.ImpliedType(spec).WithoutOptionalAttributesDeep(), Block: spec, Recreation: provider.Never}
	}
	sort.Strings(s.Attributes)
	return s
}

// blockSpec decodes the blocks of one nested block type, as Terraform's
// configschema does.
func blockSpec(name string, nb *NestedBlock) hcldec.Spec {
	nested := objectSpec(&nb.Block)
	switch nb.Nesting {
	case NestingSingle, NestingGroup:
		return &hcldec.BlockSpec{TypeName: name, Nested: nested, Required: nb.MinItems > 0}
	case NestingSet:
		return &hcldec.BlockSetSpec{TypeName: name, Nested: nested, MinItems: int(nb.MinItems), MaxItems: int(nb.MaxItems)}
	case NestingMap:
		if nb.Block.ImpliedType().HasDynamicTypes() {
			return &hcldec.BlockObjectSpec{TypeName: name, Nested: nested, LabelNames: []string{"key"}}
		}
		return &hcldec.BlockMapSpec{TypeName: name, Nested: nested, LabelNames: []string{"key"}}
	default:
		if nb.Block.ImpliedType().HasDynamicTypes() {
			return &hcldec.BlockTupleSpec{TypeName: name, Nested: nested, MinItems: int(nb.MinItems), MaxItems: int(nb.MaxItems)}
		}
		return &hcldec.BlockListSpec{TypeName: name, Nested: nested, MinItems: int(nb.MinItems), MaxItems: int(nb.MaxItems)}
	}
}

// objectSpec decodes one block's body.
func objectSpec(b *Block) hcldec.ObjectSpec {
	spec := hcldec.ObjectSpec{}
	for name, a := range b.Attributes {
		if !a.Required && !a.Optional {
			continue // computed only: never in configuration
		}
		spec[name] = &hcldec.AttrSpec{Name: name, Type: a.configType(), Required: a.Required} // nested_attrs.go
	}
	for name, nb := range b.BlockTypes {
		spec[name] = blockSpec(name, nb)
	}
	return spec
}

// fullObject is v (an object of some of b's attributes and block types)
// as a value of type ty: every attribute and block type present, null or
// empty where v has none.
func fullObject(b *Block, v cty.Value, ty cty.Type) (cty.Value, error) {
	if v == cty.NilVal {
		v = cty.EmptyObjectVal
	}
	v, _ = v.Unmark()
	if v.IsNull() {
		return cty.NullVal(ty), nil
	}
	if !v.Type().IsObjectType() {
		return cty.NilVal, errors.New("not an object")
	}
	atys := ty.AttributeTypes()
	m := make(map[string]cty.Value, len(atys))
	for name, at := range atys {
		if v.Type().HasAttribute(name) {
			// Marks dropped attribute by attribute: UnmarkDeep of the
			// whole object rebuilt every value of it, marked or not.
			av, _ := v.GetAttr(name).Unmark()
			if !av.Type().IsPrimitiveType() && av.IsKnown() && !av.IsNull() {
				av, _ = av.UnmarkDeep()
			}
			m[name] = av
			continue
		}
		m[name] = cty.NullVal(at)
		if nb, ok := b.BlockTypes[name]; ok {
			switch nb.Nesting {
			case NestingList:
				if at.IsListType() {
					m[name] = cty.ListValEmpty(at.ElementType())
				}
			case NestingSet:
				m[name] = cty.SetValEmpty(at.ElementType())
			case NestingMap:
				if at.IsMapType() {
					m[name] = cty.MapValEmpty(at.ElementType())
				}
			}
		}
	}
	return convert.Convert(cty.ObjectVal(m), ty)
}

// proposedNew is the configuration merged with the prior state, as
// Terraform proposes it to PlanResourceChange: configured values as
// configured, a computed attribute left unset keeps its prior value (null
// on a create), nested blocks merged element by element where they are
// lists or single blocks.
func proposedNew(b *Block, prior, config cty.Value) cty.Value {
	if config.IsNull() || !config.IsKnown() {
		return config
	}
	m := map[string]cty.Value{}
	for name, a := range b.Attributes {
		cv := config.GetAttr(name)
		pv := cty.NullVal(cv.Type())
		if !prior.IsNull() && prior.IsKnown() {
			pv = prior.GetAttr(name)
		}
		switch {
		case a.Computed && cv.IsNull():
			// The prior value; null on a create (the provider plans it,
			// unknown when only the apply tells).
			m[name] = pv
		default:
			m[name] = cv
		}
	}
	for name, nb := range b.BlockTypes {
		cv := config.GetAttr(name)
		var pv cty.Value
		if !prior.IsNull() && prior.IsKnown() {
			pv = prior.GetAttr(name)
		} else {
			pv = cty.NullVal(cv.Type())
		}
		switch nb.Nesting {
		case NestingSingle, NestingGroup:
			m[name] = proposedNew(&nb.Block, pv, cv)
		case NestingList:
			if !cv.IsKnown() || cv.IsNull() || !cv.Type().IsListType() || cv.LengthInt() == 0 {
				m[name] = cv
				continue
			}
			elems := make([]cty.Value, 0, cv.LengthInt())
			for i, ce := range cv.AsValueSlice() {
				pe := cty.NullVal(ce.Type())
				if !pv.IsNull() && pv.IsKnown() && pv.LengthInt() > i {
					pe = pv.Index(cty.NumberIntVal(int64(i)))
				}
				elems = append(elems, proposedNew(&nb.Block, pe, ce))
			}
			m[name] = cty.ListVal(elems)
		default:
			m[name] = cv
		}
	}
	return cty.ObjectVal(m)
}

package tfplugin

// Nested attributes (protocol 6 nested_type) in configuration: Terraform
// decodes a nested attribute's value with its object type's optional and
// computed fields optional (configschema's specType), so that
// settings = { color = "blue" } is the whole object with the fields left
// out null. Values stay of the implied type (ImpliedType); only the
// conversion of what is configured uses ConfigType.

import "github.com/zclconf/go-cty/cty"

// ConfigType is the type constraint a configured value of the nested
// attribute is converted with: the object of its attributes (nested ones
// by their own ConfigType), the optional and computed ones optional, in
// the collection its nesting mode makes.
func (o *Object) ConfigType() cty.Type {
	attrs := make(map[string]cty.Type, len(o.Attributes))
	var optional []string
	for name, a := range o.Attributes {
		attrs[name] = a.configType()
		if a.Optional || a.Computed {
			optional = append(optional, name)
		}
	}
	ety := cty.Object(attrs)
	if len(optional) > 0 {
		ety = cty.ObjectWithOptionalAttrs(attrs, optional)
	}
	switch o.Nesting {
	case NestingList:
		return cty.List(ety)
	case NestingSet:
		return cty.Set(ety)
	case NestingMap:
		return cty.Map(ety)
	case NestingSingle, NestingGroup:
		return ety
	default:
		return cty.DynamicPseudoType
	}
}

// configType is the type constraint a configured value of a is converted
// with.
func (a *Attribute) configType() cty.Type {
	if a.NestedType != nil {
		return a.NestedType.ConfigType()
	}
	return a.ImpliedType()
}

// constraint is a's type constraint as a provider.Property's Constraint:
// cty.NilType where it is the implied type.
func (a *Attribute) constraint() cty.Type {
	if a.NestedType == nil {
		return cty.NilType
	}
	return a.NestedType.ConfigType()
}

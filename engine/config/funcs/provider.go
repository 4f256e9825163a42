package funcs

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// The functions of Terraform's built-in provider terraform.io/builtin/terraform.

// encodeTfvarsFunc writes an object or map as a .tfvars file.
var encodeTfvarsFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowUnknown: true}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		if !v.IsWhollyKnown() {
			return cty.UnknownVal(cty.String).RefineNotNull(), nil
		}
		var keys []string
		switch ty := v.Type(); {
		case ty.IsObjectType():
			for k := range ty.AttributeTypes() {
				keys = append(keys, k)
			}
		case ty.IsMapType():
			for it := v.ElementIterator(); it.Next(); {
				k, _ := it.Element()
				keys = append(keys, k.AsString())
			}
		default:
			return cty.NilVal, function.NewArgErrorf(0, "invalid value to encode: must be an object whose attribute names will become the encoded variable names")
		}
		slices.Sort(keys)
		f := hclwrite.NewEmptyFile()
		for _, k := range keys {
			if !hclsyntax.ValidIdentifier(k) {
				return cty.NilVal, function.NewArgErrorf(0, "invalid variable name %q: must be a valid identifier, per Terraform's rules for input variable declarations", k)
			}
			ev, _ := hcl.Index(v, cty.StringVal(k), nil)
			f.Body().SetAttributeValue(k, ev)
		}
		return cty.StringVal(string(f.Bytes())), nil
	},
})

// decodeTfvarsFunc reads a .tfvars file's attributes as an object;
// expressions may not refer to anything or call functions.
var decodeTfvarsFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "src", Type: cty.String}},
	Type: func(args []cty.Value) (cty.Type, error) {
		return cty.DynamicPseudoType, nil
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		f, diags := hclsyntax.ParseConfig([]byte(args[0].AsString()), "<decode_tfvars argument>", hcl.InitialPos)
		if diags.HasErrors() {
			return cty.NilVal, fmt.Errorf("invalid tfvars syntax: %s", diags.Error())
		}
		attrs, diags := f.Body.JustAttributes()
		if diags.HasErrors() {
			return cty.NilVal, fmt.Errorf("invalid tfvars content: %s", diags.Error())
		}
		out := make(map[string]cty.Value, len(attrs))
		for name, a := range attrs {
			v, diags := a.Expr.Value(nil)
			if diags.HasErrors() {
				return cty.NilVal, fmt.Errorf("invalid expression for variable %q: %s", name, diags.Error())
			}
			out[name] = v
		}
		return cty.ObjectVal(out), nil
	},
})

// encodeExprFunc writes a value as a Terraform language expression.
var encodeExprFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "value", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowDynamicType: true}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		if !v.IsWhollyKnown() {
			ret := cty.UnknownVal(cty.String).RefineNotNull()
			if !v.Range().CouldBeNull() {
				switch ty := v.Type(); {
				case ty.IsObjectType() || ty.IsMapType():
					ret = ret.Refine().StringPrefixFull("{").NewValue()
				case ty.IsTupleType() || ty.IsListType() || ty.IsSetType():
					ret = ret.Refine().StringPrefixFull("[").NewValue()
				case ty == cty.String:
					ret = ret.Refine().StringPrefixFull(`"`).NewValue()
				}
			}
			return ret, nil
		}
		return cty.StringVal(string(bytes.TrimSpace(hclwrite.TokensForValue(v).Bytes()))), nil
	},
})

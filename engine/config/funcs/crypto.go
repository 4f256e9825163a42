package funcs

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/gocty"
	"golang.org/x/crypto/bcrypt"
)

// bcryptFunc hashes a string with bcrypt (cost 10 by default). Costs over
// Options.MaxBcryptCost are refused: each step doubles the work.
func (t *table) bcryptFunc() function.Function {
	return function.New(&function.Spec{
		Params:       []function.Parameter{{Name: "str", Type: cty.String}},
		VarParam:     &function.Parameter{Name: "cost", Type: cty.Number},
		Type:         function.StaticReturnType(cty.String),
		RefineResult: refineNotNull,
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if len(args) > 2 {
				return cty.UnknownVal(cty.String), errors.New("bcrypt() takes no more than two arguments")
			}
			cost := bcrypt.DefaultCost
			if len(args) == 2 {
				if err := gocty.FromCtyValue(args[1], &cost); err != nil {
					return cty.UnknownVal(cty.String), err
				}
			}
			if cost > t.o.MaxBcryptCost {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(1, "a bcrypt cost of %d is more than %d, the highest stackd computes", cost, t.o.MaxBcryptCost)
			}
			out, err := bcrypt.GenerateFromPassword([]byte(args[0].AsString()), cost)
			if err != nil {
				return cty.UnknownVal(cty.String), fmt.Errorf("error occured generating password %s", err.Error())
			}
			return cty.StringVal(string(out)), nil
		},
	})
}

// uuidFunc is 16 bytes of Options.Rand written as a UUID, as Terraform's
// (which sets no version bits).
func (t *table) uuidFunc() function.Function {
	return function.New(&function.Spec{
		Type:         function.StaticReturnType(cty.String),
		RefineResult: refineNotNull,
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
			var b [16]byte
			if _, err := io.ReadFull(t.o.Rand, b[:]); err != nil {
				return cty.UnknownVal(cty.String), fmt.Errorf("failed to read random bytes: %w", err)
			}
			return cty.StringVal(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])), nil
		},
	})
}

// cidrNetmaskFunc is the netmask of an IPv4 prefix.
var cidrNetmaskFunc = function.New(&function.Spec{
	Params:       []function.Parameter{{Name: "prefix", Type: cty.String}},
	Type:         function.StaticReturnType(cty.String),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		_, network, err := net.ParseCIDR(args[0].AsString())
		if err != nil {
			return cty.UnknownVal(cty.String), fmt.Errorf("invalid CIDR expression: %s", err)
		}
		if network.IP.To4() == nil {
			return cty.UnknownVal(cty.String), fmt.Errorf("IPv6 addresses cannot have a netmask: %s", args[0].AsString())
		}
		return cty.StringVal(net.IP(network.Mask).String()), nil
	},
})

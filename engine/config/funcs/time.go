package funcs

import (
	"fmt"
	"time"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// timestampFunc is the current time of Options.Now, in RFC 3339 UTC.
func (t *table) timestampFunc() function.Function {
	return function.New(&function.Spec{
		Type:         function.StaticReturnType(cty.String),
		RefineResult: refineNotNull,
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
			return cty.StringVal(t.o.Now().UTC().Format(time.RFC3339)), nil
		},
	})
}

// planTimestampFunc is Options.PlanTime, unknown when it is zero.
func (t *table) planTimestampFunc() function.Function {
	return function.New(&function.Spec{
		Type:         function.StaticReturnType(cty.String),
		RefineResult: refineNotNull,
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
			if t.o.PlanTime.IsZero() {
				return cty.UnknownVal(cty.String), nil
			}
			return cty.StringVal(t.o.PlanTime.UTC().Format(time.RFC3339)), nil
		},
	})
}

// timeCmpFunc compares two RFC 3339 timestamps: -1, 0 or 1.
var timeCmpFunc = function.New(&function.Spec{
	Params: []function.Parameter{
		{Name: "timestamp_a", Type: cty.String},
		{Name: "timestamp_b", Type: cty.String},
	},
	Type:         function.StaticReturnType(cty.Number),
	RefineResult: refineNotNull,
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		a, err := parseTimestamp(args[0].AsString())
		if err != nil {
			return cty.UnknownVal(cty.Number), function.NewArgError(0, err)
		}
		b, err := parseTimestamp(args[1].AsString())
		if err != nil {
			return cty.UnknownVal(cty.Number), function.NewArgError(1, err)
		}
		return cty.NumberIntVal(int64(a.Compare(b))), nil
	},
})

// parseTimestamp parses an RFC 3339 timestamp as Terraform does (with a
// "T" or "t" separator and a "Z", "z" or numeric offset).
func parseTimestamp(s string) (time.Time, error) {
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("not a valid RFC3339 timestamp: %s", err)
	}
	return ts, nil
}

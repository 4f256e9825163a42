package tfbuiltin

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/provider"
)

// Type names and the provider source of Terraform's built-in provider.
const (
	TypeData        = "terraform_data"
	TypeRemoteState = "terraform_remote_state"
	// Source is the provider source address Terraform gives the built-in
	// provider; a required_providers entry with it needs no plugin.
	Source = "terraform.io/builtin/terraform"
)

// IsSource reports whether a required_providers source names the
// built-in provider ("terraform.io/builtin/terraform", in any case, as
// Terraform compares source addresses).
func IsSource(src string) bool {
	return strings.EqualFold(src, Source)
}

// Resources are the built-in provider's resource types.
func Resources() provider.Registry {
	return provider.Registry{TypeData: &Data{}}
}

// DataSources are the built-in provider's data sources.
func DataSources() map[string]provider.DataSource {
	return map[string]provider.DataSource{TypeRemoteState: &RemoteState{}}
}

var (
	_ provider.Provider               = (*Data)(nil)
	_ provider.AttributePlanner       = (*Data)(nil)
	_ provider.UpdateAttributePlanner = (*Data)(nil)
	_ provider.DriftReader            = (*Data)(nil)
	_ provider.Importer               = (*Data)(nil)
)

// Data is terraform_data. It holds no state of its own: everything it
// is lives in the resource's record.
type Data struct{}

// Schema declares input and triggers_replace (any type; a change of
// triggers_replace replaces the resource) and the attributes id and
// output.
func (*Data) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{
			"input":            {Type: cty.DynamicPseudoType, Recreation: provider.Never},
			"triggers_replace": {Type: cty.DynamicPseudoType, Recreation: provider.Always},
		},
		Attributes: []string{"id", "output"},
	}
}

// PlanAttributes plans output as Terraform does for a new object: null
// when input is null, else unknown until the apply (of input's type, and
// sensitive when input is). id is a new UUID, unknown until the apply.
func (*Data) PlanAttributes(_ provider.Target, props cty.Value) map[string]cty.Value {
	in := attr(props, "input")
	if in.IsNull() {
		return map[string]cty.Value{"output": in}
	}
	clean, marks := in.UnmarkDeep()
	out := cty.UnknownVal(clean.Type())
	if len(marks) > 0 {
		out = out.Mark(provider.SensitiveMark)
	}
	return map[string]cty.Value{"output": out}
}

// PlanUpdateAttributes plans an update in place as Terraform's
// terraform_data does: the id stays; output stays when input did not
// change, else it is null for a null input and unknown until the apply
// otherwise. (A change of triggers_replace is a replacement, planned as a
// new object.)
func (*Data) PlanUpdateAttributes(_ provider.Target, recorded map[string]cty.Value, oldProps, props cty.Value) map[string]cty.Value {
	planned := map[string]cty.Value{}
	if id, ok := recorded["id"]; ok && !id.IsNull() {
		planned["id"] = id
	}
	in := attr(props, "input")
	switch out, ok := recorded["output"]; {
	case ok && sameValue(attr(oldProps, "input"), in):
		planned["output"] = out
	case in.IsNull():
		planned["output"] = in
	default:
		planned["output"] = cty.UnknownVal(in.Type())
	}
	return planned
}

// CanImport: an import block adopts its id (Terraform's terraform_data
// imports the id alone; the apply then sets output from input).
func (*Data) CanImport() bool { return true }

// Create makes a new id (or adopts req.ImportID) and sets output to input.
func (*Data) Create(ctx context.Context, req provider.Request) (provider.Result, error) {
	if err := ctx.Err(); err != nil {
		return provider.Result{}, err
	}
	id := req.ImportID
	if id == "" {
		id = uuid.NewString()
	}
	return result(id, req.Properties), nil
}

// Update sets output to the new input and keeps the id; when
// triggers_replace changed (an update the engine planned before it knew
// the new value) it is a replacement: a new id, as Terraform's.
func (*Data) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	if err := ctx.Err(); err != nil {
		return provider.Result{}, err
	}
	id := req.PhysicalID
	if !sameValue(attr(req.OldProperties, "triggers_replace"), attr(req.Properties, "triggers_replace")) || id == "" {
		id = uuid.NewString()
	}
	return result(id, req.Properties), nil
}

// Read returns what was recorded: terraform_data exists nowhere else.
func (*Data) Read(ctx context.Context, req provider.Request) (provider.Result, error) {
	if err := ctx.Err(); err != nil {
		return provider.Result{}, err
	}
	res := result(req.PhysicalID, req.Properties)
	if v, ok := req.Attributes["output"]; ok {
		res.Attributes["output"] = v
	}
	res.Properties = req.Properties
	return res, nil
}

// Readable: every terraform_data can be read (it never drifts).
func (*Data) Readable(cty.Value) bool { return true }

// Delete has nothing to remove.
func (*Data) Delete(ctx context.Context, _ provider.Request) error { return ctx.Err() }

func result(id string, props cty.Value) provider.Result {
	return provider.Result{PhysicalID: id, Attributes: map[string]cty.Value{
		"id":     cty.StringVal(id),
		"output": attr(props, "input"),
	}}
}

// attr is props' attribute name, null when props has none.
func attr(props cty.Value, name string) cty.Value {
	if props == cty.NilVal || props.IsNull() || !props.IsKnown() || !props.Type().IsObjectType() || !props.Type().HasAttribute(name) {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	return props.GetAttr(name)
}

// sameValue compares two recorded or configured values: equal when both
// are null, or both known and equal (recorded values come back as
// objects and tuples, so a list and a tuple of the same elements are
// equal, as the engine's diff compares them).
func sameValue(a, b cty.Value) bool {
	a, _ = a.UnmarkDeep()
	b, _ = b.UnmarkDeep()
	if a.IsNull() || b.IsNull() {
		return a.IsNull() == b.IsNull()
	}
	if !a.IsWhollyKnown() || !b.IsWhollyKnown() {
		return false
	}
	if a.Type().Equals(b.Type()) {
		return a.RawEquals(b)
	}
	aj, err1 := json.Marshal(ctyjson.SimpleJSONValue{Value: a})
	bj, err2 := json.Marshal(ctyjson.SimpleJSONValue{Value: b})
	return err1 == nil && err2 == nil && string(aj) == string(bj)
}

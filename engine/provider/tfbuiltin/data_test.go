package tfbuiltin

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

func dataProps(input, triggers cty.Value) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"input": input, "triggers_replace": triggers})
}

var null = cty.NullVal(cty.DynamicPseudoType)

func TestDataSchema(t *testing.T) {
	s := (&Data{}).Schema()
	if got := s.Properties["triggers_replace"].Recreation; got != provider.Always {
		t.Errorf("triggers_replace recreation = %s, want Always", got)
	}
	if got := s.Properties["input"].Recreation; got != provider.Never {
		t.Errorf("input recreation = %s, want Never", got)
	}
	for _, n := range []string{"input", "triggers_replace"} {
		if p := s.Properties[n]; p.Required || !p.Type.Equals(cty.DynamicPseudoType) {
			t.Errorf("%s: got required=%v type=%#v, want optional and of any type", n, p.Required, p.Type)
		}
	}
	if len(s.Attributes) != 2 || s.Attributes[0] != "id" || s.Attributes[1] != "output" || s.OpenAttributes {
		t.Errorf("attributes = %v (open %v), want [id output] closed", s.Attributes, s.OpenAttributes)
	}
}

func TestDataLifecycle(t *testing.T) {
	ctx := context.Background()
	d := &Data{}
	in := cty.ObjectVal(map[string]cty.Value{"a": cty.NumberIntVal(1), "b": cty.TupleVal([]cty.Value{cty.StringVal("x")})})
	created, err := d.Create(ctx, provider.Request{Properties: dataProps(in, cty.StringVal("t1"))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uuid.Parse(created.PhysicalID); err != nil {
		t.Fatalf("id %q is not a UUID: %v", created.PhysicalID, err)
	}
	if got := created.Attributes["id"]; !got.RawEquals(cty.StringVal(created.PhysicalID)) {
		t.Errorf("id attribute = %#v, want the physical id", got)
	}
	if got := created.Attributes["output"]; !got.RawEquals(in) {
		t.Errorf("output = %#v, want the input %#v", got, in)
	}
	again, _ := d.Create(ctx, provider.Request{Properties: dataProps(in, null)})
	if again.PhysicalID == created.PhysicalID {
		t.Errorf("two creates made the same id %q", again.PhysicalID)
	}

	// Only input changes: same id, output follows.
	newIn := cty.StringVal("v2")
	upd, err := d.Update(ctx, provider.Request{PhysicalID: created.PhysicalID, OldProperties: dataProps(in, cty.StringVal("t1")), Properties: dataProps(newIn, cty.StringVal("t1"))})
	if err != nil {
		t.Fatal(err)
	}
	if upd.PhysicalID != created.PhysicalID || !upd.Attributes["output"].RawEquals(newIn) {
		t.Errorf("update of input: got id %q output %#v, want id %q output %#v", upd.PhysicalID, upd.Attributes["output"], created.PhysicalID, newIn)
	}
	// A recorded tuple equals the configured list it came from.
	list := cty.ListVal([]cty.Value{cty.StringVal("a")})
	rec := cty.TupleVal([]cty.Value{cty.StringVal("a")})
	upd, _ = d.Update(ctx, provider.Request{PhysicalID: created.PhysicalID, OldProperties: dataProps(in, rec), Properties: dataProps(newIn, list)})
	if upd.PhysicalID != created.PhysicalID {
		t.Errorf("triggers_replace recorded as a tuple and configured as the same list: got a new id")
	}
	// triggers_replace changes: a replacement, with a new id.
	repl, err := d.Update(ctx, provider.Request{PhysicalID: created.PhysicalID, OldProperties: dataProps(in, cty.StringVal("t1")), Properties: dataProps(in, cty.StringVal("t2"))})
	if err != nil {
		t.Fatal(err)
	}
	if repl.PhysicalID == created.PhysicalID {
		t.Errorf("update of triggers_replace kept id %q, want a new one", repl.PhysicalID)
	}

	// Read returns what was recorded: no drift.
	read, err := d.Read(ctx, provider.Request{PhysicalID: created.PhysicalID, Properties: dataProps(in, null), Attributes: created.Attributes})
	if err != nil {
		t.Fatal(err)
	}
	if read.PhysicalID != created.PhysicalID || !read.Attributes["output"].RawEquals(in) || !read.Properties.RawEquals(dataProps(in, null)) {
		t.Errorf("read = %+v, want the recorded resource", read)
	}
	if !d.Readable(dataProps(in, null)) {
		t.Error("not readable")
	}
	if err := d.Delete(ctx, provider.Request{PhysicalID: created.PhysicalID}); err != nil {
		t.Errorf("delete: %v", err)
	}
	// An import adopts its id.
	imp, err := d.Create(ctx, provider.Request{ImportID: "given-id", Properties: dataProps(in, null)})
	if err != nil || imp.PhysicalID != "given-id" || !imp.Attributes["id"].RawEquals(cty.StringVal("given-id")) {
		t.Errorf("import: got %+v, %v; want id given-id", imp, err)
	}
	if !d.CanImport() {
		t.Error("CanImport is false")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Create(cancelled, provider.Request{Properties: dataProps(in, null)}); err == nil {
		t.Error("create with an ended context succeeded")
	}
}

func TestDataPlanAttributes(t *testing.T) {
	d := &Data{}
	for _, tc := range []struct {
		name      string
		input     cty.Value
		wantKnown bool
		wantType  cty.Type
		sensitive bool
	}{
		{"null input: output null", null, true, cty.DynamicPseudoType, false},
		{"string input: unknown string", cty.StringVal("x"), false, cty.String, false},
		{"object input: unknown object", cty.ObjectVal(map[string]cty.Value{"a": cty.True}), false, cty.Object(map[string]cty.Type{"a": cty.Bool}), false},
		{"sensitive input: sensitive output", cty.StringVal("s").Mark(provider.SensitiveMark), false, cty.String, true},
		{"unknown input: unknown output", cty.UnknownVal(cty.Number), false, cty.Number, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planned := d.PlanAttributes(provider.Target{}, dataProps(tc.input, null))
			out, ok := planned["output"]
			if !ok {
				t.Fatal("no planned output")
			}
			if _, ok := planned["id"]; ok {
				t.Errorf("id planned as %#v, want it left unknown", planned["id"])
			}
			if out.IsKnown() != tc.wantKnown || !out.Type().Equals(tc.wantType) {
				t.Errorf("output = %#v, want known=%v of type %#v", out, tc.wantKnown, tc.wantType)
			}
			if got := provider.IsSensitive(out); got != tc.sensitive {
				t.Errorf("output sensitive = %v, want %v", got, tc.sensitive)
			}
		})
	}
}

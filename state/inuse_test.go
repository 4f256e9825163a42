package state

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
)

func TestResourceTypeInUse(t *testing.T) {
	s := newStore(t)
	if used, err := s.ResourceTypeInUse("Custom::DNS"); used || err != nil {
		t.Errorf("empty state: got %v, %v, want false, nil", used, err)
	}
	web := mustCreate(t, s, "web")
	mustCreate(t, s, "idle") // no instances
	for _, in := range []Instance{
		{StackSetID: web.ID, Region: "eu-west-1", Account: "1", Status: InstanceOperationComplete, Updated: t0},
		{StackSetID: web.ID, Region: "eu-west-1", Account: "12", Status: InstanceOperationComplete, Updated: t0},
	} {
		if err := s.PutInstance(in); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct {
		account string
		res     Resource
	}{
		{"1", Resource{Address: "custom.dns", Type: "custom", Inputs: json.RawMessage(`{"type":"Custom::DNS","zone":"x"}`)}},
		{"1", Resource{Address: "file.cfg", Type: "file", Inputs: json.RawMessage(`{"type":"Custom::File"}`)}},
		{"12", Resource{Address: "custom.bad", Type: "custom", Inputs: json.RawMessage(`["Custom::Array"]`)}},
		{"12", Resource{Address: "custom.cert", Type: "custom", Inputs: json.RawMessage(`{"type":"Custom::Cert"}`)}},
	} {
		r.res.Status, r.res.Updated = ResourceApplied, t0
		if err := s.PutResource(web.ID, "eu-west-1", r.account, r.res); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"Custom::DNS", true},
		{"Custom::Cert", true},   // in the second instance
		{"Custom::File", false},  // not a custom resource
		{"Custom::Array", false}, // inputs not an object
		{"Custom::Unused", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			used, err := s.ResourceTypeInUse(tc.name)
			if err != nil || used != tc.want {
				t.Errorf("got %v, %v, want %v, nil", used, err, tc.want)
			}
		})
	}
}

func TestResourceTypeInUseClosed(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResourceTypeInUse("Custom::DNS"); !errors.Is(err, ErrClosed) {
		t.Errorf("closed store: got %v, want ErrClosed", err)
	}
}

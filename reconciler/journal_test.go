package reconciler

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stackd/stackd/engine"
)

// fill sets every field of the struct v points to (recursively, through
// pointers) to a value that is not zero and names the field.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.String:
		v.SetString(path)
	case reflect.Int64:
		v.SetInt(int64(len(path)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		switch v.Type() {
		case reflect.TypeFor[json.RawMessage]():
			v.Set(reflect.ValueOf(json.RawMessage(`"` + path + `"`)))
		case reflect.TypeFor[[]string]():
			v.Set(reflect.ValueOf([]string{path}))
		case reflect.TypeFor[[]byte]():
			v.Set(reflect.ValueOf([]byte(path)))
		default:
			t.Fatalf("%s: no filler for %s", path, v.Type())
		}
	default:
		t.Fatalf("%s: no filler for %s", path, v.Type())
	}
}

// zeroFields names the fields of the struct v (recursively) left zero.
func zeroFields(v reflect.Value, path string, skip map[string]bool) []string {
	var out []string
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return zeroFields(v.Elem(), path, skip)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			if v.Interface().(time.Time).IsZero() {
				return []string{path}
			}
			return nil
		}
		for i := range v.NumField() {
			p := path + "." + v.Type().Field(i).Name
			if !skip[p] {
				out = append(out, zeroFields(v.Field(i), p, skip)...)
			}
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

// The engine's resource and the state's record map onto each other field
// by field: a field added to one and not to the mapping fails here.
func TestResourceMapping(t *testing.T) {
	var r engine.ResourceState
	fill(t, reflect.ValueOf(&r).Elem(), "r")
	rec := resourceRecord(r, time.Unix(1, 0))
	if zero := zeroFields(reflect.ValueOf(rec), "rec", nil); len(zero) > 0 {
		t.Errorf("state record fields the mapping leaves empty: %v", zero)
	}
	back := resourceState(rec)
	// MovedFrom is set by a plan (a moved block) and never stored: the
	// apply records the resource at its new address.
	if diff := cmp.Diff(r, back, cmpopts.IgnoreFields(engine.ResourceState{}, "MovedFrom")); diff != "" {
		t.Errorf("engine -> state -> engine lost something (-want +got):\n%s", diff)
	}
}

package provider

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestRedactor(t *testing.T) {
	r := NewSecrets(
		cty.StringVal("hunter22"),
		cty.StringVal("abc"), // too short to redact
		cty.ObjectVal(map[string]cty.Value{"k": cty.StringVal("tok-1234"), "n": cty.NumberIntVal(987654)}),
		cty.StringVal("hunter22-long").Mark(SensitiveMark), // longer first: replaced whole
	)
	r.AddJSON([]byte(`{"Data": ["json-leaf", 31415926]}`))
	for _, tc := range []struct{ in, want string }{
		{"password hunter22 rejected", "password <sensitive> rejected"},
		{"got hunter22-long", "got <sensitive>"},
		{"abc stays", "abc stays"},
		{"tok-1234/987654", "<sensitive>/<sensitive>"},
		{"json-leaf and 31415926", "<sensitive> and <sensitive>"},
	} {
		if got := r.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	base := context.Canceled
	err := r.Error(fmt.Errorf("call with hunter22: %w", base))
	if err.Error() != "call with <sensitive>: context canceled" || !errors.Is(err, base) {
		t.Errorf("Error: %q (errors.Is canceled %v)", err, errors.Is(err, base))
	}
	if plain := errors.New("nothing secret"); r.Error(plain) != plain {
		t.Errorf("an error without secrets was wrapped")
	}
	if r.Error(nil) != nil {
		t.Errorf("Error(nil) is not nil")
	}
	var nilR *Secrets
	if got := nilR.Redact("hunter22"); got != "hunter22" {
		t.Errorf("a nil Redactor changed the text: %q", got)
	}

	derived := cty.ObjectVal(map[string]cty.Value{
		"plain":  cty.StringVal("visible-value"),
		"hidden": cty.StringVal("aHVudGVyMjI=").Mark(SensitiveMark),
	})
	r2 := &Secrets{}
	r2.AddMarked(derived)
	if got := r2.Redact("visible-value aHVudGVyMjI="); got != "visible-value <sensitive>" {
		t.Errorf("AddMarked: %q", got)
	}
}

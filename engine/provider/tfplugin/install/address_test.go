package install

import (
	"strings"
	"testing"

	version "github.com/hashicorp/go-version"
)

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in, want, display, err string
	}{
		{in: "hashicorp/local", want: "registry.terraform.io/hashicorp/local", display: "hashicorp/local"},
		{in: "local", want: "registry.terraform.io/hashicorp/local", display: "hashicorp/local"},
		{in: "registry.terraform.io/hashicorp/local", want: "registry.terraform.io/hashicorp/local", display: "hashicorp/local"},
		{in: "registry.opentofu.org/hashicorp/random", want: "registry.opentofu.org/hashicorp/random", display: "registry.opentofu.org/hashicorp/random"},
		{in: "Example.COM/NS/Type", want: "example.com/ns/type", display: "example.com/ns/type"},
		{in: "example.com:443/ns/type", want: "example.com/ns/type", display: "example.com/ns/type"},
		{in: "example.com:8443/ns/type", want: "example.com:8443/ns/type", display: "example.com:8443/ns/type"},
		{in: "a/b/c/d", err: "[HOST/]NAMESPACE/TYPE"},
		{in: "", err: "invalid provider source"},
		{in: "ns/my_type", err: "invalid provider source"},
		{in: "hashicorp/terraform-provider-local", err: "Did you mean \"hashicorp/local\"?"},
		{in: "terraform-provider-local", err: "did you mean \"local\""},
		{in: "-/aws", err: "legacy"},
		{in: "terraform.io/builtin/terraform", err: "built-in"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			a, err := ParseAddress(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error containing %q", a, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.String() != tc.want || a.ForDisplay() != tc.display {
				t.Errorf("got %q (%q), want %q (%q)", a.String(), a.ForDisplay(), tc.want, tc.display)
			}
		})
	}
}

func TestConstraints(t *testing.T) {
	vs := func(ss ...string) []*version.Version {
		var out []*version.Version
		for _, s := range ss {
			out = append(out, version.Must(version.NewSemver(s)))
		}
		return out
	}
	all := vs("1.0.0", "2.4.0", "2.5.0", "2.5.1", "2.6.0", "2.99.3", "3.0.0", "3.1.0-beta1", "3.1.0")
	tests := []struct {
		in, canonical, newest string
	}{
		{"~> 2.5", "~> 2.5", "2.99.3"},
		{"~> 2.5.0", "~> 2.5.0", "2.5.1"},
		{"~> 2", "~> 2.0", "2.99.3"},
		{">= 1.0, < 3", ">= 1.0.0, < 3.0.0", "2.99.3"},
		{"< 3, >= 1.0", ">= 1.0.0, < 3.0.0", "2.99.3"},
		{"2.5.1", "2.5.1", "2.5.1"},
		{"= 2.5.1", "2.5.1", "2.5.1"},
		{"!= 3.1.0, >= 3.0", ">= 3.0.0, != 3.1.0", "3.0.0"},
		{"", "", "3.1.0"},
		{">= 3.1.0-beta1", ">= 3.1.0-beta1", "3.1.0"},
		{"3.1.0-beta1", "3.1.0-beta1", "3.1.0-beta1"},
		{"> 3.1.0", "> 3.1.0", ""},
		{">= 2.5, >= 2.5.0", ">= 2.5.0", "3.1.0"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			c, err := ParseConstraints(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.String(); got != tc.canonical {
				t.Errorf("canonical: got %q, want %q", got, tc.canonical)
			}
			got := ""
			if v := c.Newest(all); v != nil {
				got = v.String()
			}
			if got != tc.newest {
				t.Errorf("newest: got %q, want %q", got, tc.newest)
			}
		})
	}
	for _, bad := range []string{"~>", "abc", ">= 1.0,", "1.2.3.4", "=> 1.0"} {
		if _, err := ParseConstraints(bad); err == nil {
			t.Errorf("ParseConstraints(%q): got no error", bad)
		}
	}
}

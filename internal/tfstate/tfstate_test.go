package tfstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The golden state was written once by Terraform 1.11.4 (terraform apply
// of testdata/terraform-1.11/main.tf, terraform_data only).
func readGolden(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "terraform-1.11", "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseTerraformState(t *testing.T) {
	st, err := Parse(readGolden(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.TerraformVersion != "1.11.4" {
		t.Errorf("terraform_version: got %q, want 1.11.4", st.TerraformVersion)
	}
	var addrs []string
	byAddr := map[string]Object{}
	for _, o := range st.Objects {
		addrs = append(addrs, o.Address)
		byAddr[o.Address] = o
	}
	want := []string{
		"terraform_data.counted[0]", "terraform_data.counted[1]",
		`terraform_data.each["a"]`, `terraform_data.each["b"]`,
		"terraform_data.secret", "terraform_data.single",
		"module.child.terraform_data.inner",
	}
	if d := cmp.Diff(want, addrs); d != "" {
		t.Fatalf("addresses (-want +got):\n%s", d)
	}
	each := byAddr[`terraform_data.each["a"]`]
	if each.ProviderSource != "terraform.io/builtin/terraform" || each.Type != "terraform_data" || each.Key != `["a"]` {
		t.Errorf("each[a]: got source %q type %q key %q", each.ProviderSource, each.Type, each.Key)
	}
	if d := cmp.Diff([]string{"terraform_data.single"}, each.Dependencies); d != "" {
		t.Errorf("dependencies (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"input"}, byAddr["terraform_data.secret"].Sensitive); d != "" {
		t.Errorf("sensitive (-want +got):\n%s", d)
	}
	if m := byAddr["module.child.terraform_data.inner"]; m.Module != "module.child" {
		t.Errorf("module: got %q, want module.child", m.Module)
	}
	if out, ok := st.Outputs["single_id"]; !ok || !strings.Contains(string(out.Value), "-") {
		t.Errorf("outputs: got %v", st.Outputs)
	}
}

func TestParseRefuses(t *testing.T) {
	golden := string(readGolden(t))
	for _, tc := range []struct {
		name, src string
		want      error
		says      string
	}{
		{"not JSON", "{", ErrNotState, "invalid JSON"},
		{"no version", `{"resources": []}`, ErrNotState, `no "version"`},
		{"version 3", `{"version": 3, "terraform_version": "0.11.14", "modules": []}`, ErrVersion, "Terraform 0.12 or newer"},
		{"version 5", `{"version": 5}`, ErrVersion, "format version 5"},
		{"OpenTofu encrypted", `{"serial": 1, "lineage": "x", "meta": {"key_provider.pbkdf2.k": "e30="}, "encrypted_data": "AAAA", "encryption_version": "v0"}`, ErrEncrypted, "tofu state pull"},
		{"tampered attributes", strings.Replace(golden, `"attributes": {`, `"attributes": [{`, 1), ErrNotState, ""},
		{"tampered key", strings.Replace(golden, `"index_key": 0`, `"index_key": -1`, 1), ErrNotState, "whole number"},
		{"tampered module", strings.Replace(golden, `"module": "module.child"`, `"module": "child"`, 1), ErrNotState, "module path"},
		{"tampered provider", strings.Replace(golden, `"provider": "provider[\"terraform.io/builtin/terraform\"]"`, `"provider": "terraform"`, 1), ErrNotState, "provider"},
		{"tampered status", strings.Replace(golden, `"schema_version": 0,`, `"status": "weird", "schema_version": 0,`, 1), ErrNotState, "unknown status"},
		{"deposed", strings.Replace(golden, `"schema_version": 0,`, `"deposed": "00000001", "schema_version": 0,`, 1), ErrUnsupported, "terraform apply"},
		{"duplicate", strings.Replace(golden, `"index_key": 1`, `"index_key": 0`, 1), ErrUnsupported, "twice"},
		{"deep", strings.Repeat("[", MaxNesting+1), ErrNotState, "nests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error quotes a value of the state: %v", err)
			}
		})
	}
}

func TestParseTaintedAndModuleKeys(t *testing.T) {
	src := `{"version": 4, "terraform_version": "1.8.5", "resources": [
	  {"module": "module.a[\"x.y\"].module.b[2]", "mode": "managed", "type": "random_pet", "name": "p",
	   "provider": "module.a.provider[\"registry.opentofu.org/hashicorp/random\"].alt",
	   "instances": [{"status": "tainted", "schema_version": 1, "attributes": {"id": "x"}, "private": "aGk=",
	     "sensitive_attributes": [[{"type": "get_attr", "value": "keepers"}, {"type": "index", "value": {"value": "k", "type": "string"}}]]}]},
	  {"mode": "data", "type": "random_thing", "name": "d", "provider": "provider[\"registry.opentofu.org/hashicorp/random\"]",
	   "instances": [{"attributes": {}}]}]}`
	st, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Objects) != 1 {
		t.Fatalf("got %d objects, want 1 (data resources are not taken over)", len(st.Objects))
	}
	o := st.Objects[0]
	if want := `module.a["x.y"].module.b[2].random_pet.p`; o.Address != want {
		t.Errorf("address: got %q, want %q", o.Address, want)
	}
	if !o.Tainted || o.SchemaVersion != 1 || string(o.Private) != "hi" || o.ProviderSource != "registry.opentofu.org/hashicorp/random" {
		t.Errorf("got %+v", o)
	}
	if d := cmp.Diff([]string{"keepers"}, o.Sensitive); d != "" {
		t.Errorf("sensitive (-want +got):\n%s", d)
	}
}

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "terraform-1.11", "terraform.tfstate"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"version": 4, "resources": [{"module": "module.a[\"k\"]", "mode": "managed", "type": "t", "name": "n", "provider": "provider[\"x/y/z\"]", "instances": [{"index_key": "k", "attributes": {}}]}]}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		st, err := Parse(src)
		if err == nil && st == nil {
			t.Fatal("nil state without an error")
		}
	})
}

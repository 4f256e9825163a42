package tfbuiltin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/provider"
)

func rsProps(backend string, config, defaults, workspace cty.Value) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"backend": cty.StringVal(backend), "config": config, "defaults": defaults, "workspace": workspace,
	})
}

func cfg(kv ...string) cty.Value {
	m := map[string]cty.Value{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = cty.StringVal(kv[i+1])
	}
	return cty.ObjectVal(m)
}

var noWorkspace = cty.NullVal(cty.String)

// TestRemoteStateAsTerraform reads the states Terraform 1.11 wrote in
// testdata/repo/network as testdata/repo/app's configuration does, and
// compares with what Terraform read (terraform show -json).
func TestRemoteStateAsTerraform(t *testing.T) {
	raw, err := os.ReadFile("testdata/terraform_show.json")
	if err != nil {
		t.Fatal(err)
	}
	var show struct {
		Values struct {
			RootModule struct {
				Resources []struct {
					Address string `json:"address"`
					Values  struct {
						Outputs json.RawMessage `json:"outputs"`
					} `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
			Outputs map[string]struct {
				Type json.RawMessage `json:"type"`
			} `json:"outputs"`
		} `json:"values"`
	}
	if err := json.Unmarshal(raw, &show); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, r := range show.Values.RootModule.Resources {
		want[r.Address] = compactJSON(t, r.Values.Outputs)
	}
	tree := os.DirFS("testdata/repo")
	rs := &RemoteState{}
	for _, tc := range []struct {
		addr  string
		props cty.Value
	}{
		{"data.terraform_remote_state.network", rsProps("local", cfg("path", "../network/terraform.tfstate"), cfg("name", "dflt", "extra", "x"), noWorkspace)},
		{"data.terraform_remote_state.dev", rsProps("local", cfg("workspace_dir", "../network/terraform.tfstate.d"), cty.NullVal(cty.DynamicPseudoType), cty.StringVal("dev"))},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			if want[tc.addr] == "" {
				t.Fatalf("%s is not in the golden file", tc.addr)
			}
			req := provider.Request{Properties: tc.props, Tree: tree, TreeDir: "app"}
			if err := rs.ValidateConfig(context.Background(), req); err != nil {
				t.Fatalf("validate: %v", err)
			}
			attrs, err := rs.ReadData(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			outs, _ := attrs["outputs"].UnmarkDeep()
			got, err := ctyjson.Marshal(outs, outs.Type())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want[tc.addr] {
				t.Errorf("outputs = %s\nwant (Terraform) %s", got, want[tc.addr])
			}
			for _, n := range []string{"backend", "config", "defaults", "workspace"} {
				if !attrs[n].RawEquals(tc.props.GetAttr(n)) {
					t.Errorf("%s = %#v, want it as configured", n, attrs[n])
				}
			}
			if !provider.IsSensitive(attrs["outputs"].GetAttr("secret")) || provider.IsSensitive(attrs["outputs"].GetAttr("name")) {
				t.Errorf("outputs: only secret (recorded sensitive) must be marked sensitive: %#v", attrs["outputs"])
			}
		})
	}
	// The output of app "network" is the whole object: its type as
	// Terraform typed it.
	data, _ := rs.ReadData(context.Background(), provider.Request{Properties: rsProps("local", cfg("path", "../network/terraform.tfstate"), cfg("name", "dflt", "extra", "x"), noWorkspace), Tree: tree, TreeDir: "app"})
	outs, _ := data["outputs"].UnmarkDeep()
	gotType, _ := ctyjson.MarshalType(outs.Type())
	if string(gotType) != compactJSON(t, show.Values.Outputs["network"].Type) {
		t.Errorf("outputs type = %s, want (Terraform) %s", gotType, compactJSON(t, show.Values.Outputs["network"].Type))
	}
}

func compactJSON(t *testing.T, b json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

const minimalState = `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l","outputs":{"a":{"value":"x","type":"string"}},"resources":[]}`

func TestRemoteStateRefuses(t *testing.T) {
	tree := fstest.MapFS{
		"tmpl/terraform.tfstate": {Data: []byte(minimalState)},
		"tmpl/v3.tfstate":        {Data: []byte(`{"version":3,"outputs":{}}`)},
		"tmpl/v5.tfstate":        {Data: []byte(`{"version":5,"outputs":{}}`)},
		"tmpl/junk.tfstate":      {Data: []byte(`not json`)},
		"tmpl/notype.tfstate":    {Data: []byte(`{"version":4,"outputs":{"a":{"value":"x","type":"number"}}}`)},
		"tmpl/deep.tfstate":      {Data: []byte(`{"version":4,"outputs":{"a":{"value":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}}}`)},
		"tmpl/big.tfstate":       {Data: make([]byte, MaxStateBytes+1)},
		"tmpl/dir.tfstate/x":     {Data: []byte("x")},
	}
	for _, tc := range []struct {
		name      string
		props     cty.Value
		validate  bool // ValidateConfig refuses it too
		summary   string
		detail    string
		attribute string
	}{
		{"s3 backend", rsProps("s3", cfg("bucket", "b", "key", "k"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), true, "Unsupported backend", `backend "s3" would read state from outside the repository`, "backend"},
		{"unknown backend", rsProps("nope", cty.NullVal(cty.DynamicPseudoType), cty.NullVal(cty.DynamicPseudoType), noWorkspace), true, "Invalid backend configuration", `no backend type named "nope"`, "backend"},
		{"absolute path", rsProps("local", cfg("path", "/etc/terraform.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), true, "Invalid state path", "is absolute", "config"},
		{"leaves the repository", rsProps("local", cfg("path", "../../terraform.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), true, "Invalid state path", "leaves the definitions repository", "config"},
		{"unexpected config attribute", rsProps("local", cfg("path", "terraform.tfstate", "bogus", "1"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), true, "Invalid backend configuration", `unexpected attribute "bogus"`, "config"},
		{"config not an object", rsProps("local", cty.StringVal("terraform.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), true, "Invalid backend configuration", "must be an object", "config"},
		{"defaults not an object", rsProps("local", cty.NullVal(cty.DynamicPseudoType), cty.StringVal("x"), noWorkspace), true, "Invalid default values", "object value", "defaults"},
		{"workspace with a slash", rsProps("local", cty.NullVal(cty.DynamicPseudoType), cty.NullVal(cty.DynamicPseudoType), cty.StringVal("../x")), true, "Invalid workspace name", "not a workspace name", "workspace"},
		{"missing state", rsProps("local", cfg("path", "gone.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), false, "Unable to find remote state", "tmpl/gone.tfstate is not in the definitions repository", "config"},
		{"missing workspace", rsProps("local", cty.NullVal(cty.DynamicPseudoType), cty.NullVal(cty.DynamicPseudoType), cty.StringVal("prod")), false, "Unable to find remote state", "tmpl/terraform.tfstate.d/prod/terraform.tfstate", "workspace"},
		{"format version 3", rsProps("local", cfg("path", "v3.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), false, "Invalid remote state", "format version 3", "config"},
		{"format version 5", rsProps("local", cfg("path", "v5.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), false, "Invalid remote state", "format version 5, which is not supported by Terraform 1.11", "config"},
		{"not JSON", rsProps("local", cfg("path", "junk.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), false, "Invalid remote state", "invalid JSON at byte", "config"},
		{"value not of its type", rsProps("local", cfg("path", "notype.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), false, "Invalid remote state", `output "a" of the state: the value does not match its type`, "config"},
		{"too deep", rsProps("local", cfg("path", "deep.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), false, "Invalid remote state", "nests more than", "config"},
		{"too large", rsProps("local", cfg("path", "big.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), false, "Remote state too large", "at most", "config"},
		{"a directory", rsProps("local", cfg("path", "dir.tfstate"), cty.NullVal(cty.DynamicPseudoType), noWorkspace), false, "Unable to read remote state", "not a regular file", "config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := provider.Request{Properties: tc.props, Tree: tree, TreeDir: "tmpl"}
			rs := &RemoteState{}
			verr := rs.ValidateConfig(context.Background(), req)
			if (verr != nil) != tc.validate {
				t.Errorf("validate: got %v, want refused=%v", verr, tc.validate)
			}
			_, err := rs.ReadData(context.Background(), req)
			if err == nil {
				t.Fatal("read succeeded")
			}
			var ap provider.AttributeProblems
			if !errors.As(err, &ap) || len(ap.AttributeProblems()) != 1 {
				t.Fatalf("error %v: want one attribute problem", err)
			}
			p := ap.AttributeProblems()[0]
			if p.Summary != tc.summary || !strings.Contains(p.Detail, tc.detail) || provider.FormatPath(p.Path) != tc.attribute {
				t.Errorf("got %q / %q at %q\nwant %q / …%s… at %q", p.Summary, p.Detail, provider.FormatPath(p.Path), tc.summary, tc.detail, tc.attribute)
			}
		})
	}
}

func TestRemoteStateDefaultsAndUnknown(t *testing.T) {
	tree := fstest.MapFS{"terraform.tfstate": {Data: []byte(minimalState)}}
	rs := &RemoteState{}
	// No config: terraform.tfstate in the template's directory; a map of
	// defaults; the state wins over the defaults.
	defaults := cty.MapVal(map[string]cty.Value{"a": cty.StringVal("d"), "b": cty.StringVal("only-default")})
	attrs, err := rs.ReadData(context.Background(), provider.Request{Properties: rsProps("local", cty.NullVal(cty.DynamicPseudoType), defaults, noWorkspace), Tree: tree, TreeDir: "."})
	if err != nil {
		t.Fatal(err)
	}
	want := cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("x"), "b": cty.StringVal("only-default")})
	if got := attrs["outputs"]; !got.RawEquals(want) {
		t.Errorf("outputs = %#v, want %#v", got, want)
	}
	// Unknown parts are not refused by validation.
	unknown := rsProps("local", cty.ObjectVal(map[string]cty.Value{"path": cty.UnknownVal(cty.String)}), cty.NullVal(cty.DynamicPseudoType), noWorkspace)
	if err := rs.ValidateConfig(context.Background(), provider.Request{Properties: unknown}); err != nil {
		t.Errorf("validate with an unknown path: %v", err)
	}
	// No tree: nothing is read, least of all the daemon's disk.
	if _, err := rs.ReadData(context.Background(), provider.Request{Properties: rsProps("local", cty.NullVal(cty.DynamicPseudoType), cty.NullVal(cty.DynamicPseudoType), noWorkspace)}); err == nil {
		t.Error("read without a tree succeeded")
	}
}

func FuzzReadOutputs(f *testing.F) {
	f.Add([]byte(minimalState))
	if b, err := os.ReadFile("testdata/repo/network/terraform.tfstate"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"version":4,"outputs":{"a":{"value":[1,"x"],"type":["tuple",["number","string"]],"sensitive":true}}}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		outs, err := readOutputs(src)
		if err == nil && outs == nil {
			t.Fatal("no outputs and no error")
		}
	})
}

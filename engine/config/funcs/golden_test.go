package funcs

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

var record = flag.Bool("record", false, "run terraform (1.11, on PATH) to record testdata/terraform_console.json and testdata/terraform_functions.json")

const (
	goldenFile    = "testdata/terraform_console.json"
	functionsFile = "testdata/terraform_functions.json"
	filesDir      = "testdata/files"
)

// goldenResult is what Terraform made of one expression: an error, or a
// value with its type (as cty's JSON) and whether it was sensitive.
type goldenResult struct {
	Error     string          `json:"error,omitempty"`
	Type      json.RawMessage `json:"type,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
	Sensitive bool            `json:"sensitive,omitempty"`
	// Null is a null result: terraform output lists no null outputs, so
	// its type is not recorded.
	Null    bool   `json:"null,omitempty"`
	Console string `json:"console,omitempty"`
}

type golden struct {
	TerraformVersion string                  `json:"terraform_version"`
	Results          map[string]goldenResult `json:"results"`
}

// The configuration around the recorded expressions; goldenScope is the
// same for Table.
const goldenConfig = `
terraform {
  required_providers {
    terraform = { source = "terraform.io/builtin/terraform" }
  }
}
variable "secret" {
  default   = "s3cret"
  sensitive = true
}
variable "file_name" {
  default   = "hello.txt"
  sensitive = true
}
variable "names" {
  default = ["b", "a"]
}
locals {
  tmpl        = "Hello, $${name}!"
  tmpl_list   = "%%{ for x in items ~}[$${x}]%%{ endfor ~}"
  tmpl_file   = "$${file(\"hello.txt\")}"
  tmpl_number = "$${n}"
}
`

func goldenScope(t *testing.T) *hcl.EvalContext {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"var": cty.ObjectVal(map[string]cty.Value{
				"secret":    cty.StringVal("s3cret").Mark("sensitive"),
				"file_name": cty.StringVal("hello.txt").Mark("sensitive"),
				"names":     cty.TupleVal([]cty.Value{cty.StringVal("b"), cty.StringVal("a")}),
			}),
			"local": cty.ObjectVal(map[string]cty.Value{
				"tmpl":        cty.StringVal("Hello, ${name}!"),
				"tmpl_list":   cty.StringVal("%{ for x in items ~}[${x}]%{ endfor ~}"),
				"tmpl_file":   cty.StringVal(`${file("hello.txt")}`),
				"tmpl_number": cty.StringVal("${n}"),
			}),
		},
		Functions: Table(Options{
			FS:       os.DirFS(filesDir),
			CWD:      filepath.Join(wd, filesDir),
			PlanTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		}),
	}
}

// TestGoldenConsole evaluates every expression of goldenExprs with Table
// and compares the result, its type and its sensitivity with what
// terraform console and terraform output recorded.
func TestGoldenConsole(t *testing.T) {
	if *record {
		recordGolden(t)
	}
	var g golden
	readJSON(t, goldenFile, &g)
	ctx := goldenScope(t)
	for _, src := range goldenExprs {
		t.Run(src, func(t *testing.T) {
			want, ok := g.Results[src]
			if !ok {
				t.Fatalf("%s is not in %s: record it with -record", src, goldenFile)
			}
			got, err := eval(ctx, src)
			if want.Error != "" {
				if err == nil {
					t.Fatalf("got %#v, want an error like Terraform's:\n%s", got, want.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %s", err, want.Value)
			}
			if sens := containsMark(got, "sensitive"); sens != want.Sensitive {
				t.Errorf("sensitive: got %v, want %v", sens, want.Sensitive)
			}
			raw, _ := got.UnmarkDeep()
			if want.Null {
				if !raw.IsNull() {
					t.Errorf("got %#v, want null", raw)
				}
				return
			}
			gotType, err := ctyjson.MarshalType(raw.Type())
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, gotType, want.Type) {
				t.Errorf("type: got %s, want %s", gotType, want.Type)
			}
			if nondeterministic[src] {
				return
			}
			gotValue, err := ctyjson.Marshal(raw, raw.Type())
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, gotValue, want.Value) {
				t.Errorf("value: got %s, want %s", gotValue, want.Value)
			}
		})
	}
}

// TestEveryTerraformFunction checks that every function terraform
// metadata functions lists is in the table, and nothing more than those
// and the built-in provider's.
func TestEveryTerraformFunction(t *testing.T) {
	var meta struct {
		Signatures map[string]json.RawMessage `json:"function_signatures"`
	}
	readJSON(t, functionsFile, &meta)
	if len(meta.Signatures) == 0 {
		t.Fatalf("no functions in %s", functionsFile)
	}
	table := Table(Options{})
	plain := 0
	for name := range meta.Signatures {
		if !strings.Contains(name, "::") {
			plain++
		}
		if _, ok := table[name]; !ok {
			t.Errorf("%s is missing", name)
		}
	}
	if plain != 118 {
		t.Errorf("terraform lists %d functions, want 118 (Terraform 1.11)", plain)
	}
	for name := range table {
		if _, ok := meta.Signatures[name]; !ok && !strings.HasPrefix(name, ProviderPrefix) {
			t.Errorf("%s is not one of Terraform's functions", name)
		}
	}
}

func eval(ctx *hcl.EvalContext, src string) (cty.Value, error) {
	expr, diags := hclsyntax.ParseExpression([]byte(src), "expr.tf", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	return v, nil
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// jsonEqual compares two JSON documents, numbers exactly.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	norm := func(x []byte) string {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v", x, err)
		}
		out, _ := json.Marshal(v)
		return string(out)
	}
	return norm(a) == norm(b)
}

// recordGolden runs terraform console on each expression (to learn which
// fail and which are sensitive), then terraform apply with each good one
// as an output (for exact types and values), and writes the golden files.
func recordGolden(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filesDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(goldenConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	tf := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command("terraform", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
		cmd.Stdin = strings.NewReader(stdin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	if out, err := tf("", "init", "-no-color", "-input=false"); err != nil {
		t.Fatalf("terraform init: %v\n%s", err, out)
	}
	version, err := tf("", "version", "-json")
	if err != nil {
		t.Fatalf("terraform version: %v", err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal([]byte(version), &v); err != nil {
		t.Fatalf("terraform version: %v\n%s", err, version)
	}
	meta, err := tf("", "metadata", "functions", "-json")
	if err != nil {
		t.Fatalf("terraform metadata functions: %v", err)
	}
	if err := os.WriteFile(functionsFile, []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}

	g := golden{TerraformVersion: v.Version, Results: map[string]goldenResult{}}
	var outputs strings.Builder
	names := map[string]string{}
	exprs := slices.Sorted(slices.Values(goldenExprs))
	for i, src := range exprs {
		r := goldenResult{}
		if !nondeterministic[src] {
			out, err := tf(src+"\n", "console", "-no-color")
			out = strings.TrimSpace(out)
			if err != nil {
				// A panic's stack trace says nothing about the function.
				out, _, _ = strings.Cut(out, "goroutine ")
				r.Error = strings.TrimSpace(out)
				g.Results[src] = r
				continue
			}
			r.Console = out
			r.Sensitive = strings.Contains(out, "(sensitive value)")
		}
		name := fmt.Sprintf("e%04d", i)
		names[name] = src
		fmt.Fprintf(&outputs, "output %q {\n  value     = %s\n  sensitive = true\n}\n", name, src)
		g.Results[src] = r
	}
	if err := os.WriteFile(filepath.Join(dir, "outputs.tf"), []byte(outputs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := tf("", "apply", "-auto-approve", "-no-color", "-input=false"); err != nil {
		t.Fatalf("terraform apply: %v\n%s", err, out)
	}
	out, err := tf("", "output", "-json")
	if err != nil {
		t.Fatalf("terraform output: %v\n%s", err, out)
	}
	var values map[string]struct {
		Type  json.RawMessage `json:"type"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &values); err != nil {
		t.Fatal(err)
	}
	for name, src := range names {
		o, ok := values[name]
		r := g.Results[src]
		if !ok {
			r.Null = true // terraform output omits null outputs
			g.Results[src] = r
			continue
		}
		r.Type = o.Type
		if !nondeterministic[src] {
			r.Value = o.Value
		}
		g.Results[src] = r
	}
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goldenFile, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func osDirFS(dir string) fs.FS { return os.DirFS(dir) }

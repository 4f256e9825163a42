package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/command"
	"github.com/stackd/stackd/engine/provider/file"
)

// The secret of these tests, and what a template can make of it.
const sensSecret = "Kq7rZt2Lm9Xv"

func reversed(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

// sensForms are the secret and the forms of it the tests' templates
// compute: none may be shown.
var sensForms = []string{sensSecret, reversed(sensSecret), base64.StdEncoding.EncodeToString([]byte(sensSecret)), strings.ToUpper(sensSecret)}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, f := range sensForms {
		if strings.Contains(s, f) {
			t.Errorf("%s shows %q:\n%s", what, f, s)
		}
	}
}

// sensDefs is a stack set "s" at one target giving template t (main.hcl
// is tmpl) the sensitive variable k = sensSecret.
func sensDefs(t *testing.T, reg provider.Registry, tmpl string) (*config.Definitions, *Instance) {
	t.Helper()
	defs := mustLoad(t, map[string]string{
		"d.hcl": `stack_set "s" {
  template = "./t"
  vars     = { k = "` + sensSecret + `" }
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`,
		"t/main.hcl": `variable "k" {
  type      = string
  sensitive = true
}
` + tmpl,
	}, reg)
	return defs, &Instance{StackSet: defs.StackSet("s"), StackSetID: "ss-1", Target: config.Target{Region: "eu", Account: "111"}}
}

// renderAll renders a change set of one instance's plan in every format.
func renderAll(t *testing.T, p *InstancePlan, diags []Diagnostic) string {
	t.Helper()
	cs := &changeset.StackSetChangeSet{StackSetName: "s", Revision: "0123456789abcdef", Action: changeset.InstanceUpdate, Diagnostics: diags}
	if p != nil {
		cs.Add(changeset.InstanceChangeSet{Region: "eu", Account: "111", Action: changeset.InstanceUpdate, Changes: p.Changes()})
	}
	var b bytes.Buffer
	if err := changeset.RenderText(&b, cs, false); err != nil {
		t.Fatal(err)
	}
	if err := changeset.RenderMarkdown(&b, cs, changeset.MarkdownOptions{Branch: "pr"}); err != nil {
		t.Fatal(err)
	}
	if err := json.NewEncoder(&b).Encode(cs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A function that fails on a sensitive argument, or on a value derived
// from one, says so without the argument; other calls keep their message.
// The diagnostics are the same in the text writer, DiagnosticsJSON and the
// change-set renderers.
func TestFunctionErrorsHideSensitiveArguments(t *testing.T) {
	tests := []struct {
		name, expr string
		// wantDetail is a regular expression the detail must match.
		wantDetail string
	}{
		{"parseint", `parseint(var.k, 10)`, `Call to function "parseint" failed: the error message is hidden because an argument is sensitive`},
		{"parseint of a derived value", `parseint(strrev(var.k), 10)`, `"parseint" failed: the error message is hidden`},
		{"tonumber", `tonumber(var.k)`, `"tonumber" failed: the error message is hidden`},
		{"jsondecode", `jsondecode(var.k)`, `"jsondecode" failed: the error message is hidden`},
		{"regex", `regex("^(a)$", format("%s!", var.k))`, `"regex" failed: the error message is hidden`},
		{"timeadd", `timeadd("2020-01-01T00:00:00Z", upper(var.k))`, `"timeadd" failed: the error message is hidden`},
		{"csvdecode", `csvdecode("a\n\"${var.k}")`, `"csvdecode" failed: the error message is hidden`},
		{"base64 of a sensitive value in a failing call", `parseint(base64encode(var.k), 10)`, `"parseint" failed: the error message is hidden`},
		{"duplicate key of a for expression", `jsonencode({ for x in [var.k, var.k] : x => 1 })`, `hidden because the expression uses a sensitive value \(x\)`},
		{"not sensitive: the message stays", `parseint("zz${length([var.k])}", 10)`, `cannot parse "zz1" as a base 10 integer`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := provider.Registry{"rec": newRecorder()}
			defs, inst := sensDefs(t, reg, `resource "rec" "x" {
  name    = "x"
  content = `+tc.expr+`
}`)
			_, diags := New(reg).Plan(inst, nil)
			if !diags.HasErrors() {
				t.Fatalf("%s planned without error", tc.expr)
			}
			js := config.DiagnosticsJSON(diags)
			var text bytes.Buffer
			if err := WriteDiagnostics(&text, defs, diags, false); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(js)
			assertNoSecret(t, "DiagnosticsJSON", string(b))
			assertNoSecret(t, "WriteDiagnostics", text.String())
			assertNoSecret(t, "the change sets", renderAll(t, nil, js))
			if !regexp.MustCompile(tc.wantDetail).MatchString(js[0].Detail) {
				t.Errorf("detail %q does not match %q", js[0].Detail, tc.wantDetail)
			}
			// The text writer and the JSON form say the same.
			flat := strings.Join(strings.Fields(text.String()), " ")
			for _, d := range js {
				if !strings.Contains(flat, strings.Join(strings.Fields(d.Detail), " ")) {
					t.Errorf("the text writer does not say %q:\n%s", d.Detail, text.String())
				}
			}
		})
	}
}

// Values derived from a sensitive value through functions are sensitive.
func TestDerivedValuesAreSensitive(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	_, inst := sensDefs(t, reg, `
resource "rec" "rev" {
  name    = "rev"
  content = strrev(var.k)
}
resource "rec" "b64" {
  name    = "b64"
  content = base64encode(var.k)
}
resource "rec" "fmt" {
  name    = "fmt"
  content = format("%s-%s", "x", upper(var.k))
  tags    = { k = substr(var.k, 0, 6) }
}
output "n" {
  value = parseint(substr(strrev(var.k), 9, 1), 10)
}
`)
	p, diags := New(reg).Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out := renderAll(t, p, nil)
	assertNoSecret(t, "the change sets", out)
	if n := strings.Count(out, SensitivePlaceholder); n < 4 {
		t.Errorf("the change sets show %s %d times, want the derived values as such:\n%s", SensitivePlaceholder, n, out)
	}
	if !provider.IsSensitive(p.Outputs["n"]) {
		t.Errorf("output n (a number computed from the secret) is not sensitive")
	}
}

// secretProvider returns a sensitive attribute (NoEcho data) holding the
// secret, as a custom resource does.
type secretProvider struct{}

func (secretProvider) Schema() provider.Schema {
	return provider.Schema{Properties: map[string]provider.Property{"name": {Type: cty.String}}, Attributes: []string{"id", "password"}}
}

func (secretProvider) Create(_ context.Context, req provider.Request) (provider.Result, error) {
	return provider.Result{
		PhysicalID:          "db-1",
		Attributes:          map[string]cty.Value{"id": cty.StringVal("db-1"), "password": cty.StringVal(sensSecret)},
		SensitiveAttributes: []string{"password"},
	}, nil
}

func (p secretProvider) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	return p.Create(ctx, req)
}
func (secretProvider) Read(_ context.Context, req provider.Request) (provider.Result, error) {
	return provider.Result{PhysicalID: req.PhysicalID}, nil
}
func (secretProvider) Delete(context.Context, provider.Request) error { return nil }

// A plan of an untrusted ref does not see the sensitive values recorded
// in the state: they are unknown there, so a pull request computes
// nothing from them — not the value, not an error message quoting it.
func TestUntrustedPlanWithholdsRecordedSecrets(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder(), "db": secretProvider{}}
	e := New(reg)
	j := newJournal()
	_, inst := sensDefs(t, reg, `resource "db" "main" {
  name = "main"
}`)
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}

	// The pull request's template.
	for _, expr := range []string{
		`parseint(strrev(db.main.password), 10)`,
		`db.main.password`,
		`"${db.main.password}-x"`,
		`base64encode(db.main.password)`,
	} {
		t.Run(expr, func(t *testing.T) {
			_, pr := sensDefs(t, reg, `resource "db" "main" {
  name = "main"
}
resource "rec" "probe" {
  name    = "probe"
  content = `+expr+`
}
output "leak" {
  value = `+expr+`
}`)
			pr.Untrusted = true
			p, diags := e.Plan(pr, j.list())
			if diags.HasErrors() {
				t.Fatalf("untrusted plan: %v", diags)
			}
			assertNoSecret(t, "the change sets", renderAll(t, p, nil))
			v := p.Outputs["leak"]
			if v.IsWhollyKnown() || !provider.IsSensitive(v) {
				t.Errorf("output leak = %#v, want unknown and sensitive", v)
			}
			if _, err := e.Apply(context.Background(), p, newJournal(), nil); !errors.Is(err, errUntrustedApply) {
				t.Errorf("Apply of an untrusted plan: got %v, want errUntrustedApply", err)
			}

			// The deploy branch sees the value, marked; a failing call on it
			// hides its message.
			pr.Untrusted = false
			p, diags = e.Plan(pr, j.list())
			b, _ := json.Marshal(config.DiagnosticsJSON(diags))
			assertNoSecret(t, "the trusted plan's diagnostics", string(b))
			if !diags.HasErrors() {
				if v := p.Outputs["leak"]; !v.IsWhollyKnown() || !provider.IsSensitive(v) {
					t.Errorf("trusted output leak = %#v, want known and sensitive", v)
				}
				assertNoSecret(t, "the trusted change sets", renderAll(t, p, nil))
			}
		})
	}
}

// A command given a sensitive value returns sensitive attributes: what it
// printed is computed from the value. Its physical id stays visible when
// it is stackd's request id.
func TestCommandOutputsOfSensitiveInputsAreSensitive(t *testing.T) {
	root := t.TempDir()
	reg := provider.Registry{"command": command.New(command.Options{Root: root, Enabled: true}), "rec": newRecorder()}
	e := New(reg)
	j := newJournal()
	tmpl := `resource "command" "c" {
  create      = "printf '{\"token\": \"tok-%s\", \"plain\": \"p\"}' \"$K\""
  environment = { K = var.k }
}
resource "command" "public" {
  create = "echo '{\"plain\": \"p\"}'"
}
output "token" {
  value = command.c.token
}
output "plain" {
  value = command.c.plain
}
output "public" {
  value = command.public.plain
}
`
	_, inst := sensDefs(t, reg, tmpl)
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	res, err := e.Apply(context.Background(), p, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := res.Outputs["token"]; !provider.IsSensitive(v) || !strings.Contains(displayUnmarked(v), sensSecret) {
		t.Errorf("output token = %#v, want the command's output, sensitive", v)
	}
	if !provider.IsSensitive(res.Outputs["plain"]) {
		t.Errorf("output plain is not sensitive: the command that printed it was given a sensitive value")
	}
	if provider.IsSensitive(res.Outputs["public"]) {
		t.Errorf("output public is sensitive: its command was given nothing sensitive")
	}
	for _, r := range j.list() {
		want := []string{"environment", "plain", "stdout", "token"}
		if r.Address == "command.public" {
			want = nil
		}
		if !slices.Equal(r.Sensitive, want) {
			t.Errorf("%s: recorded sensitive %v, want %v", r.Address, r.Sensitive, want)
		}
	}

	// A later plan reads them marked.
	_, inst = sensDefs(t, reg, tmpl+`
resource "rec" "use" {
  name    = "use"
  content = command.c.token
}`)
	p, diags = e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	assertNoSecret(t, "the change sets", renderAll(t, p, nil))
}

func displayUnmarked(v cty.Value) string {
	v, _ = v.UnmarkDeep()
	if !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return ""
	}
	return v.AsString()
}

// A physical id built from a sensitive value prints as <sensitive> in
// every change-set format, for a change and for a removal; one that is
// not stays visible.
func TestSensitivePhysicalID(t *testing.T) {
	root := t.TempDir()
	reg := provider.Registry{"file": file.New(file.Options{Root: root})}
	e := New(reg)
	j := newJournal()
	tmpl := func(content string) string {
		return `resource "file" "secret_path" {
  path    = "keys/${var.k}.txt"
  content = "` + content + `"
}
resource "file" "public_path" {
  path    = "public.txt"
  content = "${var.k}` + content + `"
}`
	}
	_, inst := sensDefs(t, reg, tmpl("v1"))
	p, diags := e.Plan(inst, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := e.Apply(context.Background(), p, j, nil); err != nil {
		t.Fatal(err)
	}
	if !fileExists(filepath.Join(root, "111", "eu", "keys", sensSecret+".txt")) {
		t.Fatalf("the file with the secret in its path was not written: the test would prove nothing")
	}

	_, inst = sensDefs(t, reg, tmpl("v2"))
	p, diags = e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ids := map[string]string{}
	for _, c := range p.Changes() {
		ids[c.ResourceChange.LogicalResourceId] = c.ResourceChange.PhysicalResourceId
	}
	if ids["file.secret_path"] != SensitivePlaceholder || !strings.HasSuffix(ids["file.public_path"], "public.txt") {
		t.Errorf("physical ids: %v, want file.secret_path's %s and file.public_path's shown", ids, SensitivePlaceholder)
	}
	assertNoSecret(t, "the change sets of an update", renderAll(t, p, nil))

	// Removed from the template.
	_, inst = sensDefs(t, reg, ``)
	p, diags = e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if n := len(p.Changes()); n != 2 {
		t.Fatalf("%d changes, want the two removals", n)
	}
	assertNoSecret(t, "the change sets of a removal", renderAll(t, p, nil))
	assertNoSecret(t, "the change sets of a destroy", renderAll(t, PlanDestroy(inst, j.list()), nil))
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// A diagnostic about an expression that uses a sensitive value gets a
// generic detail; the summary and detail of every diagnostic are
// redacted like the text writer's output.
func TestSanitizeDiagnostics(t *testing.T) {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{
		"var": cty.ObjectVal(map[string]cty.Value{
			"k":      cty.StringVal(sensSecret).Mark(provider.SensitiveMark),
			"public": cty.StringVal("pub"),
			"obj":    cty.ObjectVal(map[string]cty.Value{"inner": cty.StringVal(sensSecret).Mark(provider.SensitiveMark)}),
		}),
	}}
	expr := func(src string) hcl.Expression {
		e, d := hclsyntax.ParseExpression([]byte(src), "x.hcl", hcl.InitialPos)
		if d.HasErrors() {
			t.Fatal(d)
		}
		return e
	}
	red := provider.NewSecrets(cty.StringVal(sensSecret))
	diags := hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "About k", Detail: "the value " + sensSecret + " is wrong", Expression: expr("var.k"), EvalContext: ctx},
		{Severity: hcl.DiagError, Summary: "About a missing attribute of a sensitive object", Detail: "no attribute nope in " + sensSecret, Expression: expr("var.obj.nope"), EvalContext: ctx},
		{Severity: hcl.DiagError, Summary: "About public", Detail: "the value pub is wrong", Expression: expr("var.public"), EvalContext: ctx},
		{Severity: hcl.DiagWarning, Summary: "Free text " + sensSecret, Detail: "quotes " + sensSecret},
	}
	out := sanitizeDiagnostics(diags, red)
	want := []string{
		"The details of this error are hidden because the expression uses a sensitive value (var.k).",
		"The details of this error are hidden because the expression uses a sensitive value (var.obj).",
		"the value pub is wrong",
		"quotes <sensitive>",
	}
	for i, d := range out {
		if d.Detail != want[i] {
			t.Errorf("diagnostic %d: detail %q, want %q", i, d.Detail, want[i])
		}
		assertNoSecret(t, "a sanitized summary", d.Summary)
	}
	if diags[0].Detail != "the value "+sensSecret+" is wrong" {
		t.Errorf("sanitizeDiagnostics changed its input")
	}
}

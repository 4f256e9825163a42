package config

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
)

// evalIn evaluates src with the function table of a meter over a root
// module in dir of fsys (as a plan's), with vars as var.*.
func evalIn(t *testing.T, m *Meter, src string, vars map[string]cty.Value) (cty.Value, hcl.Diagnostics) {
	t.Helper()
	expr, diags := hclsyntax.ParseExpression([]byte(src), "main.tf", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", src, diags)
	}
	GuardExpr(expr)
	ctx := &hcl.EvalContext{Functions: m.Functions(), Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)}}
	return expr.Value(ctx)
}

// planMeter is the meter of a plan of the root module in dir of fsys.
func planMeter(fsys fs.FS, dir string) *Meter {
	m := NewMeter(context.Background())
	tmpl := &Template{Dir: dir}
	tmpl.files = funcFS{fsys: fsys, dirs: tmpl.fileDirs()}
	m.Template = tmpl
	return m
}

var testTree = fstest.MapFS{
	"web/main.tf":          {Data: []byte(`output "x" { value = 1 }`)},
	"web/conf/app.tftpl":   {Data: []byte("%{ for k, v in tags ~}\n${k}=${upper(v)}\n%{ endfor ~}\n")},
	"web/conf/parse.tftpl": {Data: []byte(`${parseint(p, 10)}`)},
	"web/conf/loops.tftpl": {Data: []byte(`%{ for a in xs }%{ for b in xs }%{ for c in xs }..........%{ endfor }%{ endfor }%{ endfor }`)},
	"web/conf/deep.tftpl":  {Data: []byte(strings.Repeat("${(", 600) + "1" + strings.Repeat(")}", 600))},
	"web/data.txt":         {Data: []byte("hello\n")},
	"web/big.txt":          {Data: []byte(strings.Repeat("x", MaxFunctionStringBytes+1))},
	"other/secret.txt":     {Data: []byte("not the template's")},
}

// The silent differences of the go-cty table are gone: Terraform's
// answers (as `terraform console` 1.11 gives them).
func TestTerraformSemantics(t *testing.T) {
	m := planMeter(testTree, "web")
	for _, tc := range []struct{ src, want string }{
		{`coalesce("", "x")`, "x"},
		{`replace("a-b-c-d", "/-(.)/", "<$1>")`, "a<b><c><d>"},
		{`replace("a.b", ".", "x")`, "axb"},
		{`replace("a/b", "/", "x")`, "axb"},
		{`tostring(length("héllo"))`, "5"},
		{`file("data.txt")`, "hello\n"},
		{`file("${abspath(".")}/data.txt")`, "hello\n"},
		{`templatefile("conf/app.tftpl", {tags = {a = "x", b = "y"}})`, "a=X\nb=Y\n"},
		{`join(",", fileset(".", "conf/*.tftpl"))`, "conf/app.tftpl,conf/deep.tftpl,conf/loops.tftpl,conf/parse.tftpl"},
		{`core::upper("x")`, "X"},
		{`regex_replace("a1b22", "[0-9]+", "#")`, "a#b#"},
	} {
		got, diags := evalIn(t, m, tc.src, nil)
		if diags.HasErrors() {
			t.Errorf("%s: %s", tc.src, diags)
			continue
		}
		if got.Type() != cty.String || got.AsString() != tc.want {
			t.Errorf("%s = %#v, want %q", tc.src, got, tc.want)
		}
	}
}

// File functions read the template's tree under its directories, never
// the disk, and say why they refuse what they refuse.
func TestFileFunctionsRefuse(t *testing.T) {
	m := planMeter(testTree, "web")
	for _, tc := range []struct{ src, want string }{
		{`file("../other/secret.txt")`, "read only the files under the template's directories (web)"},
		{`file("/etc/passwd")`, "read only the files under the template's directories"},
		{`file("~/.ssh/id_rsa")`, "home directory"},
		{`fileexists("../other/secret.txt")`, "read only the files under the template's directories"},
		{`fileset("..", "**")`, "read only the files under the template's directories"},
		{`file("missing.txt")`, "no file exists at missing.txt"},
		{`file("big.txt")`, "strings of at most 1048576 bytes"},
		{`templatefile("conf/deep.tftpl", {})`, "nest"},
	} {
		_, diags := evalIn(t, m, tc.src, nil)
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.src, diags, tc.want)
		}
	}
}

// A SOPS file (decrypted by ReadFile of a SecretFS) reads as it is in
// the tree: file functions open files, and never see plaintext.
func TestFileFunctionsReadNoPlaintext(t *testing.T) {
	m := planMeter(decryptingFS{testTree}, "web")
	got, diags := evalIn(t, m, `file("data.txt")`, nil)
	if diags.HasErrors() || got.AsString() != "hello\n" {
		t.Fatalf("file = %#v %s, want the file as the tree holds it", got, diags)
	}
}

// decryptingFS "decrypts" every file it reads with ReadFile, as a SecretFS
// does for SOPS files; Open gives the file as it is.
type decryptingFS struct{ fstest.MapFS }

func (d decryptingFS) ReadFile(string) ([]byte, error) { return []byte("PLAINTEXT"), nil }
func (decryptingFS) Secret(string) bool                { return true }

// What templates render is bounded: loops over their variables count
// against MaxBuiltBytes, and the error of a call with a sensitive argument
// inside a template is hidden as outside.
func TestTemplateFileLimits(t *testing.T) {
	m := planMeter(testTree, "web")
	xs := make([]cty.Value, 1000)
	for i := range xs {
		xs[i] = cty.StringVal("x")
	}
	_, diags := evalIn(t, m, `templatefile("conf/loops.tftpl", {xs = var.xs})`, map[string]cty.Value{"xs": cty.ListVal(xs)})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "MiB") {
		t.Errorf("a billion iterations: got %v, want the MaxBuiltBytes error", diags)
	}
	_, diags = evalIn(t, planMeter(testTree, "web"), `templatefile("conf/parse.tftpl", {p = var.p})`,
		map[string]cty.Value{"p": cty.StringVal("hunter2").Mark(provider.SensitiveMark)})
	if !diags.HasErrors() || strings.Contains(diags.Error(), "hunter2") {
		t.Errorf("parseint of a sensitive value in a template: got %v, want an error without the value", diags)
	}
}

// The estimates of the new functions refuse before building.
func TestNewFunctionEstimates(t *testing.T) {
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g"} {
		bomb += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	long := strings.Repeat("ab", 300000)
	for _, tc := range []struct {
		src  string
		vars map[string]cty.Value
		want string
	}{
		{`yamldecode(var.s)`, map[string]cty.Value{"s": cty.StringVal(bomb)}, "at most 10000 elements"},
		{`replace(var.s, "/(a)/", "$1$1$1")`, map[string]cty.Value{"s": cty.StringVal(long)}, "strings of at most 1048576 bytes"},
		{`replace(var.s, "/(?:a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p|q|r|s|t|u|v|w|x|y|z){1,50}/", "")`, map[string]cty.Value{"s": cty.StringVal(strings.Repeat(long, 1))}, "too much work"},
		{`urlencode(var.s)`, map[string]cty.Value{"s": cty.StringVal(strings.Repeat("é", 200000))}, "strings of at most 1048576 bytes"},
		{`yamlencode([var.s, var.s])`, map[string]cty.Value{"s": cty.StringVal(long)}, "strings of at most 1048576 bytes"},
		{`textencodebase64(var.s, "UTF-16")`, map[string]cty.Value{"s": cty.StringVal(long)}, "strings of at most 1048576 bytes"},
		{`transpose({for i in range(200) : "k${i}" => [for j in range(60) : "v${j}"]})`, nil, "at most 10000 elements"},
	} {
		_, diags := evalIn(t, planMeter(testTree, "web"), tc.src, tc.vars)
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
			t.Errorf("%.60s: got %.300v, want an error saying %q", tc.src, diags, tc.want)
		}
	}
	// Within the limits, the same functions answer.
	got, diags := evalIn(t, planMeter(testTree, "web"), `length(yamldecode("a: &a [1, 2]\nb: *a\n").b)`, nil)
	if diags.HasErrors() || !got.RawEquals(cty.NumberIntVal(2)) {
		t.Errorf("yamldecode with an alias = %#v %s, want 2", got, diags)
	}
}

// timestamp, uuid and bcrypt are unknown while planning and known when
// applying, as in Terraform; plantimestamp is the plan's time.
func TestImpureFunctions(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	plan := planMeter(testTree, "web")
	plan.PlanTime = at
	apply := planMeter(testTree, "web")
	apply.Apply, apply.PlanTime = true, at
	for _, src := range []string{`timestamp()`, `uuid()`, `bcrypt("x", 4)`} {
		v, diags := evalIn(t, plan, src, nil)
		if diags.HasErrors() || v.IsKnown() {
			t.Errorf("planning %s = %#v %s, want unknown", src, v, diags)
		}
		v, diags = evalIn(t, apply, src, nil)
		if diags.HasErrors() || !v.IsKnown() {
			t.Errorf("applying %s = %#v %s, want known", src, v, diags)
		}
	}
	for _, m := range []*Meter{plan, apply} {
		v, diags := evalIn(t, m, `plantimestamp()`, nil)
		if diags.HasErrors() || v.AsString() != "2026-01-02T03:04:05Z" {
			t.Errorf("plantimestamp() = %#v %s, want the plan's time", v, diags)
		}
	}
	// Without a plan (definitions), impure functions are unknown.
	v, diags := evalConst(mustParse(t, `timestamp()`), "x")
	if diags.HasErrors() || v.IsKnown() {
		t.Errorf("timestamp() in definitions = %#v %s, want unknown", v, diags)
	}
}

func mustParse(t *testing.T, src string) hcl.Expression {
	t.Helper()
	expr, diags := hclsyntax.ParseExpression([]byte(src), "x.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return expr
}

// A template calling file functions is hashed with the files under its
// directories: a commit changing one plans its instances again; a commit
// changing a file elsewhere does not.
func TestTemplateHashCoversFiles(t *testing.T) {
	defs := func(tmpl, data, other string) fstest.MapFS {
		return fstest.MapFS{
			"stacks.hcl":      {Data: []byte("stack_set \"web\" {\n  template = \"./web\"\n  deployment_targets {\n    regions = [\"r\"]\n    accounts = [\"111\"]\n  }\n}\n")},
			"web/main.hcl":    {Data: []byte(tmpl)},
			"web/data.txt":    {Data: []byte(data)},
			"elsewhere/x.txt": {Data: []byte(other)},
		}
	}
	hash := func(fsys fs.FS) string {
		t.Helper()
		d, diags := Load(fsys, ".", provider.Registry{})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return d.StackSets[0].Template.Hash
	}
	reads := "output \"x\" { value = file(\"data.txt\") }\n"
	plain := "output \"x\" { value = \"y\" }\n"
	if hash(defs(reads, "1", "a")) == hash(defs(reads, "2", "a")) {
		t.Error("changing a file the template reads leaves its hash")
	}
	if hash(defs(reads, "1", "a")) != hash(defs(reads, "1", "b")) {
		t.Error("changing a file outside the template's directory changes its hash")
	}
	if hash(defs(plain, "1", "a")) != hash(defs(plain, "2", "a")) {
		t.Error("a template without file functions is hashed with its files")
	}
}

package config

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
)

// tfStackSet deploys ./t to one target with the given vars.
func tfStackSet(vars string) string {
	return `stack_set "s" {
  template = "./t"
  ` + vars + `
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111"]
  }
}`
}

func loadTF(t *testing.T, vars string, files map[string]string) (*Definitions, hcl.Diagnostics) {
	t.Helper()
	fsys := fstest.MapFS{"d.hcl": {Data: []byte(tfStackSet(vars))}}
	for n, c := range files {
		fsys["t/"+n] = &fstest.MapFile{Data: []byte(c)}
	}
	reg := provider.Registry{"file": file.New(file.Options{Root: t.TempDir()})}
	return Load(fsys, ".", reg)
}

// hasDiag reports whether diags hold one of severity sev whose subject
// starts with at and whose text contains want.
func hasDiag(diags hcl.Diagnostics, sev hcl.DiagnosticSeverity, at, want string) bool {
	for _, d := range diags {
		if d.Severity != sev || !strings.Contains(d.Summary+" "+d.Detail, want) {
			continue
		}
		if at == "" || d.Subject != nil && strings.HasPrefix(d.Subject.String(), at) {
			return true
		}
	}
	return false
}

func TestClassifyTemplateFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		want fileKind
	}{
		{"main.tf", kindPrimary}, {"vars.tf.json", kindPrimary}, {"stackd.hcl", kindPrimary},
		{"override.tf", kindOverride}, {"web_override.tf", kindOverride}, {"override.tf.json", kindOverride}, {"a_override.tf.json", kindOverride},
		{"overrides.tf", kindPrimary}, {"my-override.tf", kindPrimary},
		{"terraform.tfvars", kindTFVars}, {"terraform.tfvars.json", kindTFVars}, {"a.auto.tfvars", kindTFVars}, {"b.auto.tfvars.json", kindTFVars},
		{"prod.tfvars", kindNotLoaded}, {"prod.tfvars.json", kindNotLoaded}, {"terraform.tfstate", kindNotLoaded}, {"terraform.tfstate.backup", kindNotLoaded}, {"main.tofu", kindNotLoaded},
		{".terraform.lock.hcl", kindLock},
		{".hidden.tf", kindIgnored}, {"main.tf~", kindIgnored}, {"#main.tf#", kindIgnored}, {".#main.tf", kindIgnored},
		{"main.tftest.hcl", kindIgnored}, {"mock.tfmock.hcl", kindIgnored},
		{"README.md", kindIgnored}, {"user_data.sh.tpl", kindIgnored}, {"policy.json", kindIgnored},
	} {
		if got, _ := classifyTemplateFile(tc.name); got != tc.want {
			t.Errorf("%s: got kind %d, want %d", tc.name, got, tc.want)
		}
	}
}

// A directory of *.tf, *.tf.json and *.hcl files is read whole, with
// override files merged and variable files applied in Terraform's order;
// what Terraform ignores is ignored, what it would not read is warned of.
func TestTerraformFileSet(t *testing.T) {
	files := map[string]string{
		"main.tf": `
variable "name" { type = string }
variable "greeting" {
  type    = string
  default = "hello"
}
locals { path = "out/${var.name}.txt" }
resource "file" "a" {
  path    = local.path
  content = "${var.greeting} ${var.name}"
}
`,
		"variables.tf.json": `{"variable": {"suffix": {"type": "string", "default": "json"}, "from_auto": {"type": "string"}}}`,
		"extra.hcl":         `output "suffix" { value = var.suffix }`,
		"override.tf": `
locals { path = "out/override-${var.name}.txt" }
variable "greeting" { default = "overridden" }
`,
		"terraform.tfvars":      "name = \"tfvars\"\nsuffix = \"from-tfvars\"\n",
		"b.auto.tfvars":         "suffix = \"from-b\"\nfrom_auto = \"b\"\n",
		"a.auto.tfvars.json":    `{"suffix": "from-a", "from_auto": "a", "undeclared": 1}`,
		"prod.tfvars":           "name = \"prod\"\n",
		"terraform.tfstate":     "{}",
		"main.tf~":              "this is not HCL {",
		"#main.tf#":             "this is not HCL {",
		".terraform.lock.hcl":   "# no providers\n",
		"notes.tftest.hcl":      "run \"x\" {}",
		".terraform/modules.tf": "not HCL {",
	}
	defs, diags := loadTF(t, `vars = { name = "stackset" }`, files)
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	ss := defs.StackSets[0]
	tm := ss.Template
	for _, v := range []string{"name", "greeting", "suffix", "from_auto"} {
		if tm.Variables[v] == nil {
			t.Errorf("variable %q not loaded; got %v", v, SortedKeys(tm.Variables))
		}
	}
	if tm.Outputs["suffix"] == nil || tm.Resources["file.a"] == nil {
		t.Errorf("got outputs %v, resources %v; want the .hcl file's output and the .tf file's resource", SortedKeys(tm.Outputs), SortedKeys(tm.Resources))
	}
	if got := tm.Variables["greeting"].Default; !got.RawEquals(cty.StringVal("overridden")) {
		t.Errorf("greeting default: got %#v, want the override file's", got)
	}
	if got := tm.Locals["path"].DeclRange.Filename; got != "t/override.tf" {
		t.Errorf("local path: got from %s, want t/override.tf", got)
	}
	// Terraform's precedence: terraform.tfvars < *.auto.tfvars in name
	// order < the stack set's vars (-var).
	for name, want := range map[string]string{"name": "stackset", "suffix": "from-b", "from_auto": "b"} {
		if got := ss.Vars[name]; !got.RawEquals(cty.StringVal(want)) {
			t.Errorf("var %s: got %#v, want %q", name, got, want)
		}
	}
	if _, ok := ss.Vars["greeting"]; ok {
		t.Errorf("greeting: got a stack set value, want the template default")
	}
	for _, w := range []struct{ at, want string }{
		{"t/prod.tfvars:1,1", "terraform.tfvars"},
		{"t/terraform.tfstate:1,1", "import-state"},
		{"t/a.auto.tfvars.json:1,", "undeclared"},
	} {
		if !hasDiag(diags, hcl.DiagWarning, w.at, w.want) {
			t.Errorf("want a warning at %s saying %q; got %s", w.at, w.want, diags.Error())
		}
	}
}

// Override files follow Terraform's merge rules: arguments replace, nested
// block types replace whole, lifecycle merges per argument, and whatever
// Terraform would refuse or drop is an error.
func TestOverrideFiles(t *testing.T) {
	base := `
variable "n" {
  type    = number
  default = 1
}
locals { a = "a" }
resource "file" "x" {
  path    = "x.txt"
  content = "base"
  lifecycle {
    prevent_destroy = true
  }
}
output "o" { value = local.a }
`
	defs, diags := loadTF(t, "", map[string]string{"main.tf": base, "x_override.tf": `
resource "file" "x" {
  content = "override"
  lifecycle {
    ignore_changes = [content]
  }
}
output "o" { sensitive = true }
`})
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	r := defs.StackSets[0].Template.Resources["file.x"]
	if got := r.Properties["content"].Expr.Range().Filename; got != "t/x_override.tf" {
		t.Errorf("content from %s, want the override", got)
	}
	if got := r.Properties["path"].Expr.Range().Filename; got != "t/main.tf" {
		t.Errorf("path from %s, want the base", got)
	}
	if !r.Lifecycle.PreventDestroy || len(r.Lifecycle.IgnoreChanges) != 1 {
		t.Errorf("lifecycle: got %+v, want prevent_destroy kept and ignore_changes added", r.Lifecycle)
	}
	if o := defs.StackSets[0].Template.Outputs["o"]; !o.Sensitive || o.Expr == nil {
		t.Errorf("output o: got sensitive=%v expr=%v, want sensitive with the base value", o.Sensitive, o.Expr)
	}

	for _, tc := range []struct{ name, override, at, want string }{
		{"missing resource", `resource "file" "y" { content = "x" }`, "t/override.tf:1,1", "Missing resource to override"},
		{"missing variable", `variable "nope" { default = 1 }`, "t/override.tf:1,1", "Missing base variable declaration"},
		{"missing local", `locals { nope = 1 }`, "t/override.tf:1,10", "Missing base local value"},
		{"missing output", `output "nope" { value = 1 }`, "t/override.tf:1,1", "Missing base output"},
		{"missing aliased provider", `provider "file" {
  alias = "west"
}`, "t/override.tf:1,1", "Missing base provider configuration"},
		{"depends_on", `resource "file" "x" { depends_on = [] }`, "t/override.tf:1,23", "depends_on argument may not be overridden"},
		{"import", `import {
  to = file.x
  id = "x"
}`, "t/override.tf:1,1", "Cannot override 'import' blocks"},
		{"validation", `variable "n" {
  validation {
    condition     = var.n > 0
    error_message = "positive"
  }
}`, "t/override.tf:2,3", "not merged by Terraform"},
		{"type makes default invalid", `variable "n" { type = list(string) }`, "", "Invalid default value"},
		{"unknown argument", `resource "file" "x" { bogus = 1 }`, "t/override.tf:1,23", `"bogus" is not expected`},
	} {
		_, diags := loadTF(t, "", map[string]string{"main.tf": base, "override.tf": tc.override})
		if !hasDiag(diags, hcl.DiagError, tc.at, tc.want) {
			t.Errorf("%s: want an error at %s saying %q; got %s", tc.name, tc.at, tc.want, diags.Error())
		}
	}
	// Only override files: nothing to override.
	if _, diags := loadTF(t, "", map[string]string{"override.tf": base}); !hasDiag(diags, hcl.DiagError, "", "only override files") {
		t.Errorf("only override files: got %s", diags.Error())
	}
}

// The terraform block: required_version is checked against the language
// version stackd implements; backend and cloud are ignored with a
// warning; experiments and provider_meta are refused.
func TestTerraformBlock(t *testing.T) {
	res := `resource "file" "x" {
  path    = "x"
  content = "x"
}
`
	for _, tc := range []struct {
		name, block string
		sev         hcl.DiagnosticSeverity
		at, want    string
	}{
		{"version ok", `terraform { required_version = ">= 1.5, < 2.0" }`, 0, "", ""},
		{"version pessimistic ok", `terraform { required_version = "~> 1.11.0" }`, 0, "", ""},
		{"version too new", `terraform { required_version = ">= 1.12" }`, hcl.DiagError, "t/main.tf:1,32", "Unsupported Terraform Core version"},
		{"version bad", `terraform { required_version = "banana" }`, hcl.DiagError, "t/main.tf:1,32", "not a version constraint"},
		{"prerelease", `terraform { required_version = ">= 1.11.0-beta1" }`, hcl.DiagError, "t/main.tf:1,32", "Prerelease"},
		{"backend", "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n  }\n}", hcl.DiagWarning, "t/main.tf:2,3", "backend \"s3\" block is ignored"},
		{"cloud", "terraform {\n  cloud {\n    organization = \"o\"\n  }\n}", hcl.DiagWarning, "t/main.tf:2,3", "cloud block is ignored"},
		{"experiments", "terraform {\n  experiments = [foo]\n}", hcl.DiagError, "t/main.tf:2,3", "Experiments are not supported"},
		{"provider_meta", "terraform {\n  provider_meta \"file\" {\n    x = 1\n  }\n}", hcl.DiagError, "t/main.tf:2,3", "provider_meta is not supported"},
		{"unknown", "terraform {\n  bogus = 1\n}", hcl.DiagError, "t/main.tf:2,3", `"bogus" is not expected`},
		{"builtin terraform provider", "terraform {\n  required_providers {\n    terraform = { source = \"terraform.io/builtin/terraform\" }\n  }\n}", 0, "", ""},
	} {
		_, diags := loadTF(t, "", map[string]string{"main.tf": tc.block + "\n" + res})
		if tc.want == "" {
			if len(diags) > 0 {
				t.Errorf("%s: got %s, want no diagnostics", tc.name, diags.Error())
			}
			continue
		}
		if !hasDiag(diags, tc.sev, tc.at, tc.want) {
			t.Errorf("%s: want a diagnostic at %s saying %q; got %s", tc.name, tc.at, tc.want, diags.Error())
		}
		if tc.sev == hcl.DiagWarning && diags.HasErrors() {
			t.Errorf("%s: got errors %s, want a warning only", tc.name, diags.Error())
		}
	}
	// An override file's required_version replaces the primary files'.
	_, diags := loadTF(t, "", map[string]string{
		"main.tf":     `terraform { required_version = ">= 9.0" }` + "\n" + res,
		"override.tf": `terraform { required_version = ">= 1.0" }`,
	})
	if len(diags) > 0 {
		t.Errorf("override of required_version: got %s", diags.Error())
	}
}

// Providers are implied as Terraform implies them: by the resource type's
// prefix, the provider meta-argument, provider blocks and module calls'
// providers; required_providers entries (objects or the legacy version
// string) win, and the built-in terraform provider is never installed.
func TestProviderRequirements(t *testing.T) {
	src := `
terraform {
  required_providers {
    aws = {
      source                = "hashicorp/aws"
      version               = "~> 5.0"
      configuration_aliases = [aws.west]
    }
    random = "~> 3.0"
    terraform = { source = "terraform.io/builtin/terraform" }
  }
}
provider "google" {}
resource "random_pet" "p" {}
resource "null_resource" "n" {}
resource "aws_s3_bucket" "b" { provider = aws.west }
resource "thing" "t" { provider = acme }
resource "file" "f" {}
resource "terraform_data" "d" {}
data "tls_public_key" "k" {}
data "http" "h" {}
module "m" {
  source    = "./m"
  providers = { time = time }
}
`
	f, diags := hclparse.NewParser().ParseHCL([]byte(src), "main.tf")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	content, diags := f.Body.Content(templateSchema)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var tf, pb []*hcl.Block
	for _, b := range content.Blocks {
		switch b.Type {
		case "terraform":
			tf = append(tf, b)
		case "provider":
			pb = append(pb, b)
		}
	}
	ts, diags := readTerraformBlocks(tf, nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	explicit, implied, _ := ts.providerRequirements([]*hcl.BodyContent{content}, pb, func(typ string) bool { return typ == "file" })
	got := map[string]string{}
	for _, r := range append(explicit, implied...) {
		got[r.LocalName] = r.Source + " " + r.Version
	}
	want := map[string]string{
		"aws": "hashicorp/aws ~> 5.0", "random": "hashicorp/random ~> 3.0", "google": "hashicorp/google ",
		"null": "hashicorp/null ", "acme": "hashicorp/acme ", "tls": "hashicorp/tls ", "http": "hashicorp/http ",
		"time": "hashicorp/time ",
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if rp := ts.required["aws"]; rp == nil || len(rp.ConfigurationAliases) != 1 || rp.ConfigurationAliases[0] != "aws.west" {
		t.Errorf("aws configuration_aliases: got %+v", rp)
	}

	for _, tc := range []struct{ src, want string }{
		{`terraform {
  required_providers {
    aws = { source = "hashicorp/aws", bogus = 1 }
  }
}`, "can only contain"},
		{`terraform {
  required_providers {
    aws = { configuration_aliases = [google.west] }
  }
}`, "may only name configurations"},
		{`terraform {
  required_providers {
    aws = 3
  }
}`, "must be objects"},
		{`terraform {
  required_providers {
    Bad_Name = { source = "x/y" }
  }
}`, "not a valid provider local name"},
	} {
		f, _ := hclparse.NewParser().ParseHCL([]byte(tc.src), "main.tf")
		c, _ := f.Body.Content(templateSchema)
		_, diags := readTerraformBlocks(c.Blocks, nil)
		if !hasDiag(diags, hcl.DiagError, "main.tf:", tc.want) {
			t.Errorf("%s: want an error saying %q, got %s", tc.src, tc.want, diags.Error())
		}
	}
}

// A lock file pins the providers it locks; one whose locked version the
// constraints exclude is an error.
func TestLockFilePins(t *testing.T) {
	lock := `# This file is maintained automatically by "terraform init".
provider "registry.terraform.io/hashicorp/random" {
  version     = "3.6.2"
  constraints = "~> 3.0"
  hashes = [
    "h1:abc=",
  ]
}
provider "registry.example.com/stackd/p6" {
  version = "1.0.0"
}
`
	locks, diags := parseLockFile([]byte(lock), ".terraform.lock.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	reqs := []provider.ProviderRequirement{
		{LocalName: "random", Source: "hashicorp/random", Version: "~> 3.0"},
		{LocalName: "p6", Source: "registry.example.com/stackd/p6"},
		{LocalName: "null", Source: "hashicorp/null", Version: "~> 3.0"},
	}
	if diags := pinLocked(reqs, locks, hcl.Range{}); diags.HasErrors() {
		t.Fatal(diags)
	}
	for i, want := range []string{"= 3.6.2", "= 1.0.0", "~> 3.0"} {
		if reqs[i].Version != want {
			t.Errorf("%s: got version %q, want %q", reqs[i].LocalName, reqs[i].Version, want)
		}
	}
	bad := []provider.ProviderRequirement{{LocalName: "random", Source: "hashicorp/random", Version: "~> 2.0"}}
	if diags := pinLocked(bad, locks, hcl.Range{}); !hasDiag(diags, hcl.DiagError, ".terraform.lock.hcl:2,", "do not admit") {
		t.Errorf("constraints excluding the locked version: got %s", diags.Error())
	}
	if _, diags := parseLockFile([]byte("provider \"x/y\" {\n  version = \"not a version\"\n}\n"), "l.hcl"); !hasDiag(diags, hcl.DiagError, "l.hcl:2,", "not a version") {
		t.Errorf("bad lock version: got %s", diags.Error())
	}
}

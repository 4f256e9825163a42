package config

import (
	"testing"
	"testing/fstest"

	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/file"
)

// FuzzTerraformTemplate loads a template of a primary file, an override
// file (each in native or JSON syntax), a variable file and a lock file:
// whatever they hold, loading returns diagnostics and never panics.
func FuzzTerraformTemplate(f *testing.F) {
	f.Add([]byte("resource \"file\" \"x\" {\n  path = \"x\"\n  content = \"a\"\n}\n"), []byte("resource \"file\" \"x\" { content = \"b\" }"), []byte("a = 1\n"), []byte("provider \"x/y\" { version = \"1.0.0\" }"), false)
	f.Add([]byte(`{"variable": {"a": {"default": 1}}}`), []byte(`{"variable": {"a": {"default": 2}}}`), []byte(`{"a": 3}`), []byte(""), true)
	f.Add([]byte("terraform {\n  required_version = \"~> 1.11\"\n  required_providers {\n    p = \"~> 1.0\"\n  }\n}\nlocals { a = 1 }"), []byte("locals { a = 2 }\nterraform { required_version = \">= 0\" }"), []byte("a = {"), []byte("provider"), false)
	f.Fuzz(func(t *testing.T, primary, override, tfvars, lock []byte, json bool) {
		ext := ".tf"
		if json {
			ext = ".tf.json"
		}
		fsys := fstest.MapFS{
			"d.hcl":                 {Data: []byte(tfStackSet(""))},
			"t/main" + ext:          {Data: primary},
			"t/override" + ext:      {Data: override},
			"t/terraform.tfvars":    {Data: tfvars},
			"t/.terraform.lock.hcl": {Data: lock},
		}
		Load(fsys, ".", provider.Registry{"file": file.New(file.Options{Root: t.TempDir()})})
	})
}

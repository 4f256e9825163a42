package config

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// A resource argument calling timestamp, uuid or bcrypt is said to differ
// from Terraform (which plans it anew at every run), at the call; other
// functions, and such calls outside resource arguments, say nothing.
func TestImpureArgumentWarning(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		at        string // "" : no warning
	}{
		{"timestamp", "resource \"file\" \"a\" {\n  path    = \"a\"\n  content = \"t=${timestamp()}\"\n}\n", "t/main.tf:3,18"},
		{"uuid nested", "resource \"file\" \"a\" {\n  path    = \"a\"\n  content = jsonencode({ id = upper(uuid()) })\n}\n", "t/main.tf:3,37"},
		{"core prefix", "resource \"file\" \"a\" {\n  path    = \"a\"\n  content = core::timestamp()\n}\n", "t/main.tf:3,13"},
		{"pure", "resource \"file\" \"a\" {\n  path    = \"a\"\n  content = upper(\"x\")\n}\n", ""},
		{"output only", "output \"t\" {\n  value = timestamp()\n}\nresource \"file\" \"a\" {\n  path    = \"a\"\n  content = \"x\"\n}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := loadTF(t, "", map[string]string{"main.tf": tc.src})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			got := hasDiag(diags, hcl.DiagWarning, tc.at, "Terraform plans a new value for it at every plan")
			if tc.at != "" && !got {
				t.Errorf("no warning at %s: %v", tc.at, diags)
			}
			if tc.at == "" && hasDiag(diags, hcl.DiagWarning, "", "at every plan") {
				t.Errorf("a warning without an impure call in a resource argument: %v", diags)
			}
		})
	}
}

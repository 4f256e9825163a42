package engine

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine/provider"
)

// CheckOverrides: a block no instance records (new or changed) must name
// every variable; a recorded one only has to stay a subset; without the
// state (stackd validate) the problems are warnings.
func TestCheckOverridesByHistory(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	defs := mustLoad(t, map[string]string{"ss.hcl": selfManaged(`instance_override {
    vars               = { a = "y" }
    use_stack_set_vars = ["c"]
  }`), "t/main.hcl": rulesTmpl}, reg)
	ss := defs.StackSet("s")
	ov := ss.Overrides[0]
	if ov.Digest == "" {
		t.Fatal("the override has no digest")
	}
	summaries := func(diags hcl.Diagnostics, sev hcl.DiagnosticSeverity) string {
		var out []string
		for _, d := range diags {
			if d.Severity == sev {
				out = append(out, d.Summary)
			}
		}
		return strings.Join(out, ", ")
	}
	if got := summaries(ss.CheckOverrides(map[string]bool{}), hcl.DiagError); got != "Override of an unknown variable, Incomplete override" {
		t.Errorf("a changed block: errors %q, want the unknown kept variable c and the missing b", got)
	}
	if got := ss.CheckOverrides(map[string]bool{ov.Digest: true}); len(got) != 0 {
		t.Errorf("an unchanged block: %v, want nothing", got)
	}
	if got := ss.CheckOverrides(nil); got.HasErrors() || summaries(got, hcl.DiagWarning) == "" {
		t.Errorf("unknown history: %v, want warnings only", got)
	}

	// The digest ignores the stack set's variables and follows the block.
	more := mustLoad(t, map[string]string{"ss.hcl": strings.Replace(selfManaged(`instance_override {
    vars               = { a = "y" }
    use_stack_set_vars = ["c"]
  }`), `vars     = { a = "x", b = 2 }`, `vars     = { a = "x", b = 3, c = "z" }`, 1), "t/main.hcl": rulesTmpl}, reg).StackSet("s")
	if more.Overrides[0].Digest != ov.Digest {
		t.Error("the digest changed with the stack set's variables")
	}
	edited := mustLoad(t, map[string]string{"ss.hcl": selfManaged(`instance_override {
    vars               = { a = "z" }
    use_stack_set_vars = ["c"]
  }`), "t/main.hcl": rulesTmpl}, reg).StackSet("s")
	if edited.Overrides[0].Digest == ov.Digest {
		t.Error("the digest did not change with the block's values")
	}
}

// The vars_body limit counts characters: 20,000 CJK characters (60,000
// bytes) fit.
func TestVarsBodyLengthCountsCharacters(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	_, diags := load(t, map[string]string{"ss.hcl": selfManaged(`instance_override {
    vars               = { a = "` + strings.Repeat("漢", 20000) + `" }
    use_stack_set_vars = ["b"]
  }`), "t/main.hcl": rulesTmpl}, reg)
	if diags.HasErrors() {
		t.Fatalf("20,000 CJK characters rejected: %s", diags.Error())
	}
}

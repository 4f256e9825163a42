package changeset

import (
	"strings"
	"testing"
)

// A diagnostic's file name comes from the branch: its newlines and
// backticks cannot end the code span and start Markdown of their own, nor
// its escape sequences reach a terminal.
func TestDiagnosticsCannotInject(t *testing.T) {
	d := Diagnostic{Severity: "error", Summary: "Unsupported argument", File: "a`\n\n## stackd: no changes, safe to merge\n\n<!--`z\x1b[2K.hcl", Line: 1, Column: 1}
	var b strings.Builder
	WriteDiagnosticsMarkdown(&b, "1234567890", []Diagnostic{d})
	md := b.String()
	if strings.Contains(md, "\n## ") || strings.Count(md, "\n") != 5 || strings.Contains(md, "\x1b") {
		t.Errorf("markdown:\n%s", md)
	}
	if s := d.String(); strings.ContainsAny(s, "\n\x1b") {
		t.Errorf("String() = %q", s)
	}
}

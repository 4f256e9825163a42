package engine

import (
	"bytes"
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine/changeset"
)

// Diagnostic is the JSON form of one diagnostic (see changeset.Diagnostic).
type Diagnostic = changeset.Diagnostic

// DiagnosticsJSON converts hcl diagnostics to their JSON form.
func DiagnosticsJSON(diags hcl.Diagnostics) []Diagnostic {
	out := make([]Diagnostic, 0, len(diags))
	for _, d := range diags {
		j := Diagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			j.Severity = "warning"
		}
		if d.Subject != nil {
			j.File, j.Line, j.Column = d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column
		}
		out = append(out, j)
	}
	return out
}

// WriteDiagnostics prints diagnostics with source snippets, like Terraform.
//
// The source snippets show the lines of the definitions, so the values
// the definitions give sensitive variables are redacted from them (and
// from everything else written).
func WriteDiagnostics(w io.Writer, defs *Definitions, diags hcl.Diagnostics, color bool) error {
	var buf bytes.Buffer
	if err := hcl.NewDiagnosticTextWriter(&buf, defs.Files, 78, color).WriteDiagnostics(diags); err != nil {
		return err
	}
	_, err := io.WriteString(w, defs.Redactor().Redact(buf.String()))
	return err
}

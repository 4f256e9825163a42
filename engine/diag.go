package engine

import (
	"bytes"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
)

// Diagnostic is the JSON form of one diagnostic (see changeset.Diagnostic).
type Diagnostic = changeset.Diagnostic

// WriteDiagnostics prints diagnostics with source snippets, like Terraform.
//
// The source snippets show the lines of the definitions, so the values
// the definitions give sensitive variables are redacted from them (and
// from everything else written).
func WriteDiagnostics(w io.Writer, defs *config.Definitions, diags hcl.Diagnostics, color bool) error {
	var buf bytes.Buffer
	if err := hcl.NewDiagnosticTextWriter(&buf, defs.Files, 78, color).WriteDiagnostics(diags); err != nil {
		return err
	}
	_, err := io.WriteString(w, defs.Redactor().Redact(buf.String()))
	return err
}

// DiagnosticsError is diagnostics as one error, as Terraform's tfdiags
// keeps wrapped errors: its message is the error diagnostics, one per
// line, sanitised like every diagnostic stackd shows (file:line, summary,
// detail, no sensitive value); errors.Is and errors.As see the errors the
// diagnostics report — a cancelled context, a provider's own error type
// (custom.FailedError, command.ExitError). Their messages are for
// programs: they are not redacted, so callers print Error(), never a
// cause's.
type DiagnosticsError struct {
	msg    string
	causes []error
}

func (e *DiagnosticsError) Error() string { return e.msg }

func (e *DiagnosticsError) Unwrap() []error { return e.causes }

// DiagsError is the error of diags' errors (nil when there are none): the
// one way stackd turns diagnostics into an error.
func DiagsError(diags hcl.Diagnostics) error {
	if !diags.HasErrors() {
		return nil
	}
	var msgs []string
	for _, d := range config.DiagnosticsJSON(sanitizeDiagnostics(diags, nil)) {
		if d.Severity == changeset.SeverityError {
			msgs = append(msgs, d.String())
		}
	}
	e := &DiagnosticsError{msg: strings.Join(msgs, "\n")}
	for _, d := range diags {
		if c, ok := hcl.DiagnosticExtra[causeExtra](d); ok && d.Severity == hcl.DiagError {
			e.causes = append(e.causes, c.err)
		}
	}
	return e
}

// causeExtra is the hcl.Diagnostic.Extra of a diagnostic that reports an
// error (a provider call's, a wait's): DiagsError keeps it as a cause.
type causeExtra struct{ err error }

// causeDiag is an error diagnostic reporting err, which it keeps.
func causeDiag(summary, detail string, err error) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Extra: causeExtra{err}}
}

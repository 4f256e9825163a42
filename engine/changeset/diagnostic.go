package changeset

import "fmt"

// Severity is a diagnostic's severity (hcl's error or warning).
type Severity string

// The severities of a Diagnostic.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Diagnostic is the JSON form of one diagnostic, for status documents and
// machine-readable output.
type Diagnostic struct {
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`
	Detail   string   `json:"detail,omitempty"`
	File     string   `json:"file,omitempty"`
	Line     int      `json:"line,omitempty"`
	Column   int      `json:"column,omitempty"`
}

// String renders "file:line,col: summary; detail", the file name's
// control characters escaped (Printable): it comes from the branch, and
// its newlines or escape sequences would otherwise forge lines of the
// output or drive the terminal.
func (d Diagnostic) String() string {
	s := d.Summary
	if d.Detail != "" {
		s += "; " + d.Detail
	}
	if d.File != "" {
		return fmt.Sprintf("%s:%d,%d: %s", Printable(d.File), d.Line, d.Column, s)
	}
	return s
}

package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Diagnostic is the JSON form of one diagnostic, for status documents and
// machine-readable output.
type Diagnostic struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail,omitempty"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
}

// String renders "file:line,col: summary; detail".
func (d Diagnostic) String() string {
	s := d.Summary
	if d.Detail != "" {
		s += "; " + d.Detail
	}
	if d.File != "" {
		return fmt.Sprintf("%s:%d,%d: %s", d.File, d.Line, d.Column, s)
	}
	return s
}

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

func hclsyntaxValidIdentifier(s string) bool { return hclsyntax.ValidIdentifier(s) }

func invalidName(kind, name string, rng hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid " + kind + " name",
		Detail:   fmt.Sprintf("%q is not a valid %s name: a name must start with a letter or underscore and may contain only letters, digits, underscores and dashes.", name, kind),
		Subject:  rng.Ptr(),
	}
}

func ptrRange(r hcl.Range) *hcl.Range { return &r }

func asPathError(err error, pe **fs.PathError) bool { return errors.As(err, pe) }

// constValue evaluates an expression that may use functions but no variables.
func constValue(expr hcl.Expression, ty cty.Type, what string) (cty.Value, hcl.Diagnostics) {
	v, diags := expr.Value(&hcl.EvalContext{Functions: functions})
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	if !v.IsWhollyKnown() {
		// No variables are in scope, so only an expression the parser could
		// not read (it reported why) evaluates to an unknown value.
		return cty.NilVal, diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for " + what,
			Detail:   fmt.Sprintf("The value of %s must be a constant known when the definitions are loaded.", what),
			Subject:  expr.Range().Ptr(),
		})
	}
	if ty == cty.DynamicPseudoType {
		return v, diags
	}
	conv, err := convert.Convert(v, ty)
	if err != nil || conv.IsNull() {
		msg := "a value is required"
		if err != nil {
			msg = err.Error()
		}
		return cty.NilVal, diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for " + what,
			Detail:   fmt.Sprintf("Invalid value for %s: %s.", what, msg),
			Subject:  expr.Range().Ptr(),
		})
	}
	return conv, diags
}

func boolAttr(a *hcl.Attribute, dst *bool) hcl.Diagnostics {
	if a == nil {
		return nil
	}
	v, diags := constValue(a.Expr, cty.Bool, a.Name)
	if !diags.HasErrors() {
		*dst = v.True()
	}
	return diags
}

func stringAttr(a *hcl.Attribute, dst *string) hcl.Diagnostics {
	if a == nil {
		return nil
	}
	v, diags := constValue(a.Expr, cty.String, a.Name)
	if !diags.HasErrors() {
		*dst = v.AsString()
	}
	return diags
}

func stringListAttr(a *hcl.Attribute, dst *[]string) hcl.Diagnostics {
	if a == nil {
		return nil
	}
	v, diags := constValue(a.Expr, cty.List(cty.String), a.Name)
	if diags.HasErrors() {
		return diags
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return diags.Append(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value for " + a.Name, Detail: "The list must not contain null.", Subject: a.Expr.Range().Ptr()})
		}
		out = append(out, e.AsString())
	}
	*dst = out
	return diags
}

func intAttr(a *hcl.Attribute, dst *int) hcl.Diagnostics {
	if a == nil {
		return nil
	}
	v, diags := constValue(a.Expr, cty.Number, a.Name)
	if diags.HasErrors() {
		return diags
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != 0 || i < 0 || i > 1<<31 {
		return diags.Append(&hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Invalid value for " + a.Name,
			Detail:  fmt.Sprintf("%s must be a non-negative whole number; got %s.", a.Name, bf.Text('g', -1)),
			Subject: a.Expr.Range().Ptr(),
		})
	}
	*dst = int(i)
	return diags
}

// MaxNesting bounds how deeply brackets may nest in a file: hcl's
// recursive-descent parser would otherwise overflow the goroutine stack
// (a fatal error no recover catches) on hostile input.
const MaxNesting = 512

// checkNesting scans src for (, [ and { nesting deeper than MaxNesting,
// outside quoted strings and comments, before the parser sees it.
func checkNesting(src []byte, filename string) *hcl.Diagnostic {
	depth, line, col := 0, 1, 0
	inString, escaped := false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		col++
		if c == '\n' {
			line, col = line+1, 0
		}
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"' || c == '\n':
				inString = false
			}
			continue
		case c == '"':
			inString = true
		case c == '#' || c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			line, col = line+1, 0
		case c == '(' || c == '[' || c == '{':
			depth++
			if depth > MaxNesting {
				pos := hcl.Pos{Line: line, Column: col, Byte: i}
				return &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Nesting too deep",
					Detail:   fmt.Sprintf("Brackets nest more than %d levels deep here; simplify the expression.", MaxNesting),
					Subject:  &hcl.Range{Filename: filename, Start: pos, End: pos},
				}
			}
		case c == ')' || c == ']' || c == '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}

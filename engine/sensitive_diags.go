package engine

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// Diagnostics about sensitive values. Every renderer of diagnostics (the
// text writer, DiagnosticsJSON and what is built from it: status
// documents, change sets in text, JSON and Markdown, API responses, logs)
// starts from the diagnostics Engine.Load and Engine.Plan return, so those
// are made safe where they are produced:
//
//   - A diagnostic about an expression that uses a sensitive value (a
//     reference whose value, in the diagnostic's evaluation context, holds
//     the sensitive mark) gets a generic detail: hcl's own messages quote
//     values (a 'for' expression's duplicate key, say). The errors of
//     function calls are left to the functions' wrapper
//     (sensitive_funcs.go), which judges by the arguments' marks.
//   - Summary and detail are then redacted as the text writer redacts its
//     output (WriteDiagnostics): every value the definitions give a
//     sensitive variable, and for a plan every sensitive value the
//     instance knows (its variables, the sensitive attributes recorded for
//     its resources).

// sensitiveDetail is the detail of a diagnostic about an expression that
// uses a sensitive value; %s names the sensitive references.
const sensitiveDetail = "The details of this error are hidden because the expression uses a sensitive value (%s)."

// loadRedacted is Load with its diagnostics redacted like the text
// writer's output (Engine.Load's hook).
func loadRedacted(defs *config.Definitions, diags hcl.Diagnostics) (*config.Definitions, hcl.Diagnostics) {
	return defs, sanitizeDiagnostics(diags, defs.Redactor())
}

// planDiagnostics is the hook of Engine.Plan: it makes the plan's
// diagnostics safe to show with the instance's Redactor.
func planDiagnostics(inst *Instance, recorded []ResourceState, diags hcl.Diagnostics) hcl.Diagnostics {
	if len(diags) == 0 || inst == nil {
		return diags
	}
	rec := make(map[string]*recordedResource, len(recorded))
	for _, r := range recorded {
		rec[r.Address] = &recordedResource{ResourceState: r}
	}
	return sanitizeDiagnostics(diags, instanceRedactor(inst, rec))
}

// sanitizeDiagnostics returns copies of diags that are safe to show: see
// the comment at the top of this file. The input is not changed.
func sanitizeDiagnostics(diags hcl.Diagnostics, red *provider.Secrets) hcl.Diagnostics {
	if len(diags) == 0 {
		return diags
	}
	out := make(hcl.Diagnostics, len(diags))
	for i, d := range diags {
		if d == nil {
			continue
		}
		c := *d
		if refs := sensitiveRefs(d); len(refs) > 0 && !callError(d) {
			c.Detail = fmt.Sprintf(sensitiveDetail, strings.Join(refs, ", "))
		}
		c.Summary, c.Detail = red.Redact(c.Summary), red.Redact(c.Detail)
		out[i] = &c
	}
	return out
}

// callError reports whether d is the error of a function call: the
// wrapper of the function (hideSensitiveErrors) already decided from the
// marks of the call's arguments whether its message may be shown.
func callError(d *hcl.Diagnostic) bool {
	call, ok := hcl.DiagnosticExtra[hclsyntax.FunctionCallDiagExtra](d)
	return ok && call.FunctionCallError() != nil
}

// sensitiveRefs names the references of d's expression whose values, in
// d's evaluation context, are or hold a sensitive value. A reference that
// does not resolve is judged by its longest prefix that does (its
// attribute may be what is missing).
func sensitiveRefs(d *hcl.Diagnostic) []string {
	if d.Expression == nil || d.EvalContext == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, tr := range d.Expression.Variables() {
		for n := len(tr); n > 0; n-- {
			v, vd := tr[:n].TraverseAbs(d.EvalContext)
			if vd.HasErrors() {
				continue
			}
			if provider.IsSensitive(v) {
				if name := traversalName(tr[:n]); !seen[name] {
					seen[name] = true
					out = append(out, name)
				}
			}
			break
		}
	}
	return out
}

// traversalName renders a traversal's root and attribute steps
// ("var.api_key", "custom.db.data"), stopping at the first index.
func traversalName(tr hcl.Traversal) string {
	var b strings.Builder
	for _, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		default:
			return b.String()
		}
	}
	return b.String()
}

// BoundDiagnostics keeps the first max diagnostics of diags and, when
// there were more, adds one saying how many of where were left out (an
// error if any left out was).
func BoundDiagnostics(diags hcl.Diagnostics, max int, where string) hcl.Diagnostics {
	if len(diags) <= max {
		return diags
	}
	rest := diags[max:]
	more := TooManyDiagnostics(len(rest), rest.HasErrors(), where)
	if max > 0 {
		more.Subject = diags[max-1].Subject
	}
	return append(diags[:max:max], more)
}

// TooManyDiagnostics says that n more diagnostics of where are not shown:
// an error if any of them is one.
func TooManyDiagnostics(n int, anyError bool, where string) *hcl.Diagnostic {
	sev := hcl.DiagWarning
	if anyError {
		sev = hcl.DiagError
	}
	return &hcl.Diagnostic{Severity: sev, Summary: "Too many diagnostics",
		Detail: fmt.Sprintf("%d more diagnostics of %s are not shown; fix these and plan again.", n, where)}
}

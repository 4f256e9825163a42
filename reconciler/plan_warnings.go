package reconciler

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
)

// maxWarningInstances bounds the instances a grouped warning names.
const maxWarningInstances = 10

// planWarnings collects the warnings of a stack set's instance plans (a
// failed check block assertion, as Terraform reports it, never blocks)
// for its change set: one diagnostic per distinct warning, naming the
// instances it concerns, so that 1,000 instances failing the same check
// say it once.
type planWarnings struct {
	order []string
	by    map[string]*groupedWarning
}

type groupedWarning struct {
	d         changeset.Diagnostic
	instances []string
}

// add records the warnings of the plan of instance t.
func (pw *planWarnings) add(diags hcl.Diagnostics, t config.Target) {
	for _, d := range config.DiagnosticsJSON(diags) {
		if d.Severity != changeset.SeverityWarning {
			continue
		}
		key := fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%d", d.Summary, d.Detail, d.File, d.Line, d.Column)
		if pw.by == nil {
			pw.by = map[string]*groupedWarning{}
		}
		g := pw.by[key]
		if g == nil {
			g = &groupedWarning{d: d}
			pw.by[key] = g
			pw.order = append(pw.order, key)
		}
		g.instances = append(g.instances, t.Region+"/"+t.Account)
	}
}

// diagnostics are the grouped warnings of stack set name, in the order
// they were first seen.
func (pw *planWarnings) diagnostics(name string) []changeset.Diagnostic {
	out := make([]changeset.Diagnostic, 0, len(pw.order))
	for _, key := range pw.order {
		g := pw.by[key]
		d := g.d
		shown := g.instances
		more := ""
		if len(shown) > maxWarningInstances {
			more = fmt.Sprintf(" and %d more", len(shown)-maxWarningInstances)
			shown = shown[:maxWarningInstances]
		}
		noun := "instance"
		if len(g.instances) > 1 {
			noun = "instances"
		}
		d.Detail = fmt.Sprintf("%s (stack set %q, %s %s%s)", d.Detail, name, noun, strings.Join(shown, ", "), more)
		out = append(out, d)
	}
	return out
}

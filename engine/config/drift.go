package config

import (
	"path"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Drift modes of a drift block.
const (
	// DriftModeReport only reports drift.
	DriftModeReport = "report"
	// DriftModeCorrect re-applies drifted instances (a DriftCorrection
	// operation).
	DriftModeCorrect = "correct"
)

// MinDriftInterval is the shortest drift interval (1m): a check reads
// every resource of the stack set, so checking more often costs the
// targets more than it tells.
const MinDriftInterval = time.Minute

// DriftSpec is a stack set's drift block.
type DriftSpec struct {
	// Interval between the daemon's checks; 0: no periodic check.
	Interval time.Duration
	// Mode is DriftModeReport or DriftModeCorrect.
	Mode string
	// Ignore are rules of what is not compared (DriftIgnored).
	Ignore    []string
	DeclRange hcl.Range
}

var driftSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "interval"}, {Name: "mode"}, {Name: "ignore"}}}

// loadDrift decodes a drift block.
func (ss *StackSet) loadDrift(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(driftSchema)
	a := content.Attributes
	d := &DriftSpec{Mode: DriftModeReport, DeclRange: b.DefRange}
	diags = append(diags, stringAttr(a["mode"], &d.Mode)...)
	diags = append(diags, stringListAttr(a["ignore"], &d.Ignore)...)
	if diags.HasErrors() {
		return diags
	}
	switch d.Mode {
	case DriftModeReport, DriftModeCorrect:
	default:
		diags = diags.Append(Errorf(a["mode"].Expr.Range(), "Invalid drift mode",
			"Stack set %q: mode is %q; it must be %q (report drift) or %q (re-apply drifted instances).", ss.Name, d.Mode, DriftModeReport, DriftModeCorrect))
	}
	if i := a["interval"]; i != nil {
		var s string
		if dd := stringAttr(i, &s); dd.HasErrors() {
			diags = append(diags, dd...)
		} else if iv, err := time.ParseDuration(s); err != nil || iv < MinDriftInterval {
			diags = diags.Append(Errorf(i.Expr.Range(), "Invalid drift interval",
				"Stack set %q: interval is %q; it must be a duration of at least %s, such as \"1h\" or \"15m\".", ss.Name, s, MinDriftInterval))
		} else {
			d.Interval = iv
		}
	}
	for _, rule := range d.Ignore {
		if _, err := path.Match(rule, ""); err != nil || strings.TrimSpace(rule) == "" {
			diags = diags.Append(Errorf(a["ignore"].Expr.Range(), "Invalid drift ignore rule",
				"Stack set %q: ignore rule %q is not an address (\"file.config\"), an address and a property (\"file.config.mode\") or a pattern of one (\"file.*\").", ss.Name, rule))
		}
	}
	ss.Drift = d
	return diags
}

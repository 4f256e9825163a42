package changeset

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

const (
	ansiReset   = "\x1b[0m"
	ansiGreen   = "\x1b[32m"
	ansiYellow  = "\x1b[33m"
	ansiRed     = "\x1b[31m"
	ansiMagenta = "\x1b[35m"
	ansiCyan    = "\x1b[36m"
	ansiBold    = "\x1b[1m"
)

// symbol returns the terraform-plan symbol and colour of a resource change.
func symbol(rc ResourceChange) (string, string) {
	switch {
	case rc.Action == Add:
		return "+", ansiGreen
	case rc.Action == Import:
		return "<=", ansiCyan
	case rc.Retained():
		// Terraform's "forget": no longer managed, not destroyed.
		return ".", ansiYellow
	case rc.Action == Remove:
		return "-", ansiRed
	case rc.Replacement == ReplacementTrue:
		return "-/+", ansiMagenta
	default:
		return "~", ansiYellow
	}
}

// RenderText writes a change set like `terraform plan`; colour only when
// color is true (the caller decides: a terminal, not a pipe). Multi-line
// strings are shown as heredocs, and a change of one as a line diff with a
// few lines of context; changes without values (Metadata, DeletionPolicy, a
// nested stack or the system) as a comment line naming their source.
// Control characters in values are escaped.
func RenderText(w io.Writer, cs *StackSetChangeSet, color bool) error {
	paint := func(c, s string) string {
		if !color {
			return s
		}
		return c + s + ansiReset
	}
	var b strings.Builder
	id := cs.StackSetId
	if id == "" {
		id = "new"
	}
	fmt.Fprintf(&b, "%s (%s) at %s\n", paint(ansiBold, "Stack set "+cs.StackSetName), id, shortRev(cs.Revision))
	if len(cs.Diagnostics) > 0 {
		for _, d := range cs.Diagnostics {
			fmt.Fprintf(&b, "  %s %s\n", paint(ansiRed, severity(d)+":"), strings.ReplaceAll(d.String(), "\n", "\n    "))
		}
	}
	// Instances whose changes are equal, values included, are one group
	// (as in RenderMarkdown): their changes are printed once.
	for _, g := range groupInstances(cs) {
		if g.action == InstanceNoChange {
			continue
		}
		ic := cs.Instances[g.members[0]]
		sym, col := "~", ansiYellow
		switch g.action {
		case InstanceCreate:
			sym, col = "+", ansiGreen
		case InstanceDelete:
			sym, col = "-", ansiRed
		}
		if n := len(g.members); n == 1 {
			fmt.Fprintf(&b, "\n  %s instance %s will be %s\n", paint(col, sym), printableLine(instanceName(ic)), instanceVerb(g.action))
		} else {
			const maxNames = 10
			names := make([]string, 0, maxNames)
			for _, m := range g.members[:min(n, maxNames)] {
				names = append(names, instanceName(cs.Instances[m]))
			}
			list := strings.Join(names, ", ")
			if n > maxNames {
				list += fmt.Sprintf(" and %d more (%s)", n-maxNames, groupRegions(cs, g))
			}
			fmt.Fprintf(&b, "\n  %s %d instances will be %s, each with the same changes: %s\n", paint(col, sym), n, instanceVerb(g.action), printableLine(list))
		}
		for _, c := range ic.Changes {
			rc := c.ResourceChange
			sym, col := symbol(rc)
			note := ""
			switch {
			case rc.Replacement == ReplacementTrue:
				note = " (must be replaced)"
			case rc.Replacement == ReplacementConditional:
				note = " (may be replaced)"
			case rc.Retained():
				note = ` will be retained: removed from the stack, not destroyed (deletion_policy = "Retain")`
			}
			note += driftNote(rc) + repeatNote(rc)
			if rc.MovedFrom != "" {
				note += " has moved from " + printableLine(rc.MovedFrom)
			}
			if rc.Action == Import {
				note += " will be imported (id " + printableLine(rc.PhysicalResourceId) + ")"
			}
			fmt.Fprintf(&b, "      %s %s%s\n", paint(col, sym), printableLine(rc.FullAddress()), note)
			width := 0
			for _, pc := range rc.PropertyChanges {
				width = max(width, len(pc.Name))
			}
			if resent := resentNames(rc); len(resent) > 0 {
				// Not changes: the properties the repeated update sends
				// again as they are.
				fmt.Fprintf(&b, "          # sent again unchanged: %s\n", printableLine(strings.Join(resent, ", ")))
			}
			for _, d := range rc.Details {
				if d.Target.Attribute == "Properties" && hasPropertyChange(rc, d.Target.Name) ||
					d.Target.Attribute != "Properties" && hasPropertyChange(rc, d.Target.Attribute) ||
					resent(rc, d) {
					continue
				}
				// A change without values: Metadata, DeletionPolicy, or a
				// property changed by the system or a nested stack.
				what := d.Target.Attribute
				if d.Target.Attribute == "Properties" {
					what = d.Target.Name
				}
				why := d.ChangeSource
				if d.CausingEntity != nil {
					why += ": " + *d.CausingEntity
				}
				fmt.Fprintf(&b, "          # %s changes (%s)\n", printableLine(what), printableLine(why))
			}
			for _, pc := range rc.PropertyChanges {
				if rc.Action == Add || rc.Action == Import {
					fmt.Fprintf(&b, "          %-*s = %s\n", width, pc.Name, textValue(pc.AfterValue, "          "))
					continue
				}
				forces := ""
				for _, d := range rc.Details {
					if (d.Target.Name == pc.Name || strings.HasPrefix(pc.Name, d.Target.Name+".")) && d.Target.RequiresRecreation == "Always" && rc.Replacement == ReplacementTrue {
						forces = paint(ansiRed, " # forces replacement")
					}
				}
				if ops, ok := lineDiff(pc.BeforeValue, pc.AfterValue); ok {
					// Multi-line strings diff line by line, like a heredoc in
					// `terraform plan`.
					fmt.Fprintf(&b, "          %s %-*s = <<-EOT%s\n", paint(ansiYellow, "~"), width, pc.Name, forces)
					for _, op := range ops {
						b.WriteString("              ")
						switch op.Kind {
						case '-':
							b.WriteString(paint(ansiRed, "-") + " " + op.Text)
						case '+':
							b.WriteString(paint(ansiGreen, "+") + " " + op.Text)
						case ' ':
							b.WriteString("  " + op.Text)
						default:
							b.WriteString("  # (" + op.Text + ")")
						}
						b.WriteByte('\n')
					}
					b.WriteString("            EOT\n")
					continue
				}
				fmt.Fprintf(&b, "          %s %-*s = %s -> %s%s\n", paint(ansiYellow, "~"), width, pc.Name, textValue(pc.BeforeValue, "            "), textValue(pc.AfterValue, "            "), forces)
			}
		}
	}
	s := cs.Summary
	fmt.Fprintf(&b, "\nInstances: %d to create, %d to update, %d to delete, %d unchanged.\n",
		s.InstancesToCreate, s.InstancesToUpdate, s.InstancesToDelete, s.InstancesUnchanged)
	fmt.Fprintf(&b, "Resources: %d to add, %d to change, %d to replace, %d to destroy",
		s.ResourcesToAdd, s.ResourcesToModify, s.ResourcesToReplace, s.ResourcesToRemove)
	if s.ResourcesToRetain > 0 {
		fmt.Fprintf(&b, ", %d to retain (removed, not destroyed)", s.ResourcesToRetain)
	}
	b.WriteString(".\n")
	if cs.Rollout != nil {
		fmt.Fprintf(&b, "Rollout: %s.\n", cs.Rollout)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func severity(d Diagnostic) string {
	if d.Severity == "" {
		return string(SeverityError)
	}
	return string(d.Severity)
}

func hasPropertyChange(rc ResourceChange, name string) bool {
	for _, pc := range rc.PropertyChanges {
		if pc.Name == name || strings.HasPrefix(pc.Name, name+".") {
			return true // a nested change ("tag.0.value") belongs to its property
		}
	}
	return false
}

func instanceVerb(a InstanceAction) string {
	switch a {
	case InstanceCreate:
		return "created"
	case InstanceDelete:
		return "deleted"
	default:
		return "updated in place"
	}
}

func quoteValue(val any) string {
	if val == nil {
		return "null"
	}
	v, isString := val.(string)
	if v == SensitivePlaceholder || v == KnownAfterApplyPlaceholder {
		return "(" + strings.Trim(v, "<>") + ")"
	}
	if !isString {
		return compactValueJSON(val)
	}
	const limit = 200
	q := strconv.Quote(v)
	if len(q) > limit {
		q = q[:limit] + "…\""
	}
	return q
}

func shortRev(r string) string {
	if len(r) > 7 {
		return r[:7]
	}
	return r
}

// textValue renders a change-set value for RenderText: a multi-line string
// as a heredoc whose closing EOT is indented by indent, anything else as
// quoteValue does.
func textValue(val any, indent string) string {
	v, ok := diffableString(val)
	if !ok || !strings.Contains(v, "\n") {
		return quoteValue(val)
	}
	var b strings.Builder
	b.WriteString("<<-EOT\n")
	lines := splitValueLines(v)
	for i, l := range lines {
		if i == diffMaxLines {
			fmt.Fprintf(&b, "%s    # (%d more lines not shown)\n", indent, len(lines)-i)
			break
		}
		b.WriteString(indent + "    " + printableLine(l) + "\n")
	}
	b.WriteString(indent + "EOT")
	return b.String()
}

// driftNote says that a change corrects drift, after the resource's
// address.
func driftNote(rc ResourceChange) string {
	switch rc.ResourceDriftStatus {
	case "DELETED":
		return " # deleted outside stackd (drift): created again"
	case "MODIFIED":
		return " # changed outside stackd (drift): restored"
	}
	return ""
}

// repeatNote says that a change repeats an update a crash interrupted,
// after the resource's address.
func repeatNote(rc ResourceChange) string {
	if !rc.RepeatsInterruptedUpdate {
		return ""
	}
	return " will be updated again: its last update was interrupted"
}

// resent reports whether d is a property a repeated update sends again
// unchanged (the System source of a change that repeats an interrupted
// update).
func resent(rc ResourceChange, d ResourceChangeDetail) bool {
	return rc.RepeatsInterruptedUpdate && d.ChangeSource == SourceSystem && d.Target.Attribute == "Properties"
}

// resentNames are the properties a repeated update sends again unchanged.
func resentNames(rc ResourceChange) []string {
	var out []string
	for _, d := range rc.Details {
		if resent(rc, d) && d.Target.Name != "" {
			out = append(out, d.Target.Name)
		}
	}
	return out
}

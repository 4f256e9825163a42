package engine

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// StackSetChangeSet is the change set of one stack set: instance-level
// actions plus each instance's resource changes.
type StackSetChangeSet struct {
	StackSetName string              `json:"StackSetName"`
	StackSetId   string              `json:"StackSetId,omitempty"`
	Revision     string              `json:"Revision"`
	Action       string              `json:"Action"` // Create | Update | Delete | NoChange
	Summary      ChangeSummary       `json:"Summary"`
	Instances    []InstanceChangeSet `json:"Instances"`
	// Rollout, for a stack set with a rollout block and instances to
	// create or update, is how they will go out.
	Rollout     *RolloutPlan `json:"Rollout,omitempty"`
	Diagnostics []Diagnostic `json:"Diagnostics,omitempty"`
}

// ChangeSummary counts instance and resource actions.
type ChangeSummary struct {
	InstancesToCreate  int `json:"InstancesToCreate"`
	InstancesToUpdate  int `json:"InstancesToUpdate"`
	InstancesToDelete  int `json:"InstancesToDelete"`
	InstancesUnchanged int `json:"InstancesUnchanged"`
	ResourcesToAdd     int `json:"ResourcesToAdd"`
	ResourcesToModify  int `json:"ResourcesToModify"`
	ResourcesToReplace int `json:"ResourcesToReplace"`
	ResourcesToRemove  int `json:"ResourcesToRemove"`
	// ResourcesToRetain counts removals under deletion_policy = "Retain":
	// they leave the stack but are not destroyed (not in ResourcesToRemove).
	ResourcesToRetain int `json:"ResourcesToRetain"`
}

// Instance-level actions.
const (
	InstanceCreate   = "Create"
	InstanceUpdate   = "Update"
	InstanceDelete   = "Delete"
	InstanceNoChange = "NoChange"
)

// InstanceChangeSet is one instance's part of a stack-set change set.
type InstanceChangeSet struct {
	Region  string   `json:"Region"`
	Account string   `json:"Account"`
	Action  string   `json:"Action"`
	Changes []Change `json:"Changes"`
}

// Add appends an instance and updates the summary.
func (cs *StackSetChangeSet) Add(ic InstanceChangeSet) {
	if ic.Changes == nil {
		ic.Changes = []Change{}
	}
	switch ic.Action {
	case InstanceCreate:
		cs.Summary.InstancesToCreate++
	case InstanceUpdate:
		cs.Summary.InstancesToUpdate++
	case InstanceDelete:
		cs.Summary.InstancesToDelete++
	default:
		cs.Summary.InstancesUnchanged++
	}
	for _, c := range ic.Changes {
		switch {
		case c.ResourceChange.Retained():
			cs.Summary.ResourcesToRetain++
		case c.ResourceChange.Action == "Add":
			cs.Summary.ResourcesToAdd++
		case c.ResourceChange.Action == "Remove":
			cs.Summary.ResourcesToRemove++
		case c.ResourceChange.Replacement == ReplacementTrue:
			cs.Summary.ResourcesToReplace++
		default:
			cs.Summary.ResourcesToModify++
		}
	}
	cs.Instances = append(cs.Instances, ic)
}

// HasChanges reports whether any instance changes.
func (cs *StackSetChangeSet) HasChanges() bool {
	s := cs.Summary
	return s.InstancesToCreate+s.InstancesToUpdate+s.InstancesToDelete > 0
}

const (
	ansiReset   = "\x1b[0m"
	ansiGreen   = "\x1b[32m"
	ansiYellow  = "\x1b[33m"
	ansiRed     = "\x1b[31m"
	ansiMagenta = "\x1b[35m"
	ansiBold    = "\x1b[1m"
)

// symbol returns the terraform-plan symbol and colour of a resource change.
func symbol(rc ResourceChange) (string, string) {
	switch {
	case rc.Action == "Add":
		return "+", ansiGreen
	case rc.Retained():
		// Terraform's "forget": no longer managed, not destroyed.
		return ".", ansiYellow
	case rc.Action == "Remove":
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
			fmt.Fprintf(&b, "      %s %s%s\n", paint(col, sym), printableLine(rc.FullAddress()), note)
			width := 0
			for _, pc := range rc.PropertyChanges {
				width = max(width, len(pc.Name))
			}
			for _, d := range rc.Details {
				if d.Target.Attribute == "Properties" && hasPropertyChange(rc, d.Target.Name) ||
					d.Target.Attribute != "Properties" && hasPropertyChange(rc, d.Target.Attribute) {
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
				if rc.Action == "Add" {
					fmt.Fprintf(&b, "          %-*s = %s\n", width, pc.Name, textValue(pc.AfterValue, "          "))
					continue
				}
				forces := ""
				for _, d := range rc.Details {
					if d.Target.Name == pc.Name && d.Target.RequiresRecreation == "Always" && rc.Replacement == ReplacementTrue {
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
		return "error"
	}
	return d.Severity
}

func hasPropertyChange(rc ResourceChange, name string) bool {
	for _, pc := range rc.PropertyChanges {
		if pc.Name == name {
			return true
		}
	}
	return false
}

func instanceVerb(a string) string {
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

// Line diffs of multi-line string values, shared by the text and Markdown
// renderers.

// diffOp is one line of a line diff. Kind is ' ' (unchanged), '-' (only in
// the old value), '+' (only in the new value) or '#' (a note, such as a run
// of unchanged lines left out; Text says what).
type diffOp struct {
	Kind byte
	Text string
}

const (
	diffContext    = 3       // unchanged lines kept on each side of a change
	diffMaxCells   = 1 << 20 // bound of the LCS table; a larger middle is one block
	diffMaxLines   = 200     // lines of a diff or heredoc shown per value
	diffMaxLineLen = 500     // bytes shown per line
)

// diffableString returns a value that is a real string (not a placeholder).
func diffableString(val any) (string, bool) {
	s, ok := val.(string)
	if !ok || s == SensitivePlaceholder || s == KnownAfterApplyPlaceholder {
		return "", false
	}
	return s, true
}

// lineDiff diffs two values line by line when both are strings (never a
// placeholder: a sensitive value is never diffed) and at least one spans
// several lines. The result is elided to a few lines of context around each
// change and bounded to diffMaxLines lines.
func lineDiff(before, after any) ([]diffOp, bool) {
	a, ok1 := diffableString(before)
	b, ok2 := diffableString(after)
	if !ok1 || !ok2 || !strings.Contains(a, "\n") && !strings.Contains(b, "\n") {
		return nil, false
	}
	return textDiff(a, b, diffMaxLines), true
}

// textDiff is the line diff of two strings, elided and bounded to maxLines
// lines and a note.
func textDiff(a, b string, maxLines int) []diffOp {
	all := diffLines(splitValueLines(a), splitValueLines(b))
	ops := elideDiff(all)
	changed := slices.ContainsFunc(ops, func(op diffOp) bool { return op.Kind == '-' || op.Kind == '+' })
	if !changed && a != b {
		// Only the final newline differs: show the last lines.
		k := max(0, len(all)-diffContext)
		ops = nil
		if k > 1 {
			ops = append(ops, diffOp{'#', fmt.Sprintf("%d unchanged lines hidden", k)})
			ops = append(ops, all[k:]...)
		} else {
			ops = append(ops, all...)
		}
		ops = append(ops, diffOp{'#', "only the final newline changed"})
	}
	if len(ops) > maxLines {
		n := len(ops) - maxLines
		ops = append(ops[:maxLines:maxLines], diffOp{'#', fmt.Sprintf("%d more diff lines not shown", n)})
	}
	for i := range ops {
		if ops[i].Kind != '#' {
			ops[i].Text = printableLine(ops[i].Text)
		}
	}
	return ops
}

// splitLines splits s into lines; a final newline does not start a line.
func splitValueLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// diffLines is a longest-common-subsequence line diff: the common prefix and
// suffix are matched first, the middle with an LCS table unless that would
// exceed diffMaxCells, in which case the middle is all removed then all
// added. Removals come before additions.
func diffLines(a, b []string) []diffOp {
	var ops []diffOp
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		ops = append(ops, diffOp{' ', a[p]})
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	am, bm := a[p:len(a)-s], b[p:len(b)-s]
	if len(am)*len(bm) > diffMaxCells {
		for _, l := range am {
			ops = append(ops, diffOp{'-', l})
		}
		for _, l := range bm {
			ops = append(ops, diffOp{'+', l})
		}
	} else {
		// lcs[i*(m+1)+j] is the LCS length of am[i:] and bm[j:].
		n, m := len(am), len(bm)
		lcs := make([]int32, (n+1)*(m+1))
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if am[i] == bm[j] {
					lcs[i*(m+1)+j] = lcs[(i+1)*(m+1)+j+1] + 1
				} else {
					lcs[i*(m+1)+j] = max(lcs[(i+1)*(m+1)+j], lcs[i*(m+1)+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && am[i] == bm[j]:
				ops = append(ops, diffOp{' ', am[i]})
				i++
				j++
			case j == m || i < n && lcs[(i+1)*(m+1)+j] >= lcs[i*(m+1)+j+1]:
				ops = append(ops, diffOp{'-', am[i]})
				i++
			default:
				ops = append(ops, diffOp{'+', bm[j]})
				j++
			}
		}
	}
	for _, l := range a[len(a)-s:] {
		ops = append(ops, diffOp{' ', l})
	}
	return ops
}

// elideDiff keeps diffContext unchanged lines around each change and
// replaces longer runs of unchanged lines with a note.
func elideDiff(ops []diffOp) []diffOp {
	keep := make([]bool, len(ops))
	for i, op := range ops {
		if op.Kind == ' ' {
			continue
		}
		for k := max(0, i-diffContext); k <= min(len(ops)-1, i+diffContext); k++ {
			keep[k] = true
		}
	}
	var out []diffOp
	for i := 0; i < len(ops); {
		if keep[i] {
			out = append(out, ops[i])
			i++
			continue
		}
		j := i
		for j < len(ops) && !keep[j] {
			j++
		}
		if j-i == 1 {
			out = append(out, ops[i])
		} else {
			out = append(out, diffOp{'#', fmt.Sprintf("%d unchanged lines hidden", j-i)})
		}
		i = j
	}
	return out
}

// sanitizeLine makes one line of a value safe to print: control characters
// (which could drive a terminal) are escaped and the line is cut at
// diffMaxLineLen bytes.
func printableLine(s string) string {
	cut := false
	if len(s) > diffMaxLineLen {
		i := diffMaxLineLen
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s, cut = s[:i], true
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) >= 0 {
		var b strings.Builder
		for _, r := range s {
			if unicode.IsControl(r) && r != '\t' {
				q := strconv.QuoteRune(r)
				b.WriteString(q[1 : len(q)-1])
				continue
			}
			b.WriteRune(r)
		}
		s = b.String()
	}
	if cut {
		s += "…"
	}
	return s
}

package changeset

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

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
// Printable is s with every control character but tab escaped as Go
// quotes it (\n, \x1b): text from a branch (a file name in a diagnostic)
// can then neither break a line of Markdown or of a terminal nor send the
// terminal escape sequences.
func Printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func printableLine(s string) string {
	cut := false
	if len(s) > diffMaxLineLen {
		i := diffMaxLineLen
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s, cut = s[:i], true
	}
	s = Printable(s)
	if cut {
		s += "…"
	}
	return s
}

// PrintableLine makes a value safe to print on one line of a terminal:
// control characters (newlines included) are escaped and it is cut at a
// length a line can show.
func PrintableLine(s string) string { return printableLine(s) }

package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
)

// plural is "1 stack set", "2 stack sets".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func short(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

// instanceLine is an instance worth a line: its status and why.
type instanceLine struct{ target, status, reason string }

// maxListed bounds the instances listed for one status and reason.
const maxListed = 12

// printInstanceLines prints one line per instance, except that instances
// sharing a status and reason (the 995 instances a stopped rollout
// cancelled) are printed once, with their count and the first few.
func printInstanceLines(w io.Writer, lines []instanceLine) {
	type group struct {
		instanceLine
		targets []string
	}
	var groups []*group
	byKey := map[[2]string]*group{}
	for _, l := range lines {
		k := [2]string{l.status, l.reason}
		g := byKey[k]
		if g == nil {
			g = &group{instanceLine: l}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.targets = append(g.targets, l.target)
	}
	for _, g := range groups {
		what := strings.TrimSpace(g.status + " " + g.reason)
		if len(g.targets) == 1 {
			fmt.Fprintf(w, "  %s %s\n", g.targets[0], what)
			continue
		}
		shown := g.targets[:min(len(g.targets), maxListed)]
		more := ""
		if n := len(g.targets) - len(shown); n > 0 {
			more = fmt.Sprintf(" and %d more", n)
		}
		fmt.Fprintf(w, "  %d instances %s\n    %s%s\n", len(g.targets), what, strings.Join(shown, ", "), more)
	}
}

// noColor is --no-color (STACKD_NO_COLOR) of the command running.
var noColor atomic.Bool

// colorOK reports whether w gets colours: a terminal, unless --no-color
// or NO_COLOR (https://no-color.org) says otherwise.
func colorOK(w io.Writer) bool {
	return isTerminal(w) && !noColor.Load() && os.Getenv("NO_COLOR") == ""
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

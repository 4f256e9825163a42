package engine

import (
	"sort"
	"strings"
)

// graph is a small directed graph of node names; an edge a -> b means a
// depends on b (b must be evaluated first).
type graph struct {
	deps map[string]map[string]bool
}

func newGraph() *graph { return &graph{deps: map[string]map[string]bool{}} }

func (g *graph) add(n string) {
	if g.deps[n] == nil {
		g.deps[n] = map[string]bool{}
	}
}

func (g *graph) connect(from, to string) {
	g.add(from)
	g.add(to)
	g.deps[from][to] = true
}

// order returns the nodes in dependency order (dependencies first, ties by
// name for determinism), or the nodes of one cycle if there is one.
func (g *graph) order() (order []string, cycle []string) {
	names := make([]string, 0, len(g.deps))
	for n := range g.deps {
		names = append(names, n)
	}
	sort.Strings(names)
	const (
		unvisited = iota
		visiting
		done
	)
	stateOf := make(map[string]int, len(names))
	var stack []string
	var visit func(n string) bool
	visit = func(n string) bool {
		switch stateOf[n] {
		case done:
			return true
		case visiting:
			i := len(stack) - 1
			for i >= 0 && stack[i] != n {
				i--
			}
			cycle = append(append([]string{}, stack[i:]...), n)
			return false
		}
		stateOf[n] = visiting
		stack = append(stack, n)
		ds := make([]string, 0, len(g.deps[n]))
		for d := range g.deps[n] {
			ds = append(ds, d)
		}
		sort.Strings(ds)
		for _, d := range ds {
			if !visit(d) {
				return false
			}
		}
		stack = stack[:len(stack)-1]
		stateOf[n] = done
		order = append(order, n)
		return true
	}
	for _, n := range names {
		if !visit(n) {
			return nil, cycle
		}
	}
	return order, nil
}

func cycleString(c []string) string { return strings.Join(c, " -> ") }

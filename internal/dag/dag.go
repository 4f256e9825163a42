package dag

import (
	"sort"
	"strings"
)

// Graph is a small directed graph of node names; an edge a -> b means a
// depends on b (b must be evaluated first). Deps holds the edges by node.
type Graph struct {
	Deps map[string]map[string]bool
}

// New returns an empty graph.
func New() *Graph { return &Graph{Deps: map[string]map[string]bool{}} }

// Add adds node n.
func (g *Graph) Add(n string) {
	if g.Deps[n] == nil {
		g.Deps[n] = map[string]bool{}
	}
}

// Connect adds the edge from -> to (from depends on to), and both nodes.
func (g *Graph) Connect(from, to string) {
	g.Add(from)
	g.Add(to)
	g.Deps[from][to] = true
}

// Order returns the nodes in dependency order (dependencies first, ties by
// name for determinism), or the nodes of one cycle if there is one.
func (g *Graph) Order() (order []string, cycle []string) {
	names := make([]string, 0, len(g.Deps))
	for n := range g.Deps {
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
		ds := make([]string, 0, len(g.Deps[n]))
		for d := range g.Deps[n] {
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

// CycleString writes a cycle as "a -> b -> a".
func CycleString(c []string) string { return strings.Join(c, " -> ") }

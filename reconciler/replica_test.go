package reconciler

import (
	"fmt"
	"testing"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ss-%03d", i)
	}
	return out
}

// Assign gives every stack set one owner, at most ⌈sets/members⌉ each, the
// same wherever it runs.
func TestAssignSharesFairly(t *testing.T) {
	for _, tc := range []struct{ sets, members int }{{100, 3}, {7, 3}, {1, 3}, {3, 5}, {1000, 7}, {0, 2}} {
		ids := make([]string, tc.members)
		for i := range ids {
			ids[i] = fmt.Sprintf("replica-%d", i)
		}
		got := Assign(names(tc.sets), ids)
		if len(got) != tc.sets {
			t.Fatalf("%d sets × %d members: %d assigned", tc.sets, tc.members, len(got))
		}
		limit := (tc.sets + tc.members - 1) / tc.members
		load := map[string]int{}
		for _, id := range got {
			load[id]++
		}
		for id, n := range load {
			if n > limit {
				t.Errorf("%d sets × %d members: %s has %d, more than %d", tc.sets, tc.members, id, n, limit)
			}
		}
		rev := make([]string, len(ids))
		for i := range ids {
			rev[i] = ids[len(ids)-1-i]
		}
		if re := Assign(names(tc.sets), rev); fmt.Sprint(re) != fmt.Sprint(got) {
			t.Errorf("%d sets × %d members: the order of the members changed the assignment", tc.sets, tc.members)
		}
	}
}

// A member joining takes its share and moves few other stack sets; one
// leaving hands only its own on.
func TestAssignMovesLittle(t *testing.T) {
	sets := names(300)
	three := Assign(sets, []string{"a", "b", "c"})
	four := Assign(sets, []string{"a", "b", "c", "d"})
	moved := 0
	for _, s := range sets {
		if four[s] != "d" && four[s] != three[s] {
			moved++
		}
	}
	// d takes ~75; with bounded load some others shift as well, but far
	// from a reshuffle (a modulo would move ~225).
	if moved > 30 {
		t.Errorf("a fourth member moved %d stack sets between the other three", moved)
	}
	two := Assign(sets, []string{"a", "b"})
	kept := 0
	for _, s := range sets {
		if three[s] != "c" && two[s] == three[s] {
			kept++
		}
	}
	if owned := len(sets) - count(three, "c"); kept < owned*4/5 {
		t.Errorf("c leaving moved %d of a's and b's %d stack sets", owned-kept, owned)
	}
}

func count(m map[string]string, id string) int {
	n := 0
	for _, v := range m {
		if v == id {
			n++
		}
	}
	return n
}

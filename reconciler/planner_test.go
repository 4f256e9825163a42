package reconciler

import (
	"fmt"
	"testing"
)

// The plan cache answers a revision planned with the same trust against the
// same state, forgets plans of an older state, and keeps at most
// planCacheSize plans.
func TestPlanCache(t *testing.T) {
	var c planCache
	a := &PlanResult{Revision: "a"}
	c.put("a", true, 1, a)
	if got := c.get("a", true, 1); got != a {
		t.Errorf("get(a, untrusted, 1) = %v, want the plan put", got)
	}
	if got := c.get("a", false, 1); got != nil {
		t.Errorf("get(a, trusted, 1) = %v, want nil: an untrusted plan is not a trusted one", got)
	}
	if got := c.get("a", true, 2); got != nil {
		t.Errorf("get(a, untrusted, 2) = %v, want nil: the state changed since", got)
	}
	c.put("b", true, 2, &PlanResult{Revision: "b"})
	if got := c.get("a", true, 1); got != nil {
		t.Errorf("a plan of state 1 survived a put of state 2: %v", got)
	}
	for i := range planCacheSize + 5 {
		c.put(fmt.Sprint(i), true, 2, &PlanResult{})
	}
	if n := len(c.entries); n != planCacheSize {
		t.Errorf("the cache holds %d plans, want %d", n, planCacheSize)
	}
	if c.get("0", true, 2) != nil || c.get(fmt.Sprint(planCacheSize+4), true, 2) == nil {
		t.Error("the cache did not keep the newest plans")
	}
}

package reconciler_test

import (
	"context"
	"testing"
)

// TestWaitPass: WaitPass(PassesStarted()) returns the outcome of the first
// pass that starts after the call — the one that sees a commit made
// before it — not of a pass already over.
func TestWaitPass(t *testing.T) {
	c := newCtl()
	h, first := newHarness(t, c, map[string]string{
		"web.hcl":                stackSetHCL("web", "v1", []string{"eu"}, accountIDs(2), ""),
		"templates/ctl/main.hcl": ctlTemplate,
	})
	d := runDriver(t, h)
	defer d.stop(t)
	res, err := h.rec.WaitPass(context.Background(), 0) // the first pass
	if err != nil || res.Revision != first {
		t.Fatalf("first pass: %+v, %v; want revision %s", res, err, first)
	}

	n := h.rec.PassesStarted()
	second := commitFiles(t, h.repo, map[string]string{"web.hcl": stackSetHCL("web", "v2", []string{"eu"}, accountIDs(2), "")}, "v2")
	d.submit()
	res, err = h.rec.WaitPass(context.Background(), n)
	if err != nil || res.Revision != second {
		t.Fatalf("the pass after the request: %+v, %v; want revision %s", res, err, second)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.rec.WaitPass(ctx, h.rec.PassesStarted()); err != context.Canceled {
		t.Fatalf("WaitPass with an ended context and no pass coming: %v", err)
	}
}

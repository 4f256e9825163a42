package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine/config"
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

// A revision's diagnostics are bounded across its stack sets: a branch
// anyone can push must not make a status commit or PR comment of
// megabytes (each stack set here fails in ten blocks).
func TestRevisionDiagnosticsBounded(t *testing.T) {
	var tmpl strings.Builder
	for i := range 10 {
		fmt.Fprintf(&tmpl, "resource \"ctl\" \"bad%d\" {\n  tag = tobool(var.tag)\n}\n", i)
	}
	files := map[string]string{"templates/bad/main.hcl": "variable \"tag\" {\n  type = string\n}\n" + tmpl.String()}
	var defs strings.Builder
	for i := range 30 {
		defs.WriteString(strings.Replace(stackSetHCL(fmt.Sprintf("s%02d", i), "v1", []string{"eu"}, []string{accountID(1)}, ""), "./templates/ctl", "./templates/bad", 1))
	}
	files["stacks.hcl"] = defs.String()
	h, _ := newHarness(t, newCtl(), files)
	res, err := h.rec.Reconcile(t.Context())
	if err != nil || !res.Rejected {
		t.Fatalf("Reconcile: %v %+v, want the revision rejected", err, res)
	}
	last := res.Diagnostics[len(res.Diagnostics)-1]
	if len(res.Diagnostics) != config.MaxRevisionDiagnostics+1 || last.Summary != "Too many diagnostics" || !strings.Contains(last.Detail, "100 more") {
		t.Errorf("%d diagnostics, the last %s: %s", len(res.Diagnostics), last.Summary, last.Detail)
	}
}

package main

// min_in_service at plan time (docs/design.md §6): a rollout whose min_in_service
// the operation can never meet — at or above the number of instances the
// stack set has during the operation — is a diagnostic when the commit is
// planned. A running daemon (a real process) shows it in a pull request's
// change set and rejects it on the deploy branch with file:line, applying
// nothing; the fixed commit deploys.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// withRollout adds a rolling rollout with minInService to the quickstart's
// web (6 instances) in dir and moves it to image.
func withRollout(minInService int, image string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		replaceIn(t, dir, "web.hcl", "  operation_preferences {", fmt.Sprintf(`  rollout {
    pattern        = "rolling"
    batch_size     = 2
    min_in_service = %d
  }

  operation_preferences {`, minInService))
		replaceIn(t, dir, "web.hcl", `image    = "nginx:1.25"`, fmt.Sprintf(`image    = %q`, image))
	}
}

func TestMinInServiceUnmeetableIsRejected(t *testing.T) {
	t.Parallel()
	f, p := deployedDaemon(t)
	deployed := snapshot(t, f.targets)
	n := len(qsRegions) * len(qsAccounts)

	// A pull request's change set shows the diagnostic.
	head := commitOnBranch(t, f.repo, "min-in-service", withRollout(n, "nginx:1.27"))
	diags := waitBranchDiagnostics(t, p, f.repo, "min-in-service", head)
	want := []string{"min_in_service cannot be met", `Stack set "web"`, fmt.Sprintf("min_in_service is %d", n),
		fmt.Sprintf("the operation has %d instances (%d to create or update, 0 left in service untouched)", n, n),
		fmt.Sprintf("must be at most %d", n-1)}
	wantDiagnostic(t, diags, want...)

	// On the deploy branch the commit is rejected at the attribute.
	withRollout(n+4, "nginx:1.27")(t, f.repo)
	line := lineOf(t, f.repo, "web.hcl", "min_in_service")
	rev := f.commit(t, "web: a rollout keeping more instances in service than it has")
	diags = waitRejected(t, p, f.repo, rev)
	wantDiagnostic(t, diags, fmt.Sprintf("web.hcl:%d,", line), "min_in_service cannot be met", `Stack set "web"`,
		fmt.Sprintf("min_in_service is %d", n+4), fmt.Sprintf("the operation has %d instances", n), fmt.Sprintf("must be at most %d", n-1))
	if diff := cmp.Diff(deployed, snapshot(t, f.targets)); diff != "" {
		t.Errorf("the rejected commit changed the targets:\n%s", diff)
	}

	// The bound one below the instances deploys, one in-service instance
	// at a time.
	replaceIn(t, f.repo, "web.hcl", fmt.Sprintf("min_in_service = %d", n+4), fmt.Sprintf("min_in_service = %d", n-1))
	rev = f.commit(t, "web: min_in_service one below its instances")
	// Each batch writes a RUNNING status commit; wait for the last one.
	var msg string
	eventually(t, 60*time.Second, func() bool {
		msg = statusHead(t, f.repo).Message
		return strings.HasPrefix(msg, "stackd: web ") && strings.Contains(msg, rev[:7]) && !strings.Contains(msg, " RUNNING ")
	}, "no final status commit of web at %s; logs:\n%s", rev[:7], p.log)
	if !strings.Contains(msg, "SUCCEEDED") {
		t.Fatalf("status commit %q, want SUCCEEDED; logs:\n%s", msg, p.log)
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.27")
	var sizes []float64
	for _, l := range p.log.all() {
		if l["message"] == "rollout batch started" {
			sizes = append(sizes, l["instances"].(float64))
		}
	}
	if fmt.Sprint(sizes) != "[1 1 1 1 1 1]" {
		t.Errorf("batches of %v instances, want 6 of 1 (min_in_service %d of %d)", sizes, n-1, n)
	}
	p.signal(t, 15)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Errorf("stackd run exited %d after SIGTERM; logs:\n%s", code, p.log)
	}
}

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// stackd apply without --listen serves no API, so no signal can ever reach
// a wait_condition: the commit is rejected when it is planned, naming
// --listen, instead of waiting out the condition's timeout. With --listen
// the same commit plans (and waits for its signals as the daemon does).
func TestWaitConditionNeedsTheAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	writeTree(t, f.repo, map[string]string{
		"app.hcl": `stack_set "app" {
  template = "./template"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`,
		"template/main.hcl": `resource "wait_condition" "ready" {
  timeout = "10m"
}

resource "file" "boot" {
  path    = "signal_url"
  content = wait_condition.ready.handle_url
}
`,
	})
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "a wait condition")
	res := f.apply(t)
	if res.code() == 0 || !strings.Contains(res.stdout+res.stderr, "no signal can arrive at the handle URL") || !strings.Contains(res.stdout+res.stderr, "--listen") {
		t.Fatalf("apply without --listen: exit %d, want a rejection naming --listen\n%s", res.code(), res)
	}
	if strings.Contains(res.stdout+res.stderr, "OPERATION_IN_PROGRESS") {
		t.Errorf("something was applied:\n%s", res)
	}
	if plan := stackd(t, "plan", "--repo", f.repo, "--state-dir", f.state, "--targets-root", f.targets); plan.code() != 0 {
		t.Errorf("stackd plan (which needs no signal) failed: %s", plan)
	}
}

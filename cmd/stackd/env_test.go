package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Every flag also comes from STACKD_<FLAG>: stackd apply with only
// environment variables deploys, the command line wins over the
// environment, and a bad value names its variable.
func TestFlagsFromEnvironment(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := newFixture(t)
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	env := []string{"STACKD_REPO=" + f.repo, "STACKD_STATE_DIR=" + f.state, "STACKD_TARGETS_ROOT=" + f.targets, "STACKD_LOG_FORMAT=json"}
	if out, err := run(env, "apply"); err != nil {
		t.Fatalf("stackd apply with flags from the environment: %v\n%s", err, out)
	}
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.25")

	out, err := run(append(env, "STACKD_GIT_TIMEOUT=banana"), "apply")
	if err == nil || !strings.Contains(out, "STACKD_GIT_TIMEOUT") {
		t.Errorf("STACKD_GIT_TIMEOUT=banana: %v, want an error naming the variable; output:\n%s", err, out)
	}
	// The command line wins: a wrong STACKD_REPO does not matter.
	if out, err := run([]string{"STACKD_REPO=/nonexistent"}, append([]string{"apply"}, f.flags()...)...); err != nil {
		t.Errorf("--repo with a wrong STACKD_REPO: %v\n%s", err, out)
	}
}

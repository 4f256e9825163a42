package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCommandDiesWithStackd: a command's shell does not outlive a stackd
// killed with SIGKILL, so the apply that resumes the operation never runs
// the call beside the orphan of the same call.
func TestCommandDiesWithStackd(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := newFixture(t)
	pidFile := filepath.Join(t.TempDir(), "shell.pid")
	writeTree(t, f.repo, map[string]string{"templates/web/slow.hcl": `resource "command" "slow" {
  create = "echo $$ >> ` + pidFile + `; sleep 60; echo '{}'"
  delete = "true"
}
`})
	f.commit(t, "a slow command")
	p := startProc(t, binary, nil, append([]string{"apply"}, f.flags()...)...)
	var pid int
	eventually(t, 30*time.Second, func() bool {
		b, _ := os.ReadFile(pidFile)
		line, _, _ := strings.Cut(string(b), "\n")
		pid, _ = strconv.Atoi(strings.TrimSpace(line))
		return pid > 0
	}, "no command started")
	p.signal(t, syscall.SIGKILL)
	eventually(t, 10*time.Second, func() bool {
		return !alive(pid)
	}, "the command's shell (pid %d) still runs after its stackd was killed", pid)
}

// alive reports whether pid names a process that has not exited (a zombie
// has).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

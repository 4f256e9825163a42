package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// eachChild finds this process's running children, and only them: a
// child started here is listed once, with this process as its parent.
func TestEachChildFindsARunningChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	self := strconv.Itoa(os.Getpid())
	seen := 0
	eachChild(func(dir string, stat []string) {
		if stat[1] != self {
			t.Errorf("%s: parent %s, want %s", dir, stat[1], self)
		}
		if filepath.Base(dir) == strconv.Itoa(cmd.Process.Pid) {
			seen++
		}
	})
	if seen != 1 {
		t.Errorf("the child %d was listed %d times, want once", cmd.Process.Pid, seen)
	}
}

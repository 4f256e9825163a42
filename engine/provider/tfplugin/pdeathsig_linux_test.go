//go:build linux

package tfplugin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
)

// TestProviderDiesWithStackd: the provider of a stackd killed with SIGKILL,
// which runs no Close, is ended by the kernel instead of running on,
// reparented to PID 1. The stackd is this test binary run as a stand-in
// (standIn), which starts the provider through Start.
func TestProviderDiesWithStackd(t *testing.T) {
	for _, proto := range []int{5, 6} {
		t.Run(fmt.Sprintf("protocol %d", proto), func(t *testing.T) {
			if buildSkip != "" {
				t.Skip(buildSkip)
			}
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			stackd := exec.Command(exe)
			stackd.Env = append(os.Environ(), standInEnv+"="+providers[proto])
			var stderr bytes.Buffer
			stackd.Stderr = &stderr
			stdin, err := stackd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := stackd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := stackd.Start(); err != nil {
				t.Fatal(err)
			}
			waited := false
			t.Cleanup(func() {
				_ = stdin.Close()
				if !waited {
					_ = stackd.Process.Kill()
					_ = stackd.Wait()
				}
			})
			lines := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				sc.Scan()
				lines <- sc.Text()
			}()
			var line string
			select {
			case line = <-lines:
			case <-testCtx(t).Done():
				t.Fatal("the stand-in stackd never said its provider's pid")
			}
			pid, err := strconv.Atoi(strings.TrimPrefix(line, "pid "))
			if err != nil || pid <= 0 {
				_ = stackd.Process.Kill()
				_ = stackd.Wait()
				waited = true
				t.Fatalf("the stand-in stackd said %q, want \"pid N\"; its stderr:\n%s", line, stderr.String())
			}
			t.Cleanup(func() {
				if processAlive(pid) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			if !processAlive(pid) {
				t.Fatalf("the provider (pid %d) is not running while its stackd is", pid)
			}

			if err := stackd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = stackd.Wait()
			waited = true
			deadline := time.Now().Add(10 * time.Second)
			for processAlive(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("the provider (pid %d) still runs 10s after its stackd was killed with SIGKILL", pid)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestProviderOutlivesThreadExits: the parent-death signal comes when the
// thread that forked the provider exits, and the runtime ends the thread
// of every goroutine that returns locked to it. Such goroutines, run on
// whichever threads the runtime has, do not end a provider that stackd
// still uses.
func TestProviderOutlivesThreadExits(t *testing.T) {
	c := start(t, 6, nil)
	s, err := c.Schema(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// Each goroutine runs on the thread the test goroutine was on (a new
	// goroutine runs next on its creator's thread) and exits locked: its
	// thread ends, and the test goes on on another, which the next ends.
	var tids []int
	for range 64 {
		tid := make(chan int)
		go func() {
			runtime.LockOSThread()
			tid <- syscall.Gettid()
		}()
		tids = append(tids, <-tid)
	}
	// The kernel sends the parent-death signal as a thread exits, before
	// its task leaves /proc: once they all left, every signal is sent. The
	// main thread is the exception: the runtime parks it instead.
	deadline := time.Now().Add(10 * time.Second)
	for _, tid := range tids {
		if tid == os.Getpid() {
			continue
		}
		for {
			_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %d did not exit: %v", tid, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if _, err := c.ValidateProviderConfig(testCtx(t), fill(s.Provider.Block, map[string]cty.Value{"region": cty.StringVal("eu-west-1"), "dir": cty.StringVal(t.TempDir())})); err != nil {
		t.Fatalf("a call after %d threads of stackd exited: %v", len(tids), err)
	}
	if !processAlive(c.PID()) {
		t.Fatalf("the provider (pid %d) is gone after %d threads of stackd exited", c.PID(), len(tids))
	}
}

//go:build unix

package tfplugin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestSweepSockDirs: the socket directories of stackd processes that are
// gone are removed; those of this process and of running ones stay, and so
// does anything else in the temporary directory, a symbolic link with the
// prefix included.
func TestSweepSockDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	// A process that has ended: its pid is free (until reused, which a
	// test run does not wait for).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := cmd.Process.Pid
	outside := t.TempDir()
	mk := func(name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(tmp, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, name, "plugin123"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mk(fmt.Sprintf("%s%d-111", sockDirPrefix, gone))
	mk(fmt.Sprintf("%s%d-222", sockDirPrefix, gone))
	mk(fmt.Sprintf("%s%d-333", sockDirPrefix, os.Getpid()))
	mk(fmt.Sprintf("%s%d-444", sockDirPrefix, os.Getppid()))
	mk(sockDirPrefix + "notapid-555")
	mk("unrelated")
	if err := os.Symlink(outside, filepath.Join(tmp, fmt.Sprintf("%s%d-666", sockDirPrefix, gone))); err != nil {
		t.Fatal(err)
	}
	sweepSockDirs()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{
		fmt.Sprintf("%s%d-333", sockDirPrefix, os.Getpid()),
		fmt.Sprintf("%s%d-444", sockDirPrefix, os.Getppid()),
		fmt.Sprintf("%s%d-666", sockDirPrefix, gone),
		sockDirPrefix + "notapid-555",
		"unrelated",
	}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("left after the sweep: %v\nwant %v", left, want)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the symbolic link's target: %v", err)
	}
}

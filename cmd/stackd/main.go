package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/stackd/stackd/internal/gctune"
)

// exitError carries an exit code without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// gcPolicy tunes GOGC unless the environment sets it (internal/gctune):
// the heap may grow towards 128 MiB, so a small heap is collected rarely
// (GOGC up to 200), while a large live heap grows by at most half before
// the next collection (GOGC 50: a 10,000-instance fleet keeps ~150 MB live
// while it deploys; at GOGC=100 its peak RSS was 326–379 MB, at 50 it is
// 232–257 MB). At 1,000 instances the tuned GOGC saves ~10 % of the CPU of
// a fleet create against a fixed 50 (docs/performance.md).
var gcPolicy = gctune.Policy{Target: 128 << 20, Min: 50, Max: 200}

func main() {
	if os.Getenv("GOGC") == "" {
		gctune.Start(gcPolicy)
	}
	cmd := newRootCommand()
	if err := cmd.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "stackd:", err)
		os.Exit(1)
	}
}

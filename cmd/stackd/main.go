package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
)

// exitError carries an exit code without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// gcPercent is stackd's GOGC unless the environment sets one: the heap
// may grow to 1.5 times what is live instead of twice. A 10,000-instance
// fleet keeps ~150 MB live while it deploys; at GOGC=100 its peak RSS was
// 326-379 MB, at 50 it is 250-280 MB, in the same time (docs/performance.md).
const gcPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
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

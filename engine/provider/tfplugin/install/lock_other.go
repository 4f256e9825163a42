//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package install

import (
	"os"
	"time"
)

// abandonedAge: without flock, a stage older than a day is abandoned — far
// beyond the longest download (Limits.DownloadTimeout).
const abandonedAge = 24 * time.Hour

func tryLock(*os.File) (bool, error) { return true, nil }

func abandoned(_ string, mod time.Time) bool { return time.Since(mod) > abandonedAge }

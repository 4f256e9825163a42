package tfplugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// sockDirPrefix starts the name of the directory a provider makes its
// socket in, under the temporary directory; stackd's pid follows it, so
// that the directories of a stackd that was killed (and could not remove
// them) can be told from those of one still running.
const sockDirPrefix = "stackd-tfplugin-"

var sweepOnce sync.Once

// newSockDir makes a provider's socket directory (0700). The first call
// of a process removes what stackd processes that are gone left.
func newSockDir() (string, error) {
	sweepOnce.Do(sweepSockDirs)
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", sockDirPrefix, os.Getpid()))
}

// sweepSockDirs removes the socket directories of stackd processes that
// no longer run. It is best effort: what it cannot read or remove (another
// user's, say) stays. Only real directories are looked at, never a
// symbolic link.
func sweepSockDirs() {
	tmp := os.TempDir()
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, sockDirPrefix) {
			continue
		}
		pidStr, _, ok := strings.Cut(strings.TrimPrefix(name, sockDirPrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || pidRunning(pid) {
			continue
		}
		_ = os.RemoveAll(filepath.Join(tmp, name))
	}
}

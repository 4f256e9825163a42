package file

import (
	"bufio"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
)

// createsWith reports whether a file created with permission mode gets
// exactly mode, that is whether the process's umask takes none of its bits
// away; otherwise the write sets the mode with a chmod. When the umask
// cannot be read it reports false (always chmod).
func createsWith(mode fs.FileMode) bool {
	m, ok := processUmask()
	return ok && mode.Perm()&m == 0
}

// processUmask is the process's umask, read once from /proc/self/status
// (Linux 4.7 and later; umask(2) cannot read it without changing it, which
// would race with every file other goroutines create meanwhile).
var processUmask = sync.OnceValues(func() (fs.FileMode, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "Umask:")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
		if err != nil {
			return 0, false
		}
		return fs.FileMode(n), true
	}
	return 0, false
})

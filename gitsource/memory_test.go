package gitsource

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The memory a Source keeps must not grow with the remote's history. What a daemon keeps
// is measured in a process of its own (the test binary run again, see TestMain), so that
// nothing else the tests did counts: it opens a Source on a remote, fetches a new commit,
// reads the head's tree, writes status several times, and reports its live heap after a
// GC and its resident set.

// memoryScenarioEnv, when set to a JSON memoryScenario, makes the test binary run
// the scenario instead of the tests.
const memoryScenarioEnv = "STACKD_GITSOURCE_MEMORY_SCENARIO"

// memoryProfileEnv names a file the scenario writes its heap profile to (go tool pprof).
const memoryProfileEnv = "STACKD_GITSOURCE_MEMORY_PROFILE"

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type memoryScenario struct {
	URL      string `json:"url"`
	CacheDir string `json:"cache_dir"`
	// Work is a clone of the remote whose main gets a new commit pushed after Open
	// (the scenario pushes it with the git CLI, which runs in its own process).
	Work string `json:"work"`
}

// memoryFigures is what the scenario reports.
type memoryFigures struct {
	HeapAlloc uint64 `json:"heap_alloc"` // live heap after GC, bytes
	HeapSys   uint64 `json:"heap_sys"`
	RSS       uint64 `json:"rss"`  // VmRSS after GC and returning memory to the OS, bytes
	Peak      uint64 `json:"peak"` // VmHWM, bytes
}

// runMemoryScenario runs the scenario described by the environment, prints its figures
// as JSON on stdout and returns the exit code.
func runMemoryScenario(spec string) int {
	var sc memoryScenario
	if err := json.Unmarshal([]byte(spec), &sc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	figures, err := sc.run()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(figures); err != nil {
		return 1
	}
	return 0
}

func (sc memoryScenario) run() (memoryFigures, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := Open(ctx, Options{Repo: sc.URL, CacheDir: sc.CacheDir})
	if err != nil {
		return memoryFigures{}, err
	}
	if out, err := gitErr(sc.Work, "commit", "-q", "--allow-empty", "-m", "new commit"); err != nil {
		return memoryFigures{}, fmt.Errorf("commit: %v: %s", err, out)
	}
	if out, err := gitErr(sc.Work, "push", "-q", "origin", "main"); err != nil {
		return memoryFigures{}, fmt.Errorf("push: %v: %s", err, out)
	}
	if err := s.Fetch(ctx); err != nil {
		return memoryFigures{}, err
	}
	head, err := s.Head(ctx, "main")
	if err != nil {
		return memoryFigures{}, err
	}
	fsys, err := s.Tree(ctx, head)
	if err != nil {
		return memoryFigures{}, err
	}
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		_, err = fs.ReadFile(fsys, p)
		return err
	})
	if err != nil {
		return memoryFigures{}, err
	}
	for i := range 5 {
		w := StatusWrite{Files: map[string][]byte{fmt.Sprintf("status/set-%d.json", i%3): fmt.Appendf(nil, `{"n":%d}`, i)}}
		if _, err := s.WriteStatus(ctx, w); err != nil {
			return memoryFigures{}, err
		}
	}

	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f := memoryFigures{HeapAlloc: ms.HeapAlloc, HeapSys: ms.HeapSys}
	f.RSS, f.Peak, err = procStatus()
	if path := os.Getenv(memoryProfileEnv); path != "" && err == nil {
		err = writeHeapProfile(path)
	}
	runtime.KeepAlive(s)
	return f, err
}

// procStatus reads VmRSS and VmHWM from /proc/self/status.
func procStatus() (rss, peak uint64, err error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != "VmRSS" && key != "VmHWM" {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/self/status %s: %w", key, err)
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak, sc.Err()
}

// measureMemory runs the memory scenario in a new process against a remote whose main has
// commits commits, served over transport.
func measureMemory(tb testing.TB, transport string, commits int) memoryFigures {
	tb.Helper()
	url, bare := historyRemote(tb, transport, commits)
	work := filepath.Join(tb.TempDir(), "work")
	runGit(tb, filepath.Dir(work), "clone", "-q", bare, work)
	spec, err := json.Marshal(memoryScenario{URL: url, CacheDir: filepath.Join(tb.TempDir(), "cache"), Work: work})
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memoryScenarioEnv+"="+string(spec))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("memory scenario (%d commits over %s): %v\n%s", commits, transport, err, stderr.String())
	}
	var f memoryFigures
	if err := json.Unmarshal(out, &f); err != nil {
		tb.Fatalf("memory scenario printed %q: %v", out, err)
	}
	return f
}

// BenchmarkSourceMemory reports what a Source keeps on a remote whose main has 1 or
// 20,000 commits (the same files at the head): live heap after GC (heap-MB), resident set
// after GC (rss-MB) and its peak (peak-rss-MB). Each iteration is one process.
func BenchmarkSourceMemory(b *testing.B) {
	for _, transport := range []string{"file", "git"} {
		for _, commits := range []int{1, longHistory} {
			b.Run(fmt.Sprintf("%s/commits=%d", transport, commits), func(b *testing.B) {
				var f memoryFigures
				for b.Loop() {
					f = measureMemory(b, transport, commits)
				}
				const mb = 1 << 20
				b.ReportMetric(float64(f.HeapAlloc)/mb, "heap-MB")
				b.ReportMetric(float64(f.RSS)/mb, "rss-MB")
				b.ReportMetric(float64(f.Peak)/mb, "peak-rss-MB")
			})
		}
	}
}

// What a Source keeps does not grow with the remote's history: after opening a remote
// whose main has 10,000 commits, fetching, reading the head's tree and writing status,
// its process holds at most a few MB more live heap than on a one-commit remote with the
// same files — go-git's pack index, about 100 bytes per object. (go-git's own push
// walked the whole history on every status write and kept what it read in its object
// cache: about 50 MB more here, 100 MB on 20,000 commits.) The heap is measured after a
// GC in a process of its own, so the bound does not depend on the machine's load.
func TestSourceMemoryDoesNotGrowWithHistory(t *testing.T) {
	const commits, bound = 10000, 12 << 20
	short := measureMemory(t, "file", 1)
	long := measureMemory(t, "file", commits)
	t.Logf("live heap after GC: %.1f MB (1 commit), %.1f MB (%d commits); resident set %.1f MB, %.1f MB",
		float64(short.HeapAlloc)/(1<<20), float64(long.HeapAlloc)/(1<<20), commits,
		float64(short.RSS)/(1<<20), float64(long.RSS)/(1<<20))
	if grown := int64(long.HeapAlloc) - int64(short.HeapAlloc); grown > bound {
		t.Errorf("a Source on a %d-commit remote keeps %.1f MB more live heap than on a one-commit remote, want at most %d MB",
			commits, float64(grown)/(1<<20), bound>>20)
	}
}

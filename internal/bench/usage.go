package bench

// What the process and its children used: CPU time, peak RSS, a heap
// profile of the peak (Linux's getrusage and /proc).

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// peakHeapProfile writes a heap profile to path each time the live heap
// (after a GC) is larger than any seen before, checking every 100 ms, so
// the file ends up with the profile of the peak; stop ends the sampling.
func peakHeapProfile(path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var peak uint64
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			metrics.Read(sample)
			if live := sample[0].Value.Uint64(); live > peak {
				peak = live
				if f, err := os.Create(path); err == nil {
					_ = pprof.WriteHeapProfile(f)
					_ = f.Close()
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// childrenCPUSeconds is the user and system CPU time of the process's
// children so far: those that ended and were waited for (getrusage) and
// those still running (/proc/PID/stat, Linux; elsewhere they are left
// out).
func childrenCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	eachChild(func(_ string, stat []string) {
		ut, _ := strconv.ParseFloat(stat[11], 64)
		st, _ := strconv.ParseFloat(stat[12], 64)
		total += (ut + st) / clockTicks
	})
	return total
}

// childrenPeakRSSMB is the largest peak resident set size (VmHWM) of the
// process's running children (Linux; 0 elsewhere). getrusage's figure for
// children would be stackd's own: a child's high-water mark starts from
// the address space it was forked from. A child that has not yet called
// exec is left out: Go starts processes with clone(CLONE_VM|CLONE_VFORK),
// so until the exec its VmHWM is this process's own (stackd's peak, not a
// provider's); it still has this process's command name then.
func childrenPeakRSSMB() float64 {
	self, _ := os.ReadFile("/proc/self/comm")
	var kib float64
	eachChild(func(dir string, _ []string) {
		if comm, err := os.ReadFile(filepath.Join(dir, "comm")); err != nil || bytes.Equal(comm, self) {
			return // ended, or not yet exec'd: its memory is ours
		}
		b, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			return
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					n, _ := strconv.ParseFloat(f[0], 64)
					kib = max(kib, n)
				}
			}
		}
	})
	return kib / 1024
}

// sampleChildrenPeakRSS samples childrenPeakRSSMB every 50 ms (children
// that end in between are seen at their last sample) until stop is
// called, which returns the largest.
func sampleChildrenPeakRSS() (stop func() float64) {
	done := make(chan struct{})
	result := make(chan float64, 1)
	go func() {
		peak := 0.0
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, childrenPeakRSSMB())
			select {
			case <-done:
				result <- max(peak, childrenPeakRSSMB())
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		return <-result
	}
}

// eachChild calls fn with the /proc directory and the fields of
// /proc/PID/stat after the command name (state, ppid, …) of each running
// child of this process.
func eachChild(fn func(dir string, stat []string)) {
	self := os.Getpid()
	for _, name := range childPIDs() {
		dir := filepath.Join("/proc", name)
		b, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15), in clock ticks;
		// comm may hold spaces and parentheses: split after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 || f[1] != strconv.Itoa(self) {
			continue
		}
		fn(dir, f)
	}
}

// childPIDs lists the process ids that may be children of this process:
// those its threads' /proc/self/task/TID/children name (a few files,
// where scanning all of /proc read every process of the machine 20 times
// a second, a tenth of what tf-fleet-create allocated), or every process
// when the kernel has no such files.
func childPIDs() []string {
	tasks, err := os.ReadDir("/proc/self/task")
	var pids []string
	found := err == nil
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		if err != nil {
			if os.IsNotExist(err) {
				found = false
				break
			}
			continue // the thread ended
		}
		pids = append(pids, strings.Fields(string(b))...)
	}
	if found {
		return pids
	}
	pids = pids[:0]
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil && e.Name() != strconv.Itoa(os.Getpid()) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// peakRSSMB is the process's peak resident set size.
func peakRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // Linux reports KiB
}

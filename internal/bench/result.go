package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/reconciler"
)

// Result is the JSON line printed per scenario.
type Result struct {
	Scenario           string  `json:"scenario"`
	Regions            int     `json:"regions"`
	Accounts           int     `json:"accounts"`
	Instances          int     `json:"instances"`
	ResourcesPerInst   int     `json:"resources_per_instance"`
	WallSeconds        float64 `json:"wall_seconds"`
	PlanSeconds        float64 `json:"plan_seconds,omitempty"`
	ApplySeconds       float64 `json:"apply_seconds,omitempty"`
	InstancesPerSecond float64 `json:"instances_per_second,omitempty"`
	ResourcesPerSecond float64 `json:"resources_per_second,omitempty"`
	MedianSeconds      float64 `json:"median_seconds,omitempty"`
	MinSeconds         float64 `json:"min_seconds,omitempty"`
	MaxSeconds         float64 `json:"max_seconds,omitempty"`
	PeakRSSMB          float64 `json:"peak_rss_mb"`
	// TargetsFS is the filesystem the file resources were written to
	// (ext4, xfs, tmpfs, ...): figures on tmpfs leave the disk out.
	TargetsFS string `json:"targets_fs"`
	// PhaseSeconds is where the measured time went (see
	// reconciler.Phases), summed over the instances applied at once, so
	// the phases of a parallel operation add up to more than its wall time.
	PhaseSeconds map[string]float64 `json:"phase_seconds,omitempty"`
	// CPUSeconds is the process's user and system CPU time in the measured
	// part; against WallSeconds × CPUs it tells CPU-bound from waiting.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// ProviderProcesses counts the Terraform provider processes running
	// at the end (tf-fleet-create), ProviderProcessesStarted those started
	// (the ones replaced after --plugin-recycle-after uses included).
	ProviderProcesses        int `json:"provider_processes,omitempty"`
	ProviderProcessesStarted int `json:"provider_processes_started,omitempty"`
	// ProviderCPUSeconds is the user and system CPU time of the provider
	// processes (stackd's child processes) in the measured part: with
	// CPUSeconds, what the machine spent.
	ProviderCPUSeconds float64 `json:"provider_cpu_seconds,omitempty"`
	// ProviderCalls counts the resource calls made to the provider
	// processes (tf- scenarios): ValidateResourceConfig,
	// PlanResourceChange, ApplyResourceChange.
	ProviderCalls *ProviderCalls `json:"provider_calls,omitempty"`
	// ProviderPeakRSSMB is the largest peak RSS of a provider process.
	ProviderPeakRSSMB float64 `json:"provider_peak_rss_mb,omitempty"`
	CPUs              int     `json:"cpus"`

	// The Git-at-scale scenarios (gitscale.go).
	//
	// StackSets is how many stack sets the definitions hold (one instance
	// each); HistoryCommits how many commits main of the repository had.
	StackSets      int `json:"stack_sets,omitempty"`
	HistoryCommits int `json:"history_commits,omitempty"`
	// CreateSeconds is the first deployment, from the daemon's start to
	// the last operation's end.
	CreateSeconds float64 `json:"create_seconds,omitempty"`
	// StatusCommits counts the commits the daemon added to the status
	// branch in the measured part (counted on the branch with git), and
	// CreateStatusCommits those of the first deployment.
	StatusCommits       int `json:"status_commits,omitempty"`
	CreateStatusCommits int `json:"create_status_commits,omitempty"`
	// StatusWrittenSeconds is from the push to the status of every stack
	// set it changed being on the status branch.
	StatusWrittenSeconds float64 `json:"status_written_seconds,omitempty"`
	// RSSMB is the resident set size (VmRSS) and HeapMB the Go heap
	// (HeapAlloc) after a collection, at the end, the daemon idle.
	RSSMB  float64 `json:"rss_mb,omitempty"`
	HeapMB float64 `json:"heap_mb,omitempty"`
	// Where the RSS is: anonymous memory and mapped files (RssAnon,
	// RssFile), the heap pages the Go runtime holds free without having
	// returned them (HeapIdle − HeapReleased), and the heap's address
	// space (HeapSys: the most the heap ever needed, about).
	RSSAnonMB      float64 `json:"rss_anon_mb,omitempty"`
	RSSFileMB      float64 `json:"rss_file_mb,omitempty"`
	HeapFreeHeldMB float64 `json:"heap_free_held_mb,omitempty"`
	HeapPeakMB     float64 `json:"heap_sys_mb,omitempty"`
	// Cases are the set-ups a scenario compares (status-push).
	Cases []Case `json:"cases,omitempty"`
}

// Case is one set-up of a scenario that compares several: the median and
// range of its timings.
type Case struct {
	Name           string  `json:"name"`
	Transport      string  `json:"transport,omitempty"`
	HistoryCommits int     `json:"history_commits,omitempty"`
	N              int     `json:"n"`
	MedianSeconds  float64 `json:"median_seconds"`
	MinSeconds     float64 `json:"min_seconds"`
	MaxSeconds     float64 `json:"max_seconds"`
	// VsShortHistory is this case's median over the same transport's
	// with a one-commit history.
	VsShortHistory float64 `json:"vs_short_history,omitempty"`
}

// setLatencies sets the case's figures from its timings (seconds).
func (c *Case) setLatencies(lat []float64) {
	s := slices.Sorted(slices.Values(lat))
	c.N = len(s)
	if c.N > 0 {
		c.MedianSeconds, c.MinSeconds, c.MaxSeconds = median(s), s[0], s[len(s)-1]
	}
}

// Summary is the human line of a result: the wall time and where it went.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d instances × %d resources on %s", r.Scenario, r.Instances, r.ResourcesPerInst, r.TargetsFS)
	if r.StackSets > 0 {
		fmt.Fprintf(&b, " (%d stack sets", r.StackSets)
		if r.HistoryCommits > 0 {
			fmt.Fprintf(&b, ", a history of %d commits", r.HistoryCommits)
		}
		b.WriteString(")")
	}
	switch {
	case r.WallSeconds > 0 && r.MedianSeconds > 0:
		fmt.Fprintf(&b, ": %.3f s wall, then median %.3f s (%.3f–%.3f s)", r.WallSeconds, r.MedianSeconds, r.MinSeconds, r.MaxSeconds)
	case r.WallSeconds > 0:
		fmt.Fprintf(&b, ": %.3f s wall", r.WallSeconds)
	case r.MedianSeconds > 0:
		fmt.Fprintf(&b, ": median %.3f s (%.3f–%.3f s)", r.MedianSeconds, r.MinSeconds, r.MaxSeconds)
	}
	if r.CreateSeconds > 0 {
		fmt.Fprintf(&b, ", first deployment %.3f s", r.CreateSeconds)
	}
	if r.StatusWrittenSeconds > 0 {
		fmt.Fprintf(&b, ", status on the branch after %.3f s", r.StatusWrittenSeconds)
	}
	if r.StatusCommits > 0 || r.CreateStatusCommits > 0 {
		fmt.Fprintf(&b, ", %d status commits", r.StatusCommits)
		if r.CreateStatusCommits > 0 {
			fmt.Fprintf(&b, " (first deployment: %d)", r.CreateStatusCommits)
		}
	}
	if r.RSSMB > 0 {
		fmt.Fprintf(&b, ", RSS %.1f MB (anonymous %.1f, files %.1f), Go heap after GC %.1f MB (free pages held %.1f MB, heap reserved %.1f MB)",
			r.RSSMB, r.RSSAnonMB, r.RSSFileMB, r.HeapMB, r.HeapFreeHeldMB, r.HeapPeakMB)
	}
	for _, c := range r.Cases {
		fmt.Fprintf(&b, "\n  %-26s median %.4f s (%.4f–%.4f s, %d runs)", c.Name, c.MedianSeconds, c.MinSeconds, c.MaxSeconds, c.N)
		if c.VsShortHistory > 0 {
			fmt.Fprintf(&b, ", %.2f× the one-commit history", c.VsShortHistory)
		}
	}
	fmt.Fprintf(&b, ", peak RSS %.0f MB", r.PeakRSSMB)
	if r.CPUSeconds > 0 && r.WallSeconds > 0 {
		fmt.Fprintf(&b, ", CPU %.3f s (%.0f%% of %d CPUs)", r.CPUSeconds, 100*r.CPUSeconds/(r.WallSeconds*float64(r.CPUs)), r.CPUs)
	}
	if r.ProviderProcessesStarted > 0 {
		fmt.Fprintf(&b, ", %d provider processes started (%d running at the end)", r.ProviderProcessesStarted, r.ProviderProcesses)
		if r.ProviderCPUSeconds > 0 && r.WallSeconds > 0 {
			fmt.Fprintf(&b, " using CPU %.3f s (%.0f%% of %d CPUs)", r.ProviderCPUSeconds, 100*r.ProviderCPUSeconds/(r.WallSeconds*float64(r.CPUs)), r.CPUs)
		}
		if r.ProviderPeakRSSMB > 0 {
			fmt.Fprintf(&b, ", the largest's peak RSS %.0f MB", r.ProviderPeakRSSMB)
		}
		if c := r.ProviderCalls; c != nil {
			fmt.Fprintf(&b, "; calls: %d validate, %d plan, %d apply", c.Validate, c.Plan, c.Apply)
		}
	}
	if len(r.PhaseSeconds) > 0 && r.WallSeconds > 0 {
		// Summed over the instances applied at once, a phase's time over
		// the wall time is how many instances were in it on average
		// (Little's law): where they queue.
		b.WriteString("\n  where the time went (seconds summed over instances; instances in the phase on average):")
		for _, ph := range reconciler.Phases {
			fmt.Fprintf(&b, "\n    %-13s %9.3f s  %6.1f", ph, r.PhaseSeconds[ph], r.PhaseSeconds[ph]/r.WallSeconds)
		}
	}
	return b.String()
}

// phaseSeconds reads the time spent per phase so far
// (stackd_phase_seconds_total).
func phaseSeconds(m *api.Metrics) map[string]float64 {
	out := map[string]float64{}
	families, err := m.Registry().Gather()
	if err != nil {
		return out
	}
	for _, mf := range families {
		if mf.GetName() != "stackd_phase_seconds_total" {
			continue
		}
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "phase" {
					out[l.GetValue()] = metric.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// ProviderCalls are the calls of Result.ProviderCalls.
type ProviderCalls struct {
	Validate int `json:"validate"`
	Plan     int `json:"plan"`
	Apply    int `json:"apply"`
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// measure runs fn and returns its wall time, with the CPU time of stackd
// and of its children (provider processes) in res, and the children's
// peak RSS.
func (res *Result) measure(fn func() error) (float64, error) {
	// What earlier runs (and the set-up) left dirty in the page cache is
	// written back before the clock starts, not during the run.
	syscall.Sync()
	cpu, childCPU := cpuSeconds(), childrenCPUSeconds()
	childRSS := sampleChildrenPeakRSS()
	start := time.Now()
	err := fn()
	wall := time.Since(start).Seconds()
	res.ProviderPeakRSSMB = round3(childRSS())
	res.CPUSeconds = round3(cpuSeconds() - cpu)
	res.ProviderCPUSeconds = round3(childrenCPUSeconds() - childCPU)
	return wall, err
}

// perSecond sets the throughput of a run that made resources resources.
func (res *Result) perSecond(resources float64) {
	if res.WallSeconds > 0 {
		res.InstancesPerSecond = float64(res.Instances) / res.WallSeconds
		res.ResourcesPerSecond = resources / res.WallSeconds
	}
}

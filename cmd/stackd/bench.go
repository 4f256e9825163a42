package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/spf13/cobra"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/provider/tfplugin"
	"github.com/stackd/stackd/reconciler"
)

// benchScenarios are the end-to-end scenarios of `stackd bench`, in order.
var benchScenarios = []string{"fleet-create", "fleet-update", "fleet-noop", "big-template", "push-latency", "push-latency-busy", "scale", "drift", "tf-fleet-create", "tf-provider-floor"}

type benchConfig struct {
	scenario                     string
	regions, accounts, resources int
	dir                          string
	cpuProfile                   string
	memProfile                   string
	targetsDir                   string
	// pluginDir holds hashicorp/local for tf-fleet-create.
	pluginDir string
	// pluginGOGC is the provider processes' GOGC (0: inherited).
	pluginGOGC int
	// pluginRecycleAfter is stackd's --plugin-recycle-after.
	pluginRecycleAfter int
}

// benchResult is the JSON line printed per scenario.
type benchResult struct {
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
	// ProviderPeakRSSMB is the largest peak RSS of a provider process.
	ProviderPeakRSSMB float64 `json:"provider_peak_rss_mb,omitempty"`
	CPUs              int     `json:"cpus"`
}

// summary is the human line of a result: the wall time and where it went.
func (r *benchResult) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d instances × %d resources on %s", r.Scenario, r.Instances, r.ResourcesPerInst, r.TargetsFS)
	switch {
	case r.WallSeconds > 0:
		fmt.Fprintf(&b, ": %.3f s wall", r.WallSeconds)
	case r.MedianSeconds > 0:
		fmt.Fprintf(&b, ": median %.3f s (%.3f–%.3f s)", r.MedianSeconds, r.MinSeconds, r.MaxSeconds)
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

func newBenchCommand() *cobra.Command {
	var c benchConfig
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure stackd end to end on a generated fleet (one JSON line per scenario)",
		Long: `bench generates a definitions repository in a temporary directory and measures
the scenarios fleet-create, fleet-update, fleet-noop, big-template, push-latency,
push-latency-busy (the same while a pull-request branch that takes tens of
seconds to plan is pushed before every commit; plan_seconds is one plan of that
branch), scale and drift (a drift check of the created fleet). With
--plugin-dir holding HashiCorp's local provider, also tf-fleet-create (the
fleet's files written through that Terraform provider) and tf-provider-floor
(the same resources made through the provider bridge alone, without the
reconciler: the least tf-fleet-create can take). With --scenario all (the
default) each scenario runs in its own process, so that peak RSS is the
scenario's own.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.scenario == "all" {
				return benchAll(cmd.Context(), cmd.OutOrStdout(), c)
			}
			if c.cpuProfile != "" {
				f, err := os.Create(c.cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if c.memProfile != "" {
				stop := peakHeapProfile(c.memProfile)
				defer stop()
			}
			res, err := runBench(cmd.Context(), c)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), res.summary())
			return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.scenario, "scenario", "all", "scenario: all, "+strings.Join(benchScenarios, ", "))
	f.IntVar(&c.regions, "regions", 10, "regions of the fleet (scale: default 100)")
	f.IntVar(&c.accounts, "accounts", 100, "accounts of the fleet (scale: default 100)")
	f.IntVar(&c.resources, "resources", 10, "file resources per instance (big-template: default 1000, in one instance)")
	f.StringVar(&c.targetsDir, "targets-dir", "", "parent directory of the targets root (default: the working directory, on a disk); e.g. /dev/shm to take the disk out of the figures")
	f.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the scenario to this file")
	f.IntVar(&c.pluginRecycleAfter, "plugin-recycle-after", tfplugin.DefaultMaxUses, "resource operations after which a provider process of the tf- scenarios is replaced (as stackd --plugin-recycle-after)")
	f.IntVar(&c.pluginGOGC, "plugin-gogc", 0, "GOGC of the provider processes of the tf- scenarios (as stackd --plugin-gogc)")
	f.StringVar(&c.pluginDir, "plugin-dir", "", "plugin directory holding hashicorp/local (filesystem-mirror layout) for tf-fleet-create and tf-provider-floor: the fleet writes its files through that Terraform provider")
	f.StringVar(&c.memProfile, "memprofile", "", "write a heap profile to this file, taken when the live heap was largest")
	f.StringVar(&c.dir, "dir", "", "working directory (default: a new temporary directory, removed afterwards; under the user cache directory when the temporary directory is in memory)")
	return cmd
}

// benchAll runs every scenario in a child process of this binary.
func benchAll(ctx context.Context, w io.Writer, c benchConfig) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, sc := range benchScenarios {
		args := []string{"bench", "--scenario", sc}
		if strings.HasPrefix(sc, "tf-") {
			// The scenarios of Terraform providers need hashicorp/local.
			if c.pluginDir == "" {
				fmt.Fprintf(os.Stderr, "%s: skipped (it needs --plugin-dir with hashicorp/local)\n", sc)
				continue
			}
			args = append(args, "--plugin-dir", c.pluginDir, fmt.Sprintf("--plugin-gogc=%d", c.pluginGOGC), fmt.Sprintf("--plugin-recycle-after=%d", c.pluginRecycleAfter))
		}
		for _, f := range []struct {
			name string
			v    int
			def  int
		}{{"regions", c.regions, 10}, {"accounts", c.accounts, 100}, {"resources", c.resources, 10}} {
			if f.v != f.def {
				args = append(args, fmt.Sprintf("--%s=%d", f.name, f.v))
			}
		}
		if c.targetsDir != "" {
			args = append(args, "--targets-dir", c.targetsDir)
		}
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Stdout, cmd.Stderr = w, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("scenario %s: %w", sc, err)
		}
	}
	return nil
}

// benchParent is where the bench's working directory goes: the temporary
// directory, unless that is in memory (tmpfs), when the figures would
// leave the disk out; then the user cache directory.
func benchParent() string {
	tmp := os.TempDir()
	if fs := fsType(tmp); fs != "tmpfs" && fs != "ramfs" {
		return tmp
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return tmp
	}
	dir := filepath.Join(cache, "stackd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tmp
	}
	return dir
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

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// measure runs fn and returns its wall time, with the CPU time of stackd
// and of its children (provider processes) in res, and the children's
// peak RSS.
func (res *benchResult) measure(fn func() error) (float64, error) {
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
func (res *benchResult) perSecond(resources float64) {
	if res.WallSeconds > 0 {
		res.InstancesPerSecond = float64(res.Instances) / res.WallSeconds
		res.ResourcesPerSecond = resources / res.WallSeconds
	}
}

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
// the address space it was forked from.
func childrenPeakRSSMB() float64 {
	var kib float64
	eachChild(func(dir string, _ []string) {
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
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
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

// benchFleet is a generated repository with a stackd wired to it.
type benchFleet struct {
	dir  string
	repo *git.Repository
	cfg  repoConfig
	app  *app
	n    int // commits made
}

func fleetDefs(regions, accounts, resources int, counted bool, version string) map[string]string {
	var rs, as []string
	for i := 0; i < regions; i++ {
		rs = append(rs, fmt.Sprintf("%q", fmt.Sprintf("region-%03d", i)))
	}
	for i := 0; i < accounts; i++ {
		as = append(as, fmt.Sprintf("%q", fmt.Sprintf("%012d", i)))
	}
	defs := fmt.Sprintf(`stack_set "fleet" {
  template = "./template"
  vars = {
    version = %q
    owner   = "platform"
  }
  deployment_targets {
    regions  = [%s]
    accounts = [%s]
  }
  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 100
    failure_tolerance_mode  = "SOFT_FAILURE_TOLERANCE"
  }
}
`, version, strings.Join(rs, ", "), strings.Join(as, ", "))
	var t strings.Builder
	t.WriteString("variable \"version\" { type = string }\nvariable \"owner\" { type = string }\n\n")
	if counted {
		fmt.Fprintf(&t, `resource "file" "f" {
  count   = %d
  path    = "fleet/${count.index}.conf"
  content = "version=${var.version}\nowner=${var.owner}\nregion=${target.region}\naccount=${target.account}\nindex=${count.index}\n"
}
`, resources)
	} else {
		for i := 0; i < resources; i++ {
			fmt.Fprintf(&t, `resource "file" "f%d" {
  path    = "fleet/f%d.conf"
  content = "version=${var.version}\nowner=${var.owner}\nregion=${target.region}\naccount=${target.account}\n"
}
`, i, i)
		}
	}
	return map[string]string{"fleet.hcl": defs, "template/main.hcl": t.String()}
}

// localFleetDefs is the fleet of defs with its files written by
// hashicorp/local's local_file under root instead of the file provider.
func localFleetDefs(defs map[string]string, resources int, root string) map[string]string {
	out := map[string]string{"fleet.hcl": defs["fleet.hcl"]}
	out["template/main.hcl"] = fmt.Sprintf(`terraform {
  required_providers {
    local = { source = "hashicorp/local", version = ">= 2.4" }
  }
}
variable "version" { type = string }
variable "owner" { type = string }

resource "local_file" "f" {
  count    = %d
  filename = "%s/${target.account}/${target.region}/fleet/${count.index}.conf"
  content  = "version=${var.version}\nowner=${var.owner}\nregion=${target.region}\naccount=${target.account}\nindex=${count.index}\n"
}
`, resources, root)
	return out
}

func newBenchFleet(ctx context.Context, dir, targetsDir string, files map[string]string, plugins pluginFlags) (*benchFleet, error) {
	repoDir := filepath.Join(dir, "repo")
	repo, err := git.PlainInitWithOptions(repoDir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		return nil, err
	}
	f := &benchFleet{dir: dir, repo: repo, cfg: repoConfig{
		repo: repoDir, branch: "main", statusBranch: "stackd/status", path: ".",
		stateDir: filepath.Join(dir, "state"), targetsRoot: filepath.Join(targetsDir, "targets"),
		allowCommand: true, logLevel: "warn", logFormat: "json", externalURL: "http://127.0.0.1:7070",
		plugins: pluginFlags{dirs: plugins.dirs, noRegistry: true, maxProcesses: 16, gogc: plugins.gogc, recycleAfter: plugins.recycleAfter},
	}}
	if err := f.commit(files); err != nil {
		return nil, err
	}
	f.app, err = f.cfg.open(ctx, io.Discard)
	return f, err
}

func (f *benchFleet) commit(files map[string]string) error {
	root := filepath.Join(f.dir, "repo")
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	f.n++
	return commitAll(f.repo, fmt.Sprintf("bench commit %d", f.n))
}

func (f *benchFleet) reconcile(ctx context.Context) error {
	res, err := f.app.rec.Reconcile(ctx)
	if err != nil {
		return err
	}
	if res.Rejected {
		return fmt.Errorf("revision rejected: %v", res.Diagnostics)
	}
	if res.Failed() {
		return fmt.Errorf("operation failed: %+v", res.Operations)
	}
	return nil
}

func runBench(ctx context.Context, c benchConfig) (*benchResult, error) {
	dir := c.dir
	if dir == "" {
		d, err := os.MkdirTemp(benchParent(), "stackd-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	res := &benchResult{Scenario: c.scenario, Regions: c.regions, Accounts: c.accounts, ResourcesPerInst: c.resources, CPUs: runtime.GOMAXPROCS(0)}
	counted := false
	switch c.scenario {
	case "big-template":
		res.Regions, res.Accounts, counted = 1, 1, true
		if c.resources == 10 {
			res.ResourcesPerInst = 1000
		}
	case "scale":
		if c.regions == 10 && c.accounts == 100 {
			res.Regions, res.Accounts = 100, 100
		}
	case "push-latency", "push-latency-busy":
		// Latency, not throughput: one instance with one file.
		res.Regions, res.Accounts, res.ResourcesPerInst = 1, 1, 1
	}
	res.Instances = res.Regions * res.Accounts
	resources := float64(res.Instances * res.ResourcesPerInst)
	targetsDir := dir
	if c.targetsDir != "" {
		td, err := os.MkdirTemp(c.targetsDir, "stackd-bench-targets-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(td)
		targetsDir = td
	}
	res.TargetsFS = fsType(targetsDir)
	if c.scenario == "tf-provider-floor" {
		if err := tfProviderFloor(ctx, c, dir, targetsDir, res); err != nil {
			return nil, err
		}
		res.perSecond(resources)
		res.PeakRSSMB = peakRSSMB()
		return res, nil
	}
	defs := fleetDefs(res.Regions, res.Accounts, res.ResourcesPerInst, counted, "v1")
	var plugins pluginFlags
	if c.scenario == "tf-fleet-create" {
		if c.pluginDir == "" {
			return nil, fmt.Errorf("tf-fleet-create needs --plugin-dir with hashicorp/local (see docs/performance.md)")
		}
		defs = localFleetDefs(defs, res.ResourcesPerInst, filepath.Join(targetsDir, "targets"))
		plugins = pluginFlags{dirs: []string{c.pluginDir}, gogc: c.pluginGOGC, recycleAfter: c.pluginRecycleAfter}
	}
	fl, err := newBenchFleet(ctx, dir, targetsDir, defs, plugins)
	if err != nil {
		return nil, err
	}
	defer fl.app.Close()
	timed := func(fn func() error) (float64, error) {
		before := phaseSeconds(fl.app.metrics)
		wall, err := res.measure(fn)
		res.PhaseSeconds = map[string]float64{}
		for ph, v := range phaseSeconds(fl.app.metrics) {
			res.PhaseSeconds[ph] = round3(v - before[ph])
		}
		return wall, err
	}
	switch c.scenario {
	case "fleet-create", "tf-fleet-create":
		res.WallSeconds, err = timed(func() error { return fl.reconcile(ctx) })
		if c.scenario == "tf-fleet-create" {
			res.ProviderProcesses = fl.app.plugins.Len()
			res.ProviderProcessesStarted = fl.app.plugins.Started()
		}
	case "fleet-update", "fleet-noop", "scale":
		if err = fl.reconcile(ctx); err != nil {
			return nil, err
		}
		if c.scenario == "fleet-update" {
			err = fl.commit(fleetDefs(res.Regions, res.Accounts, res.ResourcesPerInst, false, "v2"))
		} else {
			err = fl.commit(map[string]string{"README.md": "unrelated change\n"})
		}
		if err != nil {
			return nil, err
		}
		res.WallSeconds, err = timed(func() error {
			if c.scenario == "fleet-update" {
				var perr error
				res.PlanSeconds, perr = timed(func() error {
					_, err := fl.app.rec.Plan(ctx, "")
					return err
				})
				if perr != nil {
					return perr
				}
			}
			return fl.reconcile(ctx)
		})
	case "big-template":
		res.ApplySeconds, err = timed(func() error { return fl.reconcile(ctx) })
		if err == nil {
			res.PlanSeconds, err = timed(func() error {
				_, err := fl.app.rec.Plan(ctx, "")
				return err
			})
		}
		res.WallSeconds = res.ApplySeconds
	case "push-latency":
		var lat []float64
		if lat, err = fl.measurePushes(ctx, 20, nil); err == nil {
			res.MedianSeconds, res.MinSeconds, res.MaxSeconds = lat[len(lat)/2], lat[0], lat[len(lat)-1]
		}
	case "push-latency-busy":
		err = fl.pushLatencyBusy(ctx, 20, res)
	case "drift":
		// A drift check of the whole fleet: every file read and compared,
		// the results recorded.
		if err = fl.reconcile(ctx); err != nil {
			return nil, err
		}
		var rep *reconciler.DriftReport
		res.WallSeconds, err = timed(func() error {
			var err error
			rep, err = fl.app.rec.CheckDrift(ctx, "fleet")
			return err
		})
		if err == nil && (rep.Status != engine.DriftInSync || len(rep.Instances) != res.Instances) {
			err = fmt.Errorf("drift check of the fleet: %s over %d instances, want IN_SYNC over %d", rep.Status, len(rep.Instances), res.Instances)
		}
	default:
		return nil, fmt.Errorf("unknown scenario %q (want all, %s)", c.scenario, strings.Join(benchScenarios, ", "))
	}
	if err != nil {
		return nil, err
	}
	if c.scenario == "fleet-create" || c.scenario == "fleet-update" || c.scenario == "tf-fleet-create" {
		res.perSecond(resources)
	}
	res.PeakRSSMB = peakRSSMB()
	return res, nil
}

// waitIdle waits until the reconciler has no running operation.
func waitIdle(ctx context.Context, a *app) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ops, err := a.store.OperationsByStatus("RUNNING", "QUEUED")
		if err != nil {
			return err
		}
		if len(ops) == 0 && a.rec.Health().Revision != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("operations still running after 60s")
}

// lineWatcher is a log writer that reports when a line matches.
type lineWatcher struct {
	match []byte
	ch    chan time.Time
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	if bytes.Contains(p, l.match) {
		select {
		case l.ch <- time.Now():
		default:
		}
	}
	return len(p), nil
}

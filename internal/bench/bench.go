// Package bench is `stackd bench`: it generates a definitions repository
// in a temporary directory, opens a stackd on it (wired by cmd/stackd,
// through internal/inproc) and measures one scenario per process, printing
// a JSON line of figures (Result) and a human summary.
//
// Adding a scenario: write its run function (see fleetCreate for the
// simplest; r.openFleet generates and opens the fleet, r.timed measures a
// part) and add it to scenarios, in the order `--scenario all` runs them.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/internal/inproc"
	"github.com/stackd/stackd/reconciler"
)

// The fleet's default shape (stackd bench's flags); a scenario that sizes
// its own fleet does so only while the flags are at these.
const (
	DefaultRegions   = 10
	DefaultAccounts  = 100
	DefaultResources = 10
)

// Config is one stackd bench run.
type Config struct {
	// Scenario is a name of Scenarios, or "all".
	Scenario                     string
	Regions, Accounts, Resources int
	// Dir is the working directory ("": a new temporary one, removed
	// afterwards; under the user cache directory when the temporary
	// directory is in memory).
	Dir string
	// CPUProfile and MemProfile, if set, are written.
	CPUProfile, MemProfile string
	// TargetsDir is the parent of the targets root ("": Dir).
	TargetsDir string
	// PluginDir holds hashicorp/local for the tf- scenarios.
	PluginDir string
	// PluginGOGC is the provider processes' GOGC (0: inherited).
	PluginGOGC int
	// PluginRecycleAfter is stackd's --plugin-recycle-after.
	PluginRecycleAfter int
	// StateURL, if set, is a PostgreSQL server the fleets keep their state
	// in (a new database each, dropped afterwards) instead of Badger.
	StateURL string

	// Open and Resolve are cmd/stackd's wiring.
	Open    inproc.Open
	Resolve inproc.Resolve
}

// scenario is one measurement.
type scenario struct {
	name string
	// size sets the fleet's shape in res from the flags (nil: as given).
	size func(c Config, res *Result)
	// plugins: it needs --plugin-dir with hashicorp/local.
	plugins bool
	// throughput: instances and resources per second are reported.
	throughput bool
	// run measures, filling r.res.
	run func(ctx context.Context, r *run) error
}

// scenarios are the end-to-end scenarios, in the order of --scenario all.
var scenarios = []scenario{
	{name: "fleet-create", run: fleetCreate, throughput: true},
	{name: "fleet-update", run: fleetChange, throughput: true},
	{name: "fleet-noop", run: fleetChange},
	{name: "big-template", size: bigTemplateSize, run: bigTemplate},
	{name: "push-latency", size: onePushSize, run: pushLatency},
	{name: "push-latency-busy", size: onePushSize, run: pushLatencyBusy},
	{name: "scale", size: scaleSize, run: fleetChange},
	{name: "drift", run: drift},
	{name: "status-push", size: stackSetsSize(1), run: statusPush},
	{name: "commit-300", size: stackSetsSize(commit300Sets), run: commit300},
	{name: "next-commit-long-history", size: stackSetsSize(nextCommitSets), run: nextCommitLongHistory},
	{name: "rss-long-history", size: stackSetsSize(nextCommitSets), run: rssAfterDeployment(longHistory, false)},
	{name: "rss-short-history", size: stackSetsSize(nextCommitSets), run: rssAfterDeployment(1, false)},
	{name: "rss-local-path", size: stackSetsSize(nextCommitSets), run: rssAfterDeployment(1, true)},
	{name: "tf-fleet-create", plugins: true, run: tfFleetCreate, throughput: true},
	{name: "tf-provider-floor", plugins: true, run: tfProviderFloor, throughput: true},
}

// Scenarios names the scenarios in the order --scenario all runs them.
func Scenarios() []string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return names
}

func find(name string) (scenario, bool) {
	i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == name })
	if i < 0 {
		return scenario{}, false
	}
	return scenarios[i], true
}

// Main is stackd bench: with Scenario "all" every scenario in a child
// process (command is how to start stackd bench: the executable and its
// arguments, the flags are added), so that peak RSS is the scenario's own;
// otherwise the one scenario here, its summary to stderr and its JSON line
// to stdout.
func Main(ctx context.Context, stdout, stderr io.Writer, c Config, command []string) error {
	if c.Scenario == "all" {
		return all(ctx, stdout, stderr, c, command)
	}
	if c.CPUProfile != "" {
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if c.MemProfile != "" {
		stop := peakHeapProfile(c.MemProfile)
		defer stop()
	}
	res, err := Run(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, res.Summary())
	return json.NewEncoder(stdout).Encode(res)
}

// all runs every scenario in a child process.
func all(ctx context.Context, stdout, stderr io.Writer, c Config, command []string) error {
	for _, sc := range scenarios {
		args := append(slices.Clone(command[1:]), "--scenario", sc.name)
		if sc.plugins {
			// The scenarios of Terraform providers need hashicorp/local.
			if c.PluginDir == "" {
				fmt.Fprintf(stderr, "%s: skipped (it needs --plugin-dir with hashicorp/local)\n", sc.name)
				continue
			}
			args = append(args, "--plugin-dir", c.PluginDir, fmt.Sprintf("--plugin-gogc=%d", c.PluginGOGC), fmt.Sprintf("--plugin-recycle-after=%d", c.PluginRecycleAfter))
		}
		for _, f := range []struct {
			name string
			v    int
			def  int
		}{{"regions", c.Regions, DefaultRegions}, {"accounts", c.Accounts, DefaultAccounts}, {"resources", c.Resources, DefaultResources}} {
			if f.v != f.def {
				args = append(args, fmt.Sprintf("--%s=%d", f.name, f.v))
			}
		}
		if c.TargetsDir != "" {
			args = append(args, "--targets-dir", c.TargetsDir)
		}
		if c.StateURL != "" {
			args = append(args, "--state-url", c.StateURL)
		}
		cmd := exec.CommandContext(ctx, command[0], args...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
	}
	return nil
}

// run is one scenario being measured.
type run struct {
	c   Config
	res *Result
	// dir is the working directory, targetsDir the targets root's parent.
	dir, targetsDir string
	// fleet is the repository and stackd openFleet made (nil before).
	fleet *fleet
}

// openFleet commits files to a new repository and opens a stackd on it.
func (r *run) openFleet(ctx context.Context, files map[string]string, plugins inproc.Plugins) (*fleet, error) {
	f, err := newFleet(ctx, r.c.Open, r.dir, r.targetsDir, r.c.StateURL, files, plugins)
	r.fleet = f
	return f, err
}

// defs is the fleet of the result's shape at version.
func (r *run) defs(version string) map[string]string {
	return fleetDefs(r.res.Regions, r.res.Accounts, r.res.ResourcesPerInst, false, version)
}

// timed measures fn (see Result.measure), with the time per phase it took.
func (r *run) timed(fn func() error) (float64, error) {
	m := r.fleet.d.Metrics
	before := phaseSeconds(m)
	wall, err := r.res.measure(fn)
	r.res.PhaseSeconds = map[string]float64{}
	for ph, v := range phaseSeconds(m) {
		r.res.PhaseSeconds[ph] = round3(v - before[ph])
	}
	return wall, err
}

// Run measures the scenario c names.
func Run(ctx context.Context, c Config) (*Result, error) {
	sc, ok := find(c.Scenario)
	if !ok {
		return nil, fmt.Errorf("unknown scenario %q (want all, %s)", c.Scenario, strings.Join(Scenarios(), ", "))
	}
	dir := c.Dir
	if dir == "" {
		d, err := os.MkdirTemp(parentDir(), "stackd-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	res := &Result{Scenario: c.Scenario, Regions: c.Regions, Accounts: c.Accounts, ResourcesPerInst: c.Resources, CPUs: runtime.GOMAXPROCS(0)}
	if sc.size != nil {
		sc.size(c, res)
	}
	res.Instances = res.Regions * res.Accounts
	targetsDir := dir
	if c.TargetsDir != "" {
		td, err := os.MkdirTemp(c.TargetsDir, "stackd-bench-targets-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(td)
		targetsDir = td
	}
	res.TargetsFS = fsType(targetsDir)
	if sc.plugins && c.PluginDir == "" {
		return nil, fmt.Errorf("%s needs --plugin-dir with hashicorp/local (see docs/performance.md)", sc.name)
	}
	r := &run{c: c, res: res, dir: dir, targetsDir: targetsDir}
	err := sc.run(ctx, r)
	if r.fleet != nil {
		r.fleet.close()
	}
	if err != nil {
		return nil, err
	}
	if sc.throughput {
		res.perSecond(float64(res.Instances * res.ResourcesPerInst))
	}
	res.PeakRSSMB = peakRSSMB()
	return res, nil
}

// parentDir is where the bench's working directory goes: the temporary
// directory, unless that is in memory (tmpfs), when the figures would
// leave the disk out; then the user cache directory.
func parentDir() string {
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

// The sizes of the scenarios that do not measure the flags' fleet.

// bigTemplateSize: one instance of 1,000 resources.
func bigTemplateSize(c Config, res *Result) {
	res.Regions, res.Accounts = 1, 1
	if c.Resources == DefaultResources {
		res.ResourcesPerInst = 1000
	}
}

// scaleSize: 100 × 100 instances.
func scaleSize(c Config, res *Result) {
	if c.Regions == DefaultRegions && c.Accounts == DefaultAccounts {
		res.Regions, res.Accounts = 100, 100
	}
}

// onePushSize: latency, not throughput: one instance with one file.
func onePushSize(_ Config, res *Result) {
	res.Regions, res.Accounts, res.ResourcesPerInst = 1, 1, 1
}

// The scenarios.

// fleetCreate: the first deployment of the fleet.
func fleetCreate(ctx context.Context, r *run) error {
	fl, err := r.openFleet(ctx, r.defs("v1"), inproc.Plugins{})
	if err != nil {
		return err
	}
	r.res.WallSeconds, err = r.timed(func() error { return fl.reconcile(ctx) })
	return err
}

// tfFleetCreate: fleet-create with the files written through hashicorp/local.
func tfFleetCreate(ctx context.Context, r *run) error {
	defs := localFleetDefs(r.defs("v1"), r.res.ResourcesPerInst, filepath.Join(r.targetsDir, "targets"))
	fl, err := r.openFleet(ctx, defs, inproc.Plugins{Dirs: []string{r.c.PluginDir}, GOGC: r.c.PluginGOGC, RecycleAfter: r.c.PluginRecycleAfter})
	if err != nil {
		return err
	}
	r.res.WallSeconds, err = r.timed(func() error { return fl.reconcile(ctx) })
	r.res.ProviderProcesses = fl.d.Plugins.Len()
	r.res.ProviderProcessesStarted = fl.d.Plugins.Started()
	r.res.ProviderCalls = providerCalls(fl.d.Plugins.Calls())
	return err
}

// fleetChange: a commit after the fleet's deployment, reconciled:
// fleet-update a new version of every instance (and its plan measured
// first), fleet-noop and scale an unrelated change.
func fleetChange(ctx context.Context, r *run) error {
	fl, err := r.openFleet(ctx, r.defs("v1"), inproc.Plugins{})
	if err != nil {
		return err
	}
	if err = fl.reconcile(ctx); err != nil {
		return err
	}
	update := r.c.Scenario == "fleet-update"
	if update {
		err = fl.commit(r.defs("v2"))
	} else {
		err = fl.commit(map[string]string{"README.md": "unrelated change\n"})
	}
	if err != nil {
		return err
	}
	r.res.WallSeconds, err = r.timed(func() error {
		if update {
			var perr error
			r.res.PlanSeconds, perr = r.timed(func() error {
				_, err := fl.d.Reconciler.Plan(ctx, "")
				return err
			})
			if perr != nil {
				return perr
			}
		}
		return fl.reconcile(ctx)
	})
	return err
}

// bigTemplate: one instance of many resources, applied and then planned.
func bigTemplate(ctx context.Context, r *run) error {
	fl, err := r.openFleet(ctx, fleetDefs(r.res.Regions, r.res.Accounts, r.res.ResourcesPerInst, true, "v1"), inproc.Plugins{})
	if err != nil {
		return err
	}
	r.res.ApplySeconds, err = r.timed(func() error { return fl.reconcile(ctx) })
	if err == nil {
		r.res.PlanSeconds, err = r.timed(func() error {
			_, err := fl.d.Reconciler.Plan(ctx, "")
			return err
		})
	}
	r.res.WallSeconds = r.res.ApplySeconds
	return err
}

// pushLatency: from a commit to its operation starting, 20 times.
func pushLatency(ctx context.Context, r *run) error {
	fl, err := r.openFleet(ctx, r.defs("v1"), inproc.Plugins{})
	if err != nil {
		return err
	}
	lat, err := fl.measurePushes(ctx, 20, nil)
	if err != nil {
		return err
	}
	r.res.MedianSeconds, r.res.MinSeconds, r.res.MaxSeconds = lat[len(lat)/2], lat[0], lat[len(lat)-1]
	return nil
}

// pushLatencyBusy: push-latency while a pull-request branch slow to plan
// is pushed before every commit.
func pushLatencyBusy(ctx context.Context, r *run) error {
	fl, err := r.openFleet(ctx, r.defs("v1"), inproc.Plugins{})
	if err != nil {
		return err
	}
	return fl.pushLatencyBusy(ctx, 20, r.res)
}

// drift: a drift check of the whole fleet: every file read and compared,
// the results recorded.
func drift(ctx context.Context, r *run) error {
	fl, err := r.openFleet(ctx, r.defs("v1"), inproc.Plugins{})
	if err != nil {
		return err
	}
	if err = fl.reconcile(ctx); err != nil {
		return err
	}
	var rep *reconciler.DriftReport
	r.res.WallSeconds, err = r.timed(func() error {
		var err error
		rep, err = fl.d.Reconciler.CheckDrift(ctx, "fleet")
		return err
	})
	if err == nil && (rep.Status != engine.DriftInSync || len(rep.Instances) != r.res.Instances) {
		err = fmt.Errorf("drift check of the fleet: %s over %d instances, want IN_SYNC over %d", rep.Status, len(rep.Instances), r.res.Instances)
	}
	return err
}

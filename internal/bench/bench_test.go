package bench

import (
	"context"
	"strings"
	"testing"
)

// Every scenario has a name, once, and a run function; Scenarios lists
// them in the table's order (the order of --scenario all).
func TestScenarioTable(t *testing.T) {
	seen := map[string]bool{}
	for i, name := range Scenarios() {
		sc := scenarios[i]
		if sc.name != name || name == "" || name == "all" || seen[name] || sc.run == nil {
			t.Errorf("scenario %d: %q (run set: %v), seen before: %v", i, name, sc.run != nil, seen[name])
		}
		seen[name] = true
		if strings.HasPrefix(name, "tf-") != sc.plugins {
			t.Errorf("%s: needs --plugin-dir %v; the tf- scenarios, and only they, need hashicorp/local", name, sc.plugins)
		}
	}
	if len(seen) < 16 {
		t.Errorf("%d scenarios, want the 16 of docs/performance.md at least", len(seen))
	}
}

// A scenario that cannot run says why before anything is opened (Open is
// nil here: calling it would panic).
func TestRunRefusesEarly(t *testing.T) {
	for _, tc := range []struct{ scenario, want string }{
		{"fleet-crate", `unknown scenario "fleet-crate" (want all, fleet-create, fleet-update,`},
		{"tf-fleet-create", "tf-fleet-create needs --plugin-dir with hashicorp/local"},
		{"tf-provider-floor", "tf-provider-floor needs --plugin-dir with hashicorp/local"},
	} {
		_, err := Run(context.Background(), Config{Scenario: tc.scenario, Regions: 1, Accounts: 1, Resources: 1, Dir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.scenario, err, tc.want)
		}
	}
}

// The scenarios that size their own fleet do so only while the flags are
// at their defaults.
func TestScenarioSizes(t *testing.T) {
	size := func(name string, c Config) Result {
		sc, ok := find(name)
		if !ok {
			t.Fatalf("no scenario %s", name)
		}
		res := Result{Regions: c.Regions, Accounts: c.Accounts, ResourcesPerInst: c.Resources}
		if sc.size != nil {
			sc.size(c, &res)
		}
		return res
	}
	def := Config{Regions: DefaultRegions, Accounts: DefaultAccounts, Resources: DefaultResources}
	small := Config{Regions: 2, Accounts: 3, Resources: 4}
	for _, tc := range []struct {
		name string
		c    Config
		want [3]int // regions, accounts, resources per instance
	}{
		{"fleet-create", def, [3]int{10, 100, 10}},
		{"fleet-create", small, [3]int{2, 3, 4}},
		{"scale", def, [3]int{100, 100, 10}},
		{"scale", small, [3]int{2, 3, 4}},
		{"big-template", def, [3]int{1, 1, 1000}},
		{"big-template", small, [3]int{1, 1, 4}},
		{"push-latency", small, [3]int{1, 1, 1}},
		{"push-latency-busy", def, [3]int{1, 1, 1}},
		{"commit-300", def, [3]int{1, 300, 1}},
		{"commit-300", small, [3]int{1, 3, 1}},
		{"commit-300", def, [3]int{1, 300, 1}},
		{"next-commit-long-history", def, [3]int{1, 50, 1}},
		{"rss-long-history", def, [3]int{1, 50, 1}},
		{"status-push", def, [3]int{1, 1, 1}},
	} {
		r := size(tc.name, tc.c)
		if got := [3]int{r.Regions, r.Accounts, r.ResourcesPerInst}; got != tc.want {
			t.Errorf("%s with %+v: %v, want %v", tc.name, tc.c, got, tc.want)
		}
	}
}

// The summary says the wall time, or the median and range, and where the
// time went.
func TestSummary(t *testing.T) {
	r := Result{Scenario: "fleet-create", Instances: 6, ResourcesPerInst: 2, TargetsFS: "ext4", WallSeconds: 2, PeakRSSMB: 80,
		CPUSeconds: 1, CPUs: 2, PhaseSeconds: map[string]float64{"provider": 3}}
	s := r.Summary()
	for _, want := range []string{"fleet-create: 6 instances × 2 resources on ext4: 2.000 s wall", "peak RSS 80 MB", "CPU 1.000 s (25% of 2 CPUs)", "where the time went", "provider          3.000 s     1.5"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q: no %q", s, want)
		}
	}
	p := Result{Scenario: "push-latency", MedianSeconds: 0.05, MinSeconds: 0.01, MaxSeconds: 0.2}
	if s := p.Summary(); !strings.Contains(s, "median 0.050 s (0.010–0.200 s)") || strings.Contains(s, "where the time went") {
		t.Errorf("push-latency summary %q", s)
	}
}

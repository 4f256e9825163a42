package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stackd/stackd/internal/bench"
	"github.com/stackd/stackd/reconciler"
)

// busyBranchDefs is the bench's branch that is slow to plan (the hostile
// branch tests use it too).
var busyBranchDefs = bench.BusyBranchDefs

// The bench command's output for tiny sizes: one JSON line with the
// scenario's figures (correctness of the harness, not speed).
func TestBenchSmoke(t *testing.T) {
	for _, sc := range []string{"fleet-create", "fleet-update", "fleet-noop", "big-template"} {
		t.Run(sc, func(t *testing.T) {
			res := mustStackd(t, "bench", "--scenario", sc, "--regions", "2", "--accounts", "3", "--resources", "2", "--dir", t.TempDir())
			var got bench.Result
			if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
				t.Fatalf("output %q: %v", res.stdout, err)
			}
			if got.Scenario != sc || got.WallSeconds <= 0 || got.PeakRSSMB <= 0 {
				t.Errorf("figures: %+v", got)
			}
			if got.TargetsFS == "" || got.CPUs < 1 {
				t.Errorf("targets_fs %q, cpus %d: want both", got.TargetsFS, got.CPUs)
			}
			switch sc {
			case "fleet-create":
				// Where the time went: every phase reported, and the 12
				// files' provider calls and flushes took some time.
				for _, ph := range reconciler.Phases {
					if _, ok := got.PhaseSeconds[ph]; !ok {
						t.Errorf("phase_seconds %v: no %s", got.PhaseSeconds, ph)
					}
				}
				if got.PhaseSeconds[reconciler.PhaseProvider] <= 0 || got.PhaseSeconds[reconciler.PhaseJournal] <= 0 {
					t.Errorf("phase_seconds %v: want provider and journal time", got.PhaseSeconds)
				}
				if !strings.Contains(res.stderr, "where the time went") || !strings.Contains(res.stderr, "provider") {
					t.Errorf("stderr %q: want the summary of where the time went", res.stderr)
				}
			case "big-template":
				if got.Instances != 1 || got.ResourcesPerInst != 2 || got.PlanSeconds <= 0 {
					t.Errorf("big-template: %+v", got)
				}
			case "fleet-update":
				if got.Instances != 6 || got.PlanSeconds <= 0 || got.ResourcesPerSecond <= 0 {
					t.Errorf("fleet-update: %+v", got)
				}
			}
		})
	}
}

// The scenarios of Terraform providers say what they need instead of
// failing somewhere in the provider installer.
func TestBenchTerraformScenariosNeedPluginDir(t *testing.T) {
	for _, sc := range []string{"tf-fleet-create", "tf-provider-floor"} {
		res := stackd(t, "bench", "--scenario", sc, "--regions", "1", "--accounts", "1", "--resources", "1", "--dir", t.TempDir())
		if res.err == nil || !strings.Contains(res.err.Error(), sc+" needs --plugin-dir with hashicorp/local") {
			t.Errorf("%s without --plugin-dir: %v; want a failure naming --plugin-dir", sc, res.err)
		}
	}
}

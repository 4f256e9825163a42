package main

import (
	"encoding/json"
	"testing"
)

// The bench command's output for tiny sizes: one JSON line with the
// scenario's figures (correctness of the harness, not speed).
func TestBenchSmoke(t *testing.T) {
	for _, sc := range []string{"fleet-create", "fleet-update", "fleet-noop", "big-template"} {
		t.Run(sc, func(t *testing.T) {
			res := mustStackd(t, "bench", "--scenario", sc, "--regions", "2", "--accounts", "3", "--resources", "2", "--dir", t.TempDir())
			var got benchResult
			if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
				t.Fatalf("output %q: %v", res.stdout, err)
			}
			if got.Scenario != sc || got.WallSeconds <= 0 || got.PeakRSSMB <= 0 {
				t.Errorf("figures: %+v", got)
			}
			switch sc {
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

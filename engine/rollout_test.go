package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/hcl/v2"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

const rolloutTmpl = `
variable "a" { type = string }
resource "rec" "x" {
  name    = "x"
  content = var.a
}
output "host" { value = "svc-${target.region}" }
output "port" { value = 8080 }
output "secret" {
  value     = "s3cr3t"
  sensitive = true
}
`

// rolloutDefs is a stack set with the given rollout block body.
func rolloutDefs(body string) string {
	return `stack_set "s" {
  template = "./t"
  vars     = { a = "x" }
  deployment_targets {
    regions  = ["r1", "r2"]
    accounts = ["111111111111", "222222222222"]
  }
  rollout {
` + body + `
  }
}
`
}

func loadRollout(t *testing.T, body string) (*config.StackSet, hcl.Diagnostics) {
	t.Helper()
	defs, diags := load(t, map[string]string{"ss.hcl": rolloutDefs(body), "t/main.hcl": rolloutTmpl}, provider.Registry{"rec": newRecorder()})
	return defs.StackSet("s"), diags
}

func TestRolloutDefaults(t *testing.T) {
	ss, diags := loadRollout(t, ``)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := config.Rollout{Pattern: config.PatternRolling, BatchSize: 1, GrowthFactor: 1, OnFailure: config.OnFailureStop}
	if diff := cmp.Diff(want, *ss.Rollout, cmpopts.IgnoreFields(config.Rollout{}, "DeclRange", "MinInServiceRange")); diff != "" {
		t.Errorf("rollout defaults (-want +got):\n%s", diff)
	}

	ss, diags = loadRollout(t, `
    pattern        = "canary"
    batch_size     = 2
    min_in_service = 3
    pause          = "until_promoted"
    on_failure     = "rollback"
    health_check {
      url = "http://${output.host}:${output.port}/${target.account}/healthz"
    }`)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r := ss.Rollout
	if r.Pattern != config.PatternCanary || r.GrowthFactor != config.DefaultGrowthFactor || !r.UntilPromoted || r.Pause != 0 || r.OnFailure != config.OnFailureRollback || r.MinInService != 3 || r.BatchSize != 2 {
		t.Errorf("canary rollout %+v, want canary ×2 until promoted, rollback, min_in_service 3, batch_size 2", r)
	}
	h := r.HealthCheck
	if h == nil || h.Expect != 200 || h.Timeout != 5*time.Second || h.Interval != 2*time.Second || h.Healthy != 1 || h.Deadline != 5*time.Minute {
		t.Errorf("health_check defaults %+v, want expect 200, timeout 5s, interval 2s, healthy 1, deadline 5m", h)
	}

	// The rollout is scheduling only: it does not change the instances.
	plain, diags := load(t, map[string]string{"ss.hcl": strings.Replace(rolloutDefs(""), "rollout {\n\n  }", "", 1), "t/main.hcl": rolloutTmpl}, provider.Registry{"rec": newRecorder()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if p := plain.StackSet("s"); p.Rollout != nil || p.ConfigHash != ss.ConfigHash {
		t.Errorf("without the block: rollout %v, config hash %s; want nil and the same hash as with it (%s)", p.Rollout, p.ConfigHash, ss.ConfigHash)
	}
}

func TestRolloutValidation(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		line             int // line of ss.hcl the diagnostic must name
	}{
		{"unknown pattern", `pattern = "blue-green"`, `pattern is "blue-green"; it must be "rolling" or "canary"`, 9},
		{"batch_size 0", `batch_size = 0`, "batch_size is 0; it must be at least 1", 9},
		{"negative batch_size", `batch_size = -2`, "batch_size must be a non-negative whole number", 9},
		{"fractional batch_size", `batch_size = 1.5`, "batch_size must be a non-negative whole number", 9},
		{"growth_factor 1", "pattern = \"canary\"\ngrowth_factor = 1", "growth_factor is 1; a canary rollout must grow its batches, so it must be at least 2", 10},
		{"growth_factor with rolling", "growth_factor = 3", "growth_factor only applies to pattern = \"canary\"", 9},
		{"bad pause", `pause = "soon"`, `pause is "soon"; it is not a duration like "30s"`, 9},
		{"negative pause", `pause = "-5s"`, `pause is "-5s"; it must be positive`, 9},
		{"huge pause", `pause = "48h"`, "it may be at most 24h", 9},
		{"bad on_failure", `on_failure = "panic"`, `on_failure is "panic"; it must be "stop" or "rollback"`, 9},
		{"missing url", "health_check {\n}", `The argument "url" is required`, 9},
		{"bad timeout", "health_check {\nurl = \"http://x\"\ntimeout = \"0s\"\n}", `health_check timeout is "0s"; it must be positive`, 11},
		{"bad interval", "health_check {\nurl = \"http://x\"\ninterval = \"2 seconds\"\n}", `health_check interval is "2 seconds"; it is not a duration`, 11},
		{"deadline below timeout", "health_check {\nurl = \"http://x\"\ntimeout = \"10s\"\ndeadline = \"5s\"\n}", "deadline (5s) is shorter than its timeout (10s)", 12},
		{"healthy unreachable before the deadline", "health_check {\nurl = \"http://x\"\nhealthy = 4\ninterval = \"10s\"\ndeadline = \"30s\"\n}", "needs 4 consecutive successes 10s apart, which takes 30s, but its deadline is 30s", 13},
		{"healthy 0", "health_check {\nurl = \"http://x\"\nhealthy = 0\n}", "at least 1 consecutive success is needed", 11},
		{"expect not a status", "health_check {\nurl = \"http://x\"\nexpect = 42\n}", "it must be an HTTP status code", 11},
		{"url uses var", "health_check {\nurl = \"http://${var.a}\"\n}", `not "var"`, 10},
		{"url uses unknown output", "health_check {\nurl = \"http://${output.nope}\"\n}", `references output "nope", which template t does not declare`, 10},
		{"url uses sensitive output", "health_check {\nurl = \"http://${output.secret}\"\n}", `output "secret" is sensitive`, 10},
		{"two health checks", "health_check {\nurl = \"http://x\"\n}\nhealth_check {\nurl = \"http://y\"\n}", "Duplicate health_check block", 12},
		{"unknown attribute", `batch = 2`, `An argument named "batch" is not expected here`, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := loadRollout(t, tc.body)
			var got []string
			found := false
			for _, d := range config.DiagnosticsJSON(diags) {
				got = append(got, d.String())
				if strings.Contains(d.String(), tc.want) {
					found = true
					if d.File != "ss.hcl" || d.Line != tc.line {
						t.Errorf("diagnostic %q at %s:%d, want ss.hcl:%d", d.Summary, d.File, d.Line, tc.line)
					}
				}
			}
			if !found {
				t.Fatalf("diagnostics:\n%s\nwant one containing %q", strings.Join(got, "\n"), tc.want)
			}
		})
	}

	defs, diags := load(t, map[string]string{"t/main.hcl": rolloutTmpl, "ss.hcl": strings.Replace(rolloutDefs(""), "  }\n}", "  }\n  rollout {\n  }\n}", 1)}, provider.Registry{"rec": newRecorder()})
	_ = defs
	if !strings.Contains(diags.Error(), "Duplicate rollout block") {
		t.Errorf("two rollout blocks: diagnostics %q, want a duplicate block error", diags.Error())
	}
}

func TestHealthCheckURL(t *testing.T) {
	ss, diags := loadRollout(t, `
    health_check {
      url = "http://${output.host}.${target.region}:${output.port}/${stack_set.name}/${target.account}"
    }`)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	h := ss.Rollout.HealthCheck
	got, err := h.URLFor(ss, "id-1", config.Target{Region: "r2", Account: "222222222222"}, json.RawMessage(`{"host":"svc-r2","port":8080}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://svc-r2.r2:8080/s/222222222222"; got != want {
		t.Errorf("URL %q, want %q", got, want)
	}
	if _, err := h.URLFor(ss, "id-1", config.Target{Region: "r2", Account: "222222222222"}, nil); err == nil {
		t.Errorf("URL without recorded outputs: no error")
	}
	if _, err := h.URLFor(ss, "id-1", config.Target{Region: "r2", Account: "2"}, json.RawMessage(`{"host":"<sensitive>","port":1}`)); err == nil || !strings.Contains(err.Error(), "not recorded") {
		t.Errorf("URL with a redacted output: error %v, want one saying the value is not recorded", err)
	}

	ss, diags = loadRollout(t, "health_check {\nurl = \"ftp://${target.region}\"\n}")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if _, err := ss.Rollout.HealthCheck.URLFor(ss, "id", config.Target{Region: "r1", Account: "1"}, nil); err == nil || !strings.Contains(err.Error(), "not an http") {
		t.Errorf("ftp URL: error %v, want not an http URL", err)
	}
}

// sum adds batch sizes.
func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func sizesOf(batches [][]int) []int {
	var out []int
	if len(batches) > 0 {
		out = make([]int, len(batches))
	}
	for i, b := range batches {
		out[i] = len(b)
	}
	return out
}

func candidates(inService ...bool) []config.Candidate {
	out := make([]config.Candidate, len(inService))
	for i, s := range inService {
		out[i] = config.Candidate{Region: "r1", InService: s}
	}
	return out
}

// NextBatch over regions: an in-service instance min_in_service holds
// back lets the batch take instances that do not serve in its region, not
// in a later one — unless the batch has taken nothing, when stopping would
// be the alternative. Nothing is taken when every instance left serves and
// none may leave service.
func TestNextBatch(t *testing.T) {
	r := &config.Rollout{Pattern: config.PatternRolling, BatchSize: 3, MinInService: 3}
	c := func(region string, inService bool) config.Candidate {
		return config.Candidate{Region: region, InService: inService}
	}
	for _, tc := range []struct {
		name    string
		left    []config.Candidate
		serving int
		want    []int
	}{
		{"capacity for one", []config.Candidate{c("a", true), c("a", true), c("a", true), c("a", true)}, 4, []int{0}},
		{"no capacity", []config.Candidate{c("a", true), c("a", true)}, 3, nil},
		{"no capacity, a failed one later in the region", []config.Candidate{c("a", true), c("a", false), c("a", true)}, 3, []int{1}},
		{"capacity for one, new ones after it", []config.Candidate{c("a", true), c("a", true), c("a", false), c("a", false)}, 4, []int{0, 2, 3}},
		{"never past a held-back instance into a later region", []config.Candidate{c("a", true), c("a", true), c("b", false)}, 4, []int{0}},
		{"into a later region rather than stop", []config.Candidate{c("a", true), c("b", false), c("b", false)}, 3, []int{1, 2}},
		{"size bounds new instances too", []config.Candidate{c("a", false), c("a", false), c("a", false), c("a", false)}, 0, []int{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.NextBatch(tc.left, tc.serving, 3)); diff != "" {
				t.Errorf("batch (-want +got):\n%s", diff)
			}
		})
	}
	canary := &config.Rollout{Pattern: config.PatternCanary, BatchSize: 1, GrowthFactor: 3}
	if got := canary.NextSize(2, true); got != 6 {
		t.Errorf("canary after a fully successful batch of 2: %d, want 6", got)
	}
	if got := canary.NextSize(2, false); got != 2 {
		t.Errorf("canary after a batch with a failure: %d, want 2 (it grows only after a fully successful batch)", got)
	}
	if got := r.NextSize(3, true); got != 3 {
		t.Errorf("rolling: %d, want 3", got)
	}
}

func allInService(n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = true
	}
	return out
}

func TestBatchSizes(t *testing.T) {
	rolling := func(b, min int) *config.Rollout {
		return &config.Rollout{Pattern: config.PatternRolling, BatchSize: b, GrowthFactor: 1, MinInService: min}
	}
	canary := func(b, g, min int) *config.Rollout {
		return &config.Rollout{Pattern: config.PatternCanary, BatchSize: b, GrowthFactor: g, MinInService: min}
	}
	repeat := func(size, times int, tail ...int) []int {
		var out []int
		for range times {
			out = append(out, size)
		}
		return append(out, tail...)
	}
	for _, tc := range []struct {
		name      string
		r         *config.Rollout
		inService []bool
		untouched int
		want      []int
	}{
		// Rolling: batch_size every batch, the last one what is left.
		{"rolling 1 instance", rolling(2, 0), allInService(1), 0, []int{1}},
		{"rolling 7 by 2", rolling(2, 0), allInService(7), 0, []int{2, 2, 2, 1}},
		{"rolling 7 by 1", rolling(1, 0), allInService(7), 0, repeat(1, 7)},
		{"rolling 20 by 3", rolling(3, 0), allInService(20), 0, repeat(3, 6, 2)},
		{"rolling 1000 by 100", rolling(100, 0), allInService(1000), 0, repeat(100, 10)},
		{"rolling 1000 by 7", rolling(7, 0), allInService(1000), 0, repeat(7, 142, 6)},
		{"rolling batch larger than the fleet", rolling(50, 0), allInService(20), 0, []int{20}},
		// Canary: 1, 2, 4, 8… capped by what is left.
		{"canary 1 instance", canary(1, 2, 0), allInService(1), 0, []int{1}},
		{"canary 7", canary(1, 2, 0), allInService(7), 0, []int{1, 2, 4}},
		{"canary 20", canary(1, 2, 0), allInService(20), 0, []int{1, 2, 4, 8, 5}},
		{"canary 1000", canary(1, 2, 0), allInService(1000), 0, []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 489}},
		{"canary 1000 from 2 by 3", canary(2, 3, 0), allInService(1000), 0, []int{2, 6, 18, 54, 162, 486, 272}},
		{"canary 20 from 5", canary(5, 2, 0), allInService(20), 0, []int{5, 10, 5}},
		// min_in_service: never fewer than that many in service untouched.
		{"rolling 20 by 10, min 15", rolling(10, 15), allInService(20), 0, repeat(5, 4)},
		{"rolling 7 by 4, min 5", rolling(4, 5), allInService(7), 0, []int{2, 2, 2, 1}},
		{"canary 20, min 16", canary(1, 2, 16), allInService(20), 0, []int{1, 2, 4, 4, 4, 4, 1}},
		{"canary 1000, min 900", canary(1, 2, 900), allInService(1000), 0, append([]int{1, 2, 4, 8, 16, 32, 64}, repeat(100, 8, 73)...)},
		// Untouched in-service instances count towards min_in_service.
		{"rolling 5 by 5, min 5, 5 untouched", rolling(5, 5), allInService(5), 5, []int{5}},
		{"rolling 5 by 5, min 5, 2 untouched", rolling(5, 5), allInService(5), 2, []int{2, 2, 1}},
		// min_in_service at or above the fleet (a plan-time diagnostic):
		// the split cannot go, the rest goes one at a time.
		{"min above the fleet", rolling(3, 50), allInService(7), 0, repeat(1, 7)},
		{"min equal to the fleet, canary", canary(1, 2, 20), allInService(20), 0, repeat(1, 20)},
		// New instances are not in service: they never count against it,
		// and once their batch passes they serve.
		{"new fleet ignores min_in_service", rolling(4, 10), make([]bool, 10), 0, []int{4, 4, 2}},
		{"new instances join service", rolling(4, 3), []bool{false, false, false, true, true, true, true}, 0, []int{4, 3}},
		// Instances not in service go past one min_in_service holds back.
		{"new instances go first", rolling(4, 3), []bool{true, true, true, false, false}, 0, []int{2, 2, 1}},
		{"no instances", rolling(2, 0), nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sizesOf(tc.r.Batches(tc.inService, tc.untouched))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("batch sizes (-want +got):\n%s", diff)
			}
			if sum(got) != len(tc.inService) {
				t.Errorf("batches hold %d instances, want %d", sum(got), len(tc.inService))
			}
		})
	}
}

// The min_in_service invariant over many shapes: every batch holds at
// least one instance, and a batch takes in-service instances out only down
// to min_in_service; when it cannot take one (min_in_service at or above
// the fleet, a plan-time diagnostic), planning says so.
func TestBatchSizesInvariant(t *testing.T) {
	for _, n := range []int{1, 7, 20, 1000} {
		for _, b := range []int{1, 2, 5, 64} {
			for _, min := range []int{0, 1, n / 2, n - 1, n, n + 3} {
				for _, pattern := range []string{config.PatternRolling, config.PatternCanary} {
					r := &config.Rollout{Pattern: pattern, BatchSize: b, GrowthFactor: 2, MinInService: min}
					name := fmt.Sprintf("%s n=%d b=%d min=%d", pattern, n, b, min)
					batches, ok := r.PlanBatches(candidates(allInService(n)...), n)
					sizes := sizesOf(batches)
					if ok != (min < n) || ok && sum(sizes) != n || !ok && len(sizes) != 0 {
						t.Fatalf("%s: batches %v (all placed: %v), want all %d placed exactly when min < n", name, sizes, ok, n)
					}
					for k, s := range sizes {
						if s < 1 || n-s < min {
							t.Fatalf("%s: batch %d of %v holds %d, leaving %d of %d in service", name, k+1, sizes, s, n-s, min)
						}
					}
				}
			}
		}
	}
}

func TestRolloutPlanInChangeSets(t *testing.T) {
	for _, tc := range []struct {
		r    config.Rollout
		want string
	}{
		{config.Rollout{Pattern: config.PatternCanary, BatchSize: 1, GrowthFactor: 2, OnFailure: config.OnFailureRollback, HealthCheck: &config.HealthCheck{}},
			"canary in 3 batches (1, 2, 3), each health-checked, on failure rollback"},
		{config.Rollout{Pattern: config.PatternRolling, BatchSize: 6, GrowthFactor: 1, OnFailure: config.OnFailureStop, Pause: 30 * time.Second},
			"rolling in 1 batch (6), pause 30s, on failure stop"},
		{config.Rollout{Pattern: config.PatternRolling, BatchSize: 4, GrowthFactor: 1, OnFailure: config.OnFailureStop, UntilPromoted: true},
			"rolling in 2 batches (4, 2), held between batches until stackd promote, on failure stop"},
	} {
		p := tc.r.PlanRollout(candidates(make([]bool, 6)...), 0)
		if got := p.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
		cs := &changeset.StackSetChangeSet{StackSetName: "web", Revision: "0123456789", Action: changeset.InstanceUpdate, Rollout: p}
		var text, md strings.Builder
		if err := changeset.RenderText(&text, cs, false); err != nil {
			t.Fatal(err)
		}
		if err := changeset.RenderMarkdown(&md, cs, changeset.MarkdownOptions{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "\nRollout: "+tc.want+".\n") || !strings.Contains(md.String(), "**Rollout:** "+tc.want+".") {
			t.Errorf("the change set does not show the rollout:\n%s\n%s", text.String(), md.String())
		}
		b, err := json.Marshal(cs)
		if err != nil {
			t.Fatal(err)
		}
		var back changeset.StackSetChangeSet
		if err := json.Unmarshal(b, &back); err != nil || back.Rollout == nil || !slices.Equal(back.Rollout.Batches, p.Batches) {
			t.Errorf("JSON round trip of %s: %+v %v", b, back.Rollout, err)
		}
	}
}

// A min_in_service the operation can never meet is a diagnostic at the
// attribute, naming the stack set, the value, the instances and the limit:
// below the number of instances (changing + untouched) it is accepted, at
// or above it is not; a first deploy (nothing untouched, nothing in
// service) is held to the same rule.
func TestRolloutMinInServiceCannotBeMet(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		min, changing, untouched int
		want                     string // "" when accepted
	}{
		{"no bound", 0, 4, 0, ""},
		{"below: 3 of 4", 3, 4, 0, ""},
		{"at: 4 of 4", 4, 4, 0, `min_in_service is 4, but the operation has 4 instances (4 to create or update, 0 left in service untouched); a rollout must take at least one instance out of service at a time, so min_in_service must be at most 3.`},
		{"above: 9 of 4", 9, 4, 0, `min_in_service is 9, but the operation has 4 instances (4 to create or update, 0 left in service untouched)`},
		{"untouched count: 5 of 2+4", 5, 2, 4, ""},
		{"untouched count: 6 of 2+4", 6, 2, 4, `the operation has 6 instances (2 to create or update, 4 left in service untouched); a rollout must take at least one instance out of service at a time, so min_in_service must be at most 5.`},
		{"one instance", 1, 1, 0, `the operation has 1 instance (1 to create or update, 0 left in service untouched); a rollout must take at least one instance out of service at a time, so min_in_service must be at most 0.`},
		{"nothing rolls out", 9, 0, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, diags := loadRollout(t, fmt.Sprintf("    batch_size = 2\n    min_in_service = %d", tc.min))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			d := ss.Rollout.CheckMinInService(ss.Name, tc.changing, tc.untouched)
			if tc.want == "" {
				if d != nil {
					t.Fatalf("min_in_service %d with %d+%d instances: %s; want it accepted", tc.min, tc.changing, tc.untouched, d.Detail)
				}
				return
			}
			if d == nil {
				t.Fatalf("min_in_service %d with %d+%d instances accepted; want %q", tc.min, tc.changing, tc.untouched, tc.want)
			}
			if d.Severity != hcl.DiagError || d.Summary != "min_in_service cannot be met" || !strings.HasPrefix(d.Detail, `Stack set "s": `) || !strings.Contains(d.Detail, tc.want) {
				t.Errorf("diagnostic %q: %q, want an error for stack set \"s\" containing %q", d.Summary, d.Detail, tc.want)
			}
			// The attribute's value, line 10 of ss.hcl (the rollout body starts on line 9).
			if d.Subject == nil || d.Subject.Filename != "ss.hcl" || d.Subject.Start.Line != 10 {
				t.Errorf("diagnostic at %v, want ss.hcl line 10 (min_in_service)", d.Subject)
			}
		})
	}
}

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/reconciler"
)

// svcTemplate is a command resource whose read reports what svc.state in
// the instance directory says (running unless told otherwise), and whose
// update takes a while and puts it right.
const svcTemplate = `
resource "command" "svc" {
  create = "printf '{\"state\": \"running\"}'"
  update = "sleep 1; rm -f svc.state; printf '{\"state\": \"running\"}'"
  read   = "cat svc.state 2>/dev/null || printf '{\"state\": \"running\"}'"
}
`

// TestDriftDaemon tries drift as an operator would, against a real daemon:
// files edited and deleted and a service reported stopped are found, with
// mode "report" only reported (status, API, CLI, metrics, a notification),
// with mode "correct" re-applied by a DriftCorrection operation — and a
// kill -9 in the middle of that correction is resumed after the restart
// until nothing has drifted.
func TestDriftDaemon(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.repo, "templates", "web", "svc.hcl"), []byte(svcTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	replaceIn(t, f.repo, "web.hcl", "  deployment_targets {", "  drift {\n    interval = \"1h\"\n    mode     = \"report\"\n    ignore   = [\"file.credentials.mode\"]\n  }\n\n  deployment_targets {")
	f.commit(t, "drift block, a service")

	hook := newEventHook(t)
	p, _ := startTokenDaemon(t, binary, f, "--notify-webhook-url-file", hook.file)
	p.waitLine(t, 60*time.Second, 0, "first operation", message("operation finished"))

	// Nothing drifted yet.
	rep := driftCLI(t, binary, f, "web")
	if rep.Status != engine.DriftInSync {
		t.Fatalf("fresh fleet: %+v", rep)
	}
	// The world changes behind stackd's back.
	stopped := []string{f.instanceDir("eu-west-1", "111111111111"), f.instanceDir("us-east-1", "222222222222"), f.instanceDir("ap-south-1", "111111111111")}
	for _, dir := range stopped {
		if err := os.WriteFile(filepath.Join(dir, "svc.state"), []byte(`{"state": "stopped"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	appConf := filepath.Join(f.instanceDir("eu-west-1", "222222222222"), "web", "app.conf")
	want := readFile(t, appConf)
	if err := os.WriteFile(appConf, []byte("hand-edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	replica := filepath.Join(f.instanceDir("us-east-1", "111111111111"), "web", "replicas", "1.conf")
	wantReplica := readFile(t, replica)
	if err := os.Remove(replica); err != nil {
		t.Fatal(err)
	}
	// An ignored difference.
	if err := os.Chmod(filepath.Join(f.instanceDir("us-east-1", "111111111111"), "web", "credentials"), 0o640); err != nil {
		t.Fatal(err)
	}

	rep = driftCLI(t, binary, f, "web")
	if rep.Status != engine.DriftDrifted || rep.DriftedInstances != 5 || rep.DriftedResources != 5 || rep.Correction != "" {
		t.Fatalf("after the changes (report mode): status %s, %d instances, %d resources, correction %q", rep.Status, rep.DriftedInstances, rep.DriftedResources, rep.Correction)
	}
	text := runBinary(t, binary, "drift", "web", "--last", "--state-dir", f.state)
	for _, w := range []string{"~ command.svc", "state: running → stopped", "- file.replica[1] deleted outside stackd", "~ file.config"} {
		if !strings.Contains(text.stdout, w) {
			t.Errorf("stackd drift --last lacks %q:\n%s", w, text.stdout)
		}
	}
	if strings.Contains(text.stdout, "credentials") {
		t.Errorf("the ignored mode change is reported:\n%s", text.stdout)
	}
	if st := runBinary(t, binary, "status", "web", "--state-dir", f.state); !strings.Contains(st.stdout, "drift: DRIFTED (5 of 6 instances drifted") {
		t.Errorf("stackd status:\n%s", st)
	}
	if b, _ := os.ReadFile(appConf); string(b) != "hand-edited\n" {
		t.Errorf("report mode changed app.conf: %q", b)
	}
	info := readDaemonInfo(t, f.state)
	if m := apiGet(t, info.URL+"/metrics"); !strings.Contains(m, `stackd_drifted_resources{stack_set="web"} 5`) {
		t.Errorf("metrics lack stackd_drifted_resources 5")
	}
	doc := statusHead(t, f.repo).stackSetStatus(t, "web")
	if doc.Drift == nil || doc.Drift.Status != engine.DriftDrifted || doc.Drift.DriftedResources != 5 {
		t.Errorf("status document drift: %+v", doc.Drift)
	}
	eventually(t, 10*time.Second, func() bool {
		for _, e := range hook.received() {
			if e.Type == notify.TypeDriftDetected && e.StackSet == "web" && e.DriftedResources == 5 {
				return true
			}
		}
		return false
	}, "no drift_detected notification")

	// mode = "correct": the next check starts a DriftCorrection; the daemon
	// is killed in its middle and restarted.
	replaceIn(t, f.repo, "web.hcl", `mode     = "report"`, `mode     = "correct"`)
	f.commit(t, "correct drift")
	if rc := runBinary(t, binary, "reconcile", "--wait", "--state-dir", f.state); rc.err != nil {
		t.Fatalf("reconcile: %s", rc)
	}
	from := len(p.log.all())
	rep = driftCLI(t, binary, f, "web")
	if rep.Correction == "" {
		t.Fatalf("correct mode started no correction: %+v", rep)
	}
	p.waitLine(t, 60*time.Second, from, "a corrected instance", func(l map[string]any) bool {
		return l["message"] == "instance complete" && l["kind"] == "DriftCorrection"
	})
	p.kill(t)
	p, _ = startTokenDaemon(t, binary, f)
	p.waitLine(t, 120*time.Second, 0, "the resumed correction", func(l map[string]any) bool {
		return l["message"] == "operation finished" && l["kind"] == "DriftCorrection" && l["status"] == "SUCCEEDED"
	})
	for _, dir := range stopped {
		if _, err := os.Stat(filepath.Join(dir, "svc.state")); !os.IsNotExist(err) {
			t.Errorf("%s: the service was not put right (%v)", dir, err)
		}
	}
	if got := readFile(t, appConf); got != want {
		t.Errorf("app.conf after the correction: %q, want %q", got, want)
	}
	if got := readFile(t, replica); got != wantReplica {
		t.Errorf("replica after the correction: %q", got)
	}
	rep = driftCLI(t, binary, f, "web")
	if rep.Status != engine.DriftInSync {
		t.Errorf("after the correction: %+v", rep)
	}
	// The status writer pushes after the operation ends: its commit comes.
	eventually(t, 30*time.Second, func() bool {
		commits, _, err := readStatusHistory(f.repo)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range commits {
			for _, l := range strings.Split(c.Message, "\n") {
				if strings.HasPrefix(l, "stackd: web DriftCorrection ") && strings.Contains(l, " SUCCEEDED") {
					return true
				}
			}
		}
		return false
	}, "no status commit of the DriftCorrection; logs:\n%s", p.log)
}

// driftCLI runs stackd drift NAME --json through the daemon.
func driftCLI(t *testing.T, binary string, f *fixture, name string) *reconciler.DriftReport {
	t.Helper()
	// While an operation of the stack set runs (the daemon's pass after a
	// restart, say) the daemon answers 409 and the CLI says so: ask again
	// until it is free.
	var res cliResult
	eventually(t, 60*time.Second, func() bool {
		res = runBinary(t, binary, "drift", name, "--json", "--state-dir", f.state)
		return res.err == nil || !strings.Contains(res.stderr, "(HTTP 409)")
	}, "stack set %s stayed busy: %s", name, &res)
	if res.err != nil {
		t.Fatalf("stackd drift: %s", res)
	}
	var reps []*reconciler.DriftReport
	if err := json.Unmarshal([]byte(res.stdout), &reps); err != nil || len(reps) != 1 {
		t.Fatalf("stackd drift --json: %v\n%s", err, res.stdout)
	}
	return reps[0]
}

// apiGet GETs url with the test daemons' token: the body.
func apiGet(t *testing.T, url string) string {
	t.Helper()
	_, body := apiGetStatus(t, url)
	return body
}

// apiGetStatus GETs url with the test daemons' token: status and body.
func apiGetStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer s3cret-token")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

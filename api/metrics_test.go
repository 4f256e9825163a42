package api

import (
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/state"
)

func TestMetrics(t *testing.T) {
	m := NewMetrics()
	e := newEnv(t, func(o *Options) { o.Metrics = m })
	if e.api.Metrics() != m {
		t.Fatal("Server.Metrics is not Options.Metrics")
	}
	m.OperationFinished("DeployStackSet", "SUCCEEDED")
	m.OperationFinished("DeployStackSet", "SUCCEEDED")
	m.OperationFinished("DeleteStackSet", "FAILED")
	m.InstanceDuration("DeployStackSet", 1500*time.Millisecond)
	m.ReconcileDone(2*time.Second, nil)
	m.ReconcileDone(time.Second, errors.New("git unreachable"))
	m.FetchDone(100*time.Millisecond, nil)
	m.FetchDone(100*time.Millisecond, errors.New("timeout"))
	m.FetchDone(100*time.Millisecond, errors.New("timeout"))
	m.QueueLength(4)
	m.Drift("web", 2)
	m.Drift("gone", 1)
	m.ForgetStackSet("gone")
	m.GitFault("push_conflict")
	e.do(req{path: "/v1/stack_sets/nope"}).wantStatus(t, "a 404 to count", http.StatusNotFound)
	e.do(req{method: "BREW", path: "/v1/stack_sets"}).wantStatus(t, "an odd method", http.StatusMethodNotAllowed)

	r := e.do(req{path: "/metrics"})
	r.wantStatus(t, "GET /metrics", http.StatusOK)
	text := string(r.body)
	for _, want := range []string{
		`stackd_operations_total{kind="DeployStackSet",status="SUCCEEDED"} 2`,
		`stackd_operations_total{kind="DeleteStackSet",status="FAILED"} 1`,
		`stackd_operations_total{kind="CreateStackInstances",status="SUCCEEDED"} 0`, // pre-initialised
		`stackd_instance_operation_duration_seconds_count{kind="DeployStackSet"} 1`,
		`stackd_instance_operation_duration_seconds_sum{kind="DeployStackSet"} 1.5`,
		`stackd_reconcile_duration_seconds_count 2`,
		`stackd_reconciles_total{result="success"} 1`,
		`stackd_reconciles_total{result="error"} 1`,
		`stackd_git_fetch_duration_seconds_count 3`,
		`stackd_git_fetches_total{result="error"} 2`,
		`stackd_git_fetches_total{result="success"} 1`,
		`stackd_operation_queue_length 4`,
		`stackd_drifted_resources{stack_set="web"} 2`,
		`stackd_git_faults_total{kind="push_conflict"} 1`,
		`stackd_http_requests_total{code="404",method="GET",route="/v1/stack_sets/{name}"} 1`,
		`stackd_http_requests_total{code="405",method="other",route="/v1/stack_sets"} 1`,
		"# HELP stackd_operations_total ",
		"go_goroutines ",
		"stackd_last_reconcile_success_timestamp_seconds ",
		"stackd_last_git_fetch_success_timestamp_seconds ",
		`stackd_phase_seconds_total{phase="flush"} 0`, // pre-initialised
		`stackd_build_info{goversion="` + runtime.Version() + `",revision="`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, `stack_set="gone"`) {
		t.Errorf("metrics still have the forgotten stack set")
	}
	if strings.Contains(text, "stackd_last_reconcile_success_timestamp_seconds 0\n") {
		t.Errorf("last reconcile success not set")
	}
}

// Metrics have no global state: two sets in one process do not collide,
// and a nil *Metrics ignores calls.
func TestMetricsIndependentAndNilSafe(t *testing.T) {
	a, b := NewMetrics(), NewMetrics()
	a.QueueLength(1)
	b.QueueLength(2)
	if a.Registry() == b.Registry() {
		t.Fatal("shared registry")
	}
	var m *Metrics
	m.OperationFinished("k", "s")
	m.InstanceDuration("k", time.Second)
	m.ReconcileDone(time.Second, nil)
	m.FetchDone(time.Second, nil)
	m.QueueLength(1)
	m.Drift("x", 1)
	m.ForgetStackSet("x")
	m.GitFault("x")
	m.httpRequest("r", "GET", 200, time.Second)
}

// stackd_stack_set_last_operation has a series for every status, so an
// alert on a rolled-back or failed rollback fires.
func TestLastOperationEveryStatus(t *testing.T) {
	for _, status := range state.OperationStatuses {
		m := NewMetrics()
		e := newEnv(t, func(o *Options) { o.Metrics = m })
		m.WatchStackSets(e.store, nil)
		ss, op := populate(t, e.store)
		op.Status = status
		if err := e.store.PutOperation(op); err != nil {
			t.Fatal(err)
		}
		text := string(e.do(req{path: "/metrics"}).body)
		want := `stackd_stack_set_last_operation{kind="DeployStackSet",stack_set="` + ss.Name + `",status="` + string(status) + `"} 1`
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
		if n := strings.Count(text, `stackd_stack_set_last_operation{kind="DeployStackSet",stack_set="web"`); n != len(state.OperationStatuses) {
			t.Errorf("%s: %d series, want one per status", status, n)
		}
	}
}

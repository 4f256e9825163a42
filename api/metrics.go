package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stackd/stackd/internal/version"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// Metrics are stackd's Prometheus metrics, in a registry of their own (no
// global state): the daemon's (reported by the reconciler through the
// methods below), the API's requests, and the Go and process collectors.
// All methods are safe for concurrent use and do nothing on a nil
// *Metrics, so a component may hold an optional one.
type Metrics struct {
	reg *prometheus.Registry

	operations        *prometheus.CounterVec
	instanceDuration  *prometheus.HistogramVec
	reconcileDuration prometheus.Histogram
	reconciles        *prometheus.CounterVec
	reconcileSuccess  prometheus.Gauge
	fetchDuration     prometheus.Histogram
	fetches           *prometheus.CounterVec
	fetchSuccess      prometheus.Gauge
	queue             prometheus.Gauge
	drift             *prometheus.GaugeVec
	gitFaults         *prometheus.CounterVec
	phaseTime         *prometheus.CounterVec
	httpRequests      *prometheus.CounterVec
	httpDuration      *prometheus.HistogramVec
	leasesHeld        prometheus.Gauge
	leaseTakeovers    prometheus.Counter
}

var _ reconciler.ReplicaMetrics = (*Metrics)(nil)

// Result label values.
const (
	resultSuccess = "success"
	resultError   = "error"
)

// durationBuckets cover provider calls and passes from 50 ms to ~2 h.
var durationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200}

// NewMetrics returns the metrics in a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_operations_total",
			Help: "Stack-set operations finished, by kind (CreateStackInstances, DeployStackSet, ...) and final status (SUCCEEDED, FAILED, STOPPED, CANCELLED).",
		}, []string{"kind", "status"}),
		instanceDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stackd_instance_operation_duration_seconds",
			Help:    "Time to create, update or delete one stack instance, by operation kind.",
			Buckets: durationBuckets,
		}, []string{"kind"}),
		reconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stackd_reconcile_duration_seconds",
			Help:    "Time of one reconcile pass (fetch, validate, plan and run the operations).",
			Buckets: durationBuckets,
		}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_reconciles_total",
			Help: "Reconcile passes, by result: success, or error (the fetch or the branch's resolve failed, as during a remote outage; the revision was rejected; or the pass failed).",
		}, []string{"result"}),
		reconcileSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stackd_last_reconcile_success_timestamp_seconds",
			Help: "Unix time of the last reconcile pass that ended without error (0: none yet).",
		}),
		fetchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stackd_git_fetch_duration_seconds",
			Help:    "Time of one fetch of the definitions repository.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_git_fetches_total",
			Help: "Fetches of the definitions repository, by result (success or error).",
		}, []string{"result"}),
		fetchSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stackd_last_git_fetch_success_timestamp_seconds",
			Help: "Unix time of the last successful fetch of the definitions repository (0: none yet).",
		}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stackd_operation_queue_length",
			Help: "Stack-set operations waiting to run.",
		}),
		drift: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "stackd_drifted_resources",
			Help: "Resources whose real state differs from the recorded one, per stack set, as of the latest drift check.",
		}, []string{"stack_set"}),
		gitFaults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_git_faults_total",
			Help: "Git problems the daemon worked around, by kind (for example fetch, push_conflict, force_push).",
		}, []string{"kind"}),
		phaseTime: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_phase_seconds_total",
			Help: "Time spent in each phase of operations (plan, provider, flush, journal, state_sync, status_commit), summed over the instances applied at the same time.",
		}, []string{"phase"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_http_requests_total",
			Help: "HTTP API requests, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stackd_http_request_duration_seconds",
			Help:    "Time to answer an HTTP API request, by route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		leasesHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stackd_leases_held",
			Help: "Stack set leases this replica holds on a shared (PostgreSQL) state: the stack sets whose operations it runs (0 on Badger, where one process runs all).",
		}),
		leaseTakeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stackd_lease_takeovers_total",
			Help: "Stack set leases this replica took over from a replica that did not give them up (it died or stalled past its lease).",
		}),
	}
	v := version.Get()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "stackd_build_info",
		Help:        "Which stackd this is: always 1, with the version, VCS revision and Go version as labels.",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": v.Revision, "goversion": v.GoVersion},
	})
	buildInfo.Set(1)
	m.reg.MustRegister(
		buildInfo,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.operations, m.instanceDuration, m.reconcileDuration, m.reconciles, m.reconcileSuccess,
		m.fetchDuration, m.fetches, m.fetchSuccess, m.queue, m.drift, m.gitFaults, m.phaseTime,
		m.httpRequests, m.httpDuration, m.leasesHeld, m.leaseTakeovers,
	)
	// Start the known series at zero, so rates and alerts work before the
	// first event.
	for _, kind := range state.Kinds {
		for _, st := range []state.OperationStatus{state.OperationSucceeded, state.OperationFailed, state.OperationStopped, state.OperationCancelled} {
			m.operations.WithLabelValues(string(kind), string(st))
		}
	}
	for _, res := range []string{resultSuccess, resultError} {
		m.reconciles.WithLabelValues(res)
		m.fetches.WithLabelValues(res)
	}
	for _, ph := range reconciler.Phases {
		m.phaseTime.WithLabelValues(ph)
	}
	return m
}

// PhaseTime adds d to the time spent in phase.
func (m *Metrics) PhaseTime(phase string, d time.Duration) {
	if m == nil {
		return
	}
	m.phaseTime.WithLabelValues(phase).Add(d.Seconds())
}

// Registry is the metrics' registry, for collectors of other components.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// OperationFinished counts an operation that ended with status.
func (m *Metrics) OperationFinished(kind, status string) {
	if m == nil {
		return
	}
	m.operations.WithLabelValues(kind, status).Inc()
}

// InstanceDuration observes how long one instance of an operation of kind
// took.
func (m *Metrics) InstanceDuration(kind string, d time.Duration) {
	if m == nil {
		return
	}
	m.instanceDuration.WithLabelValues(kind).Observe(d.Seconds())
}

// ReconcileDone observes a reconcile pass that took d and ended with err.
func (m *Metrics) ReconcileDone(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.reconcileDuration.Observe(d.Seconds())
	if err != nil {
		m.reconciles.WithLabelValues(resultError).Inc()
		return
	}
	m.reconciles.WithLabelValues(resultSuccess).Inc()
	m.reconcileSuccess.SetToCurrentTime()
}

// FetchDone observes a Git fetch that took d and ended with err.
func (m *Metrics) FetchDone(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.fetchDuration.Observe(d.Seconds())
	if err != nil {
		m.fetches.WithLabelValues(resultError).Inc()
		return
	}
	m.fetches.WithLabelValues(resultSuccess).Inc()
	m.fetchSuccess.SetToCurrentTime()
}

// QueueLength sets the number of operations waiting to run.
func (m *Metrics) QueueLength(n int) {
	if m == nil {
		return
	}
	m.queue.Set(float64(n))
}

// Drift sets the number of drifted resources found in stackSet.
func (m *Metrics) Drift(stackSet string, n int) {
	if m == nil {
		return
	}
	m.drift.WithLabelValues(stackSet).Set(float64(n))
}

// ForgetStackSet drops the per-stack-set series of a deleted stack set.
func (m *Metrics) ForgetStackSet(stackSet string) {
	if m == nil {
		return
	}
	m.drift.DeleteLabelValues(stackSet)
}

// GitFault counts a Git problem of kind (a small fixed set of names, for
// example "fetch", "push_conflict", "force_push").
func (m *Metrics) GitFault(kind string) {
	if m == nil {
		return
	}
	m.gitFaults.WithLabelValues(kind).Inc()
}

// httpRequest observes one API request.
func (m *Metrics) httpRequest(route, method string, status int, d time.Duration) {
	if m == nil {
		return
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
	default:
		method = "other" // bound the label's values
	}
	m.httpRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route).Observe(d.Seconds())
}

// stackSetCollector reports, at each scrape, per stack set: the status of
// its last operation and whether the deploy branch's latest revision was
// rejected — what alerts on a stuck or failing stack set need.
type stackSetCollector struct {
	store    *state.Store
	rejected func() string
	lastOp   *prometheus.Desc
	rejDesc  *prometheus.Desc
}

// WatchStackSets adds the per-stack-set gauges
// stackd_stack_set_last_operation{stack_set,kind,status} (1 for the
// status of its last operation, 0 for the others) and
// stackd_stack_set_revision_rejected{stack_set} (1 while the deploy
// branch's head, which holds every stack set, is rejected: rejected
// returns its revision, or "").
func (m *Metrics) WatchStackSets(st *state.Store, rejected func() string) {
	if m == nil {
		return
	}
	m.reg.MustRegister(&stackSetCollector{
		store: st, rejected: rejected,
		lastOp: prometheus.NewDesc("stackd_stack_set_last_operation",
			"The last operation of each stack set: 1 for its status, 0 for the other statuses.",
			[]string{"stack_set", "kind", "status"}, nil),
		rejDesc: prometheus.NewDesc("stackd_stack_set_revision_rejected",
			"1 while the deploy branch's latest revision is rejected (it did not validate or plan; the last good revision stays deployed), else 0.",
			[]string{"stack_set"}, nil),
	})
}

func (c *stackSetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lastOp
	ch <- c.rejDesc
}

func (c *stackSetCollector) Collect(ch chan<- prometheus.Metric) {
	sets, err := c.store.ListStackSets()
	if err != nil {
		return
	}
	rejected := 0.0
	if c.rejected != nil && c.rejected() != "" {
		rejected = 1
	}
	for _, ss := range sets {
		ch <- prometheus.MustNewConstMetric(c.rejDesc, prometheus.GaugeValue, rejected, ss.Name)
		if ss.LastOperation == "" {
			continue
		}
		op, err := c.store.Operation(ss.LastOperation)
		if err != nil {
			continue
		}
		for _, s := range state.OperationStatuses {
			v := 0.0
			if op.Status == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.lastOp, prometheus.GaugeValue, v, ss.Name, string(op.Kind), string(s))
		}
	}
}

// LeasesHeld sets the number of stack set leases held
// (reconciler.ReplicaMetrics).
func (m *Metrics) LeasesHeld(n int) {
	if m == nil {
		return
	}
	m.leasesHeld.Set(float64(n))
}

// LeaseTakeover counts a lease taken over from a replica that did not
// release it (reconciler.ReplicaMetrics).
func (m *Metrics) LeaseTakeover() {
	if m == nil {
		return
	}
	m.leaseTakeovers.Inc()
}

// WatchReplicas adds the metrics of a replica of a shared state:
// stackd_fenced_writes_total (st's fenced writes refused for a lost
// lease), and from owners (the owner watch's latest view, nil before the
// first; read at each scrape, no database query):
// stackd_replicas (live replicas), stackd_stack_set_owner_info{stack_set,
// replica} (1 per stack set with a live owner) and
// stackd_stack_set_ownerless{stack_set} (1 for a stack set without a live
// owner for more than twice the lease TTL: the alert, else 0).
func (m *Metrics) WatchReplicas(st *state.Store, owners func() *reconciler.Owners) {
	if m == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "stackd_fenced_writes_total",
			Help: "State writes of this replica refused because the stack set's lease was lost (taken over, expired or given up): each is a write an old owner could not make.",
		}, func() float64 { return float64(st.FencedWritesRefused()) }),
		&ownersCollector{
			owners: owners,
			replicas: prometheus.NewDesc("stackd_replicas",
				"Live replicas sharing the state (heartbeat not expired), as this replica last read them.", nil, nil),
			owner: prometheus.NewDesc("stackd_stack_set_owner_info",
				"1 for each stack set with a live owner, labelled with the replica that owns it.", []string{"stack_set", "replica"}, nil),
			ownerless: prometheus.NewDesc("stackd_stack_set_ownerless",
				"1 while a stack set has had no live owner for more than twice the lease TTL (none of its operations run), else 0.", []string{"stack_set"}, nil),
		},
	)
}

// ownersCollector reports the owner watch's latest view.
type ownersCollector struct {
	owners                     func() *reconciler.Owners
	replicas, owner, ownerless *prometheus.Desc
}

func (c *ownersCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.replicas
	ch <- c.owner
	ch <- c.ownerless
}

func (c *ownersCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.owners()
	if v == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(len(v.Replicas)))
	for _, so := range v.StackSets {
		if so.Owner != "" {
			ch <- prometheus.MustNewConstMetric(c.owner, prometheus.GaugeValue, 1, so.StackSet, so.Owner)
		}
		alert := 0.0
		if so.Alert {
			alert = 1
		}
		ch <- prometheus.MustNewConstMetric(c.ownerless, prometheus.GaugeValue, alert, so.StackSet)
	}
}

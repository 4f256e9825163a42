package main

// Helpers of the replica tests (replica_e2e_test.go, issue 31,
// docs/design.md §13): a throwaway PostgreSQL cluster, a real Git
// repository, several `stackd run` processes sharing both, a counting
// custom-resource provider that also serves the instances' health checks
// and samples how many instances are in service, and readers of the shared
// state.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/internal/pgtest"
	"github.com/stackd/stackd/state"
)

// ---- the counting provider ---------------------------------------------------

// rpCall is one request the provider received.
type rpCall struct {
	req    crRequest
	source string // the replica's address, from the ResponseURL
	at     time.Time
}

// rpWatch is a stack set whose instances the provider counts in service.
type rpWatch struct {
	fleet, min int
}

// rpProvider is a custom-resource provider on 127.0.0.1 that answers
// synchronously after delay and records every request with the replica it
// came from (the host of its ResponseURL: each replica has its own external
// URL). An instance is out of service while a request for it is being
// served; GET /health/<set>/<region>/<account> answers 503 then and 200
// otherwise. For watched stack sets every request and every probe samples
// how many instances are in service.
type rpProvider struct {
	delay time.Duration
	// slots, if set, bounds the requests served at once (a provider
	// with a limited throughput); the others queue.
	slots chan struct{}

	mu       sync.Mutex
	calls    []rpCall
	inflight map[string]int // "set/region/account" → requests being served
	watch    map[string]rpWatch
	samples  map[string]int
	minSeen  map[string]int
	breaches []string
	probes   int
}

func newRPProvider(delay time.Duration) *rpProvider {
	return &rpProvider{delay: delay, inflight: map[string]int{}, watch: map[string]rpWatch{},
		samples: map[string]int{}, minSeen: map[string]int{}}
}

// watchSet starts sampling the in-service count of set.
func (p *rpProvider) watchSet(set string, fleet, min int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watch[set] = rpWatch{fleet: fleet, min: min}
	p.minSeen[set] = fleet
}

// sampleLocked records the in-service count of set now.
func (p *rpProvider) sampleLocked(set, why string) {
	w, ok := p.watch[set]
	if !ok {
		return
	}
	out := 0
	for inst, n := range p.inflight {
		if n > 0 && strings.HasPrefix(inst, set+"/") {
			out++
		}
	}
	in := w.fleet - out
	p.samples[set]++
	if in < p.minSeen[set] {
		p.minSeen[set] = in
	}
	if in < w.min && len(p.breaches) < 20 {
		p.breaches = append(p.breaches, fmt.Sprintf("%s at %s: %d of %d in service (min_in_service %d)", set, why, in, w.fleet, w.min))
	}
}

func (p *rpProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/health/"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) != 3 {
			http.NotFound(w, r)
			return
		}
		p.mu.Lock()
		p.probes++
		busy := p.inflight[rest] > 0
		p.sampleLocked(parts[0], "a health probe")
		p.mu.Unlock()
		if busy {
			http.Error(w, "deploying", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
		return
	}
	var req crRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	source := ""
	if u, err := url.Parse(req.ResponseURL); err == nil {
		source = u.Host
	}
	inst := req.StackName + "/" + req.RegionID + "/" + req.ResourceOwnerID
	p.mu.Lock()
	p.calls = append(p.calls, rpCall{req: req, source: source, at: time.Now()})
	p.inflight[inst]++
	p.sampleLocked(req.StackName, req.RequestType+" "+req.where())
	p.mu.Unlock()
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
			defer func() { <-p.slots }()
		case <-r.Context().Done():
		}
	}
	if p.delay > 0 {
		select {
		case <-time.After(p.delay):
		case <-r.Context().Done():
		}
	}
	p.mu.Lock()
	p.inflight[inst]--
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(req.success())
}

// all returns the calls so far.
func (p *rpProvider) all() []rpCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// duplicateCreates lists the resources that got Creates with more than
// one request id (a repeated request id is create-or-verify: one resource).
func (p *rpProvider) duplicateCreates() []string {
	ids := map[string]map[string]bool{}
	for _, c := range p.all() {
		if c.req.RequestType != "Create" {
			continue
		}
		k := c.req.where()
		if ids[k] == nil {
			ids[k] = map[string]bool{}
		}
		ids[k][c.req.RequestID] = true
	}
	var out []string
	for k, s := range ids {
		if len(s) > 1 {
			out = append(out, fmt.Sprintf("%s created %d times", k, len(s)))
		}
	}
	sort.Strings(out)
	return out
}

// created is how many resources of set whose logical id is logical got a
// Create (distinct resources).
func (p *rpProvider) created(set, logical string) int {
	seen := map[string]bool{}
	for _, c := range p.all() {
		if c.req.RequestType == "Create" && c.req.StackName == set && c.req.LogicalResourceID == logical {
			seen[c.req.where()] = true
		}
	}
	return len(seen)
}

// callsFrom lists the calls from source received after since.
func (p *rpProvider) callsFrom(source string, since time.Time) []rpCall {
	var out []rpCall
	for _, c := range p.all() {
		if c.source == source && c.at.After(since) {
			out = append(out, c)
		}
	}
	return out
}

// inService reports the smallest in-service count sampled for set, the
// number of samples and the breaches of min_in_service seen.
func (p *rpProvider) inService(set string) (min, samples int, breaches []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.minSeen[set], p.samples[set], slices.Clone(p.breaches)
}

// ---- the world: database, repository, replicas ----------------------------------

// rpReplica is one `stackd run` process.
type rpReplica struct {
	n    int
	p    *proc
	addr string // its listen address, also its external URL's host
	id   string // its replica id
}

// rpWorld is the test's fleet: one database, one repository, replicas.
type rpWorld struct {
	t       *testing.T
	binary  string
	pg      *pgtest.Cluster
	dsn     string
	repo    string
	targets string
	prov    *rpProvider
	provURL string
	ttl     time.Duration
	st      *state.Store // the test's own view of the state
	reps    []*rpReplica
	runs    int
}

// newRPWorld starts a PostgreSQL cluster, a provider answering after
// delay and an empty repository; replicas use lease TTL ttl.
func newRPWorld(t *testing.T, ttl, delay time.Duration) *rpWorld {
	t.Helper()
	w := &rpWorld{t: t, binary: stackdBinary(t), ttl: ttl, prov: newRPProvider(delay)}
	w.pg = pgtest.Start(t)
	w.dsn = w.pg.NewDatabase(t)
	st, err := state.OpenPostgres(w.dsn, state.PostgresOptions{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w.st = st
	srv := httptest.NewServer(w.prov)
	t.Cleanup(srv.Close)
	w.provURL = srv.URL
	dir := t.TempDir()
	w.repo, w.targets = filepath.Join(dir, "repo"), filepath.Join(dir, "targets")
	if err := os.MkdirAll(w.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, w.repo, "init", "-q")
	return w
}

// commit writes files into the repository and commits them.
func (w *rpWorld) commit(files map[string]string, msg string) string {
	w.t.Helper()
	writeTree(w.t, w.repo, files)
	return commitAllIn(w.t, w.repo, msg)
}

// start starts a replica (run's flags, then extra) and waits until it
// serves and runs as a replica.
func (w *rpWorld) start(extra ...string) *rpReplica {
	t := w.t
	t.Helper()
	for attempt := 1; ; attempt++ {
		w.runs++
		addr := freePort(t)
		args := append([]string{"run", "--repo", w.repo, "--state-url", w.dsn, "--targets-root", w.targets,
			"--lease-ttl", w.ttl.String(), "--interval", "300ms", "--listen", addr, "--external-url", "http://" + addr,
			"--shutdown-grace", "20s", "--log-format", "json", "--log-level", "debug"}, extra...)
		p := startProc(t, w.binary, nil, args...)
		i, ok := p.tryWaitLine(60*time.Second, 0, message("running as a replica of a shared state"), nil)
		if !ok {
			if p.done() && attempt < 3 && strings.Contains(p.log.String(), "address already in use") {
				continue // the free port was taken meanwhile
			}
			t.Fatalf("replica %d did not start; logs:\n%s", w.runs, p.log)
		}
		lines, _ := p.log.since(i)
		id, _ := lines[0]["replica"].(string)
		p.waitLine(t, 60*time.Second, 0, `"stackd running"`, message("stackd running"))
		r := &rpReplica{n: w.runs, p: p, addr: addr, id: id}
		w.reps = append(w.reps, r)
		t.Logf("replica %d started: %s at %s", r.n, id, addr)
		return r
	}
}

// live lists the replicas whose process runs.
func (w *rpWorld) live() []*rpReplica {
	var out []*rpReplica
	for _, r := range w.reps {
		if !r.p.done() {
			out = append(out, r)
		}
	}
	return out
}

// byID returns the replica with id (nil if none).
func (w *rpWorld) byID(id string) *rpReplica {
	for _, r := range w.reps {
		if r.id == id {
			return r
		}
	}
	return nil
}

// stackSetID returns the id of stack set name ("" while it has none).
func (w *rpWorld) stackSetID(name string) string {
	ss, err := w.st.StackSetByName(name)
	if err != nil {
		return ""
	}
	return ss.ID
}

// operation returns the operation of stack set name for revision rev.
func (w *rpWorld) operation(name, rev string) (state.Operation, bool) {
	id := w.stackSetID(name)
	if id == "" {
		return state.Operation{}, false
	}
	op, err := w.st.OperationForRevision(id, rev)
	return op, err == nil
}

// operations returns every operation of stack set name.
func (w *rpWorld) operations(name string) []state.Operation {
	id := w.stackSetID(name)
	if id == "" {
		return nil
	}
	ops, _ := w.st.Operations(id)
	return ops
}

// waitOp waits until the operation of name for rev satisfies cond.
func (w *rpWorld) waitOp(name, rev string, timeout time.Duration, what string, cond func(state.Operation) bool) state.Operation {
	w.t.Helper()
	var op state.Operation
	eventually(w.t, timeout, func() bool {
		var ok bool
		op, ok = w.operation(name, rev)
		return ok && cond(op)
	}, "%s: the operation of %s for %s: %+v%s", what, name, short(rev), op.Rollout, w.tails())
	return op
}

// waitEnded waits until the operation of name for rev ended and returns it.
func (w *rpWorld) waitEnded(name, rev string, timeout time.Duration) state.Operation {
	w.t.Helper()
	return w.waitOp(name, rev, timeout, "never ended", func(op state.Operation) bool { return op.Status.Done() })
}

// owner returns the holder of name's lease if it is live by the
// database's clock.
func (w *rpWorld) owner(name string) string {
	ls, err := w.st.Leases()
	if err != nil {
		return ""
	}
	now, err := w.st.DBNow()
	if err != nil {
		return ""
	}
	for _, l := range ls {
		if l.StackSet == name && l.Expires.After(now) {
			return l.Holder
		}
	}
	return ""
}

// stateCheck runs `stackd state check` on the database.
func (w *rpWorld) stateCheck() string {
	w.t.Helper()
	res := runBinary(w.t, w.binary, "state", "check", "--state-url", w.dsn)
	if res.err != nil || !strings.Contains(res.stdout, "state is consistent") {
		return res.String()
	}
	return ""
}

// firstEventAfter returns the time of the first event of operation id
// recorded after t0 (zero if none).
func (w *rpWorld) firstEventAfter(id string, t0 time.Time) time.Time {
	evs, err := w.st.Events(id)
	if err != nil {
		return time.Time{}
	}
	var first time.Time
	for _, ev := range evs {
		if ev.Time.After(t0) && (first.IsZero() || ev.Time.Before(first)) {
			first = ev.Time
		}
	}
	return first
}

// tails is the end of every replica's log, for a failure's message.
func (w *rpWorld) tails() string {
	var b strings.Builder
	for _, r := range w.reps {
		fmt.Fprintf(&b, "\n--- replica %d (%s, exited %v):\n%s", r.n, r.id, r.p.done(), tailLines(r.p.log.String(), 25))
	}
	return b.String()
}

// ---- the repository's contents -------------------------------------------------

// rpTypes declares the custom resource type the provider serves.
func (w *rpWorld) rpTypes() string {
	return fmt.Sprintf(`resource_type "Custom::Svc" {
  service_token = "%s/hook"
}
`, w.provURL)
}

// rpTemplate is an instance at version n: resource app (updated by every
// version) and gen_<n> (created by it; the previous one deleted).
func rpTemplate(n int) string {
	return fmt.Sprintf(`variable "version" { type = string }

resource "custom" "app" {
  type       = "Custom::Svc"
  properties = { version = var.version }
}

resource "custom" "gen_%d" {
  type       = "Custom::Svc"
  properties = { version = var.version }
}

output "version" { value = var.version }
`, n)
}

// rpAccounts returns n twelve-digit account ids.
func rpAccounts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%012d", 100000000001+i)
	}
	return out
}

// rpRollout is the rollout block of a rolling rollout checked by the
// provider's health endpoint ("" for none).
func (w *rpWorld) rpRollout(batch, minIn int) string {
	return fmt.Sprintf(`
  rollout {
    pattern        = "rolling"
    batch_size     = %d
    min_in_service = %d
    pause          = "100ms"

    health_check {
      url      = "%s/health/${stack_set.name}/${target.region}/${target.account}"
      interval = "50ms"
      timeout  = "2s"
      healthy  = 2
      deadline = "20s"
    }
  }
`, batch, minIn, w.provURL)
}

// rpStackSet is the definition of stack set name at version n.
func rpStackSet(name string, n int, regions, accounts []string, rollout string) string {
	return fmt.Sprintf(`stack_set %q {
  template = "./templates/%s"
  vars     = { version = "v%d" }

  deployment_targets {
    regions  = %s
    accounts = %s
  }

  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 2
    failure_tolerance_count = 1
  }
%s}
`, name, name, n, hclList(regions), hclList(accounts), rollout)
}

// rpSmallSet is a stack set of the shared small template at version n:
// one region, rpSmallAccounts accounts deployed one after the other, no
// rollout.
func rpSmallSet(name string, n int) string {
	return fmt.Sprintf(`stack_set %q {
  template = "./templates/small"
  vars     = { version = "v%d" }

  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = %s
  }

  operation_preferences {
    max_concurrent_count = 1
  }
}
`, name, n, hclList(rpAccounts(rpSmallAccounts)))
}

// rpSmallAccounts is the number of instances of a small stack set.
const rpSmallAccounts = 4

// rpSmallTemplate is one custom resource whose properties carry the
// version.
const rpSmallTemplate = `variable "version" { type = string }

resource "custom" "app" {
  type       = "Custom::Svc"
  properties = { version = var.version }
}
`

// waitAll waits until every stack set in names has an ended operation for
// rev, polling every 200ms (the state holds many of them); it returns the
// operations.
func (w *rpWorld) waitAll(names []string, rev string, timeout time.Duration, progress func(ended int)) map[string]state.Operation {
	t := w.t
	t.Helper()
	done := map[string]state.Operation{}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, name := range names {
			if _, ok := done[name]; ok {
				continue
			}
			if op, ok := w.operation(name, rev); ok && op.Status.Done() {
				done[name] = op
			}
		}
		if progress != nil {
			progress(len(done))
		}
		if len(done) == len(names) {
			return done
		}
		select {
		case <-deadline.C:
			var missing []string
			for _, name := range names {
				if _, ok := done[name]; !ok {
					missing = append(missing, name)
				}
			}
			t.Fatalf("after %s, %d stack sets have no ended operation for %s: %v%s", timeout, len(missing), short(rev), missing, w.tails())
		case <-tick.C:
		}
	}
}

// shares counts, by replica address, the stack sets in names whose
// requests of type kind since t0 came from it (a stack set served by
// several replicas counts for each).
func (w *rpWorld) shares(names []string, kind string, t0 time.Time) map[string]int {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	by := map[string]map[string]bool{}
	for _, c := range w.prov.all() {
		if c.req.RequestType != kind || !want[c.req.StackName] || c.at.Before(t0) {
			continue
		}
		if by[c.source] == nil {
			by[c.source] = map[string]bool{}
		}
		by[c.source][c.req.StackName] = true
	}
	out := map[string]int{}
	for src, sets := range by {
		out[src] = len(sets)
	}
	return out
}

// shareText names each replica's share.
func (w *rpWorld) shareText(shares map[string]int) string {
	var parts []string
	for _, r := range w.reps {
		if n, ok := shares[r.addr]; ok {
			parts = append(parts, fmt.Sprintf("replica %d: %d", r.n, n))
		}
	}
	return strings.Join(parts, ", ")
}

package main

// The operations view of replicas on a shared PostgreSQL state
// (docs/design.md §13): stackd status --owners and GET /v1/owners, the
// replica metrics, the ownerless alert on /readyz and as notifications,
// apply refused beside live replicas, and file resources refused unless
// --targets-root is declared shared.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/internal/pgtest"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// eventSink is a generic JSON webhook (--notify-webhook-url-file) that
// records the events it gets.
type eventSink struct {
	mu     sync.Mutex
	events []notify.Event
}

func (s *eventSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var e notify.Event
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// count counts the events of type typ for stack set set.
func (s *eventSink) count(typ, set string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.events {
		if e.Type == typ && e.StackSet == set {
			n++
		}
	}
	return n
}

// ownersFleet is a repository of small stack sets (one file resource
// each), a PostgreSQL state, and replicas run as processes.
type ownersFleet struct {
	t                  *testing.T
	binary, dsn, repo  string
	targets, notifyURL string
	st                 *state.Store
	sets               []string
	sink               *eventSink
}

func newOwnersFleet(t *testing.T, sets ...string) *ownersFleet {
	t.Helper()
	f := &ownersFleet{t: t, binary: stackdBinary(t), sets: sets, sink: &eventSink{}}
	pg := pgtest.Start(t)
	f.dsn = pg.NewDatabase(t)
	st, err := state.OpenPostgres(f.dsn, state.PostgresOptions{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.st = st
	srv := httptest.NewServer(f.sink)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	f.repo, f.targets = filepath.Join(dir, "repo"), filepath.Join(dir, "targets")
	f.notifyURL = filepath.Join(dir, "notify-url")
	if err := os.WriteFile(f.notifyURL, []byte(srv.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"templates/app/main.hcl": `resource "file" "marker" {
  path    = "app.txt"
  content = "deployed\n"
}
`}
	for i, s := range sets {
		// An account each: two stack sets may not manage one file.
		files[s+".hcl"] = fmt.Sprintf(`stack_set %q {
  template = "./templates/app"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["%012d"]
  }
}
`, s, 100000000000+i)
	}
	if err := os.MkdirAll(f.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, f.repo, "init", "-q")
	writeTree(t, f.repo, files)
	commitAllIn(t, f.repo, "stack sets")
	return f
}

// ownersReplica is one `stackd run` process of the fleet.
type ownersReplica struct {
	p        *proc
	id, addr string
}

// start starts a replica with lease TTL ttl and waits until it serves.
func (f *ownersFleet) start(ttl time.Duration) *ownersReplica {
	t := f.t
	t.Helper()
	for attempt := 1; ; attempt++ {
		addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
		p := startProc(t, f.binary, nil, "run", "--repo", f.repo, "--state-url", f.dsn,
			"--targets-root", f.targets, "--shared-targets-root", "--lease-ttl", ttl.String(), "--interval", "500ms",
			"--listen", addr, "--notify-webhook-url-file", f.notifyURL, "--log-format", "json")
		i, ok := p.tryWaitLine(60*time.Second, 0, message("running as a replica of a shared state"), nil)
		if !ok {
			if p.done() && attempt < 3 && strings.Contains(p.log.String(), "address already in use") {
				continue // the free port was taken meanwhile
			}
			t.Fatalf("replica did not start; logs:\n%s", p.log)
		}
		lines, _ := p.log.since(i)
		id, _ := lines[0]["replica"].(string)
		p.waitLine(t, 60*time.Second, 0, `"stackd running"`, message("stackd running"))
		return &ownersReplica{p: p, id: id, addr: addr}
	}
}

// owners reads the owners from the database, as status --owners does.
func (f *ownersFleet) owners() *reconciler.Owners {
	f.t.Helper()
	v, err := reconciler.ReadOwners(f.st, f.sets, 0)
	if err != nil {
		f.t.Fatalf("read owners: %v", err)
	}
	return v
}

// ownedBy maps each stack set to its live owner ("" when ownerless).
func ownedBy(v *reconciler.Owners) map[string]string {
	out := map[string]string{}
	for _, so := range v.StackSets {
		out[so.StackSet] = so.Owner
	}
	return out
}

// readyOwnerless is /readyz's status code and its list of ownerless stack
// sets (reconcile.Ownerless).
func readyOwnerless(addr string) (int, []string, error) {
	var doc struct {
		Ready     bool `json:"ready"`
		Reconcile struct {
			Revision  string
			Ownerless []reconciler.OwnerlessStackSet
		} `json:"reconcile"`
	}
	code, err := getJSON(addr, "/readyz", &doc)
	var names []string
	for _, o := range doc.Reconcile.Ownerless {
		names = append(names, o.StackSet)
	}
	slices.Sort(names)
	return code, names, err
}

// TestOwnersAndOwnerlessAlert: two replicas share four stack sets;
// status --owners (on the database and through a replica's API) and the
// metrics show who owns what. Then one replica dies of kill -9 while a
// holder that is no replica keeps renewing its leases (so the survivor
// cannot take them over): past twice the TTL the survivor's /readyz lists
// exactly those stack sets, a stack_set_ownerless event is sent once for
// each, and when the leases are let go the survivor takes them over, the
// alert clears and stack_set_owner_restored follows.
func TestOwnersAndOwnerlessAlert(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	sets := []string{"alpha", "bravo", "charlie", "delta"}
	f := newOwnersFleet(t, sets...)
	a, b := f.start(ttl), f.start(ttl)
	ids := []string{a.id, b.id}

	// Shared: every stack set owned, by both replicas between them.
	var v *reconciler.Owners
	eventually(t, time.Minute, func() bool {
		v = f.owners()
		owners := map[string]bool{}
		for _, o := range ownedBy(v) {
			if o == "" {
				return false
			}
			owners[o] = true
		}
		return len(owners) == 2 && len(v.Replicas) == 2
	}, "the stack sets were never shared between both replicas; A:\n%s\nB:\n%s", a.p.log, b.p.log)
	for _, so := range v.StackSets {
		if !slices.Contains(ids, so.Owner) || so.Epoch == 0 || so.ExpiresIn <= 0 || so.Ownerless {
			t.Errorf("stack set %+v: want a live owner among %v, an epoch and a future expiry", so, ids)
		}
	}

	// status --owners: on the database, and through a replica's API.
	res := runBinary(t, f.binary, "status", "--owners", "--state-url", f.dsn)
	if res.err != nil {
		t.Fatalf("status --owners: %s", res)
	}
	for _, want := range append(slices.Clone(sets), a.id, b.id, "0 without a live owner", "2 live replicas") {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("status --owners does not show %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "OWNERLESS") {
		t.Errorf("status --owners marks a stack set ownerless:\n%s", res.stdout)
	}
	for _, via := range [][]string{{"--state-url", f.dsn}, {"--server", "http://" + b.addr}} {
		res := runBinary(t, f.binary, append([]string{"status", "--owners", "-o", "json"}, via...)...)
		var got reconciler.Owners
		if err := json.Unmarshal([]byte(res.stdout), &got); err != nil || res.err != nil {
			t.Fatalf("status --owners -o json %v: %v; %s", via, err, res)
		}
		if len(got.StackSets) != len(sets) || len(got.Replicas) != 2 {
			t.Errorf("status --owners -o json %v: %d stack sets and %d replicas, want %d and 2:\n%s", via, len(got.StackSets), len(got.Replicas), len(sets), res.stdout)
		}
		for _, so := range got.StackSets {
			if !slices.Contains(ids, so.Owner) {
				t.Errorf("status --owners -o json %v: %s owned by %q, want one of %v", via, so.StackSet, so.Owner, ids)
			}
		}
	}

	// The metrics of each replica: its leases, the fleet's owners.
	eventually(t, 30*time.Second, func() bool {
		total := 0.0
		for _, r := range []*ownersReplica{a, b} {
			if metric(t, r.addr, "stackd_replicas") != 2 {
				return false
			}
			total += metric(t, r.addr, "stackd_leases_held")
			for _, s := range sets {
				if metric(t, r.addr, "stackd_stack_set_owner_info", `stack_set="`+s+`"`) != 1 {
					return false
				}
			}
		}
		return total == float64(len(sets))
	}, "the replicas' metrics never showed 2 replicas, %d leases and an owner per stack set", len(sets))

	// A holder that is no replica renews A's leases from now on.
	var held []state.Lease
	leases, err := f.st.Leases()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if l.Holder == a.id && l.StackSet != reconciler.LeaderLease && slices.Contains(sets, l.StackSet) {
			held = append(held, l)
		}
	}
	if len(held) == 0 {
		t.Fatalf("replica A holds no stack set's lease: %+v", leases)
	}
	var aSets []string
	for _, l := range held {
		aSets = append(aSets, l.StackSet)
	}
	slices.Sort(aSets)
	stopRenew, renewed := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(ttl / 5)
		defer tick.Stop()
		for {
			for i, l := range held {
				nl, err := f.st.RenewLease(l, ttl)
				if err != nil {
					renewed <- fmt.Errorf("renew %s: %w", l.StackSet, err)
					return
				}
				held[i] = nl
			}
			select {
			case <-stopRenew:
				renewed <- nil
				return
			case <-tick.C:
			}
		}
	}()
	a.p.kill(t)

	// The alert: on the survivor's /readyz, in its view, as events.
	eventually(t, time.Minute, func() bool {
		code, names, err := readyOwnerless(b.addr)
		return err == nil && code == http.StatusOK && slices.Equal(names, aSets)
	}, "replica B's /readyz never listed %v as ownerless (and stayed ready); logs:\n%s", aSets, b.p.log)
	for _, s := range aSets {
		eventually(t, 30*time.Second, func() bool { return f.sink.count(notify.TypeStackSetOwnerless, s) == 1 },
			"no stack_set_ownerless event for %s", s)
		if got := metric(t, b.addr, "stackd_stack_set_ownerless", `stack_set="`+s+`"`); got != 1 {
			t.Errorf("stackd_stack_set_ownerless{stack_set=%q} = %v on B, want 1", s, got)
		}
	}
	var view reconciler.Owners
	if code, err := getJSONVersion(b.addr, "/v1/owners", &view); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/owners: %d %v", code, err)
	}
	for _, so := range view.StackSets {
		want := slices.Contains(aSets, so.StackSet)
		if so.Ownerless != want || so.Alert != want {
			t.Errorf("GET /v1/owners: %s ownerless %v alert %v, want %v", so.StackSet, so.Ownerless, so.Alert, want)
		}
		if want && (so.Holder != a.id || so.OwnerlessSince == nil || view.Now.Sub(*so.OwnerlessSince) <= reconciler.OwnerlessAfter*ttl) {
			t.Errorf("GET /v1/owners: %s held by %q since %v (now %v), want held by %s for more than %s", so.StackSet, so.Holder, so.OwnerlessSince, view.Now, a.id, reconciler.OwnerlessAfter*ttl)
		}
	}
	res = runBinary(t, f.binary, "status", "--owners", "--server", "http://"+b.addr)
	if !strings.Contains(res.stdout, "(ALERT)") || !strings.Contains(res.stdout, fmt.Sprintf("%d without a live owner", len(aSets))) {
		t.Errorf("status --owners on B does not show the alert:\n%s", res)
	}

	// The leases let go: B takes them over, the alert ends.
	close(stopRenew)
	if err := <-renewed; err != nil {
		t.Fatalf("the fake holder lost A's leases while renewing them: %v", err)
	}
	eventually(t, time.Minute, func() bool {
		for _, o := range ownedBy(f.owners()) {
			if o != b.id {
				return false
			}
		}
		code, names, err := readyOwnerless(b.addr)
		return err == nil && code == http.StatusOK && len(names) == 0
	}, "replica B never took over %v and cleared the alert; logs:\n%s", aSets, b.p.log)
	for _, s := range aSets {
		eventually(t, 30*time.Second, func() bool { return f.sink.count(notify.TypeStackSetOwnerRestored, s) == 1 },
			"no stack_set_owner_restored event for %s", s)
		if n := f.sink.count(notify.TypeStackSetOwnerless, s); n != 1 {
			t.Errorf("%d stack_set_ownerless events for %s, want 1 (once per episode)", n, s)
		}
	}
	if got := metric(t, b.addr, "stackd_lease_takeovers_total"); got < float64(len(aSets)) {
		t.Errorf("stackd_lease_takeovers_total on B = %v, want at least %d", got, len(aSets))
	}
	if got := metric(t, b.addr, "stackd_leases_held"); got != float64(len(sets)) {
		t.Errorf("stackd_leases_held on B = %v, want %d", got, len(sets))
	}
	for _, s := range slices.Sorted(maps.Keys(ownedBy(f.owners()))) {
		if slices.Contains(aSets, s) {
			continue
		}
		if n := f.sink.count(notify.TypeStackSetOwnerless, s); n != 0 {
			t.Errorf("%d stack_set_ownerless events for %s, which B owned throughout", n, s)
		}
	}
}

// getJSONVersion is getJSON at the latest microversion.
func getJSONVersion(addr, path string, v any) (int, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Stackd-API-Version", "latest")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
}

// TestStateURLGuards: on a PostgreSQL state, a revision with file
// resources is rejected (a diagnostic at each file resource, nothing
// written) unless --shared-targets-root declares --targets-root shared;
// apply is refused while a replica runs, and works once it stopped.
func TestStateURLGuards(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	db := []string{"--state-url", pg.NewDatabase(t)}
	f := newFixture(t)
	flags := append([]string{"--repo", f.repo, "--targets-root", f.targets, "--log-format", "json"}, db...)

	res := stackd(t, append([]string{"apply"}, flags...)...)
	at := fmt.Sprintf("main.hcl:%d", lineOf(t, f.repo, "templates/web/main.hcl", `resource "file" "config"`))
	if res.code() != 1 || !strings.Contains(res.stdout, "rejected") || !strings.Contains(res.stdout, "--shared-targets-root") || !strings.Contains(res.stdout, at) {
		t.Fatalf("apply of file resources on a shared state without --shared-targets-root: want the revision rejected at %s; %s", at, res)
	}
	if entries, err := os.ReadDir(f.targets); err == nil && len(entries) > 0 {
		t.Errorf("the rejected apply wrote under --targets-root: %v", entries)
	}
	if res := mustStackd(t, append([]string{"status", "--owners"}, db...)...); !strings.Contains(res.stdout, "0 stack sets") {
		t.Errorf("status --owners before anything was deployed: %s", res)
	}

	shared := append(slices.Clone(flags), "--shared-targets-root")
	d := startDaemon(t, append(slices.Clone(shared), "--interval", "1h", "--listen", "127.0.0.1:0", "--lease-ttl", "2s")...)
	addr := d.addr(t)
	rev := runGit(t, f.repo, "rev-parse", "HEAD")
	eventually(t, time.Minute, func() bool {
		code, h, _ := readyz(addr)
		return code == http.StatusOK && h.Revision == rev
	}, "the replica never deployed %s; logs:\n%s", rev, d.logs)
	conf := filepath.Join(f.targets, "111111111111", "eu-west-1", "web", "app.conf")
	eventually(t, time.Minute, func() bool {
		_, err := os.Stat(conf)
		return err == nil
	}, "with --shared-targets-root the file resources were never written (%s); logs:\n%s", conf, d.logs)
	res = stackd(t, append([]string{"apply"}, shared...)...)
	if res.err == nil || !strings.Contains(res.err.Error(), "1 live replica") || !strings.Contains(res.err.Error(), "no replica") {
		t.Errorf("apply beside a live replica: want it refused; %s (%v)", res, res.err)
	}
	if err := d.stop(t); err != nil {
		t.Fatalf("stackd run: %v\n%s", err, d.logs)
	}
	if res := stackd(t, append([]string{"apply"}, shared...)...); res.err != nil {
		t.Errorf("apply once the replica left: %s (%v)", res, res.err)
	}
}

// TestHAUnit: the replica unit of examples/ha passes only flags `stackd
// run` has, with a database and no state directory, and systemd-analyze
// rates it as hardened as the single-node unit (offline, when installed).
func TestHAUnit(t *testing.T) {
	t.Parallel()
	unit, err := filepath.Abs(filepath.Join("..", "..", "examples", "ha", "stackd-replica.service"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	_, exec, ok := strings.Cut(string(b), "\nExecStart=")
	if !ok {
		t.Fatal("no ExecStart in the unit")
	}
	exec, _, _ = strings.Cut(strings.ReplaceAll(exec, "\\\n", " "), "\n")
	args := strings.Fields(exec)
	if len(args) < 2 || args[1] != "run" {
		t.Fatalf("ExecStart runs %v, want stackd run", args)
	}
	run := newRunCommand()
	var flags []string
	for _, a := range args[2:] {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			flags = append(flags, name)
			if run.Flags().Lookup(name) == nil {
				t.Errorf("the unit passes --%s, which stackd run does not have", name)
			}
		}
	}
	for _, want := range []string{"state-url", "state-password-file", "lease-ttl", "api-token-file"} {
		if !slices.Contains(flags, want) {
			t.Errorf("the unit does not pass --%s", want)
		}
	}
	if slices.Contains(flags, "state-dir") {
		t.Error("the unit passes --state-dir beside --state-url")
	}
	analyze, err := osexec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (.ci/run installs it)")
	}
	out, err := osexec.Command(analyze, "security", "--offline=true", "--threshold=20", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
}

// TestPrintOwners: the table of status --owners marks each stack set
// without a live owner and says why, with the alert, and lists the
// replicas with their last heartbeat.
func TestPrintOwners(t *testing.T) {
	now := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	v := &reconciler.Owners{Now: now, Leader: "r1", StackSets: []reconciler.StackSetOwner{
		{StackSet: "api", Holder: "r9", Epoch: 7, Expires: at(-20 * time.Second), ExpiresIn: -20, Ownerless: true, OwnerlessSince: at(-41 * time.Second), Alert: true},
		{StackSet: "db", Ownerless: true, OwnerlessSince: at(-3 * time.Second)},
		{StackSet: "web", Owner: "r1", Holder: "r1", Epoch: 3, Expires: at(12300 * time.Millisecond), ExpiresIn: 12.3},
	}, Replicas: []reconciler.ReplicaInfo{
		{ID: "r1", Info: "host-a v1\n", Started: now.Add(-time.Hour), LastHeartbeat: at(-2 * time.Second), HeartbeatExpires: now.Add(13 * time.Second), ExpiresIn: 13, Leases: 1},
	}}
	var b strings.Builder
	if err := printOwners(&b, v); err != nil {
		t.Fatal(err)
	}
	want := `STACK SET   OWNER   EPOCH   LEASE              NOTE
api         -       7       expired 20s ago    OWNERLESS: last held by r9, for 41s (ALERT)
db          -       -       -                  OWNERLESS: never leased, for 3s
web         r1      3       expires in 12.3s   

3 stack sets, 2 without a live owner; 1 live replica (leader r1), by the database's clock at 2026-11-28T01:00:00Z.

REPLICA   INFO        STARTED                HEARTBEAT   LEASES
r1        host-a v1   2026-11-28T00:00:00Z   2s ago      1
`
	if got := b.String(); got != want {
		t.Errorf("status --owners printed:\n%s\nwant:\n%s", got, want)
	}
}

package main

// The rollout chaos test (issue 14, docs/design.md §6): the real stackd binary runs
// `stackd run` on a repository of two stack sets with a rollout block — a
// rolling one ("roll") and a canary ("can"), 8 instances each, health
// checked against an HTTP server of this test on 127.0.0.1 — while commits
// push new versions, some of which are unhealthy on chosen targets (the
// health server answers 503 while an instance runs them) or fail to deploy
// on one. The daemon is killed with SIGKILL or stopped with SIGTERM at
// moments read from its own log (during a batch, a pause, a health gate, a
// hold for promotion, a rollback), restarted, and killed again. Between
// kills the test promotes held rollouts through the API (`stackd promote`).
//
// Every instance's command resource appends START and END (or FAIL) lines
// with the daemon run, the instance and the version to one log file, the
// file the daemon's own JSON log goes to as well: the order of that file is
// the order things happened in. After every settle the test walks it and
// checks, with the operations' records from the API (GET
// /v1/operations/{id}: the rollout plan with each member's previous
// revision):
//
//   - min_in_service: at no line are more instances out of service than the
//     fleet minus min_in_service, counting an instance out while its command
//     runs or was killed mid-deploy or failed, and while it runs a version
//     the health server answers 503 for (what is certain; an instance the
//     daemon still holds out for its gate is not counted, so the check never
//     blames the daemon for caution);
//   - batches: every START comes while a batch (or rollback batch) of its
//     operation is current, names a member of that batch in the recorded
//     plan, with the operation's version (a rollback: the member's previous
//     revision's version); the commands running at once never exceed the
//     batch's members nor its size; a batch, pause or gate never begins while
//     commands of the batch before still run;
//   - plans: the plan seen just before each kill keeps its batches up to the
//     current one for ever, and its later batches unless a ROLLOUT_REPLANNED
//     event was recorded after it; every plan puts each instance in one
//     non-empty batch;
//   - outcome: every member of the last operation runs the operation's
//     version or its own previous version (every member the operation
//     deployed is back at its previous one, healthy, after ROLLED_BACK; a
//     member the operation counts complete is healthy at its version; one
//     counted rolled back is not OPERATION_FAILED);
//   - status: the API, status/<name>.json on the status branch and `stackd
//     status --json` agree; every instance's recorded revision is the
//     version it runs; none is left in progress; an OPERATION_COMPLETE
//     instance is healthy; the counts of every status commit subject are the
//     operation's (succeeded/total); `stackd state check` passes; SIGTERM
//     exits 0.
//
// What no invariant forbids but is worth knowing is logged as a note: an
// instance left half-deployed by an earlier operation that the last one
// stopped before reaching, and an instance whose daemon was killed between
// its command's end and its record (the journal says pending, so its
// record may lag what it runs until an operation deploys it again).
//
// STACKD_ROLLOUT_CHAOS_KILLS sets the kills (default 10; `make chaos` runs
// 50) and STACKD_ROLLOUT_CHAOS_SEED the seed (default: the clock; logged).
// A failing run saves the merged log to $TMPDIR/stackd-rollout-chaos-SEED.log.

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// The targets of both stack sets, in scheduling order (region, then
// account): 8 instances each.
var (
	rcRegions  = []string{"eu-west-1", "us-east-1"}
	rcAccounts = []string{"111111111111", "222222222222", "333333333333", "444444444444"}
)

const (
	// rcWork is how long a command deploys, in seconds: long enough for
	// a kill to land inside a batch, short enough for 10 kills in CI.
	rcWork = "0.15"
	// rcRunEnv names the daemon run (1, 2, ...) in the commands'
	// environment, so that a line a killed run's command wrote late is
	// told apart from the next run's.
	rcRunEnv = "RC_RUN"
	// rcDeploying is what an instance's version file holds while its
	// command runs, and after a command that was killed or failed.
	rcDeploying = "deploying"
)

// rcSet is one stack set as the latest commit defines it.
type rcSet struct {
	name         string
	pattern      string
	batchSize    int
	minInService int
	pause        string // a duration or "until_promoted"
	onFailure    string
	version      string
}

func (s *rcSet) fleet() int { return len(rcRegions) * len(rcAccounts) }

func rcTargets() []string {
	var out []string
	for _, r := range rcRegions {
		for _, a := range rcAccounts {
			out = append(out, r+"/"+a)
		}
	}
	return out
}

// hcl is the stack set's file. Health checks poll every 50ms and need 2
// successes (a healthy gate takes ~50ms, leaving kills a window); an
// unhealthy instance fails after 1.5s, long enough that a healthy one on a
// loaded CI machine does not fail spuriously (each request may take 1s).
// max_concurrent_count 2 with failure_tolerance_count 1 is the most
// STRICT_FAILURE_TOLERANCE allows (more of a batch in one region wait their
// turn); one failed deploy per region is tolerated, so later batches are
// cut again (ROLLOUT_REPLANNED).
func (s *rcSet) hcl(healthURL string) string {
	growth := ""
	if s.pattern == "canary" {
		growth = "\n    growth_factor  = 2"
	}
	return fmt.Sprintf(`stack_set %q {
  template = "./templates/svc"
  vars     = { version = %q }

  deployment_targets {
    regions  = %s
    accounts = %s
  }

  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 2
    failure_tolerance_count = 1
  }

  rollout {
    pattern        = %q
    batch_size     = %d%s
    min_in_service = %d
    pause          = %q
    on_failure     = %q

    health_check {
      url      = "%s/health/${stack_set.name}/${target.region}/${target.account}"
      interval = "50ms"
      timeout  = "1s"
      healthy  = 2
      deadline = "1500ms"
    }
  }
}
`, s.name, s.version, hclList(rcRegions), hclList(rcAccounts), s.pattern, s.batchSize, growth, s.minInService, s.pause, s.onFailure, healthURL)
}

// rcTemplate is the service every instance runs: a command that logs START,
// "deploys" (the instance's version file says deploying), fails if the
// version is broken for the instance (FAIL), or writes the version and
// logs END. A command whose daemon died (the machine went down with it)
// does nothing more: it checks that its parent is still stackd before it
// starts and before it ends, and the test kills the process groups listed
// in pids/ after every kill.
func rcTemplate(logPath, svcDir, brokenDir, pidDir string) string {
	alive := fmt.Sprintf(`parent=; { read -r parent < /proc/$PPID/comm; } 2>/dev/null
[ "$parent" = stackd ] || { rm -f %[1]s/$$; exit 1; }`, pidDir)
	where := `$` + rcRunEnv + ` $STACKD_STACK_SET $STACKD_REGION/$STACKD_ACCOUNT $V`
	script := fmt.Sprintf(`echo $$ > %[4]s/$$
%[5]s
inst=$STACKD_STACK_SET.$STACKD_REGION.$STACKD_ACCOUNT
echo "START %[6]s" >> %[1]s
echo %[8]s > %[2]s/$inst
sleep %[7]s
if [ -e %[3]s/$STACKD_STACK_SET.$V.$STACKD_REGION.$STACKD_ACCOUNT ]; then
  echo "FAIL %[6]s" >> %[1]s
  rm -f %[4]s/$$
  echo "version $V does not deploy on $STACKD_REGION/$STACKD_ACCOUNT" >&2
  exit 1
fi
%[5]s
echo "$V" > %[2]s/$inst
echo "END %[6]s" >> %[1]s
rm -f %[4]s/$$
`, logPath, svcDir, brokenDir, pidDir, alive, where, rcWork, rcDeploying)
	return fmt.Sprintf(`variable "version" { type = string }

resource "command" "svc" {
  create      = <<-EOT
%[1]s  EOT
  update      = <<-EOT
%[1]s  EOT
  delete      = "echo \"DELETE $%[2]s $STACKD_STACK_SET $STACKD_REGION/$STACKD_ACCOUNT\" >> %[3]s"
  environment = { V = var.version }
}

output "version" { value = var.version }
`, script, rcRunEnv, logPath)
}

// rcHealth is the services' health endpoint: GET
// /health/<set>/<region>/<account> answers 503 while the instance deploys
// (or was left half-deployed) and while it runs a version marked bad for
// it, 200 otherwise — as a real service is unhealthy only while it runs the
// bad version.
type rcHealth struct {
	svcDir string
	mu     sync.Mutex
	bad    map[string]bool // "set version region/account"
	probes atomic.Int64
	failed atomic.Int64
}

func (h *rcHealth) markBad(set, version, target string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bad[set+" "+version+" "+target] = true
}

func (h *rcHealth) isBad(set, version, target string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bad[set+" "+version+" "+target]
}

// running is what the instance's version file says ("" when it has none).
func (h *rcHealth) running(set, target string) string {
	b, _ := os.ReadFile(filepath.Join(h.svcDir, set+"."+strings.ReplaceAll(target, "/", ".")))
	return strings.TrimSpace(string(b))
}

func (h *rcHealth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/health/"), "/")
	if len(parts) != 3 {
		http.NotFound(w, r)
		return
	}
	h.probes.Add(1)
	set, target := parts[0], parts[1]+"/"+parts[2]
	v := h.running(set, target)
	if v == "" || v == rcDeploying || h.isBad(set, v, target) {
		h.failed.Add(1)
		http.Error(w, "unhealthy", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok " + v))
}

// rcOp is an operation as GET /v1/operations/{id} shows it, with its
// events.
type rcOp struct {
	ID       string                     `json:"id"`
	StackSet string                     `json:"stack_set"`
	Kind     string                     `json:"kind"`
	Revision string                     `json:"revision"`
	Status   string                     `json:"status"`
	Reason   string                     `json:"reason"`
	Counts   reconciler.OperationCounts `json:"counts"`
	Results  []state.InstanceResult     `json:"results"`
	Rollout  *state.RolloutProgress     `json:"rollout"`
	replans  int                        // ROLLOUT_REPLANNED events
}

func (op *rcOp) result(target string) (state.InstanceResult, bool) {
	for _, r := range op.Results {
		if r.Region+"/"+r.Account == target {
			return r, true
		}
	}
	return state.InstanceResult{}, false
}

// rcSnap is an operation's plan as seen just before a kill.
type rcSnap struct {
	kill    int
	set, op string
	batch   int
	phase   string
	plan    []state.RolloutBatch
	replans int
	checked bool
}

// rcRun is one `stackd run` process.
type rcRun struct {
	p    *proc
	n    int
	addr string
	// promoted is the index of the last "waiting for promotion" line
	// this test promoted.
	promoted int
}

// rcHarness is the test's world: the repository, the health server, the
// daemon runs and what the checks found.
type rcHarness struct {
	t                                    *testing.T
	binary                               string
	rng                                  *rand.Rand
	seed                                 uint64
	repo, stateDir, targets, logPath     string
	svcDir, brokenDir, pidDir, tokenFile string
	token                                string
	health                               *rcHealth
	healthURL                            string
	sets                                 []*rcSet
	head                                 string
	versions                             int
	versionAt                            map[string]map[string]string // revision → set → version
	// pending: the fate of a set's version not yet settled ("good",
	// "bad", "broken").
	pending        map[string]string
	runs           int
	reopenFailures int
	walker         *rcWalker
	snaps          []*rcSnap
	ops            map[string]*rcOp
	kills          int
	killLog        map[string]int // "SIGKILL at batch (landed: ...)"
	missed         map[string]int // moments that did not come before the fleet settled
	promotions     int
	settles        int
	stats          map[string]int // invariant checks by name
	violations     map[string]int
	reported       map[string]bool
	excerpts       int
	// notes are states worth reporting that no invariant forbids.
	notes []string
}

func newRCHarness(t *testing.T, binary string, seed uint64) *rcHarness {
	dir := t.TempDir()
	h := &rcHarness{
		t: t, binary: binary, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x0c4a05)),
		repo: filepath.Join(dir, "repo"), stateDir: filepath.Join(dir, "stackd", "state"), targets: filepath.Join(dir, "targets"),
		logPath: filepath.Join(dir, "merged.log"), svcDir: filepath.Join(dir, "svc"), brokenDir: filepath.Join(dir, "broken"),
		pidDir: filepath.Join(dir, "pids"), tokenFile: filepath.Join(dir, "token"), token: "rollout-chaos-token",
		versionAt: map[string]map[string]string{}, pending: map[string]string{}, ops: map[string]*rcOp{},
		killLog: map[string]int{}, missed: map[string]int{}, stats: map[string]int{}, violations: map[string]int{}, reported: map[string]bool{},
	}
	for _, d := range []string{h.repo, h.svcDir, h.brokenDir, h.pidDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(h.tokenFile, []byte(h.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.health = &rcHealth{svcDir: h.svcDir, bad: map[string]bool{}}
	srv := httptest.NewServer(h.health)
	t.Cleanup(srv.Close)
	h.healthURL = srv.URL
	h.sets = []*rcSet{
		// 8 instances, batches of 3 capped to 2 by min_in_service 6.
		{name: "roll", pattern: "rolling", batchSize: 3, minInService: 6, pause: "200ms", onFailure: "rollback"},
		// 8 instances, 1, 2, 4... capped to 3 by min_in_service 5.
		{name: "can", pattern: "canary", batchSize: 1, minInService: 5, pause: "300ms", onFailure: "stop"},
	}
	h.walker = newRCWalker(h)
	runGit(t, h.repo, "init", "-q")
	t.Cleanup(h.reapCommands)
	return h
}

func (h *rcHarness) set(name string) *rcSet {
	for _, s := range h.sets {
		if s.name == name {
			return s
		}
	}
	return nil
}

// mark appends a line of the test's own to the merged log.
func (h *rcHarness) mark(format string, args ...any) {
	f, err := os.OpenFile(h.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "#"+format+"\n", args...); err != nil {
		h.t.Fatal(err)
	}
}

// commit writes the model and commits it.
func (h *rcHarness) commit(msg string) {
	t := h.t
	files := map[string]string{"templates/svc/main.hcl": rcTemplate(h.logPath, h.svcDir, h.brokenDir, h.pidDir)}
	at := map[string]string{}
	for _, s := range h.sets {
		files[s.name+".hcl"] = s.hcl(h.healthURL)
		at[s.name] = s.version
	}
	writeTree(t, h.repo, files)
	h.head = commitAllIn(t, h.repo, msg)
	h.versionAt[h.head] = at
	h.mark("COMMIT %s %s", h.head[:7], msg)
	t.Logf("commit %s: %s", h.head[:7], msg)
}

// newVersion gives set s a new version with a random fate: healthy
// everywhere, unhealthy on one or two targets, or failing to deploy on one.
func (h *rcHarness) newVersion(s *rcSet) string {
	h.versions++
	s.version = fmt.Sprintf("v%d", h.versions)
	targets := rcTargets()
	pick := func() string { return targets[h.rng.IntN(len(targets))] }
	fate, desc := "good", "healthy"
	switch x := h.rng.IntN(20); {
	case x < 9:
	case x < 14:
		tg := pick()
		h.health.markBad(s.name, s.version, tg)
		fate, desc = "bad", "unhealthy on "+tg
	case x < 16:
		a, b := pick(), pick()
		h.health.markBad(s.name, s.version, a)
		h.health.markBad(s.name, s.version, b)
		fate, desc = "bad", "unhealthy on "+a+" and "+b
	default:
		tg := pick()
		if err := os.WriteFile(filepath.Join(h.brokenDir, s.name+"."+s.version+"."+strings.ReplaceAll(tg, "/", ".")), nil, 0o644); err != nil {
			h.t.Fatal(err)
		}
		fate, desc = "broken", "failing to deploy on "+tg
	}
	if s.name == "can" {
		s.pause = "300ms"
		if h.rng.IntN(5) < 2 {
			s.pause = "until_promoted"
		}
		s.onFailure = "stop"
		if h.rng.IntN(2) == 0 {
			s.onFailure = "rollback"
		}
		desc += fmt.Sprintf(", pause %s, on_failure %s", s.pause, s.onFailure)
	}
	h.pending[s.name] = fate
	return fmt.Sprintf("%s %s (%s)", s.name, s.version, desc)
}

// commitRandom commits a new version of one or both stack sets.
func (h *rcHarness) commitRandom() {
	var which []*rcSet
	switch x := h.rng.IntN(10); {
	case x < 4:
		which = h.sets
	case x < 7:
		which = h.sets[:1]
	default:
		which = h.sets[1:]
	}
	var descs []string
	for _, s := range which {
		descs = append(descs, h.newVersion(s))
	}
	h.commit(strings.Join(descs, "; "))
}

// ---- daemon runs -------------------------------------------------------------

// launch starts `stackd run` with its stdout and stderr appended to the
// merged log; a goroutine tails the file into the process's lineLog, so
// that waitLine and friends see the daemon's lines (and the commands').
// exited is closed once the process is gone and its last lines are read.
func (h *rcHarness) launch(n int) *proc {
	t := h.t
	out, err := os.OpenFile(h.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	fi, err := out.Stat()
	if err != nil {
		t.Fatal(err)
	}
	offset := fi.Size()
	args := []string{"run", "--repo", h.repo, "--state-dir", h.stateDir, "--targets-root", h.targets, "--log-format", "json",
		"--listen", "127.0.0.1:0", "--interval", "200ms", "--shutdown-grace", "10s", "--api-token-file", h.tokenFile,
		"--log-level", "debug"} // "instance complete" is a debug line
	p := &proc{cmd: exec.Command(h.binary, args...), log: newLineLog(), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", rcRunEnv, n))
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", h.binary, err)
	}
	waited := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		in, err := os.Open(h.logPath)
		if err != nil {
			return
		}
		defer in.Close()
		if _, err := in.Seek(offset, io.SeekStart); err != nil {
			return
		}
		buf := make([]byte, 64<<10)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			n, _ := in.Read(buf)
			if n > 0 {
				p.log.Write(buf[:n])
				continue
			}
			select {
			case <-waited:
				for {
					n, _ := in.Read(buf)
					if n == 0 {
						return
					}
					p.log.Write(buf[:n])
				}
			case <-tick.C:
			}
		}
	}()
	go func() {
		err := p.cmd.Wait()
		close(waited)
		<-drained
		p.err = err
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	})
	return p
}

// start starts a daemon run and waits until it serves. A start that fails
// because Badger cannot open the state after a kill is retried, as a
// supervisor would (see checkReopenFailure).
func (h *rcHarness) start() *rcRun {
	t := h.t
	for attempt := 1; ; attempt++ {
		h.runs++
		h.mark("RUN %d", h.runs)
		p := h.launch(h.runs)
		if _, ok := p.tryWaitLine(30*time.Second, 0, message("stackd running"), nil); ok {
			return &rcRun{p: p, n: h.runs, addr: p.addr(t), promoted: -1}
		}
		if !p.done() {
			t.Fatalf("run %d: stackd did not serve within 30s; logs:\n%s", h.runs, p.log)
		}
		h.mark("EXIT %d by itself", h.runs)
		checkReopenFailure(t, p, &h.reopenFailures)
		if attempt == 3 {
			t.Fatalf("stackd did not start three times in a row; logs:\n%s", p.log)
		}
	}
}

// stop kills the run (SIGKILL) or stops it (SIGTERM: it must exit 0),
// then kills what its commands left running, as the machine going down
// would.
func (h *rcHarness) stop(r *rcRun, sig syscall.Signal) {
	t := h.t
	if sig == syscall.SIGKILL {
		r.p.kill(t)
	} else {
		r.p.signal(t, syscall.SIGTERM)
		if code := r.p.wait(t, 60*time.Second); code != 0 {
			h.violation("graceful stop", -1, "run %d: stackd exited %d after SIGTERM, want 0; its last lines:\n%s", r.n, code, tailLines(r.p.log.String(), 30))
		}
	}
	h.reapCommands()
	h.mark("EXIT %d %s", r.n, sigName(sig))
}

func sigName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}

// reapCommands kills the process groups of commands whose daemon died and
// waits until they are gone.
func (h *rcHarness) reapCommands() {
	entries, _ := os.ReadDir(h.pidDir)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = os.Remove(filepath.Join(h.pidDir, e.Name()))
		pids = append(pids, pid)
	}
	gone := func() bool {
		for _, pid := range pids {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err == nil && !strings.Contains(string(b), ") Z ") && !strings.Contains(string(b), ") X ") {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !gone() && time.Now().Before(deadline) {
		<-tick.C
	}
}

// ---- the API -------------------------------------------------------------------

func (h *rcHarness) get(addr, path string, v any) (int, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
}

// fetchOp reads an operation and counts its ROLLOUT_REPLANNED events (the
// events first: a replan between the two reads is then in the plan read,
// never in the count alone).
func (h *rcHarness) fetchOp(addr, id string) (*rcOp, error) {
	var evs struct {
		Events []state.Event `json:"events"`
	}
	if _, err := h.get(addr, "/v1/operations/"+id+"/events", &evs); err != nil {
		return nil, err
	}
	op := &rcOp{}
	if _, err := h.get(addr, "/v1/operations/"+id, op); err != nil {
		return nil, err
	}
	for _, ev := range evs.Events {
		if ev.Status == "ROLLOUT_REPLANNED" {
			op.replans++
		}
	}
	return op, nil
}

// promoteHeld promotes, with `stackd promote`, every hold the run logged
// since the last promotion.
func (h *rcHarness) promoteHeld(r *rcRun) {
	lines := r.p.log.all()
	for i := r.promoted + 1; i < len(lines); i++ {
		msg, _ := lines[i]["message"].(string)
		if !strings.HasPrefix(msg, "rollout waiting for promotion") {
			continue
		}
		r.promoted = i
		set, _ := lines[i]["stack_set"].(string)
		res := runBinary(h.t, h.binary, "promote", set, "--api-url", "http://"+r.addr, "--api-token-file", h.tokenFile)
		if res.err != nil {
			// Raced with an abort or a stop: the next hold is promoted.
			h.t.Logf("run %d: stackd promote %s: %s", r.n, set, strings.TrimSpace(res.stderr))
			continue
		}
		h.promotions++
	}
}

// settledAPI reports whether every stack set's last operation is over at
// the set's latest version.
func (h *rcHarness) settledAPI(addr string) (bool, string) {
	for _, s := range h.sets {
		var doc reconciler.StackSetStatus
		if _, err := h.get(addr, "/v1/stack_sets/"+s.name, &doc); err != nil {
			return false, err.Error()
		}
		lo := doc.LastOperation
		switch {
		case lo == nil:
			return false, s.name + ": no operation yet"
		case lo.Status == state.OperationRunning || lo.Status == state.OperationQueued:
			return false, fmt.Sprintf("%s: %s %s", s.name, lo.Status, short(lo.Revision))
		case h.versionAt[lo.Revision][s.name] != s.version:
			return false, fmt.Sprintf("%s: last operation %s at %s (%s), want %s", s.name, lo.Status, short(lo.Revision), h.versionAt[lo.Revision][s.name], s.version)
		}
	}
	if code, hl, err := readyz(addr); err != nil || code != 200 || hl.Revision != h.head {
		return false, fmt.Sprintf("readyz %d %s %v", code, short(hl.Revision), err)
	}
	return true, ""
}

// settledDocs reads every stack set's document from the API; ok is false
// (and why says which) while one has an operation running or queued.
func (h *rcHarness) settledDocs(addr string) (docs map[string]reconciler.StackSetStatus, ok bool, why string) {
	docs = map[string]reconciler.StackSetStatus{}
	for _, s := range h.sets {
		var doc reconciler.StackSetStatus
		if _, err := h.get(addr, "/v1/stack_sets/"+s.name, &doc); err != nil {
			return nil, false, err.Error()
		}
		if lo := doc.LastOperation; lo != nil && (lo.Status == state.OperationRunning || lo.Status == state.OperationQueued) {
			return nil, false, fmt.Sprintf("%s: %s %s", s.name, lo.Status, short(lo.Revision))
		}
		docs[s.name] = doc
	}
	return docs, true, ""
}

// statusOnBranch reads status/<name>.json at the tip of the status branch.
func (h *rcHarness) statusOnBranch(name string) (reconciler.StackSetStatus, error) {
	var doc reconciler.StackSetStatus
	out, err := exec.Command("git", "-C", h.repo, "show", "refs/heads/stackd/status:"+reconciler.StatusPath(name)).Output()
	if err != nil {
		return doc, fmt.Errorf("the status branch has no %s (%v)", reconciler.StatusPath(name), err)
	}
	return doc, json.Unmarshal(out, &doc)
}

// ---- kills -----------------------------------------------------------------------

// The moments a kill is aimed at, by the log line that opens them.
var rcMoments = map[string]func(msg string) bool{
	"batch":    func(m string) bool { return m == "rollout batch started" },
	"pause":    func(m string) bool { return m == "rollout pausing" },
	"gate":     func(m string) bool { return m == "rollout health checks started" },
	"hold":     func(m string) bool { return strings.HasPrefix(m, "rollout waiting for promotion") },
	"rollback": func(m string) bool { return m == "rolling back batch" || m == "rollout rolling back" },
}

// rcMomentDelay is how far after its line a kill may land and still be in
// the moment: a command deploys for 150ms, a pause lasts 200-300ms, a
// healthy gate ~50ms, a hold until promoted.
var rcMomentDelay = map[string]int{"batch": 120, "pause": 180, "gate": 40, "hold": 150, "rollback": 120, "random": 1500}

func (h *rcHarness) pickMoment() string {
	choices := []string{"batch", "batch", "batch", "pause", "pause", "gate", "gate", "random"}
	if h.pending["can"] != "" && h.set("can").pause == "until_promoted" {
		choices = append(choices, "hold", "hold", "hold")
	}
	for _, s := range h.sets {
		if f := h.pending[s.name]; f != "" && f != "good" && (s.onFailure == "rollback" || f == "broken") {
			choices = append(choices, "rollback", "rollback", "rollback")
			break
		}
	}
	return choices[h.rng.IntN(len(choices))]
}

// killAtAMoment waits for a moment, lets a random part of it pass, records
// the running operations' plans and kills or stops the daemon. It reports
// false, killing nothing, when the fleet settled before the moment came.
func (h *rcHarness) killAtAMoment(r *rcRun) bool {
	t := h.t
	moment := h.pickMoment()
	triggerSet := ""
	if moment != "random" {
		line, ok := h.waitMoment(r, rcMoments[moment])
		if !ok {
			h.missed[moment]++
			return false
		}
		triggerSet, _ = line["stack_set"].(string)
	}
	if !chaosDelay(t, r.p, time.Duration(h.rng.IntN(rcMomentDelay[moment]+1))*time.Millisecond) {
		t.Fatalf("run %d: stackd exited on its own (%v); logs:\n%s", r.n, r.p.err, tailLines(r.p.log.String(), 60))
	}
	h.snapshot(r)
	sig := syscall.SIGKILL
	if h.rng.IntN(5) < 2 {
		sig = syscall.SIGTERM
	}
	landed := h.landing(r, triggerSet)
	h.kills++
	h.stop(r, sig)
	key := fmt.Sprintf("%s at %s (landed: %s)", sigName(sig), moment, landed)
	h.killLog[key]++
	t.Logf("kill %d: %s", h.kills, key)
	return true
}

// waitMoment waits for the next line opening the moment, promoting held
// rollouts meanwhile (unless the moment is a hold); it reports false when
// the fleet settles first.
func (h *rcHarness) waitMoment(r *rcRun, match func(string) bool) (map[string]any, bool) {
	t := h.t
	from := len(r.p.log.all())
	hold := match("rollout waiting for promotion")
	if hold {
		from = r.promoted + 1 // a hold not promoted yet is the moment
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		i, ok := r.p.tryWaitLine(40*time.Millisecond, from, func(l map[string]any) bool {
			msg, _ := l["message"].(string)
			return match(msg)
		}, nil)
		if ok {
			lines, _ := r.p.log.since(i)
			return lines[0], true
		}
		if r.p.done() {
			t.Fatalf("run %d: stackd exited on its own (%v); logs:\n%s", r.n, r.p.err, tailLines(r.p.log.String(), 60))
		}
		if !hold {
			h.promoteHeld(r)
		}
		if ok, _ := h.settledAPI(r.addr); ok {
			return nil, false
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d: neither the moment nor the settle came within 90s; logs:\n%s", r.n, tailLines(r.p.log.String(), 80))
		}
	}
}

// phaseOf names the rollout phase a daemon line opens ("" for others).
func phaseOf(msg string) string {
	switch {
	case msg == "rollout batch started":
		return "batch"
	case msg == "rollout pausing":
		return "pause"
	case msg == "rollout health checks started":
		return "gate"
	case strings.HasPrefix(msg, "rollout waiting for promotion"):
		return "hold"
	case msg == "rollout rolling back" || msg == "rolling back batch" || msg == "rollback pausing":
		return "rollback"
	case msg == "rollout batch passed its gate" || msg == "rollout promoted":
		return "between batches"
	case msg == "operation finished":
		return "idle"
	case msg == "operation started" || msg == "operation started (was queued)" || msg == "resuming operation" || msg == "rollout planned":
		return "planning"
	}
	return ""
}

// landing says where a kill lands: the phase of the trigger's stack set
// (of both for a random moment), with the commands running.
func (h *rcHarness) landing(r *rcRun, set string) string {
	lines := r.p.log.all()
	where := func(name string) string {
		phase := "idle"
		running := map[string]bool{}
		for _, l := range lines {
			if raw, ok := l["unparsable"].(string); ok {
				f := strings.Fields(raw)
				if len(f) >= 4 && f[1] == strconv.Itoa(r.n) && f[2] == name {
					switch f[0] {
					case "START":
						running[f[3]] = true
					case "END", "FAIL":
						delete(running, f[3])
					}
				}
				continue
			}
			if l["stack_set"] != name {
				continue
			}
			msg, _ := l["message"].(string)
			if p := phaseOf(msg); p != "" {
				phase = p
			}
		}
		if len(running) > 0 {
			phase += fmt.Sprintf(", %d commands running", len(running))
		}
		return phase
	}
	if set != "" {
		return where(set)
	}
	var out []string
	for _, s := range h.sets {
		out = append(out, s.name+": "+where(s.name))
	}
	return strings.Join(out, "; ")
}

// runningOps are the operations a run started or resumed and has not
// finished, by stack set.
func runningOps(p *proc) map[string]string {
	out := map[string]string{}
	for _, l := range p.log.all() {
		set, _ := l["stack_set"].(string)
		id, _ := l["operation"].(string)
		switch l["message"] {
		case "operation started", "operation started (was queued)", "resuming operation":
			out[set] = id
		case "operation finished":
			if out[set] == id {
				delete(out, set)
			}
		}
	}
	return out
}

// snapshot records the plans of the operations running now.
func (h *rcHarness) snapshot(r *rcRun) {
	for set, id := range runningOps(r.p) {
		op, err := h.fetchOp(r.addr, id)
		if err != nil || op.Rollout == nil || len(op.Rollout.Plan) == 0 {
			continue
		}
		h.snaps = append(h.snaps, &rcSnap{
			kill: h.kills + 1, set: set, op: id, batch: op.Rollout.Batch, phase: string(op.Rollout.Phase),
			plan: op.Rollout.Plan, replans: op.replans,
		})
	}
}

// ---- settling and the checks ---------------------------------------------------

// settleAndCheck waits until the fleet settles (promoting held rollouts),
// reads what the API says, stops the daemon with SIGTERM and runs every
// check.
func (h *rcHarness) settleAndCheck(r *rcRun) {
	t := h.t
	h.settles++
	deadline := time.Now().Add(3 * time.Minute)
	why := ""
	var docs map[string]reconciler.StackSetStatus
	for {
		h.promoteHeld(r)
		ok, w := h.settledAPI(r.addr)
		if ok {
			ok, w = h.statusBranchFollows(r.addr)
		}
		if ok {
			// What the checks compare with, read once settled; an
			// operation that started meanwhile (the pass dispatches them
			// before they claim their stack set) means not settled yet.
			docs, ok, w = h.settledDocs(r.addr)
		}
		if ok {
			break
		}
		if w != why {
			why = w
		}
		if r.p.done() {
			t.Fatalf("run %d: stackd exited on its own (%v) before the fleet settled; logs:\n%s", r.n, r.p.err, tailLines(r.p.log.String(), 80))
		}
		if r.p.log.count("revision rejected: nothing applied") > 0 {
			t.Fatalf("run %d: the daemon rejected a commit of this test; logs:\n%s", r.n, tailLines(r.p.log.String(), 20))
		}
		if time.Now().After(deadline) {
			h.saveLog()
			t.Fatalf("settle %d: the fleet did not settle within 3 minutes: %s; logs:\n%s", h.settles, why, tailLines(r.p.log.String(), 120))
		}
		r.p.tryWaitLine(100*time.Millisecond, len(r.p.log.all()), func(map[string]any) bool { return true }, nil)
	}
	for _, id := range h.walker.opIDs() {
		if op := h.ops[id]; op != nil && op.Status != string(state.OperationRunning) && op.Status != string(state.OperationQueued) {
			continue // over: its record no longer changes
		}
		op, err := h.fetchOp(r.addr, id)
		if err != nil {
			t.Fatalf("settle %d: operation %s: %v", h.settles, id, err)
		}
		h.ops[id] = op
	}
	h.stop(r, syscall.SIGTERM)

	h.checkCLIStatus(docs)
	h.walker.advance()
	if h.walker.baseline < 0 {
		h.walker.baseline = h.walker.next // the fleet exists: min_in_service holds from here on
	}
	for _, s := range h.sets {
		h.checkInstances(s, docs[s.name])
		h.checkLastOperation(s, docs[s.name])
		h.pending[s.name] = ""
	}
	h.checkPlans()
	h.checkSnapshots()
	h.checkSubjects()
	var summary []string
	for _, s := range h.sets {
		lo := docs[s.name].LastOperation
		summary = append(summary, fmt.Sprintf("%s %s %s (%s)", s.name, s.version, lo.Status, lo.Counts))
	}
	t.Logf("settle %d after %d kills: %s", h.settles, h.kills, strings.Join(summary, "; "))
}

// statusBranchFollows reports whether status/<name>.json on the status
// branch is what the API shows.
func (h *rcHarness) statusBranchFollows(addr string) (bool, string) {
	for _, s := range h.sets {
		var doc reconciler.StackSetStatus
		if _, err := h.get(addr, "/v1/stack_sets/"+s.name, &doc); err != nil {
			return false, err.Error()
		}
		onBranch, err := h.statusOnBranch(s.name)
		if err != nil {
			return false, err.Error()
		}
		if diff := cmp.Diff(comparableStatus(doc), comparableStatus(onBranch)); diff != "" {
			return false, fmt.Sprintf("%s on the status branch is not the API's (-api +branch):\n%s", reconciler.StatusPath(s.name), diff)
		}
	}
	h.stats["status branch documents equal to the API's"] += len(h.sets)
	return true, ""
}

// checkCLIStatus compares `stackd status --json` with the API's documents
// and runs `stackd state check` (the daemon is stopped).
func (h *rcHarness) checkCLIStatus(docs map[string]reconciler.StackSetStatus) {
	t := h.t
	var res cliResult
	whileLocked(func() bool {
		res = runBinary(t, h.binary, "status", "--json", "--state-dir", h.stateDir)
		return res.err != nil && strings.Contains(res.stderr, "Cannot acquire directory lock")
	})
	if res.err != nil {
		t.Fatalf("stackd status --json: %s", res)
	}
	var cli []reconciler.StackSetStatus
	if err := json.Unmarshal([]byte(res.stdout), &cli); err != nil {
		t.Fatalf("stackd status --json: %v\n%s", err, res.stdout)
	}
	if len(cli) != len(h.sets) {
		h.violation("stackd status", -1, "stackd status --json shows %d stack sets, want %d", len(cli), len(h.sets))
	}
	for _, d := range cli {
		if diff := cmp.Diff(comparableStatus(docs[d.Name]), comparableStatus(d)); diff != "" {
			h.violation("stackd status", -1, "stackd status --json differs from the API for %s (-api +cli):\n%s", d.Name, diff)
		}
		h.stats["stackd status documents equal to the API's"]++
	}
	whileLocked(func() bool {
		res = runBinary(t, h.binary, "state", "check", "--state-dir", h.stateDir)
		return res.err != nil && strings.Contains(res.stderr, "Cannot acquire directory lock")
	})
	if res.err != nil || !strings.Contains(res.stdout, "state is consistent") {
		h.violation("state check", -1, "stackd state check: %s", res)
	}
	h.stats["stackd state check runs"]++
}

// checkInstances: every instance's record against what it runs.
func (h *rcHarness) checkInstances(s *rcSet, doc reconciler.StackSetStatus) {
	w := h.walker
	seen := map[string]bool{}
	for _, in := range doc.Instances {
		tg := in.Region + "/" + in.Account
		seen[tg] = true
		h.stats["instance records checked against what runs"]++
		dep, ver := w.deploying[s.name][tg], w.version[s.name][tg]
		// The file is written just before END: a command killed
		// between the two left the file ahead of the log, which then
		// (conservatively) says deploying.
		if file := h.health.running(s.name, tg); !dep && file != ver {
			h.violation("harness", -1, "%s %s: the log says it runs %s but its version file says %q", s.name, tg, ver, file)
		}
		recorded := h.versionAt[in.Revision][s.name]
		healthy := !dep && ver != "" && !h.health.isBad(s.name, ver, tg)
		switch {
		case in.Status == state.InstanceOperationInProgress || in.Status == state.InstanceWaitInProgress:
			h.violation("status", -1, "%s %s is left %s", s.name, tg, in.Status)
		case !dep && recorded != ver && w.uncertain[s.name][tg]:
			h.note("%s %s is recorded %s at %s but runs %s: a SIGKILL came between its command's end and its record, and no operation deployed it since", s.name, tg, in.Status, recorded, ver)
		case !dep && recorded != ver:
			h.violation("status", -1, "%s %s is recorded %s at revision %s (%s) but runs %s", s.name, tg, in.Status, short(in.Revision), recorded, ver)
		case in.Status == state.InstanceOperationComplete && !healthy:
			h.violation("status", -1, "%s %s is recorded %s at %s but is not healthy (runs %q, deploying %v)", s.name, tg, in.Status, recorded, ver, dep)
		case in.Status == state.InstanceOperationFailed && healthy && strings.Contains(in.Reason, "answered 503"):
			h.violation("status", -1, "%s %s is recorded %s (%s) but runs %s, healthy", s.name, tg, in.Status, in.Reason, ver)
		case dep && in.Status != state.InstanceOperationFailed:
			// Killed mid-deploy by an earlier operation and not reached
			// by the last one (it stopped before the instance's batch).
			h.note("%s %s is left half-deployed, recorded %s at %s: %s", s.name, tg, in.Status, recorded, in.Reason)
		}
	}
	for _, tg := range rcTargets() {
		if !seen[tg] {
			h.violation("status", -1, "%s %s has no instance record", s.name, tg)
		}
	}
}

// checkLastOperation: every member of the stack set's last operation runs
// the operation's version or its own previous one, as its outcome says.
func (h *rcHarness) checkLastOperation(s *rcSet, doc reconciler.StackSetStatus) {
	lo := doc.LastOperation
	op := h.ops[lo.ID]
	if op == nil {
		h.violation("harness", -1, "%s: the last operation %s was never seen in the log", s.name, lo.ID)
		return
	}
	if op.Rollout == nil {
		h.violation("rollout", -1, "%s: operation %s at %s has no rollout", s.name, op.ID, short(op.Revision))
		return
	}
	w := h.walker
	opV := h.versionAt[op.Revision][s.name]
	if op.Status == string(state.OperationSucceeded) && op.Counts.Succeeded == op.Counts.Total && h.versionAt[doc.Revision][s.name] != opV {
		h.violation("status", -1, "%s: the operation at %s SUCCEEDED on every instance (%s) but the stack set is recorded at %s", s.name, short(op.Revision), op.Counts, short(doc.Revision))
	}
	members := 0
	for k, b := range op.Rollout.Plan {
		for _, m := range b.Members {
			members++
			tg := m.Region + "/" + m.Account
			prevV := h.versionAt[m.PreviousRevision][s.name]
			dep, ver := w.deploying[s.name][tg], w.version[s.name][tg]
			healthy := !dep && ver != "" && !h.health.isBad(s.name, ver, tg)
			res, ran := op.result(tg)
			changed := w.started[op.ID][tg] // the operation deployed its version there
			where := fmt.Sprintf("%s %s (batch %d of operation %s at %s %s, previous %s)", s.name, tg, k+1, op.ID, opV, op.Status, prevV)
			h.stats["operation members checked against what they run"]++
			switch {
			case changed && dep && !(ran && res.Status == state.InstanceOperationFailed):
				h.violation("outcome", -1, "%s is left half-deployed (its result: %+v)", where, res)
			case !dep && ver != opV && ver != prevV && w.uncertain[s.name][tg]:
				h.note("%s runs %s, deployed by an earlier operation whose daemon was killed before recording it", where, ver)
			case !dep && ver != opV && ver != prevV:
				h.violation("outcome", -1, "%s runs %s: neither the operation's version nor its previous one", where, ver)
			case op.Status == string(state.OperationRolledBack) && changed && (dep || ver != prevV):
				h.violation("outcome", -1, "%s runs %q (deploying %v) after the operation ROLLED_BACK", where, ver, dep)
			case op.Status == string(state.OperationRolledBack) && changed && !healthy:
				h.violation("outcome", -1, "%s was rolled back but is not healthy", where)
			case ran && res.RolledBack && res.Status != state.InstanceOperationComplete:
				h.violation("status", -1, "%s is counted rolled back, but its result is %s: %s", where, res.Status, res.Reason)
			case ran && res.Status == state.InstanceOperationComplete && !res.RolledBack && (ver != opV || !healthy):
				h.violation("outcome", -1, "%s is OPERATION_COMPLETE in the operation but runs %q (healthy %v, deploying %v)", where, ver, healthy, dep)
			}
		}
	}
	if op.Counts.Total < members {
		h.violation("status", -1, "%s: operation %s counts %d instances, its plan has %d", s.name, op.ID, op.Counts.Total, members)
	}
}

// checkSnapshots: a plan seen before a kill keeps its batches up to the
// current one, and its later ones unless the operation was replanned since.
func (h *rcHarness) checkSnapshots() {
	for _, sn := range h.snaps {
		if sn.checked {
			continue
		}
		op := h.ops[sn.op]
		if op == nil {
			continue // not referenced by the log any more: cannot be
		}
		sn.checked = true
		h.stats["plans seen before a kill compared after it"]++
		if op.Rollout == nil {
			h.violation("plan", -1, "kill %d: operation %s of %s lost its rollout", sn.kill, sn.op, sn.set)
			continue
		}
		final := op.Rollout.Plan
		n := min(sn.batch, len(sn.plan))
		if len(final) < n {
			h.violation("plan", -1, "kill %d: operation %s of %s had batch %d of %d (%s) before the kill; now its plan has %d batches", sn.kill, sn.op, sn.set, sn.batch, len(sn.plan), sn.phase, len(final))
			continue
		}
		if diff := cmp.Diff(sn.plan[:n], final[:n]); diff != "" {
			h.violation("plan", -1, "kill %d: batches 1-%d of operation %s of %s changed across the restart (-before +after):\n%s", sn.kill, n, sn.op, sn.set, diff)
		}
		if op.Rollout.Batch < sn.batch {
			h.violation("plan", -1, "kill %d: operation %s of %s was at batch %d before the kill, %d after", sn.kill, sn.op, sn.set, sn.batch, op.Rollout.Batch)
		}
		if diff := cmp.Diff(sn.plan[n:], final[n:]); diff != "" && op.replans <= sn.replans {
			h.violation("plan", -1, "kill %d: the batches after batch %d of operation %s of %s changed with no ROLLOUT_REPLANNED event (-before +after):\n%s", sn.kill, n, sn.op, sn.set, diff)
		}
	}
}

// checkPlans: every recorded plan puts each instance in one non-empty
// batch, and says where the rollout is within it.
func (h *rcHarness) checkPlans() {
	for _, op := range h.ops {
		if op.Rollout == nil {
			continue
		}
		h.stats["recorded plans checked"]++
		seen := map[string]int{}
		for k, b := range op.Rollout.Plan {
			if len(b.Members) == 0 {
				h.violation("plan", -1, "%s: batch %d of operation %s has no member", op.StackSet, k+1, op.ID)
			}
			for _, m := range b.Members {
				tg := m.Region + "/" + m.Account
				if j, ok := seen[tg]; ok {
					h.violation("plan", -1, "%s: %s is in batches %d and %d of operation %s", op.StackSet, tg, j, k+1, op.ID)
				}
				seen[tg] = k + 1
			}
		}
		if ro := op.Rollout; ro.Batch > len(ro.Plan) || ro.Batches != len(ro.Plan) || ro.RollbackBatch > len(ro.Plan) {
			h.violation("plan", -1, "%s: operation %s is at batch %d of %d (rollback batch %d) with a plan of %d batches", op.StackSet, op.ID, ro.Batch, ro.Batches, ro.RollbackBatch, len(ro.Plan))
		}
	}
}

// rcSubject is a stack set's status commit subject.
var rcSubject = regexp.MustCompile(`^stackd: (\S+) \S+ ([0-9a-f]{7}) ([A-Z_]+) \((\d+)/(\d+)[^)]*\)( batch (\d+)/(\d+))?`)

// checkSubjects: the counts of every status commit subject are
// (succeeded/total of the operation) and batch k/n has k ≤ n.
func (h *rcHarness) checkSubjects() {
	out, err := exec.Command("git", "-C", h.repo, "log", "--format=%s", "refs/heads/stackd/status").Output()
	if err != nil {
		h.t.Fatalf("git log of the status branch: %v", err)
	}
	total := map[string]int{} // set + rev7 → the operation's total
	for _, op := range h.ops {
		total[op.StackSet+" "+short(op.Revision)] = op.Counts.Total
	}
	for _, subj := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		m := rcSubject.FindStringSubmatch(subj)
		if m == nil {
			continue
		}
		h.stats["status commit subjects checked"]++
		succeeded, _ := strconv.Atoi(m[4])
		tot, _ := strconv.Atoi(m[5])
		if want, ok := total[m[1]+" "+m[2]]; ok && tot != want {
			h.violation("status", -1, "status commit %q counts %d instances; the operation has %d", subj, tot, want)
		}
		if succeeded > tot {
			h.violation("status", -1, "status commit %q: more succeeded than instances", subj)
		}
		if m[6] != "" {
			k, _ := strconv.Atoi(m[7])
			n, _ := strconv.Atoi(m[8])
			if k < 1 || k > n {
				h.violation("status", -1, "status commit %q: batch %d of %d", subj, k, n)
			}
		}
	}
}

// violation reports a broken invariant with the merged log around line
// (-1: none).
func (h *rcHarness) violation(kind string, line int, format string, args ...any) {
	h.violations[kind]++
	msg := fmt.Sprintf(format, args...)
	if h.reported[msg] {
		return // a state that lasts is reported at the first settle that sees it
	}
	h.reported[msg] = true
	if line >= 0 && h.excerpts < 8 {
		h.excerpts++
		msg += "\nthe merged log around it:\n" + h.walker.excerpt(line)
	}
	h.t.Errorf("[%s] %s (seed %d)", kind, msg, h.seed)
}

// note records, once, a state worth reporting that no invariant forbids.
func (h *rcHarness) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if h.reported[msg] {
		return
	}
	h.reported[msg] = true
	h.notes = append(h.notes, fmt.Sprintf("settle %d: %s", h.settles, msg))
}

// saveLog keeps the merged log of a failing run.
func (h *rcHarness) saveLog() {
	b, err := os.ReadFile(h.logPath)
	if err != nil {
		return
	}
	p := filepath.Join(os.TempDir(), fmt.Sprintf("stackd-rollout-chaos-%d.log", h.seed))
	if err := os.WriteFile(p, b, 0o644); err == nil {
		h.t.Logf("the merged log is saved at %s", p)
	}
}

// ---- the walk of the merged log --------------------------------------------------

// rcBatch is the batch (or rollback batch) of a stack set whose commands
// may run now.
type rcBatch struct {
	op       *rcOp
	batch    int
	rollback bool
	members  map[string]state.RolloutMember
	size     int // nominal size
	limit    int // commands that may run at once
}

// rcWalker walks the merged log in order, keeping what the instances run
// and which batch is current, and checks every line.
type rcWalker struct {
	h     *rcHarness
	lines []string
	next  int // lines walked
	run   int // the daemon run whose lines come now; 0 between runs
	cur   map[string]*rcBatch
	// inflight: commands of the current run started and not ended, by
	// set and target.
	inflight map[string]map[string]int
	// deploying and version: what each instance runs, as far as its
	// commands said (reality).
	deploying map[string]map[string]bool
	version   map[string]map[string]string
	// baseline is the first line min_in_service is checked from (-1: the
	// fleet is not deployed yet).
	baseline int
	maxOut   map[string]int
	orphans  int
	commands int
	// unsettled: instances whose command of the current run ended and
	// whose result the daemon has not logged yet (run number);
	// uncertain: those whose daemon was killed in between, so that their
	// record may rightly lag what they run (the journal says pending).
	unsettled map[string]map[string]int
	uncertain map[string]map[string]bool
	// started: the instances each operation deployed its own version to
	// (a forward START), by operation id.
	started map[string]map[string]bool
	ids     map[string]bool
	idOrder []string
}

func newRCWalker(h *rcHarness) *rcWalker {
	w := &rcWalker{h: h, cur: map[string]*rcBatch{}, inflight: map[string]map[string]int{}, deploying: map[string]map[string]bool{},
		version: map[string]map[string]string{}, baseline: -1, maxOut: map[string]int{}, ids: map[string]bool{},
		started: map[string]map[string]bool{}, unsettled: map[string]map[string]int{}, uncertain: map[string]map[string]bool{}}
	for _, s := range h.sets {
		w.unsettled[s.name] = map[string]int{}
		w.uncertain[s.name] = map[string]bool{}
		w.inflight[s.name] = map[string]int{}
		w.deploying[s.name] = map[string]bool{}
		w.version[s.name] = map[string]string{}
	}
	return w
}

// read loads the merged log and collects the operation ids it names.
func (w *rcWalker) read() {
	b, err := os.ReadFile(w.h.logPath)
	if err != nil {
		w.h.t.Fatal(err)
	}
	w.lines = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for _, l := range w.lines {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var m struct {
			Operation string `json:"operation"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Operation != "" && !w.ids[m.Operation] {
			w.ids[m.Operation] = true
			w.idOrder = append(w.idOrder, m.Operation)
		}
	}
}

func (w *rcWalker) opIDs() []string {
	w.read()
	return w.idOrder
}

// advance walks the lines not walked yet (the daemon is stopped).
func (w *rcWalker) advance() {
	w.read()
	for ; w.next < len(w.lines); w.next++ {
		w.line(w.next, w.lines[w.next])
	}
}

func (w *rcWalker) line(i int, l string) {
	h := w.h
	switch {
	case strings.HasPrefix(l, "#RUN "):
		w.run, _ = strconv.Atoi(strings.TrimPrefix(l, "#RUN "))
		w.endRun()
	case strings.HasPrefix(l, "#EXIT "):
		w.run = 0
		w.endRun()
		for _, s := range h.sets {
			for tg := range w.unsettled[s.name] {
				w.uncertain[s.name][tg] = true
			}
			w.unsettled[s.name] = map[string]int{}
		}
	case strings.HasPrefix(l, "#"):
	case strings.HasPrefix(l, "{"):
		if w.run == 0 {
			h.violation("harness", i, "a daemon line outside any run")
			return
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			return
		}
		w.daemonLine(i, m)
	default:
		w.commandLine(i, l)
	}
}

// endRun: the commands of a run are over when it dies (the test kills
// what is left) and no batch is current between runs.
func (w *rcWalker) endRun() {
	for _, s := range w.h.sets {
		w.inflight[s.name] = map[string]int{}
		w.cur[s.name] = nil
	}
}

func (w *rcWalker) daemonLine(i int, m map[string]any) {
	h := w.h
	set, _ := m["stack_set"].(string)
	if h.set(set) == nil {
		return
	}
	msg, _ := m["message"].(string)
	id, _ := m["operation"].(string)
	num := func(k string) int {
		f, _ := m[k].(float64)
		return int(f)
	}
	switch region, _ := m["region"].(string); msg {
	case "instance complete", "instance failed", "instance rolled back", "instance rollback failed":
		account, _ := m["account"].(string)
		delete(w.unsettled[set], region+"/"+account)
	}
	switch {
	case msg == "rollout batch started" || msg == "rolling back batch":
		rollback := msg == "rolling back batch"
		if n := len(w.inflight[set]); n > 0 {
			h.violation("batch", i, "%s: %s %d began while %d commands of the batch before still ran", set, msg, num("batch"), n)
		}
		w.cur[set] = nil
		op := h.ops[id]
		if op == nil || op.Rollout == nil {
			h.violation("harness", i, "%s: operation %s of the line has no record with a rollout", set, id)
			return
		}
		k := num("batch")
		if k < 1 || k > len(op.Rollout.Plan) {
			h.violation("batch", i, "%s: %s %d, but the plan of operation %s has %d batches", set, msg, k, id, len(op.Rollout.Plan))
			return
		}
		b := op.Rollout.Plan[k-1]
		cur := &rcBatch{op: op, batch: k, rollback: rollback, members: map[string]state.RolloutMember{}, size: b.Size, limit: len(b.Members)}
		for _, mb := range b.Members {
			cur.members[mb.Region+"/"+mb.Account] = mb
		}
		h.stats["batch starts checked against the plan"]++
		switch n := num("instances"); {
		case !rollback && n != len(b.Members):
			h.violation("batch", i, "%s: batch %d of operation %s started with %d instances; its recorded plan has %d", set, k, id, n, len(b.Members))
		case rollback && n > len(b.Members):
			h.violation("batch", i, "%s: the rollback of batch %d of operation %s has %d instances; the batch has %d", set, k, id, n, len(b.Members))
		case rollback:
			cur.limit = n
		}
		if len(b.Members) > b.Size {
			h.violation("batch", i, "%s: batch %d of operation %s has %d members, more than its size %d", set, k, id, len(b.Members), b.Size)
		}
		w.cur[set] = cur
	case phaseOf(msg) != "" || msg == "rollout stopped":
		if phase := phaseOf(msg); (phase == "pause" || phase == "gate" || msg == "rollback pausing") && len(w.inflight[set]) > 0 {
			h.violation("batch", i, "%s: %q while %d commands of the batch still ran", set, msg, len(w.inflight[set]))
		}
		w.cur[set] = nil
	}
}

func (w *rcWalker) commandLine(i int, l string) {
	h := w.h
	f := strings.Fields(l)
	if len(f) < 4 {
		h.violation("harness", i, "a malformed line %q", l)
		return
	}
	verb, set, tg := f[0], f[2], f[3]
	run, _ := strconv.Atoi(f[1])
	s := h.set(set)
	if s == nil {
		h.violation("harness", i, "a line of an unknown stack set %q", l)
		return
	}
	w.commands++
	v := ""
	if len(f) >= 5 {
		v = f[4]
	}
	// What the instance runs.
	switch verb {
	case "START":
		w.deploying[set][tg] = true
		w.uncertain[set][tg] = false
	case "FAIL":
		w.deploying[set][tg] = true
	case "END":
		w.deploying[set][tg] = false
		w.version[set][tg] = v
	case "DELETE":
		h.violation("outcome", i, "%s %s was deleted: no operation deletes an instance of this fleet", set, tg)
	}
	if run != w.run {
		w.orphans++ // a late line of a command whose daemon died
	} else {
		switch verb {
		case "START":
			w.start(i, s, tg, v)
		case "END", "FAIL":
			if w.inflight[set][tg]--; w.inflight[set][tg] <= 0 {
				delete(w.inflight[set], tg)
			}
			w.unsettled[set][tg] = run
		}
	}
	w.checkInService(i, s)
}

// start checks a command that starts: a member of the current batch, with
// the version the plan says, within the batch's size.
func (w *rcWalker) start(i int, s *rcSet, tg, v string) {
	h := w.h
	h.stats["command starts checked against the plan"]++
	if w.inflight[s.name][tg] > 0 {
		h.violation("batch", i, "%s %s deployed twice at once", s.name, tg)
	}
	w.inflight[s.name][tg]++
	b := w.cur[s.name]
	if b == nil {
		h.violation("batch", i, "%s %s started deploying %s outside any batch", s.name, tg, v)
		return
	}
	what := "batch"
	if b.rollback {
		what = "rollback of batch"
	}
	m, ok := b.members[tg]
	if !ok {
		h.violation("batch", i, "%s %s started deploying %s in the %s %d of operation %s, which it is not a member of", s.name, tg, v, what, b.batch, b.op.ID)
		return
	}
	want := h.versionAt[b.op.Revision][s.name]
	if b.rollback {
		want = h.versionAt[m.PreviousRevision][s.name]
	} else {
		if w.started[b.op.ID] == nil {
			w.started[b.op.ID] = map[string]bool{}
		}
		w.started[b.op.ID][tg] = true
	}
	if v != want {
		h.violation("batch", i, "%s %s started deploying %s in the %s %d of operation %s, want %s", s.name, tg, v, what, b.batch, b.op.ID, want)
	}
	if n := len(w.inflight[s.name]); n > b.limit || n > b.size {
		h.violation("batch", i, "%s: %d commands run at once in the %s %d of operation %s (%d members, size %d)", s.name, n, what, b.batch, b.op.ID, b.limit, b.size)
	}
	h.stats["concurrency checks against the batch size"]++
}

// checkInService: min_in_service holds after line i — at most fleet −
// min_in_service instances deploy, were left half-deployed, or run a
// version unhealthy for them.
func (w *rcWalker) checkInService(i int, s *rcSet) {
	if w.baseline < 0 || i < w.baseline {
		return
	}
	h := w.h
	out := 0
	var which []string
	for _, tg := range rcTargets() {
		v := w.version[s.name][tg]
		switch {
		case w.deploying[s.name][tg]:
			which = append(which, tg+" deploying")
		case v == "" || h.health.isBad(s.name, v, tg):
			which = append(which, tg+" unhealthy at "+v)
		default:
			continue
		}
		out++
	}
	w.maxOut[s.name] = max(w.maxOut[s.name], out)
	h.stats["min_in_service checks"]++
	if out > s.fleet()-s.minInService {
		h.violation("min_in_service", i, "%s: %d of %d instances out of service (%s), min_in_service is %d", s.name, out, s.fleet(), strings.Join(which, ", "), s.minInService)
	}
}

// excerpt is the merged log around line i, daemon lines shortened.
func (w *rcWalker) excerpt(i int) string {
	var b strings.Builder
	for j := max(0, i-40); j < min(len(w.lines), i+8); j++ {
		l := w.lines[j]
		if strings.HasPrefix(l, "{") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil {
				continue
			}
			msg, _ := m["message"].(string)
			if _, ok := m["stack_set"]; !ok || phaseOf(msg) == "" && msg != "rollout stopped" && !strings.HasPrefix(msg, "rollout") && msg != "instance failed" {
				continue
			}
			l = fmt.Sprintf("  daemon: %s %s", m["stack_set"], msg)
			for _, k := range []string{"operation", "batch", "batches", "instances", "reason", "from_batch", "sizes"} {
				if v, ok := m[k]; ok {
					l += fmt.Sprintf(" %s=%v", k, v)
				}
			}
		}
		mark := "   "
		if j == i {
			mark = ">>>"
		}
		fmt.Fprintf(&b, "%s %d: %s\n", mark, j, l)
	}
	return b.String()
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ---- the test --------------------------------------------------------------------

func TestRolloutChaos(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	want := chaosKills(t, "STACKD_ROLLOUT_CHAOS_KILLS", 10)
	seed := chaosSeed(t, "STACKD_ROLLOUT_CHAOS_SEED")
	t.Logf("seed %d (rerun with STACKD_ROLLOUT_CHAOS_SEED=%d), %d kills", seed, seed, want)
	began := time.Now()
	h := newRCHarness(t, binary, seed)
	t.Cleanup(func() {
		if t.Failed() {
			h.saveLog()
		}
	})
	for _, s := range h.sets {
		h.versions++
		s.version = fmt.Sprintf("v%d", h.versions)
	}
	h.commit("the fleet: roll and can at v1/v2")
	h.settleAndCheck(h.start())

	rounds := 0
	for h.kills < want {
		if rounds++; rounds > 4*want+10 {
			t.Fatalf("%d rounds for %d kills: the moments never come", rounds, h.kills)
		}
		h.commitRandom()
		var r *rcRun
		for k := 1 + h.rng.IntN(3); k > 0 && h.kills < want; k-- {
			if r == nil {
				r = h.start()
			}
			if h.rng.IntN(4) == 0 {
				h.commitRandom() // lands mid-rollout, or waits behind it
			}
			if !h.killAtAMoment(r) {
				break
			}
			r = nil
		}
		if r == nil {
			r = h.start()
		}
		h.settleAndCheck(r)
	}

	w := h.walker
	if h.stats["command starts checked against the plan"] == 0 || h.stats["min_in_service checks"] == 0 || h.stats["batch starts checked against the plan"] == 0 {
		t.Errorf("the walk checked nothing: %v", h.stats)
	}
	statuses := map[string]int{}
	replans := 0
	for _, op := range h.ops {
		statuses[op.Status]++
		replans += op.replans
	}
	var kills []string
	for k, n := range h.killLog {
		kills = append(kills, fmt.Sprintf("  %3d × %s", n, k))
	}
	sort.Strings(kills)
	var stats []string
	for k, n := range h.stats {
		stats = append(stats, fmt.Sprintf("  %6d %s", n, k))
	}
	sort.Strings(stats)
	t.Logf("%d kills survived in %d rounds (%d daemon runs, %d settles, %d commits, %d promotions) in %s; moments that never came: %v",
		h.kills, rounds, h.runs, h.settles, len(h.versionAt), h.promotions, time.Since(began).Round(time.Millisecond), h.missed)
	t.Logf("kills by kind and moment:\n%s", strings.Join(kills, "\n"))
	t.Logf("invariants checked:\n%s", strings.Join(stats, "\n"))
	t.Logf("operations: %v; %d ROLLOUT_REPLANNED events; %d command lines (%d written after their daemon died); most instances out of service at once: %v (allowed: roll %d, can %d); health probes %d (%d answered 503); state reopen failures %d",
		statuses, replans, w.commands, w.orphans, w.maxOut, h.sets[0].fleet()-h.sets[0].minInService, h.sets[1].fleet()-h.sets[1].minInService,
		h.health.probes.Load(), h.health.failed.Load(), h.reopenFailures)
	if len(h.notes) > 0 {
		t.Logf("noted, not failed:\n  %s", strings.Join(h.notes, "\n  "))
	}
	if len(h.violations) > 0 {
		t.Logf("violations by kind: %v", h.violations)
	}
}

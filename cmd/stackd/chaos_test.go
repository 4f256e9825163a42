package main

// The chaos test: the real stackd binary runs `stackd run` on a real
// repository of several stack sets (~50 instances of file, command and
// custom resources) and is killed with SIGKILL at random points, again and
// again, with commits in between. After the fleet settles, every resource
// must exist exactly once, no provider may have seen a resource created
// twice under different request ids, no instance may be left in progress,
// the status branch must match the state, and `stackd state check` must
// pass.
//
// STACKD_CHAOS_KILLS sets the number of kills (default 30; use 100+ locally)
// and STACKD_CHAOS_SEED the seed (default: the clock; it is logged).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// chaosSet is one stack set of the chaos fleet as the latest commit defines it.
type chaosSet struct {
	name     string
	regions  []string
	accounts []string
	removed  []string // accounts removed by earlier commits, candidates to re-add
	gen      int
	command  bool // has a command resource
	custom   bool // has a custom resource
}

func (s *chaosSet) targets() [][2]string {
	var out [][2]string
	for _, r := range s.regions {
		for _, a := range s.accounts {
			out = append(out, [2]string{r, a})
		}
	}
	return out
}

// chaosFleet is the definitions repository's model.
type chaosFleet struct {
	sets     []*chaosSet
	hookURL  string // the custom-resource provider
	cmdLogs  string // where command resources append their lines
	commits  int
	repoPath string
}

func newChaosFleet(repo, hookURL, cmdLogs string) *chaosFleet {
	accounts := func() []string {
		var out []string
		for i := 1; i <= 5; i++ {
			out = append(out, fmt.Sprintf("10000000000%d", i))
		}
		return out
	}
	return &chaosFleet{
		repoPath: repo, hookURL: hookURL, cmdLogs: cmdLogs,
		sets: []*chaosSet{
			{name: "alpha", regions: []string{"eu-west-1", "us-east-1", "ap-south-1"}, accounts: accounts(), gen: 1, command: true},
			{name: "beta", regions: []string{"eu-west-1", "us-east-1", "eu-central-1", "ap-south-1"}, accounts: accounts(), gen: 1, custom: true},
			{name: "gamma", regions: []string{"us-west-2", "eu-west-1", "sa-east-1"}, accounts: accounts(), gen: 1, command: true, custom: true},
		},
	}
}

func (f *chaosFleet) instances() int {
	n := 0
	for _, s := range f.sets {
		n += len(s.targets())
	}
	return n
}

// files renders the repository.
func (f *chaosFleet) files() map[string]string {
	out := map[string]string{
		"types.hcl": fmt.Sprintf("resource_type \"Custom::Chaos\" {\n  service_token = %q\n}\n", f.hookURL),
	}
	for _, s := range f.sets {
		out[s.name+".hcl"] = fmt.Sprintf(`stack_set %q {
  template = "./templates/%s"
  vars     = { gen = %d }
  deployment_targets {
    regions  = %s
    accounts = %s
  }
  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 2
    failure_tolerance_count = 1
  }
}
`, s.name, s.name, s.gen, hclList(s.regions), hclList(s.accounts))
		tmpl := fmt.Sprintf(`variable "gen" { type = number }

resource "file" "conf" {
  path    = "%[1]s/conf.txt"
  content = "stack_set=%[1]s\nregion=${target.region}\naccount=${target.account}\ngen=${var.gen}\n"
}

resource "file" "extra" {
  count   = 2
  path    = "%[1]s/extra-${count.index}.txt"
  content = "extra=${count.index}\nconf=${file.conf.sha256}\n"
}

# Moves with every generation: the old file must be deleted.
resource "file" "marker" {
  path    = "%[1]s/marker-${var.gen %% 3}.txt"
  content = "gen=${var.gen}\n"
}

output "gen" { value = var.gen }
`, s.name)
		log := fmt.Sprintf(`'%s/%s.'"$STACKD_REGION.$STACKD_ACCOUNT"`, f.cmdLogs, s.name)
		if s.command {
			tmpl += fmt.Sprintf(`
resource "command" "hook" {
  create      = "echo create $STACKD_REQUEST_ID >> %[1]s"
  update      = "echo update $STACKD_REQUEST_ID $GEN >> %[1]s"
  delete      = "echo delete $STACKD_REQUEST_ID >> %[1]s"
  environment = { GEN = "${var.gen}" }
  depends_on  = [file.conf]
}
`, strings.ReplaceAll(log, `"`, `\"`))
		}
		if s.custom {
			// service_token is set although the type declares it: see
			// TestDeleteInstanceOfGitDeclaredCustomType.
			tmpl += fmt.Sprintf(`
resource "custom" "rec" {
  type          = "Custom::Chaos"
  service_token = %q
  properties    = { gen = var.gen, conf = file.conf.sha256 }
}
`, f.hookURL)
		}
		out["templates/"+s.name+"/main.hcl"] = tmpl
	}
	return out
}

func hclList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// mutate makes one random change and describes it.
func (f *chaosFleet) mutate(rng *rand.Rand) string {
	s := f.sets[rng.IntN(len(f.sets))]
	switch n := rng.IntN(20); {
	case n < 4 && len(s.accounts) > 2:
		i := rng.IntN(len(s.accounts))
		a := s.accounts[i]
		s.accounts = slices.Delete(s.accounts, i, i+1)
		s.removed = append(s.removed, a)
		return fmt.Sprintf("%s: remove account %s", s.name, a)
	case n < 7 && len(s.removed) > 0:
		a := s.removed[0]
		s.removed = s.removed[1:]
		s.accounts = append(s.accounts, a)
		return fmt.Sprintf("%s: add account %s back", s.name, a)
	case n < 10:
		for _, s := range f.sets {
			s.gen++
		}
		return "every stack set: next generation"
	default:
		s.gen++
		return fmt.Sprintf("%s: gen %d", s.name, s.gen)
	}
}

// commit writes the model and commits it; it returns the new head.
func (f *chaosFleet) commit(t *testing.T, msg string) string {
	t.Helper()
	writeTree(t, f.repoPath, f.files())
	f.commits++
	return commitAllIn(t, f.repoPath, msg)
}

// wantFiles is what the targets root must hold: path → content.
func (f *chaosFleet) wantFiles() map[string]string {
	out := map[string]string{}
	for _, s := range f.sets {
		for _, tg := range s.targets() {
			region, account := tg[0], tg[1]
			dir := account + "/" + region + "/" + s.name + "/"
			conf := fmt.Sprintf("stack_set=%s\nregion=%s\naccount=%s\ngen=%d\n", s.name, region, account, s.gen)
			out[dir+"conf.txt"] = conf
			for i := range 2 {
				out[fmt.Sprintf("%sextra-%d.txt", dir, i)] = fmt.Sprintf("extra=%d\nconf=%s\n", i, sha256Hex(conf))
			}
			out[fmt.Sprintf("%smarker-%d.txt", dir, s.gen%3)] = fmt.Sprintf("gen=%d\n", s.gen)
		}
	}
	return out
}

// settled reports whether the daemon's API shows the model deployed: every
// stack set's last operation SUCCEEDED and exactly its targets
// OPERATION_COMPLETE with the model's generation.
func (f *chaosFleet) settled(addr string) (bool, string) {
	for _, s := range f.sets {
		var doc reconciler.StackSetStatus
		code, err := getJSON(addr, "/v1/stack_sets/"+s.name, &doc)
		if err != nil || code != 200 {
			return false, fmt.Sprintf("%s: %d %v", s.name, code, err)
		}
		if op := doc.LastOperation; op == nil || op.Status != state.OperationSucceeded {
			return false, fmt.Sprintf("%s: last operation %+v", s.name, op)
		}
		want := map[[2]string]bool{}
		for _, tg := range s.targets() {
			want[tg] = true
		}
		if len(doc.Instances) != len(want) {
			return false, fmt.Sprintf("%s: %d instances, want %d", s.name, len(doc.Instances), len(want))
		}
		for _, in := range doc.Instances {
			var out struct{ Gen int }
			_ = json.Unmarshal(in.Outputs, &out)
			if !want[[2]string{in.Region, in.Account}] || in.Status != state.InstanceOperationComplete || out.Gen != s.gen {
				return false, fmt.Sprintf("%s: instance %s/%s %s gen %d, want gen %d", s.name, in.Region, in.Account, in.Status, out.Gen, s.gen)
			}
		}
	}
	return true, ""
}

// statusWritten reports whether the tip of the status branch holds every
// stack set's status as the daemon's API shows it.
func (f *chaosFleet) statusWritten(addr, repo string) (bool, string) {
	for _, s := range f.sets {
		var doc reconciler.StackSetStatus
		code, err := getJSON(addr, "/v1/stack_sets/"+s.name, &doc)
		if err != nil || code != 200 {
			return false, fmt.Sprintf("%s: %d %v", s.name, code, err)
		}
		out, err := exec.Command("git", "-C", repo, "show", "refs/heads/stackd/status:"+reconciler.StatusPath(s.name)).Output()
		if err != nil {
			return false, fmt.Sprintf("the status branch has no %s yet (%v)", reconciler.StatusPath(s.name), err)
		}
		var onBranch reconciler.StackSetStatus
		if err := json.Unmarshal(out, &onBranch); err != nil {
			return false, fmt.Sprintf("%s on the status branch: %v", reconciler.StatusPath(s.name), err)
		}
		if diff := cmp.Diff(comparableStatus(doc), comparableStatus(onBranch)); diff != "" {
			return false, fmt.Sprintf("%s on the status branch is not the API's yet (-api +branch):\n%s", reconciler.StatusPath(s.name), diff)
		}
	}
	return true, ""
}

// chaosKills is the number of kills of a chaos test: the environment
// variable env (STACKD_CHAOS_KILLS, STACKD_ROLLOUT_CHAOS_KILLS) or def.
func chaosKills(t *testing.T, env string, def int) int {
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", env, v)
		}
		return n
	}
	return def
}

// chaosSeed is a chaos test's seed: the environment variable env, or the
// clock.
func chaosSeed(t *testing.T, env string) uint64 {
	if v := os.Getenv(env); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, v, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// opStarted matches the log lines of an operation starting or resuming.
var opStarted = message("operation started", "operation started (was queued)", "resuming operation")

func TestChaosKillAndRestart(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	wantKills := chaosKills(t, "STACKD_CHAOS_KILLS", 30)
	seed := chaosSeed(t, "STACKD_CHAOS_SEED")
	t.Logf("seed %d (rerun with STACKD_CHAOS_SEED=%d), %d kills", seed, seed, wantKills)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))

	dir := t.TempDir()
	repo, stateDir, targets, cmdLogs := filepath.Join(dir, "repo"), filepath.Join(dir, "stackd", "state"), filepath.Join(dir, "targets"), filepath.Join(dir, "cmdlogs")
	if err := os.MkdirAll(cmdLogs, 0o755); err != nil {
		t.Fatal(err)
	}
	prov := newRecordingProvider()
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)

	fleet := newChaosFleet(repo, srv.URL+"/hook", cmdLogs)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, repo, "init", "-q")
	head := fleet.commit(t, "the chaos fleet")
	t.Logf("%d stack sets, %d instances", len(fleet.sets), fleet.instances())

	args := []string{"run", "--repo", repo, "--state-dir", stateDir, "--targets-root", targets, "--log-format", "json",
		"--listen", "127.0.0.1:0", "--interval", "1h", "--shutdown-grace", "5s"}
	start := time.Now()
	kills, cycles, reopenFailures, truncatedRefs := 0, 0, 0, 0
	statusRefFile := filepath.Join(repo, ".git", "refs", "heads", "stackd", "status")
	lineage := &statusHistoryCheck{repo: repo}
	var procs []*proc // every daemon run, for the logs when a check fails
	afterKill := func(p *proc) {
		kills++
		procs = append(procs, p)
		if fi, err := os.Stat(statusRefFile); err == nil && fi.Size() == 0 {
			truncatedRefs++
			t.Logf("kill %d left %s empty (TestStatusRefTruncatedByKill)", kills, statusRefFile)
		}
		lineage.check(t, fmt.Sprintf("kill %d (cycle %d)", kills, cycles), p)
	}
	phases := map[string]int{}
	for kills < wantKills {
		cycles++
		if cycles > 1 && rng.IntN(3) == 0 {
			msg := fleet.mutate(rng)
			head = fleet.commit(t, msg)
			t.Logf("cycle %d: commit %s %s", cycles, head[:7], msg)
		}
		if rng.IntN(4) == 0 {
			// Anywhere from the process start on: opening the state,
			// fetching, planning, dispatching.
			p := startProc(t, binary, nil, args...)
			if !chaosDelay(t, p, time.Duration(rng.IntN(300))*time.Millisecond) {
				checkReopenFailure(t, p, &reopenFailures)
				continue
			}
			phases[killPhase(p.log)]++
			p.kill(t)
			afterKill(p)
			continue
		}
		p := startChaosProc(t, binary, args, &reopenFailures)
		addr := p.addr(t)
		// Wait for an operation to start; when the daemon is idle (the
		// head reconciled, nothing to resume), give it a commit.
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, ok := p.tryWaitLine(100*time.Millisecond, 0, opStarted, nil); ok {
				break
			}
			if p.done() {
				t.Fatalf("cycle %d: stackd exited on its own (%v); logs:\n%s", cycles, p.err, p.log)
			}
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: no operation started within 30s; logs:\n%s", cycles, p.log)
			}
			if code, h, err := readyz(addr); err == nil && code == 200 && h.Revision == head {
				msg := fleet.mutate(rng)
				head = fleet.commit(t, msg)
				t.Logf("cycle %d: idle, commit %s %s", cycles, head[:7], msg)
			}
		}
		if !chaosDelay(t, p, time.Duration(rng.IntN(250))*time.Millisecond) {
			t.Fatalf("cycle %d: stackd exited on its own (%v); logs:\n%s", cycles, p.err, p.log)
		}
		phases[killPhase(p.log)]++
		p.kill(t)
		afterKill(p)
	}
	t.Logf("%d kills in %d cycles, %d commits, in %s; kills by phase: %v", kills, cycles, fleet.commits, time.Since(start).Round(time.Millisecond), phases)
	t.Run("the state opens after every kill", func(t *testing.T) {
		if reopenFailures > 0 {
			t.Errorf("stackd failed to open its state %d times after a kill", reopenFailures)
		}
	})

	// The last run is not killed: it must settle the fleet at the head.
	lastStart := time.Now()
	p := startChaosProc(t, binary, args, &reopenFailures)
	addr := p.addr(t)
	settleBy := time.Now().Add(60 * time.Second)
	for {
		ok, why := fleet.settled(addr)
		if ok {
			code, h, err := readyz(addr)
			if ok = err == nil && code == 200 && h.Revision == head; !ok {
				why = fmt.Sprintf("readyz %d %+v %v", code, h, err)
			}
		}
		stateSettled := ok
		if ok {
			// The status commit of the last operation lands just after
			// it: a stop before then leaves it owed (caught up at the
			// next start), which the checks after the stop would take
			// for a status branch out of step with the state.
			ok, why = fleet.statusWritten(addr, repo)
		}
		if ok {
			break
		}
		if stateSettled && time.Now().After(settleBy) {
			// The checks below say how the status branch differs.
			t.Logf("the fleet settled at %s but the status branch did not follow: %s", head[:7], why)
			break
		}
		if time.Now().After(settleBy) || p.done() {
			t.Fatalf("the fleet did not settle at %s: %s; logs:\n%s", head[:7], why, p.log)
		}
		p.tryWaitLine(50*time.Millisecond, len(p.log.all()), func(map[string]any) bool { return true }, nil)
	}
	t.Logf("the fleet settled %s after the last start", time.Since(lastStart).Round(time.Millisecond))
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("stackd run exited %d after SIGTERM; logs:\n%s", code, p.log)
	}
	procs = append(procs, p)
	lineage.check(t, "the last run", p)
	t.Run("the status branch never loses its history", func(t *testing.T) {
		for _, v := range lineage.violations {
			t.Error(v)
		}
	})

	// Every file resource exists exactly once, with the last commit's
	// content (file.marker and temporary files: see the subtests below).
	got := map[string]string{}
	for p, st := range snapshot(t, targets) {
		if !st.Mode.IsDir() {
			got[p] = st.Content
		}
	}
	wantFiles := fleet.wantFiles()
	filter := func(m map[string]string, keep func(string) bool) map[string]string {
		out := map[string]string{}
		for p, c := range m {
			if keep(p) {
				out[p] = c
			}
		}
		return out
	}
	isTemp := func(p string) bool { return strings.Contains(path.Base(p), ".stackd-tmp-") }
	isMarker := func(p string) bool { return strings.HasPrefix(path.Base(p), "marker-") }
	plain := func(p string) bool { return !isTemp(p) && !isMarker(p) }
	if diff := cmp.Diff(filter(wantFiles, plain), filter(got, plain)); diff != "" {
		t.Errorf("files under the targets root (-want +got):\n%s", diff)
	}
	t.Run("replaced file resources leave nothing behind", func(t *testing.T) {
		if diff := cmp.Diff(filter(wantFiles, isMarker), filter(got, isMarker)); diff != "" {
			t.Errorf("file.marker files (-want +got):\n%s", diff)
		}
	})
	t.Run("no temporary files left", func(t *testing.T) {
		if tmp := filter(got, isTemp); len(tmp) > 0 {
			t.Errorf("temporary files left under the targets root: %v", keys(tmp))
		}
	})

	checkCommandLogs(t, fleet)
	checkCustomCreates(t, fleet, prov)

	// No instance in progress; the state is consistent.
	status := runBinary(t, binary, "status", "--json", "--state-dir", stateDir)
	if status.err != nil {
		t.Fatalf("stackd status --json: %s", status)
	}
	var docs []reconciler.StackSetStatus
	if err := json.Unmarshal([]byte(status.stdout), &docs); err != nil {
		t.Fatalf("stackd status --json: %v\n%s", err, status.stdout)
	}
	for _, d := range docs {
		for _, in := range d.Instances {
			if in.Status == state.InstanceOperationInProgress || in.Status == state.InstanceWaitInProgress {
				t.Errorf("%s %s/%s is left %s", d.Name, in.Region, in.Account, in.Status)
			}
		}
	}
	if check := runBinary(t, binary, "state", "check", "--state-dir", stateDir); check.err != nil || !strings.Contains(check.stdout, "state is consistent") {
		t.Errorf("stackd state check: %s", check)
	}

	// The status branch says what the state says.
	headStatus := statusHead(t, repo)
	if len(docs) != len(fleet.sets) {
		t.Errorf("the state holds %d stack sets, want %d", len(docs), len(fleet.sets))
	}
	var mismatches []string
	mismatched := map[string]bool{}
	for _, d := range docs {
		if _, ok := headStatus.Files[reconciler.StatusPath(d.Name)]; !ok {
			mismatches = append(mismatches, fmt.Sprintf("the status branch has no %s", reconciler.StatusPath(d.Name)))
			mismatched[d.Name] = true
			continue
		}
		onBranch := headStatus.stackSetStatus(t, d.Name)
		if diff := cmp.Diff(comparableStatus(d), comparableStatus(onBranch)); diff != "" {
			mismatches = append(mismatches, fmt.Sprintf("status/%s.json on the status branch differs from the state (-state +branch):\n%s", d.Name, diff))
			mismatched[d.Name] = true
		}
	}
	if len(mismatched) > 0 {
		t.Logf("what every daemon run logged of the operations and status commits of %v:\n%s", keys(mismatched), operationHistory(procs, mismatched))
	}
	if len(mismatches) > 0 {
		history, _ := exec.Command("git", "-C", repo, "log", "--format=%h %p %s", "stackd/status").CombinedOutput()
		var refs []string
		entries, _ := os.ReadDir(filepath.Join(repo, ".git", "refs", "heads", "stackd"))
		for _, e := range entries {
			info, _ := e.Info()
			refs = append(refs, fmt.Sprintf("%s (%d bytes)", e.Name(), info.Size()))
		}
		packed, _ := os.ReadFile(filepath.Join(repo, ".git", "packed-refs"))
		reflog, _ := os.ReadFile(filepath.Join(repo, ".git", "logs", "refs", "heads", "stackd", "status"))
		t.Logf("the status branch differs from the state:\n%s\nstatus branch history:\n%s\nrefs/heads/stackd/: %v\npacked-refs:\n%s\nreflog of stackd/status:\n%s",
			strings.Join(mismatches, "\n"), history, refs, packed, reflog)
		for _, l := range strings.Split(p.log.String(), "\n") {
			if strings.Contains(l, "warn") || strings.Contains(l, "error") || strings.Contains(l, "status") {
				t.Log("daemon: ", l)
			}
		}
	}
	t.Run("the status branch matches the state", func(t *testing.T) {
		for _, m := range mismatches {
			t.Error(m)
		}
	})
	t.Run("no kill truncates the status ref", func(t *testing.T) {
		if truncatedRefs > 0 {
			t.Errorf("%d kills left the status branch ref empty", truncatedRefs)
		}
	})
}

// operationHistory lists, run by run, the log lines of the stack sets named
// in sets about their operations and status commits.
func operationHistory(procs []*proc, sets map[string]bool) string {
	var b strings.Builder
	for i, p := range procs {
		for _, l := range p.log.all() {
			name, _ := l["stack_set"].(string)
			msg, _ := l["message"].(string)
			if !sets[name] || !strings.Contains(msg, "operation") && !strings.Contains(msg, "status") && l["level"] != "warn" && l["level"] != "error" {
				continue
			}
			fmt.Fprintf(&b, "run %d: %s %s", i+1, l["time"], msg)
			for _, k := range []string{"stack_set", "operation", "kind", "revision", "status", "instances", "error"} {
				if v, ok := l[k]; ok {
					fmt.Fprintf(&b, " %s=%v", k, v)
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// statusHistoryCheck follows the status branch from one stackd process to
// the next: every tip seen must be an ancestor of the tips after it. A
// process that starts a new history (a status commit with no parent while
// the branch existed) or moves the branch backwards is caught in the act,
// with its log.
type statusHistoryCheck struct {
	repo       string
	tip        string // the tip seen after the previous process, "" before the first status commit
	violations []string
}

func (h *statusHistoryCheck) check(t *testing.T, when string, p *proc) {
	t.Helper()
	tip, err := exec.Command("git", "-C", h.repo, "rev-parse", "--verify", "-q", "refs/heads/stackd/status").Output()
	now := strings.TrimSpace(string(tip))
	if err != nil {
		now = ""
	}
	prev := h.tip
	h.tip = now
	if prev == "" || prev == now {
		return
	}
	why := ""
	if now == "" {
		why = "the status branch is gone"
	} else if err := exec.Command("git", "-C", h.repo, "merge-base", "--is-ancestor", prev, now).Run(); err != nil {
		why = fmt.Sprintf("its new tip %s does not descend from %s (%v)", now[:7], prev[:7], err)
	}
	if why == "" {
		return
	}
	log, _ := exec.Command("git", "-C", h.repo, "log", "--format=%h %p %s", "-n", "10", "refs/heads/stackd/status").CombinedOutput()
	reflog, _ := os.ReadFile(filepath.Join(h.repo, ".git", "logs", "refs", "heads", "stackd", "status"))
	var lines []string
	for _, l := range strings.Split(p.log.String(), "\n") {
		if strings.Contains(l, "warn") || strings.Contains(l, "error") || strings.Contains(l, "status") || strings.Contains(l, "fault") {
			lines = append(lines, l)
		}
	}
	v := fmt.Sprintf("%s: the status branch lost its history: %s\nstatus branch history:\n%s\nreflog:\n%s\nthe process's log (status, warnings, errors):\n%s",
		when, why, log, reflog, strings.Join(lines, "\n"))
	t.Log(v)
	h.violations = append(h.violations, v)
}

// startChaosProc starts `stackd run`. A start that fails because Badger
// cannot open the state after a kill is counted and retried once, as a
// supervisor (systemd Restart=on-failure) would.
func startChaosProc(t *testing.T, binary string, args []string, reopenFailures *int) *proc {
	t.Helper()
	p := startProc(t, binary, nil, args...)
	if _, ok := p.tryWaitLine(20*time.Second, 0, message("stackd running"), nil); ok || !p.done() {
		return p
	}
	checkReopenFailure(t, p, reopenFailures)
	return startProc(t, binary, nil, args...)
}

// checkReopenFailure fails the test unless p, which exited by itself, could
// not open the state for Badger's empty-memtable reason.
func checkReopenFailure(t *testing.T, p *proc, reopenFailures *int) {
	t.Helper()
	<-p.exited
	switch logs := p.log.String(); {
	case strings.Contains(logs, "Create a new file"):
		*reopenFailures++
		t.Logf("stackd could not open its state after a kill, restarting it: %s", strings.TrimSpace(logs))
	case strings.Contains(logs, "Cannot acquire directory lock"):
		// A command the killed daemon forked had not exec'd yet and held
		// a copy of Badger's lock file (released by close only).
		t.Logf("the state was still locked after a kill, restarting: %s", strings.TrimSpace(logs))
	default:
		t.Fatalf("stackd exited on its own (%v); logs:\n%s", p.err, logs)
	}
}

// chaosDelay lets the daemon run for d, the random part of the chaos:
// where the kill lands. It reports false if the daemon exited by itself.
func chaosDelay(t *testing.T, p *proc, d time.Duration) bool {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-p.exited:
		return false
	}
}

// killPhase names where a kill is about to land, from the process's log.
func killPhase(l *lineLog) string {
	started, finished, running := 0, 0, false
	for _, line := range l.all() {
		switch {
		case line["message"] == "stackd running":
			running = true
		case opStarted(line):
			started++
		case line["message"] == "operation finished":
			finished++
		}
	}
	switch {
	case !running:
		return "starting"
	case started == 0:
		return "before operations"
	case finished < started:
		return "during an operation"
	default:
		return "after operations"
	}
}

// comparableStatus keeps what the status branch and the state must agree on.
func comparableStatus(d reconciler.StackSetStatus) any {
	type op struct{ ID, Kind, Status, Revision string }
	type inst struct{ Region, Account, Status, Revision, Outputs string }
	out := struct {
		Name, ID, Revision, Status string
		LastOperation              *op
		Counts                     reconciler.OperationCounts
		Instances                  []inst
	}{Name: d.Name, ID: d.ID, Revision: d.Revision, Status: string(d.Status)}
	if d.LastOperation != nil {
		out.LastOperation = &op{d.LastOperation.ID, string(d.LastOperation.Kind), string(d.LastOperation.Status), d.LastOperation.Revision}
		out.Counts = d.LastOperation.Counts
	}
	for _, in := range d.Instances {
		var outputs bytes.Buffer
		_ = json.Compact(&outputs, in.Outputs)
		out.Instances = append(out.Instances, inst{in.Region, in.Account, string(in.Status), in.Revision, outputs.String()})
	}
	sort.Slice(out.Instances, func(a, b int) bool {
		return out.Instances[a].Region+out.Instances[a].Account < out.Instances[b].Region+out.Instances[b].Account
	})
	return out
}

// checkCommandLogs reads the lines the command resources appended: a
// resource is created again only with the request id of the create before
// (a retry after a kill), unless a delete came in between; at the end
// exactly the model's instances have a live command resource.
func checkCommandLogs(t *testing.T, fleet *chaosFleet) {
	t.Helper()
	live := map[string]bool{}
	retries := 0
	entries, err := os.ReadDir(fleet.cmdLogs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		f, err := os.Open(filepath.Join(fleet.cmdLogs, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var liveID string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				t.Errorf("%s: malformed line %q", e.Name(), sc.Text())
				continue
			}
			switch id := fields[1]; fields[0] {
			case "create":
				switch {
				case liveID == id:
					retries++
				case liveID != "":
					t.Errorf("%s: command created again with request id %s while %s is live", e.Name(), id, liveID)
				}
				liveID = id
			case "update":
				if liveID == "" {
					t.Errorf("%s: update %s of a command resource that does not exist", e.Name(), id)
				}
			case "delete":
				liveID = ""
			}
		}
		f.Close()
		live[e.Name()] = liveID != ""
	}
	want := map[string]bool{}
	for _, s := range fleet.sets {
		if !s.command {
			continue
		}
		for _, tg := range s.targets() {
			want[s.name+"."+tg[0]+"."+tg[1]] = true
		}
	}
	for name, isLive := range live {
		if isLive != want[name] {
			t.Errorf("command resource of %s: live %v, want %v", name, isLive, want[name])
		}
	}
	for name := range want {
		if _, ok := live[name]; !ok {
			t.Errorf("command resource of %s was never created", name)
		}
	}
	t.Logf("command resources: %d creates repeated with the same request id after a kill", retries)
}

// checkCustomCreates checks the custom-resource provider's view: a repeated
// Create of a resource reuses the RequestId unless a Delete came in
// between, and exactly the model's resources are live at the end.
func checkCustomCreates(t *testing.T, fleet *chaosFleet, prov *recordingProvider) {
	t.Helper()
	liveID := map[string]string{} // key -> request id of the live Create
	where := map[string]string{}
	retries, creates := 0, 0
	for _, req := range prov.all() {
		k := req.key()
		where[k] = req.where()
		switch req.RequestType {
		case "Create":
			creates++
			switch id := liveID[k]; {
			case id == req.RequestID:
				retries++
			case id != "":
				t.Errorf("%s (%s) created twice with different request ids: %s, then %s", k, req.where(), id, req.RequestID)
			}
			liveID[k] = req.RequestID
		case "Update":
			if liveID[k] == "" {
				t.Errorf("%s: Update %s of a resource that does not exist", req.where(), req.RequestID)
			}
		case "Delete":
			delete(liveID, k)
		}
	}
	got := map[string]bool{}
	for k := range liveID {
		got[where[k]] = true
	}
	want := map[string]bool{}
	for _, s := range fleet.sets {
		if !s.custom {
			continue
		}
		for _, tg := range s.targets() {
			want[s.name+"/"+tg[0]+"/"+tg[1]+"/custom.rec"] = true
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("live custom resources (-want +got):\n%s", diff)
	}
	t.Logf("custom resources: %d Creates, %d of them repeated with the same RequestId after a kill", creates, retries)
}

// A kill while a replacement deletes the old resource: the journal says
// PENDING_DELETE (with the old properties); the resumed operation must
// finish that delete before it creates the new resource, or the old one is
// left behind for ever. The command's delete waits for a gate file, so the
// kill lands inside it every time.
func TestKillDuringReplacement(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	work := filepath.Join(dir, "work")
	logFile, gate, pidFile := filepath.Join(work, "log"), filepath.Join(work, "gate"), filepath.Join(work, "pid")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repoAt := func(gen int) {
		writeTree(t, f.repo, map[string]string{
			"svc.hcl": fmt.Sprintf(`stack_set "svc" {
  template = "./t"
  vars     = { gen = %d }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`, gen),
			"t/main.hcl": fmt.Sprintf(`variable "gen" { type = number }
resource "command" "svc" {
  create = "echo created $STACKD_REQUEST_ID gen=${var.gen} >> %[1]s"
  delete = "echo $$ > %[2]s; echo deleting $STACKD_PHYSICAL_ID >> %[1]s; while [ ! -f %[3]s ]; do sleep 0.01; done; echo deleted $STACKD_PHYSICAL_ID >> %[1]s"
}
`, logFile, pidFile, gate),
		})
	}
	repoAt(1)
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "gen 1")
	mustApplyRetry(t, f)
	repoAt(2) // create changes: a replacement
	f.commit(t, "gen 2")

	p := startProc(t, binary, nil, append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h")...)...)
	eventually(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(pidFile)
		return len(b) > 0 && strings.Contains(readFile(t, logFile), "deleting")
	}, "the replacement's delete never started; logs:\n%s", p.log)
	p.kill(t)
	// The machine goes down with the daemon: the delete command dies too.
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	mustApplyRetry(t, f)
	lines := strings.Split(strings.TrimSpace(readFile(t, logFile)), "\n")
	first := strings.Fields(lines[0])
	if len(first) < 2 || first[0] != "created" {
		t.Fatalf("log starts with %q, want the first create", lines[0])
	}
	deleted, createdAgain := -1, -1
	for i, l := range lines {
		if l == "deleted "+first[1] {
			deleted = i
		}
		if strings.HasPrefix(l, "created ") && strings.HasSuffix(l, "gen=2") {
			createdAgain = i
		}
	}
	if deleted < 0 || createdAgain < 0 || deleted > createdAgain {
		t.Errorf("want the old resource %s deleted, then the new one created; the commands logged:\n%s", first[1], strings.Join(lines, "\n"))
	}
	if check := stackdRetry(t, "state", "check", "--state-dir", f.state); check.err != nil {
		t.Errorf("stackd state check: %s", check)
	}
}

// Removing the targets of a stack set whose custom resource takes its
// service token from a resource_type declared in Git: the instances must
// be deleted (the provider gets the Deletes).
func TestDeleteInstanceOfGitDeclaredCustomType(t *testing.T) {
	t.Parallel()
	prov := newRecordingProvider()
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	defs := func(accounts string) map[string]string {
		return map[string]string{
			"types.hcl": fmt.Sprintf("resource_type \"Custom::Rec\" {\n  service_token = %q\n}\n", srv.URL),
			"s.hcl": `stack_set "s" {
  template = "./t"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ` + accounts + `
  }
}
`,
			"t/main.hcl": `resource "custom" "rec" {
  type       = "Custom::Rec"
  properties = { a = 1 }
}
`,
		}
	}
	writeTree(t, f.repo, defs(`["111111111111", "222222222222"]`))
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "two instances")
	mustApplyRetry(t, f)
	writeTree(t, f.repo, defs(`["111111111111"]`))
	f.commit(t, "one instance")
	res := applyRetry(t, f)
	if res.err != nil {
		t.Errorf("apply of the target removal: %s", res)
	}
	deletes := 0
	for _, r := range prov.all() {
		if r.RequestType == "Delete" && r.ResourceOwnerID == "222222222222" {
			deletes++
		}
	}
	if deletes != 1 {
		t.Errorf("the provider got %d Deletes for 222222222222, want 1", deletes)
	}
}

// A kill inside a status-branch ref update of a local repository: go-git
// updates a loose ref in place (truncate, then write), so a SIGKILL between
// the two leaves refs/heads/stackd/status empty, as the chaos test found.
// The next status commit must not silently start a new history that drops
// the other stack sets' status files (nor, when the status branch is the
// deploy branch, the user's history).
func TestStatusRefTruncatedByKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	set := func(name, content string) {
		writeTree(t, f.repo, map[string]string{
			name + ".hcl": fmt.Sprintf(`stack_set %q {
  template = "./t"
  vars     = { content = %q }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`, name, content),
		})
	}
	writeTree(t, f.repo, map[string]string{"t/main.hcl": `variable "content" { type = string }
resource "file" "f" {
  path    = "f-${stack_set.name}.txt"
  content = var.content
}
`})
	set("a", "one")
	set("b", "one")
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "a and b")
	mustApplyRetry(t, f)
	before := statusHead(t, f.repo)
	ref := filepath.Join(f.repo, ".git", "refs", "heads", "stackd", "status")
	if err := os.Truncate(ref, 0); err != nil {
		t.Fatal(err)
	}

	set("a", "two")
	rev := f.commit(t, "a: two")
	res := applyRetry(t, f)
	if res.err != nil {
		t.Fatalf("apply after the truncated status ref: %s", res)
	}
	head := statusHead(t, f.repo)
	if doc := head.stackSetStatus(t, "a"); doc.Revision != rev {
		t.Errorf("the status of a is at %.7s after the truncated ref, want %.7s", doc.Revision, rev)
	}
	if _, ok := head.Files[reconciler.StatusPath("b")]; !ok {
		t.Errorf("after the truncated ref, the status commit %q lost %s (files: %v)", head.Message, reconciler.StatusPath("b"), keys(head.Files))
	}
	anc := exec.Command("git", "merge-base", "--is-ancestor", before.Hash, head.Hash)
	anc.Dir = f.repo
	if err := anc.Run(); err != nil {
		t.Errorf("the status commit %s before the truncated ref is not an ancestor of the new head %s: the history was dropped", before.Hash[:7], head.Hash[:7])
	}
	var reported bool
	for _, l := range logLines(res.stderr) {
		reported = reported || l["message"] == "git fault worked around" && l["kind"] == "status_ref_damaged"
	}
	if !reported {
		t.Errorf("the repaired status ref was not reported in the logs:\n%s", res.stderr)
	}
}

// A kill after an operation's last instance settled but before the
// operation finished (found by the chaos test), followed by a commit that
// leaves the stack set nothing to apply: the state is crafted to what the
// kill leaves (operation RUNNING, stack set record and status branch as
// before the operation). The next pass must bring the stack set's record
// and status document up to the instances' revision, not end the
// operation as superseded and leave both stale.
func TestInterruptedOperationSuperseded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	set := func(name, content string) {
		writeTree(t, f.repo, map[string]string{
			name + ".hcl": fmt.Sprintf(`stack_set %q {
  template = "./t"
  vars     = { content = %q }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`, name, content),
		})
	}
	writeTree(t, f.repo, map[string]string{"t/main.hcl": `variable "content" { type = string }
resource "file" "f" {
  path    = "f-${stack_set.name}.txt"
  content = var.content
}
`})
	set("a", "one")
	set("b", "one")
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "a and b")
	mustApplyRetry(t, f)
	statusBefore := statusHead(t, f.repo).Hash
	st := openState(t, f.state)
	recBefore, err := st.StackSetByName("a")
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	set("a", "two")
	rev2 := f.commit(t, "a: two")
	mustApplyRetry(t, f)
	// What a kill just before opRun.finish leaves.
	st = openState(t, f.state)
	rec, err := st.StackSetByName("a")
	if err != nil {
		t.Fatal(err)
	}
	op, err := st.Operation(rec.LastOperation)
	if err != nil {
		t.Fatal(err)
	}
	op.Status, op.Ended, op.Results = state.OperationRunning, time.Time{}, nil
	if err := st.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	if err := st.PutStackSet(recBefore); err != nil {
		t.Fatal(err)
	}
	st.Close()
	runGit(t, f.repo, "update-ref", "refs/heads/stackd/status", statusBefore)

	set("b", "two")
	f.commit(t, "b: two")
	mustApplyRetry(t, f)

	var docs []reconciler.StackSetStatus
	out := mustStackdRetry(t, "status", "--json", "--state-dir", f.state).stdout
	if err := json.Unmarshal([]byte(out), &docs); err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.Name != "a" {
			continue
		}
		if d.Revision == recBefore.Revision {
			t.Errorf("stack set a is recorded at %s, the revision before the operation that deployed %s to its instances", short(d.Revision), short(rev2))
		}
		onBranch := statusHead(t, f.repo).stackSetStatus(t, "a")
		if diff := cmp.Diff(comparableStatus(d), comparableStatus(onBranch)); diff != "" {
			t.Errorf("status/a.json differs from the state (-state +branch):\n%s", diff)
		}
	}
}

// A kill while an update runs (journaled PENDING_UPDATE), then a commit
// that changes a property requiring recreation: the resumed operation must
// replace the resource, not finish the update with properties the provider
// cannot apply in place. The chaos test found it with file.marker, whose
// path moves with the generation ("cannot change to ... in place").
func TestKillDuringUpdateThenReplace(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	work := filepath.Join(dir, "work")
	logFile, gate, pidFile := filepath.Join(work, "log"), filepath.Join(work, "gate"), filepath.Join(work, "pid")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	repoAt := func(flavor string, v int) {
		writeTree(t, f.repo, map[string]string{
			"svc.hcl": fmt.Sprintf(`stack_set "svc" {
  template = "./t"
  vars     = { flavor = %q, v = %d }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`, flavor, v),
			"t/main.hcl": fmt.Sprintf(`variable "flavor" { type = string }
variable "v" { type = number }
resource "command" "svc" {
  create      = "echo created $STACKD_REQUEST_ID ${var.flavor} >> %[1]s"
  update      = "echo $$ > %[2]s; echo updating >> %[1]s; while [ ! -f %[3]s ]; do sleep 0.01; done; echo updated $V >> %[1]s"
  delete      = "echo deleted $STACKD_PHYSICAL_ID >> %[1]s"
  environment = { V = "${var.v}" }
}
`, logFile, pidFile, gate),
		})
	}
	repoAt("a", 1)
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "flavor a")
	mustApplyRetry(t, f)
	repoAt("a", 2) // an update
	f.commit(t, "v 2")
	p := startProc(t, binary, nil, append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h")...)...)
	eventually(t, 20*time.Second, func() bool {
		b, _ := os.ReadFile(pidFile)
		return len(b) > 0 && strings.Contains(readFile(t, logFile), "updating")
	}, "the update never started; logs:\n%s", p.log)
	p.kill(t)
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	repoAt("b", 2) // create changes: a replacement
	f.commit(t, "flavor b")
	res := applyRetry(t, f)
	log := readFile(t, logFile)
	if res.err != nil || !strings.Contains(log, "deleted ") || !regexp.MustCompile(`created \S+ b\n`).MatchString(log) {
		t.Errorf("want the resource replaced at flavor b (deleted, then created); apply: %v; the commands logged:\n%s", res.err, log)
	}
}

// A status ref lock left by a killed stackd (gitsource writes
// refs/heads/stackd/status through stackd/status.lock): the next daemon's
// status commits must not fail, and the lock file is not a branch.
func TestStaleStatusRefLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mustApplyRetry(t, f)
	lock := filepath.Join(f.repo, ".git", "refs", "heads", "stackd", "status.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev := f.commit(t, "web: nginx 1.26")
	res := applyRetry(t, f)
	if res.err != nil {
		t.Errorf("apply with a stale status ref lock: %s", res)
	}
	if got := statusHead(t, f.repo).Message; !strings.Contains(got, rev[:7]) {
		t.Errorf("status commit %q, want one for %s", got, rev[:7])
	}
	if strings.Contains(res.stderr, "status.lock") {
		t.Errorf("the lock file was taken for a branch:\n%s", res.stderr)
	}
}

package main

// End-to-end tests: the real command tree (newRootCommand) on real Git
// repositories made with the git CLI, real Badger state directories and real
// target directories. Results are read back with go-git and the filesystem.

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// Every daemon test stops its `stackd run`; Badger, fsnotify, the health
// server and the go-git file:// transport end all their goroutines with it.
//
// TestMain runs the package's tests testParallel at a time unless -parallel
// says otherwise. They spend their time waiting for the processes they
// start (daemons deploying, remotes answering, providers sleeping), not on
// the CPU: at go test's default of GOMAXPROCS (2 on CI) the package took
// 410-550 s on a loaded 2-core machine, against a 10-minute timeout.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(testParallel()))
	}
	goleak.VerifyTestMain(m)
}

// testParallel is 2 per CPU, at least 4.
func testParallel() int {
	return max(4, 2*runtime.GOMAXPROCS(0))
}

// wantConf is web/app.conf of the quickstart template at one target.
func wantConf(region, account, image string) string {
	return fmt.Sprintf("name=web-%s\naccount=%s\nimage=%s\nreplicas=2\n", region, account, image)
}

// checkDeployed checks the files of every instance for image.
func checkDeployed(t *testing.T, f *fixture, regions, accounts []string, image string) {
	t.Helper()
	for _, region := range regions {
		for _, account := range accounts {
			dir := f.instanceDir(region, account)
			conf := readFile(t, filepath.Join(dir, "web", "app.conf"))
			if want := wantConf(region, account, image); conf != want {
				t.Errorf("%s/%s web/app.conf = %q, want %q", region, account, conf, want)
			}
			cred := filepath.Join(dir, "web", "credentials")
			if got := readFile(t, cred); got != "api_key="+qsSecret+"\n" {
				t.Errorf("%s/%s web/credentials = %q, want the api key", region, account, got)
			}
			if fi, err := os.Stat(cred); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s/%s web/credentials: mode %v (%v), want 0600", region, account, fi.Mode().Perm(), err)
			}
			for i := range 2 {
				p := filepath.Join(dir, "web", "replicas", fmt.Sprintf("%d.conf", i))
				want := fmt.Sprintf("replica=%d\nconfig_sha256=%s\n", i, sha256Hex(conf))
				if got := readFile(t, p); got != want {
					t.Errorf("%s/%s web/replicas/%d.conf = %q, want %q", region, account, i, got, want)
				}
			}
		}
	}
}

// checkNoSecret fails if the sensitive value appears in s.
func checkNoSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, qsSecret) {
		t.Errorf("the sensitive api_key value appears in %s", what)
	}
}

// checkStatusBranchHasNoSecret reads every commit of the status branch.
func checkStatusBranchHasNoSecret(t *testing.T, repo string) {
	t.Helper()
	history, _, err := readStatusHistory(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range history {
		checkNoSecret(t, "status commit message "+c.Hash, c.Message)
		for name, b := range c.Files {
			checkNoSecret(t, fmt.Sprintf("%s of status commit %s", name, c.Hash), string(b))
		}
	}
}

// userRepoState is what stackd must never touch in a local repository.
type userRepoState struct {
	Head, HeadRef, Index string
}

func readUserRepoState(t *testing.T, repo string) userRepoState {
	t.Helper()
	idx, err := os.ReadFile(filepath.Join(repo, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	return userRepoState{
		Head:    runGit(t, repo, "rev-parse", "HEAD"),
		HeadRef: runGit(t, repo, "symbolic-ref", "HEAD"),
		Index:   fmt.Sprintf("%x", sha256.Sum256(idx)),
	}
}

// 1. A local repository end to end, and `stackd status` after it.
func TestApplyLocalRepository(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rev := runGit(t, f.repo, "rev-parse", "HEAD")
	before := readUserRepoState(t, f.repo)

	// The first plan shows every property of every resource to add, but
	// never the api key.
	plan := mustStackd(t, append([]string{"plan", "-o", "json"}, f.flags()...)...)
	checkNoSecret(t, "plan -o json", plan.stdout)
	checkNoSecret(t, "plan's logs", plan.stderr)
	var pr reconciler.PlanResult
	if err := json.Unmarshal([]byte(plan.stdout), &pr); err != nil || len(pr.ChangeSets) != 1 {
		t.Fatalf("plan -o json: %v\n%s", err, plan.stdout)
	}
	if s := pr.ChangeSets[0].Summary; s.InstancesToCreate != 6 || s.ResourcesToAdd != 6*5 {
		t.Errorf("plan summary %+v, want 6 instances and 30 resources to add", s)
	}
	for _, ic := range pr.ChangeSets[0].Instances {
		for _, c := range ic.Changes {
			if c.ResourceChange.LogicalResourceId != "file.credentials" {
				continue
			}
			for _, pc := range c.ResourceChange.PropertyChanges {
				if pc.Name == "content" && pc.AfterValue != engine.SensitivePlaceholder {
					t.Errorf("%s/%s file.credentials content planned as %v, want %s", ic.Region, ic.Account, pc.AfterValue, engine.SensitivePlaceholder)
				}
			}
		}
	}
	text := mustStackd(t, append([]string{"plan"}, f.flags()...)...)
	checkNoSecret(t, "plan", text.stdout)

	res := f.mustApply(t)
	checkJSONLogs(t, res.stderr)
	checkNoSecret(t, "apply's logs", res.stderr)
	checkNoSecret(t, "apply's output", res.stdout)
	if want := fmt.Sprintf("web CreateStackInstances %s SUCCEEDED (6/6 instances)", rev[:7]); !strings.Contains(res.stdout, want) {
		t.Errorf("apply printed %q, want it to contain %q", res.stdout, want)
	}

	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.25")

	head := statusHead(t, f.repo)
	if head.Hash == "" {
		t.Fatal("no stackd/status branch after apply")
	}
	if want := fmt.Sprintf("stackd: web CreateStackInstances %s SUCCEEDED (6/6)", rev[:7]); head.Message != want {
		t.Errorf("status commit message = %q, want %q", head.Message, want)
	}
	doc := head.stackSetStatus(t, "web")
	if doc.Name != "web" || doc.ID == "" || doc.Revision != rev {
		t.Errorf("status/web.json: name %q id %q revision %q, want web, an id and %s", doc.Name, doc.ID, doc.Revision, rev)
	}
	if op := doc.LastOperation; op == nil || op.Kind != reconciler.KindCreateStackInstances || op.Status != state.OperationSucceeded ||
		op.Revision != rev || op.Counts != (reconciler.OperationCounts{Total: 6, Succeeded: 6}) {
		t.Errorf("last_operation = %+v, want CreateStackInstances SUCCEEDED 6/6 at %s", op, rev)
	}
	if len(doc.Instances) != 6 {
		t.Fatalf("status/web.json lists %d instances, want 6", len(doc.Instances))
	}
	for _, in := range doc.Instances {
		if in.Status != state.InstanceOperationComplete || in.Revision != rev {
			t.Errorf("instance %s/%s: %s at %s, want OPERATION_COMPLETE at %s", in.Region, in.Account, in.Status, in.Revision, rev)
		}
		var outputs map[string]string
		if err := json.Unmarshal(in.Outputs, &outputs); err != nil {
			t.Errorf("instance %s/%s outputs: %v", in.Region, in.Account, err)
		}
		if want := fmt.Sprintf("https://%s.%s.web.example", in.Region, in.Account); outputs["endpoint"] != want {
			t.Errorf("instance %s/%s output endpoint = %q, want %q", in.Region, in.Account, outputs["endpoint"], want)
		}
		conf := readFile(t, filepath.Join(f.instanceDir(in.Region, in.Account), "web", "app.conf"))
		if outputs["config_sha256"] != sha256Hex(conf) {
			t.Errorf("instance %s/%s output config_sha256 = %q, want the sha256 of its app.conf", in.Region, in.Account, outputs["config_sha256"])
		}
	}
	checkStatusBranchHasNoSecret(t, f.repo)

	// The user's checkout is exactly as it was.
	if after := readUserRepoState(t, f.repo); after != before {
		t.Errorf("user repository changed: %s", cmp.Diff(before, after))
	}
	if st := runGit(t, f.repo, "status", "--porcelain"); st != "" {
		t.Errorf("git status --porcelain = %q, want a clean work tree", st)
	}

	out := mustStackd(t, "status", "--state-dir", f.state).stdout
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^web\s+id=` + regexp.QuoteMeta(doc.ID) + `\s+revision=` + rev[:7] + `\s+instances=6$`),
		regexp.MustCompile(`(?m)^\s+OPERATION_COMPLETE\s+6$`),
		regexp.MustCompile(`last operation: CreateStackInstances SUCCEEDED at ` + rev[:7]),
	} {
		if !want.MatchString(out) {
			t.Errorf("stackd status printed:\n%s\nwant a match for %s", out, want)
		}
	}
}

// 2. A commit that changes only the image: plan shows a Modify of the
// config and of the replicas that reference its digest, and apply
// rewrites nothing else.
func TestVariableChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mustApply(t)
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev := f.commit(t, "web: nginx 1.26")

	plan := mustStackd(t, append([]string{"plan", "-o", "json"}, f.flags()...)...)
	checkNoSecret(t, "plan -o json", plan.stdout)
	var pr reconciler.PlanResult
	if err := json.Unmarshal([]byte(plan.stdout), &pr); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, plan.stdout)
	}
	if pr.Revision != rev || len(pr.ChangeSets) != 1 {
		t.Fatalf("plan: revision %s with %d change sets, want %s with 1", pr.Revision, len(pr.ChangeSets), rev)
	}
	cs := pr.ChangeSets[0]
	if cs.StackSetName != "web" || cs.Action != changeset.InstanceUpdate {
		t.Errorf("change set of %q: action %s, want web Update", cs.StackSetName, cs.Action)
	}
	if want := (changeset.ChangeSummary{InstancesToUpdate: 6, ResourcesToModify: 18}); cs.Summary != want {
		t.Errorf("summary: %s", cmp.Diff(want, cs.Summary))
	}
	plannedReplica := map[string]string{} // region/account/replica -> planned content
	for _, ic := range cs.Instances {
		where := ic.Region + "/" + ic.Account
		if ic.Action != changeset.InstanceUpdate {
			t.Errorf("%s: action %s, want Update", where, ic.Action)
		}
		var ids []string
		for _, c := range ic.Changes {
			rc := c.ResourceChange
			ids = append(ids, rc.LogicalResourceId)
			if rc.Action != "Modify" || rc.Replacement != changeset.ReplacementFalse {
				t.Errorf("%s %s: %s replacement %s, want Modify replacement False", where, rc.LogicalResourceId, rc.Action, rc.Replacement)
			}
			if len(rc.PropertyChanges) != 1 || rc.PropertyChanges[0].Name != "content" || len(rc.Details) != 1 {
				t.Errorf("%s %s: property changes %+v, details %+v, want content only", where, rc.LogicalResourceId, rc.PropertyChanges, rc.Details)
				continue
			}
			pc, d := rc.PropertyChanges[0], rc.Details[0]
			switch {
			case rc.LogicalResourceId == "file.config":
				if pc.BeforeValue != wantConf(ic.Region, ic.Account, "nginx:1.25") || pc.AfterValue != wantConf(ic.Region, ic.Account, "nginx:1.26") {
					t.Errorf("%s file.config content: %v -> %v, want the image to change 1.25 -> 1.26", where, pc.BeforeValue, pc.AfterValue)
				}
				if d.ChangeSource != changeset.SourceParameterReference || d.CausingEntity == nil || *d.CausingEntity != "var.image" {
					t.Errorf("%s file.config detail %+v, want ParameterReference var.image", where, d)
				}
			case strings.HasPrefix(rc.LogicalResourceId, "file.replica["):
				plannedReplica[where+"/"+rc.LogicalResourceId] = engine.ValueString(pc.AfterValue)
				if !strings.Contains(engine.ValueString(pc.BeforeValue), "config_sha256=") || pc.BeforeValue == pc.AfterValue {
					t.Errorf("%s %s content: %v -> %v, want a new config digest", where, rc.LogicalResourceId, pc.BeforeValue, pc.AfterValue)
				}
				if d.ChangeSource != changeset.SourceResourceAttribute || d.CausingEntity == nil || *d.CausingEntity != "file.config.sha256" {
					t.Errorf("%s %s detail %+v, want ResourceAttribute file.config.sha256", where, rc.LogicalResourceId, d)
				}
			}
		}
		if want := []string{"file.config", "file.replica[0]", "file.replica[1]"}; !slices.Equal(ids, want) {
			t.Errorf("%s changes %v, want exactly %v (credentials and command.register unchanged)", where, ids, want)
		}
	}

	// Make the credentials files old, to see that apply does not rewrite them.
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, region := range qsRegions {
		for _, account := range qsAccounts {
			if err := os.Chtimes(filepath.Join(f.instanceDir(region, account), "web", "credentials"), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	prevStatus := statusHead(t, f.repo)

	res := f.mustApply(t)
	checkNoSecret(t, "apply's logs", res.stderr)
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.26")
	for _, region := range qsRegions {
		for _, account := range qsAccounts {
			fi, err := os.Stat(filepath.Join(f.instanceDir(region, account), "web", "credentials"))
			if err != nil || !fi.ModTime().Equal(old) {
				t.Errorf("%s/%s web/credentials was rewritten (mtime %v, %v)", region, account, fi.ModTime(), err)
			}
			for i := range 2 {
				key := fmt.Sprintf("%s/%s/file.replica[%d]", region, account, i)
				got := readFile(t, filepath.Join(f.instanceDir(region, account), "web", "replicas", fmt.Sprintf("%d.conf", i)))
				if got != plannedReplica[key] {
					t.Errorf("%s: applied %q, but the plan said %q", key, got, plannedReplica[key])
				}
			}
		}
	}

	head := statusHead(t, f.repo)
	if head.Hash == prevStatus.Hash {
		t.Fatal("apply made no status commit")
	}
	if want := fmt.Sprintf("stackd: web DeployStackSet %s SUCCEEDED (6/6)", rev[:7]); head.Message != want {
		t.Errorf("status commit message = %q, want %q", head.Message, want)
	}
	doc := head.stackSetStatus(t, "web")
	if op := doc.LastOperation; op == nil || op.Kind != reconciler.KindDeployStackSet || op.Status != state.OperationSucceeded || op.Revision != rev {
		t.Errorf("last_operation = %+v, want DeployStackSet SUCCEEDED at %s", op, rev)
	}
	if doc.Revision != rev {
		t.Errorf("status/web.json revision = %s, want %s", doc.Revision, rev)
	}
	checkStatusBranchHasNoSecret(t, f.repo)
}

// 3. Removing an account deletes its instances and their files.
func TestRemoveTarget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mustApply(t)
	replaceIn(t, f.repo, "web.hcl", `accounts = ["111111111111", "222222222222"]`, `accounts = ["111111111111"]`)
	rev := f.commit(t, "web: drop account 222222222222")

	res := f.mustApply(t)
	if want := fmt.Sprintf("web DeleteStackInstances %s SUCCEEDED (3/3 instances)", rev[:7]); !strings.Contains(res.stdout, want) {
		t.Errorf("apply printed %q, want %q", res.stdout, want)
	}
	for p, st := range snapshot(t, filepath.Join(f.targets, "222222222222")) {
		if !st.Mode.IsDir() {
			t.Errorf("222222222222/%s is still there", p)
		} else if strings.Count(p, "/") > 0 {
			t.Errorf("directory 222222222222/%s was not pruned", p) // only instance roots may stay
		}
	}
	checkDeployed(t, f, qsRegions, qsAccounts[:1], "nginx:1.25")

	doc := statusHead(t, f.repo).stackSetStatus(t, "web")
	if len(doc.Instances) != 3 {
		t.Errorf("status/web.json lists %d instances, want 3", len(doc.Instances))
	}
	for _, in := range doc.Instances {
		if in.Account != "111111111111" || in.Status != state.InstanceOperationComplete {
			t.Errorf("instance %s/%s %s, want only OPERATION_COMPLETE instances of 111111111111", in.Region, in.Account, in.Status)
		}
	}
	if op := doc.LastOperation; op == nil || op.Kind != reconciler.KindDeleteStackInstances || op.Status != state.OperationSucceeded ||
		op.Counts != (reconciler.OperationCounts{Total: 3, Succeeded: 3}) {
		t.Errorf("last_operation = %+v, want DeleteStackInstances SUCCEEDED 3/3", op)
	}
	if doc.Revision != rev {
		t.Errorf("status/web.json revision = %s, want %s", doc.Revision, rev)
	}
}

// 4. A commit that does not validate changes nothing and is reported on the
// status branch; a fixing commit clears the report.
func TestInvalidCommit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		old, new string // the edit to web.hcl
		mark     string // a string on the line the diagnostic must name
		summary  string
	}{
		{
			name: "syntax error",
			old:  `description = "frontend configuration"`, new: `description = = "frontend configuration"`,
			mark: "= =", summary: "Invalid expression",
		},
		{
			name: "unknown variable",
			old:  "replicas = 2\n", new: "replicas = 2\n    colour = \"blue\"\n",
			mark: "colour", summary: "Unknown variable",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.mustApply(t)
			deployed := runGit(t, f.repo, "rev-parse", "HEAD")
			goodHCL := readFile(t, filepath.Join(f.repo, "web.hcl"))
			targets := snapshot(t, f.targets)
			prev := statusHead(t, f.repo)
			stateBefore := mustStackd(t, "status", "--json", "--state-dir", f.state).stdout

			replaceIn(t, f.repo, "web.hcl", tc.old, tc.new)
			line := lineOf(t, f.repo, "web.hcl", tc.mark)
			bad := f.commit(t, "web: "+tc.name)

			res := f.apply(t)
			if res.code() != 1 {
				t.Fatalf("apply of an invalid commit: exit %d, want 1\n%s", res.code(), res)
			}
			checkJSONLogs(t, res.stderr)
			if want := fmt.Sprintf("web.hcl:%d,", line); !strings.Contains(res.stdout, want) {
				t.Errorf("apply printed:\n%s\nwant a diagnostic at %s", res.stdout, want)
			}
			if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
				t.Errorf("an invalid commit changed the targets (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(stateBefore, mustStackd(t, "status", "--json", "--state-dir", f.state).stdout); diff != "" {
				t.Errorf("an invalid commit changed the recorded stack sets (-before +after):\n%s", diff)
			}

			head := statusHead(t, f.repo)
			history, _, _ := readStatusHistory(f.repo)
			if len(history) < 2 || history[1].Hash != prev.Hash {
				t.Fatalf("want exactly one new status commit for the rejection")
			}
			if want := fmt.Sprintf("stackd: rejected %s (", bad[:7]); !strings.HasPrefix(head.Message, want) {
				t.Errorf("status commit message = %q, want it to start with %q", head.Message, want)
			}
			idx := head.index(t)
			if idx.Valid || idx.Revision != bad || idx.Deployed != deployed {
				t.Errorf("status/stackd.json: valid %v revision %s deployed %s, want false, %s, %s", idx.Valid, idx.Revision, idx.Deployed, bad, deployed)
			}
			found := false
			for _, d := range idx.Diagnostics {
				if d.File == "web.hcl" && d.Line == line && d.Summary == tc.summary && d.Severity == "error" {
					found = true
				}
			}
			if !found {
				t.Errorf("status/stackd.json diagnostics %+v, want an error %q at web.hcl:%d", idx.Diagnostics, tc.summary, line)
			}
			if got, want := string(head.Files["status/web.json"]), string(prev.Files["status/web.json"]); got != want {
				t.Errorf("status/web.json changed on a rejected commit:\n%s", cmp.Diff(want, got))
			}
			if doc := head.stackSetStatus(t, "web"); doc.Revision != deployed {
				t.Errorf("status/web.json revision = %s, want the last good %s", doc.Revision, deployed)
			}

			// The same rejected head again: nothing new.
			if res := f.apply(t); res.code() != 1 || statusHead(t, f.repo).Hash != head.Hash {
				t.Errorf("second apply of the rejected head: exit %d, status moved %v\n%s", res.code(), statusHead(t, f.repo).Hash != head.Hash, res)
			}

			// A fixing commit.
			if err := os.WriteFile(filepath.Join(f.repo, "web.hcl"), []byte(goodHCL), 0o644); err != nil {
				t.Fatal(err)
			}
			fix := f.commit(t, "web: fix "+tc.name)
			res = f.mustApply(t)
			if want := fmt.Sprintf("Revision %s: no changes.", fix[:7]); !strings.Contains(res.stdout, want) {
				t.Errorf("apply of the fix printed %q, want %q", res.stdout, want)
			}
			idx = statusHead(t, f.repo).index(t)
			if !idx.Valid || idx.Revision != fix || idx.Deployed != fix || len(idx.Diagnostics) != 0 {
				t.Errorf("status/stackd.json after the fix = %+v, want valid at %s", idx, fix)
			}
			if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
				t.Errorf("the fixing commit (same definitions as before) changed the targets:\n%s", diff)
			}
		})
	}
}

// 5. A restart with the same state directory repeats nothing; a commit that
// does not touch the stack set makes no operation and no status commit.
func TestRestartSameStateDir(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mustApply(t)
	head := runGit(t, f.repo, "rev-parse", "HEAD")
	status := statusHead(t, f.repo)
	targets := snapshot(t, f.targets)

	unchanged := func(step string) {
		t.Helper()
		if got := statusHead(t, f.repo); got.Hash != status.Hash {
			t.Errorf("%s: new status commit %q", step, got.Message)
		}
		if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
			t.Errorf("%s changed the targets (-before +after):\n%s", step, diff)
		}
	}

	res := f.mustApply(t)
	if want := fmt.Sprintf("Revision %s already reconciled.", head[:7]); strings.TrimSpace(res.stdout) != want {
		t.Errorf("second apply printed %q, want %q", res.stdout, want)
	}
	unchanged("a second apply at the same head")

	if err := os.WriteFile(filepath.Join(f.repo, "README.md"), []byte("# Our stack sets\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := f.commit(t, "Add a README")
	res = f.mustApply(t)
	if want := fmt.Sprintf("Revision %s: no changes.", readme[:7]); strings.TrimSpace(res.stdout) != want {
		t.Errorf("apply of a README commit printed %q, want %q", res.stdout, want)
	}
	unchanged("a commit that only adds README.md")

	res = f.mustApply(t)
	if want := fmt.Sprintf("Revision %s already reconciled.", readme[:7]); strings.TrimSpace(res.stdout) != want {
		t.Errorf("third apply printed %q, want %q", res.stdout, want)
	}
	unchanged("a third apply")
}

// 6. A template that fails at apply time for one account, with failure
// tolerance 0 and SEQUENTIAL regions.
func TestInstanceFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	copyQuickstart(t, f.repo)
	replaceIn(t, f.repo, "web.hcl", "max_concurrent_count    = 2", "max_concurrent_count    = 1")
	replaceIn(t, f.repo, "web.hcl", "failure_tolerance_count = 1", "failure_tolerance_count = 0\n    region_order            = [\"eu-west-1\", \"us-east-1\", \"ap-south-1\"]")
	tmpl := filepath.Join(f.repo, "templates", "web", "main.hcl")
	src := readFile(t, tmpl) + `
# Fails in account 222222222222.
resource "command" "gate" {
  create = "test \"$STACKD_ACCOUNT\" != 222222222222"
  delete = "true"
}
`
	if err := os.WriteFile(tmpl, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, f.repo, "init", "-q")
	rev := f.commit(t, "web with a gate")

	res := f.apply(t)
	if res.code() != 1 {
		t.Fatalf("apply: exit %d, want 1\n%s", res.code(), res)
	}
	checkJSONLogs(t, res.stderr)

	doc := statusHead(t, f.repo).stackSetStatus(t, "web")
	want := map[string]string{
		"eu-west-1/111111111111":  string(state.InstanceOperationComplete),
		"eu-west-1/222222222222":  string(state.InstanceOperationFailed),
		"us-east-1/111111111111":  string(state.InstanceCancelComplete),
		"us-east-1/222222222222":  string(state.InstanceCancelComplete),
		"ap-south-1/111111111111": string(state.InstanceCancelComplete),
		"ap-south-1/222222222222": string(state.InstanceCancelComplete),
	}
	got := map[string]string{}
	for _, in := range doc.Instances {
		where := in.Region + "/" + in.Account
		got[where] = string(in.Status)
		if in.Status == state.InstanceOperationFailed && !strings.Contains(in.Reason, "exited with code 1") {
			t.Errorf("%s reason %q, want it to name the exit code", where, in.Reason)
		}
		if in.Status == state.InstanceCancelComplete && in.Reason == "" {
			t.Errorf("%s was cancelled without a reason", where)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instance statuses (-want +got):\n%s", diff)
	}
	if op := doc.LastOperation; op == nil || op.Status != state.OperationFailed || op.Revision != rev ||
		op.Counts != (reconciler.OperationCounts{Total: 6, Succeeded: 1, Failed: 1, Cancelled: 4}) {
		t.Errorf("last_operation = %+v, want FAILED with 1 succeeded, 1 failed, 4 cancelled", op)
	}
	if doc.Revision != "" {
		t.Errorf("status/web.json revision = %q, want none: no revision reached every instance", doc.Revision)
	}
	if _, err := os.Stat(filepath.Join(f.instanceDir("us-east-1", "111111111111"))); !os.IsNotExist(err) {
		t.Errorf("a cancelled instance has files: %v", err)
	}

	check := stackd(t, "state", "check", "--state-dir", f.state)
	if check.code() != 0 || !strings.Contains(check.stdout, "state is consistent") {
		t.Errorf("stackd state check: exit %d\n%s", check.code(), check)
	}
	st := mustStackd(t, "status", "--state-dir", f.state, "--json")
	if strings.Contains(st.stdout, string(state.InstanceOperationInProgress)) || strings.Contains(st.stdout, string(state.InstanceWaitInProgress)) {
		t.Errorf("an instance is left in progress:\n%s", st.stdout)
	}
}

// 7. A bare remote over file://: apply clones, deploys and pushes the
// status branch; a running daemon picks up the next pushed commit.
func TestRemoteRepository(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	remote := filepath.Join(dir, "remote.git")
	work := filepath.Join(dir, "work")
	runGit(t, dir, "init", "-q", "--bare", remote)
	url := "file://" + filepath.ToSlash(remote)
	runGit(t, dir, "clone", "-q", url, work)
	copyQuickstart(t, work)
	rev1 := commitAllIn(t, work, "Add the web stack set")
	runGit(t, work, "push", "-q", "origin", "main")

	f := &fixture{state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	flags := []string{"--repo", url, "--cache-dir", filepath.Join(dir, "cache"), "--state-dir", f.state,
		"--targets-root", f.targets, "--log-format", "json"}

	res := mustStackd(t, append([]string{"apply"}, flags...)...)
	checkJSONLogs(t, res.stderr)
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.25")
	head := statusHead(t, remote)
	if head.Hash == "" {
		t.Fatal("apply pushed no stackd/status to the remote")
	}
	if doc := head.stackSetStatus(t, "web"); doc.Revision != rev1 || len(doc.Instances) != 6 {
		t.Errorf("remote status/web.json: revision %s, %d instances; want %s, 6", doc.Revision, len(doc.Instances), rev1)
	}
	checkStatusBranchHasNoSecret(t, remote)

	d := startDaemon(t, append(flags, "--interval", "200ms", "--listen", "127.0.0.1:0")...)
	addr := d.addr(t)
	resp, err := httpClient.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz on %s: %v", addr, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /healthz: %s", resp.Status)
	}

	replaceIn(t, work, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev2 := commitAllIn(t, work, "web: nginx 1.26")
	runGit(t, work, "push", "-q", "origin", "main")

	var doc reconciler.StackSetStatus
	eventually(t, 20*time.Second, func() bool {
		history, ok, err := readStatusHistory(remote)
		if err != nil || !ok {
			return false
		}
		b := history[0].Files[reconciler.StatusPath("web")]
		return json.Unmarshal(b, &doc) == nil && doc.Revision == rev2
	}, "the remote's stackd/status never reached %s; daemon logs:\n%s", rev2, d.logs)
	if op := doc.LastOperation; op == nil || op.Kind != reconciler.KindDeployStackSet || op.Status != state.OperationSucceeded {
		t.Errorf("last_operation = %+v, want DeployStackSet SUCCEEDED", op)
	}
	// /readyz reports the pass once it has returned, just after its status push.
	eventually(t, 10*time.Second, func() bool {
		code, h, err := readyz(addr)
		return err == nil && code == 200 && h.Revision == rev2
	}, "GET /readyz never reported %s", rev2)
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v, want nil", err)
	}
	checkJSONLogs(t, d.logs.String())
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.26")
}

// 8. `stackd run` on a local repository sees a commit through fsnotify.
func TestRunReactsToLocalCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rev1 := runGit(t, f.repo, "rev-parse", "HEAD")
	// --interval 1h: only the file watch can make it notice the commit.
	d := startDaemon(t, f.flags("--interval", "1h", "--listen", "127.0.0.1:0")...)
	addr := d.addr(t)

	var h reconciler.Health
	eventually(t, 20*time.Second, func() bool {
		var code int
		code, h, _ = readyz(addr)
		return code == 200 && h.Revision == rev1
	}, "the daemon never became ready at %s; logs:\n%s", rev1, d.logs)

	// Prove the file watch is live before timing a commit: new branches make
	// the daemon run a pass (it reports it on /readyz) without deploying.
	first := h.LastAttempt
	var probed time.Time
	probes := 0
	eventually(t, 10*time.Second, func() bool {
		if time.Since(probed) > 300*time.Millisecond {
			probes++
			runGit(t, f.repo, "branch", fmt.Sprintf("probe-%d", probes))
			probed = time.Now()
		}
		_, h, err := readyz(addr)
		return err == nil && h.LastAttempt.After(first)
	}, "the daemon never reacted to a new branch; logs:\n%s", d.logs)
	before := statusHead(t, f.repo)

	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	rev2 := f.commit(t, "web: nginx 1.26")
	start := time.Now()
	var head statusCommit
	// Within a minute (the poll is an hour away): the latency is logged,
	// and measured by stackd bench, not asserted here.
	eventually(t, time.Minute, func() bool {
		history, ok, err := readStatusHistory(f.repo)
		if err != nil || !ok {
			return false
		}
		head = history[0]
		return strings.Contains(head.Message, rev2[:7])
	}, "no status commit for %s; logs:\n%s", rev2, d.logs)
	t.Logf("status commit for the new revision %s after the commit", time.Since(start).Round(time.Millisecond))

	if head.Hash == before.Hash {
		t.Fatal("no new status commit")
	}
	// One of its lines (the first operation's may share the commit when
	// its push had not gone yet).
	if want := fmt.Sprintf("stackd: web DeployStackSet %s SUCCEEDED (6/6)", rev2[:7]); operationLine(head.Message, "web", rev2) != want {
		t.Errorf("status commit message = %q, want a line %q", head.Message, want)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("stackd run returned %v, want nil", err)
	}
	checkJSONLogs(t, d.logs.String())
	checkNoSecret(t, "the daemon's logs", d.logs.String())
	checkDeployed(t, f, qsRegions, qsAccounts, "nginx:1.26")
	if st := runGit(t, f.repo, "status", "--porcelain"); st != "" {
		t.Errorf("git status --porcelain = %q, want a clean work tree", st)
	}
}

// 9. stackd validate.
func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		file     string // the file edited: web.hcl when empty
		old, new string // an edit to it; none when empty
		mark     string // marks the line the output must name
		wantCode int
		wantOut  string
	}{
		{name: "quickstart", wantCode: 0, wantOut: "is valid: 1 stack set, 6 instances."},
		{
			name: "syntax error", old: `description = "frontend configuration"`, new: `description = = "frontend configuration"`,
			mark: "= =", wantCode: 1, wantOut: "does not validate",
		},
		{
			name: "unknown variable", old: "replicas = 2\n", new: "replicas = 2\n    colour = \"blue\"\n",
			mark: "colour", wantCode: 1, wantOut: "does not validate",
		},
		{
			// Only evaluation at a target shows it: every instance is
			// planned, as a pull-request branch is.
			name: "attribute a resource does not have", file: qsTemplate, old: "config_sha256=${file.config.sha256}", new: "config_sha256=${file.config.sha257}",
			mark: "sha257", wantCode: 1, wantOut: "Unsupported attribute",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			copyQuickstart(t, dir)
			file := tc.file
			if file == "" {
				file = "web.hcl"
			}
			if tc.old != "" {
				replaceIn(t, dir, file, tc.old, tc.new)
			}
			res := stackd(t, "validate", dir)
			if res.code() != tc.wantCode || !strings.Contains(res.stdout, tc.wantOut) {
				t.Errorf("validate: exit %d, want %d and %q in the output\n%s", res.code(), tc.wantCode, tc.wantOut, res)
			}
			if tc.mark != "" {
				loc := fmt.Sprintf("%s:%d", file, lineOf(t, dir, file, tc.mark))
				if !strings.Contains(res.stdout, loc) {
					t.Errorf("validate printed:\n%s\nwant it to name %s", res.stdout, loc)
				}
			}
		})
	}
}

// 10. stackd demo.
func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := mustStackd(t, "demo", "--dir", dir)
	for _, want := range []string{
		"~ file.config",
		"Status commit",
		"stackd: web CreateStackInstances",
		"Rollout: canary in 3 batches (1, 2, 3), each health-checked, on failure rollback.",
		"sizes=[1,2,3]",
		"rollout batch passed its gate batch=3 batches=3",
		"web DeployStackSet",
		"1 of 6 instances will be updated", // values differ per instance (account, name): one group each
		"changesets/feature/more-replicas/web.md",
		"ROLLED_BACK (0/6 instances, 1 rolled back)",
		"Deployed images now: map[nginx:1.27:6]",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("demo output does not mention %q:\n%s", want, res.stdout)
		}
	}
	checkNoSecret(t, "the demo's output", res.stdout)

	// The status branch, newest first: the bad commit rolled back, the
	// pull request's change set, then the canary rollout, one commit per
	// batch, and the first deployment.
	history := readHistory(t, filepath.Join(dir, "repo"))
	var subjects []string
	for _, c := range history {
		subjects = append(subjects, strings.SplitN(c.Message, "\n", 2)[0])
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^stackd: web DeployStackSet [0-9a-f]{7} ROLLED_BACK \(0/6, 5 cancelled, 1 rolled back\)$`),
		regexp.MustCompile(`^stackd: plan feature/more-replicas`),
		regexp.MustCompile(`^stackd: web DeployStackSet [0-9a-f]{7} SUCCEEDED \(6/6\)$`),
		regexp.MustCompile(`^stackd: web DeployStackSet [0-9a-f]{7} RUNNING \(3/6\) batch 2/3$`),
		regexp.MustCompile(`^stackd: web DeployStackSet [0-9a-f]{7} RUNNING \(1/6\) batch 1/3$`),
		regexp.MustCompile(`^stackd: web CreateStackInstances [0-9a-f]{7} SUCCEEDED \(6/6\)$`),
	}
	if len(subjects) < len(want) {
		t.Fatalf("status history %q, want at least %d commits", subjects, len(want))
	}
	for i, re := range want {
		if !re.MatchString(subjects[i]) {
			t.Errorf("status commit %d is %q, want %s; history %q", i, subjects[i], re, subjects)
		}
	}
	if !strings.Contains(history[0].Message, "batch 1 of 3 failed its health check") {
		t.Errorf("the rollback's status commit does not say which batch failed and why:\n%s", history[0].Message)
	}
	// The demo shows the status commits it talks about.
	for _, i := range []int{0, 2} {
		if !strings.Contains(res.stdout, history[i].Hash[:7]) {
			t.Errorf("the demo does not show status commit %s (%s):\n%s", history[i].Hash[:7], subjects[i], res.stdout)
		}
	}
	// On disk: every instance runs the canary's good image again.
	for _, region := range []string{"eu-west-1", "us-east-1", "ap-south-1"} {
		for _, acct := range []string{"111111111111", "222222222222"} {
			b, err := os.ReadFile(filepath.Join(dir, "targets", acct, region, "web", "app.conf"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "image=nginx:1.27\n") || !strings.Contains(string(b), "replicas=3\n") {
				t.Errorf("%s/%s app.conf after the demo:\n%s", region, acct, b)
			}
		}
	}
}

// TestRejectionOutsideGitIsValidatedAgain: a revision rejected for a
// reason outside Git (here --allow-command=false) is validated again by
// the next process, which may have the flag right, rather than staying
// rejected until a new commit.
func TestRejectionOutsideGitIsValidatedAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for range 2 {
		res := stackd(t, append([]string{"apply"}, f.flags("--allow-command=false")...)...)
		if res.code() != 1 || !strings.Contains(res.stdout, "rejected") || !strings.Contains(res.stdout, "--allow-command") {
			t.Fatalf("apply with commands disabled: %s", res)
		}
	}
	res := stackd(t, append([]string{"apply"}, f.flags("--allow-command=true")...)...)
	if res.code() != 0 || strings.Contains(res.stdout, "rejected") || !strings.Contains(res.stdout, "web CreateStackInstances") {
		t.Fatalf("apply with commands allowed: %s", res)
	}
}

// TestFailedInstancesFailTheNextApply: stackd apply run again on a
// revision whose operation left instances failed exits 1 and says how
// they are retried, instead of "already reconciled" and 0.
func TestFailedInstancesFailTheNextApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mustApply(t)
	writeTree(t, f.repo, map[string]string{"templates/web/broken.hcl": `resource "command" "broken" {
  create = "exit 3"
  delete = "true"
}
`})
	head := f.commit(t, "a resource whose create fails everywhere")
	if res := f.apply(t); res.code() != 1 {
		t.Fatalf("first apply: %s", res)
	}
	res := f.apply(t)
	if res.code() != 1 || !strings.Contains(res.stdout, "Revision "+head[:7]+" already reconciled; its failed instances are retried by the next operation") ||
		!strings.Contains(res.stdout, "web DeployStackSet "+head[:7]) {
		t.Fatalf("second apply: %s", res)
	}
}

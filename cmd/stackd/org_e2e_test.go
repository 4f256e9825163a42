package main

// End-to-end test of SERVICE_MANAGED stack sets: an organization of nested
// OUs and 20 accounts in a real Git repository, OU filters, instance
// overrides, auto-deployment when OU membership changes, suspended accounts
// and an invalid override, driven by `stackd apply` commit after commit.

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// orgHCL is the organization: the management account sits in ou-root, one
// account of ou-prod-eu is suspended, ou-sandbox is outside the stack set.
const orgHCL = `organization {
  management_account = "000000000000"

  organizational_unit "ou-root" {
    accounts = ["000000000000", "100000000001"]

    organizational_unit "ou-prod" {
      accounts = ["200000000001", "200000000002", "200000000003", "200000000004"]

      organizational_unit "ou-prod-eu" {
        accounts = ["210000000001", "210000000002", "210000000003"]
        account "210000000004" {
          suspended = true
        }
      }

      organizational_unit "ou-prod-us" {
        accounts = ["220000000001", "220000000002", "220000000003"]
      }
    }

    organizational_unit "ou-dev" {
      accounts = ["300000000001", "300000000002", "300000000003", "300000000004"]
    }
  }

  organizational_unit "ou-sandbox" {
    accounts = ["400000000001", "400000000002", "400000000003"]
  }
}
`

// baselineHCL targets every account under ou-root but 300000000003.
const baselineHCL = `stack_set "baseline" {
  description      = "account baseline"
  template         = "./templates/baseline"
  permission_model = "SERVICE_MANAGED"

  vars = {
    tier      = "standard"
    retention = 7
  }

  deployment_targets {
    regions              = ["eu-west-1", "us-east-1", "ap-south-1"]
    organizational_units = ["ou-root"]
    account_filter_type  = "DIFFERENCE"
    accounts             = ["300000000003"]
  }

  # The EU production accounts get the gold tier in eu-west-1.
  instance_override {
    regions              = ["eu-west-1"]
    organizational_units = ["ou-prod-eu"]
    vars                 = { tier = "gold" }
    use_stack_set_vars   = ["retention"]
  }

  # One development account keeps its logs for a day.
  instance_override {
    accounts = ["300000000001"]
    vars     = { tier = "dev", retention = 1 }
  }

  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 4
    failure_tolerance_count = 3
  }
}
`

const baselineTemplate = `variable "tier" {
  type = string
}

variable "retention" {
  type = number
}

# A template default: overrides never touch it.
variable "owner" {
  type    = string
  default = "platform"
}

resource "file" "settings" {
  path    = "baseline/settings.conf"
  content = "ou=${target.ou}\nregion=${target.region}\naccount=${target.account}\ntier=${var.tier}\nretention=${var.retention}\nowner=${var.owner}\n"
}
`

var orgRegions = []string{"eu-west-1", "us-east-1", "ap-south-1"}

// orgModel is what the test expects deployed.
type orgModel struct {
	ouOf      map[string]string // target account -> its direct OU
	suspended map[string]bool
	euTier    string // the first override's tier
}

func newOrgModel() *orgModel {
	m := &orgModel{ouOf: map[string]string{}, suspended: map[string]bool{"210000000004": true}, euTier: "gold"}
	for ou, accts := range map[string][]string{
		"ou-root":    {"100000000001"},
		"ou-prod":    {"200000000001", "200000000002", "200000000003", "200000000004"},
		"ou-prod-eu": {"210000000001", "210000000002", "210000000003", "210000000004"},
		"ou-prod-us": {"220000000001", "220000000002", "220000000003"},
		"ou-dev":     {"300000000001", "300000000002", "300000000004"}, // 300000000003 excluded by DIFFERENCE
	} {
		for _, a := range accts {
			m.ouOf[a] = ou
		}
	}
	return m
}

func (m *orgModel) conf(region, account string) string {
	tier, retention := "standard", 7
	switch {
	case region == "eu-west-1" && m.ouOf[account] == "ou-prod-eu":
		tier = m.euTier
	case account == "300000000001":
		tier, retention = "dev", 1
	}
	return fmt.Sprintf("ou=%s\nregion=%s\naccount=%s\ntier=%s\nretention=%d\nowner=platform\n", m.ouOf[account], region, account, tier, retention)
}

// files is every deployed file the model expects, relative to the targets root.
func (m *orgModel) files() map[string]string {
	out := map[string]string{}
	for a := range m.ouOf {
		if m.suspended[a] {
			continue
		}
		for _, r := range orgRegions {
			out[a+"/"+r+"/baseline/settings.conf"] = m.conf(r, a)
		}
	}
	return out
}

// statuses is every instance the model expects recorded.
func (m *orgModel) statuses() map[string]string {
	out := map[string]string{}
	for a := range m.ouOf {
		for _, r := range orgRegions {
			s := state.InstanceOperationComplete
			if m.suspended[a] {
				s = state.InstanceSkippedSuspendedAccount
			}
			out[r+"/"+a] = string(s)
		}
	}
	return out
}

// targetFiles reads every regular file under root (relative slash paths).
func targetFiles(t *testing.T, root string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	for p, st := range snapshot(t, root) {
		if !st.Mode.IsDir() {
			out[p] = st
		}
	}
	return out
}

// ageFiles sets every file's modification time far in the past, so that a
// rewrite shows even within the filesystem's timestamp granularity.
func ageFiles(t *testing.T, root string) {
	t.Helper()
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkFiles compares the deployed files with the model; files not in
// changed must be exactly as in before (content and mtime).
func checkFiles(t *testing.T, step string, f *fixture, m *orgModel, before map[string]fileState, changed ...string) {
	t.Helper()
	after := targetFiles(t, f.targets)
	got := map[string]string{}
	for p, st := range after {
		got[p] = st.Content
	}
	if diff := cmp.Diff(m.files(), got); diff != "" {
		t.Errorf("%s: deployed files (-want +got):\n%s", step, diff)
	}
	if before == nil {
		return
	}
	for p, st := range after {
		if slices.Contains(changed, p) {
			if b, ok := before[p]; ok && b.ModTime.Equal(st.ModTime) {
				t.Errorf("%s: %s was not rewritten", step, p)
			}
			continue
		}
		if b, ok := before[p]; ok && !b.ModTime.Equal(st.ModTime) {
			t.Errorf("%s: %s was rewritten (mtime %v, was %v) although its instance did not change", step, p, st.ModTime, b.ModTime)
		}
	}
}

// instanceFiles lists the settings files of an account's instances.
func instanceFiles(accounts ...string) []string {
	var out []string
	for _, a := range accounts {
		for _, r := range orgRegions {
			out = append(out, a+"/"+r+"/baseline/settings.conf")
		}
	}
	return out
}

// checkStatus compares status/baseline.json with the model and returns its
// last operation.
func checkStatus(t *testing.T, step string, f *fixture, m *orgModel, rev string) *reconciler.OperationStatus {
	t.Helper()
	doc := statusHead(t, f.repo).stackSetStatus(t, "baseline")
	got := map[string]string{}
	for _, in := range doc.Instances {
		got[in.Region+"/"+in.Account] = string(in.Status)
		if in.Status == state.InstanceSkippedSuspendedAccount && !strings.Contains(in.Reason, "suspended") {
			t.Errorf("%s: %s/%s skipped with reason %q, want it to say the account is suspended", step, in.Region, in.Account, in.Reason)
		}
	}
	if diff := cmp.Diff(m.statuses(), got); diff != "" {
		t.Errorf("%s: status/baseline.json instances (-want +got):\n%s", step, diff)
	}
	if doc.LastOperation == nil || doc.LastOperation.Revision != rev {
		t.Fatalf("%s: status/baseline.json last_operation %+v, want one at %s", step, doc.LastOperation, rev)
	}
	return doc.LastOperation
}

// lastOperation reads the stack set's last operation from the state, with
// its per-instance results.
func lastOperation(t *testing.T, f *fixture) state.Operation {
	t.Helper()
	st, err := state.Open(f.state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ss, err := st.StackSetByName("baseline")
	if err != nil {
		t.Fatal(err)
	}
	op, err := st.Operation(ss.LastOperation)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// checkResults checks that exactly the instances of want were applied
// (OPERATION_COMPLETE) by the operation; any other result may only be a
// suspended account's SKIPPED_SUSPENDED_ACCOUNT.
func checkResults(t *testing.T, step string, op state.Operation, m *orgModel, action string, want ...string) {
	t.Helper()
	var applied []string
	for _, r := range op.Results {
		where := r.Region + "/" + r.Account
		switch {
		case r.Status == state.InstanceOperationComplete:
			applied = append(applied, where)
			if string(r.Action) != action {
				t.Errorf("%s: %s was applied with action %q, want %q", step, where, r.Action, action)
			}
		case r.Status == state.InstanceSkippedSuspendedAccount && m.suspended[r.Account]:
		default:
			t.Errorf("%s: unexpected result %s %s %s", step, where, r.Status, r.Reason)
		}
	}
	slices.Sort(applied)
	slices.Sort(want)
	if !slices.Equal(applied, want) {
		t.Errorf("%s: the operation applied %v, want exactly %v", step, applied, want)
	}
}

func targetsOf(accounts ...string) []string {
	var out []string
	for _, a := range accounts {
		for _, r := range orgRegions {
			out = append(out, r+"/"+a)
		}
	}
	return out
}

func TestOrganizationStackSet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(f.repo, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("organization.hcl", orgHCL)
	write("baseline.hcl", baselineHCL)
	write("templates/baseline/main.hcl", baselineTemplate)
	runGit(t, f.repo, "init", "-q")
	rev := f.commit(t, "baseline over ou-root")
	m := newOrgModel()

	// 1. The first apply: every account under ou-root but the management
	// account and the DIFFERENCE-excluded one; the suspended one skipped.
	res := f.mustApply(t)
	checkJSONLogs(t, res.stderr)
	if want := fmt.Sprintf("baseline CreateStackInstances %s SUCCEEDED (42/45 instances)", rev[:7]); !strings.Contains(res.stdout, want) {
		t.Errorf("apply printed:\n%s\nwant %q", res.stdout, want)
	}
	checkFiles(t, "first apply", f, m, nil)
	for _, a := range []string{"000000000000", "300000000003", "400000000001", "400000000002", "400000000003", "210000000004"} {
		if _, err := os.Stat(filepath.Join(f.targets, a)); !os.IsNotExist(err) {
			t.Errorf("first apply: account %s has a directory under the targets root (%v); it must get nothing", a, err)
		}
	}
	lo := checkStatus(t, "first apply", f, m, rev)
	if lo.Kind != reconciler.KindCreateStackInstances || lo.Status != state.OperationSucceeded ||
		lo.Counts != (reconciler.OperationCounts{Total: 45, Succeeded: 42}) {
		t.Errorf("first apply: last_operation %+v, want CreateStackInstances SUCCEEDED 42 of 45", lo)
	}

	// 2. Auto-deployment: an account joins ou-prod-us; only it is deployed.
	ageFiles(t, f.targets)
	before := targetFiles(t, f.targets)
	replaceIn(t, f.repo, "organization.hcl", `"220000000003"]`, `"220000000003", "220000000004"]`)
	rev = f.commit(t, "220000000004 joins ou-prod-us")
	m.ouOf["220000000004"] = "ou-prod-us"
	res = f.mustApply(t)
	if want := fmt.Sprintf("baseline CreateStackInstances %s SUCCEEDED (3/", rev[:7]); !strings.Contains(res.stdout, want) {
		t.Errorf("apply after an account joined printed:\n%s\nwant %q", res.stdout, want)
	}
	checkFiles(t, "account joined", f, m, before, instanceFiles("220000000004")...)
	if lo := checkStatus(t, "account joined", f, m, rev); lo.Kind != reconciler.KindCreateStackInstances || lo.Status != state.OperationSucceeded {
		t.Errorf("account joined: last_operation %+v, want CreateStackInstances SUCCEEDED", lo)
	}
	checkResults(t, "account joined", lastOperation(t, f), m, "create", targetsOf("220000000004")...)

	// 3. An account leaves ou-prod: its instances are deleted.
	ageFiles(t, f.targets)
	before = targetFiles(t, f.targets)
	replaceIn(t, f.repo, "organization.hcl", `"200000000003", "200000000004"]`, `"200000000003"]`)
	rev = f.commit(t, "200000000004 leaves the organization")
	delete(m.ouOf, "200000000004")
	res = f.mustApply(t)
	if want := fmt.Sprintf("baseline DeleteStackInstances %s SUCCEEDED (3/", rev[:7]); !strings.Contains(res.stdout, want) {
		t.Errorf("apply after an account left printed:\n%s\nwant %q", res.stdout, want)
	}
	checkFiles(t, "account left", f, m, before)
	if lo := checkStatus(t, "account left", f, m, rev); lo.Kind != reconciler.KindDeleteStackInstances || lo.Status != state.OperationSucceeded {
		t.Errorf("account left: last_operation %+v, want DeleteStackInstances SUCCEEDED", lo)
	}
	checkResults(t, "account left", lastOperation(t, f), m, "delete", targetsOf("200000000004")...)

	// 4. Only an override changes: UpdateStackInstances on exactly the
	// instances it matches (ou-prod-eu in eu-west-1).
	ageFiles(t, f.targets)
	before = targetFiles(t, f.targets)
	replaceIn(t, f.repo, "baseline.hcl", `vars                 = { tier = "gold" }`, `vars                 = { tier = "platinum" }`)
	rev = f.commit(t, "ou-prod-eu: platinum in eu-west-1")
	m.euTier = "platinum"
	res = f.mustApply(t)
	if want := fmt.Sprintf("baseline UpdateStackInstances %s SUCCEEDED (3/", rev[:7]); !strings.Contains(res.stdout, want) {
		t.Errorf("apply of an override change printed:\n%s\nwant %q", res.stdout, want)
	}
	matched := []string{"210000000001/eu-west-1/baseline/settings.conf", "210000000002/eu-west-1/baseline/settings.conf", "210000000003/eu-west-1/baseline/settings.conf"}
	checkFiles(t, "override changed", f, m, before, matched...)
	if lo := checkStatus(t, "override changed", f, m, rev); lo.Kind != reconciler.KindUpdateStackInstances || lo.Status != state.OperationSucceeded {
		t.Errorf("override changed: last_operation %+v, want UpdateStackInstances SUCCEEDED", lo)
	}
	checkResults(t, "override changed", lastOperation(t, f), m, "update", "eu-west-1/210000000001", "eu-west-1/210000000002", "eu-west-1/210000000003")

	// 5. The suspended account is reinstated: it is deployed, with the
	// override of its OU in eu-west-1.
	ageFiles(t, f.targets)
	before = targetFiles(t, f.targets)
	replaceIn(t, f.repo, "organization.hcl", "suspended = true", "suspended = false")
	rev = f.commit(t, "210000000004 reinstated")
	delete(m.suspended, "210000000004")
	res = f.mustApply(t)
	if want := fmt.Sprintf("%s SUCCEEDED (3/3 instances)", rev[:7]); !strings.Contains(res.stdout, want) {
		t.Errorf("apply after the account was reinstated printed:\n%s\nwant %q", res.stdout, want)
	}
	checkFiles(t, "account reinstated", f, m, before, instanceFiles("210000000004")...)
	if got := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "210000000004"), "baseline", "settings.conf")); !strings.Contains(got, "tier=platinum\n") {
		t.Errorf("reinstated 210000000004 in eu-west-1 has %q, want the ou-prod-eu override (tier=platinum)", got)
	}
	if lo := checkStatus(t, "account reinstated", f, m, rev); lo.Status != state.OperationSucceeded || lo.Counts != (reconciler.OperationCounts{Total: 3, Succeeded: 3}) {
		t.Errorf("account reinstated: last_operation %+v, want SUCCEEDED 3/3", lo)
	}
	op := lastOperation(t, f)
	var applied []string
	for _, r := range op.Results {
		if r.Status == state.InstanceOperationComplete {
			applied = append(applied, r.Region+"/"+r.Account)
		}
	}
	slices.Sort(applied)
	if want := slices.Sorted(slices.Values(targetsOf("210000000004"))); !slices.Equal(applied, want) {
		t.Errorf("account reinstated: the operation applied %v, want %v", applied, want)
	}

	// 6. An override that does not name every variable (replace semantics)
	// is rejected with its file:line, and nothing of the commit is applied,
	// not even the valid change made with it.
	targets := snapshot(t, f.targets)
	prev := statusHead(t, f.repo)
	deployed := rev
	stateBefore := mustStackd(t, "status", "--json", "--state-dir", f.state).stdout
	replaceIn(t, f.repo, "baseline.hcl", `tier      = "standard"`, `tier      = "standard-2"`)
	replaceIn(t, f.repo, "baseline.hcl", "  operation_preferences {", `  instance_override { # incomplete
    accounts = ["100000000001"]
    vars     = { tier = "bronze" }
  }

  operation_preferences {`)
	line := lineOf(t, f.repo, "baseline.hcl", "# incomplete")
	bad := f.commit(t, "an override without retention")
	res = f.apply(t)
	if res.code() != 1 {
		t.Fatalf("apply of an incomplete override: exit %d, want 1\n%s", res.code(), res)
	}
	if want := fmt.Sprintf("baseline.hcl:%d,", line); !strings.Contains(res.stdout, want) || !strings.Contains(res.stdout, "retention") {
		t.Errorf("apply printed:\n%s\nwant a diagnostic at %s naming the missing variable retention", res.stdout, want)
	}
	if diff := cmp.Diff(targets, snapshot(t, f.targets)); diff != "" {
		t.Errorf("a rejected commit changed the targets (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(stateBefore, mustStackd(t, "status", "--json", "--state-dir", f.state).stdout); diff != "" {
		t.Errorf("a rejected commit changed the state (-before +after):\n%s", diff)
	}
	head := statusHead(t, f.repo)
	if string(head.Files[reconciler.StatusPath("baseline")]) != string(prev.Files[reconciler.StatusPath("baseline")]) {
		t.Errorf("status/baseline.json changed on a rejected commit")
	}
	idx := head.index(t)
	if idx.Valid || idx.Revision != bad || idx.Deployed != deployed {
		t.Errorf("status/stackd.json: valid %v revision %s deployed %s, want false, %s, %s", idx.Valid, idx.Revision, idx.Deployed, bad, deployed)
	}
	found := false
	for _, d := range idx.Diagnostics {
		if d.File == "baseline.hcl" && d.Line == line && d.Severity == "error" && strings.Contains(d.Detail, "retention") {
			found = true
		}
	}
	if !found {
		t.Errorf("status/stackd.json diagnostics %+v, want an error at baseline.hcl:%d naming retention", idx.Diagnostics, line)
	}
}

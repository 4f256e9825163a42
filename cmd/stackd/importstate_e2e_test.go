package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stackd/stackd/internal/tfstate"
	"github.com/stackd/stackd/state"
)

// The workspace imported here was deployed once by Terraform 1.11.4 from
// internal/tfstate/testdata/terraform-1.11 (terraform_data with count,
// for_each, a sensitive input and a module call); its state is the golden
// file beside it.
const importGolden = "../../internal/tfstate/testdata/terraform-1.11"

// importFixture is a repository whose stack set "ws" deploys the golden
// workspace's configuration, verbatim, to the given accounts of eu-west-1.
func importFixture(t *testing.T, accounts string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "stackd", "state"), targets: filepath.Join(dir, "targets")}
	files := map[string]string{
		"ws.hcl": `stack_set "ws" {
  template = "./templates/ws"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = [` + accounts + `]
  }
}
`,
	}
	for _, name := range []string{"main.tf", "modules/child/main.tf"} {
		files["templates/ws/"+name] = readFile(t, filepath.Join(importGolden, name))
	}
	writeTree(t, f.repo, files)
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "The workspace's configuration as a stack set")
	return f
}

func goldenState(t *testing.T) *tfstate.State {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(importGolden, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := tfstate.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// recordedIDs are the physical ids of an instance's resources by address.
func recordedIDs(t *testing.T, f *fixture, account string) map[string]string {
	t.Helper()
	st, err := state.Open(f.state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ss, err := st.StackSetByName("ws")
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Resources(ss.ID, "eu-west-1", account)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range res {
		out[r.Address] = r.PhysicalID
	}
	return out
}

// TestImportStateThenPlanIsNoOp: a Terraform workspace imported into the
// instance of a stack set whose template is the workspace's configuration
// plans no change, and the apply after it keeps every object (same ids);
// the sensitive input never shows.
func TestImportStateThenPlanIsNoOp(t *testing.T) {
	t.Parallel()
	f := importFixture(t, `"111111111111"`)
	golden := filepath.Join(importGolden, "terraform.tfstate")
	res := mustStackd(t, append([]string{"import-state", "ws", "--target", "eu-west-1/111111111111", golden}, f.flags()...)...)
	if !strings.Contains(res.stdout, "Imported 7 resources") || !strings.Contains(res.stdout, "next plan of the instance: no changes") {
		t.Fatalf("import-state said:\n%s", res)
	}
	plan := stackd(t, append([]string{"plan", "--detailed-exitcode", "-o", "json"}, f.flags()...)...)
	if plan.code() != 0 {
		t.Fatalf("plan after the import: exit %d, want 0 (no changes):\n%s", plan.code(), plan)
	}
	checkNoSecret(t, "plan", plan.stdout+plan.stderr+res.stdout+res.stderr)
	if strings.Contains(plan.stdout+res.stdout, "hunter2") {
		t.Fatalf("the sensitive input shows:\n%s\n%s", res, plan)
	}
	want := map[string]string{}
	for _, o := range goldenState(t).Objects {
		var attrs struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(o.Attributes, &attrs); err != nil {
			t.Fatal(err)
		}
		want[o.Address] = attrs.ID
	}
	f.mustApply(t)
	got := recordedIDs(t, f, "111111111111")
	for addr, id := range want {
		if got[addr] != id {
			t.Errorf("%s: id %q after the apply, want %q (the object Terraform made)", addr, got[addr], id)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d resources, want %d: %v", len(got), len(want), got)
	}
	again := stackd(t, append([]string{"plan", "--detailed-exitcode"}, f.flags()...)...)
	if again.code() != 0 {
		t.Fatalf("plan after the apply: exit %d, want 0:\n%s", again.code(), again)
	}
}

// TestImportStateDirectoryWithMapping: --dir and --map import one state
// per target, the mapping in HCL or JSON.
func TestImportStateDirectoryWithMapping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, mapping string }{
		{"hcl", "targets.hcl", `targets = {
  "eu-west-1/111111111111" = "a.tfstate"
  "eu-west-1/222222222222" = "sub/b.tfstate"
}
`},
		{"json", "targets.json", `{"targets": {"eu-west-1/111111111111": "a.tfstate", "eu-west-1/222222222222": "sub/b.tfstate"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := importFixture(t, `"111111111111", "222222222222"`)
			dir := t.TempDir()
			golden := readFile(t, filepath.Join(importGolden, "terraform.tfstate"))
			writeTree(t, dir, map[string]string{"a.tfstate": golden, "sub/b.tfstate": golden, tc.file: tc.mapping})
			res := mustStackd(t, append([]string{"import-state", "ws", "--dir", dir, "--map", filepath.Join(dir, tc.file)}, f.flags()...)...)
			if n := strings.Count(res.stdout, "Imported 7 resources"); n != 2 {
				t.Fatalf("got %d instances imported, want 2:\n%s", n, res)
			}
			plan := stackd(t, append([]string{"plan", "--detailed-exitcode"}, f.flags()...)...)
			if plan.code() != 0 {
				t.Fatalf("plan after the import: exit %d, want 0:\n%s", plan.code(), plan)
			}
		})
	}
}

// TestImportStatePlansWhatTheTemplateChanges: an object whose configured
// argument differs from the template imports, and the plan updates it,
// as Terraform's plan of that configuration would.
func TestImportStatePlansWhatTheTemplateChanges(t *testing.T) {
	t.Parallel()
	f := importFixture(t, `"111111111111"`)
	replaceIn(t, f.repo, "templates/ws/main.tf", `input = "n-${count.index}"`, `input = "m-${count.index}"`)
	f.commit(t, "Change an input")
	res := mustStackd(t, append([]string{"import-state", "ws", "--target", "eu-west-1/111111111111", filepath.Join(importGolden, "terraform.tfstate")}, f.flags()...)...)
	if !strings.Contains(res.stdout, "0 to add, 2 to change, 0 to replace, 0 to destroy") {
		t.Fatalf("import-state said:\n%s", res)
	}
	plan := stackd(t, append([]string{"plan", "--detailed-exitcode"}, f.flags()...)...)
	if plan.code() != 2 || !strings.Contains(plan.stdout, "terraform_data.counted[1]") || strings.Contains(plan.stdout, "to add, 0 to change") {
		t.Fatalf("plan: exit %d, want 2 with updates of terraform_data.counted:\n%s", plan.code(), plan)
	}
}

// TestImportStateRefuses: what cannot be taken over as it is is refused
// with a diagnostic, and nothing is written.
func TestImportStateRefuses(t *testing.T) {
	t.Parallel()
	golden := readFile(t, filepath.Join(importGolden, "terraform.tfstate"))
	for _, tc := range []struct {
		name  string
		state string
		edit  func(t *testing.T, f *fixture)
		says  []string
	}{
		{name: "address not in the template", state: golden, edit: func(t *testing.T, f *fixture) {
			replaceIn(t, f.repo, "templates/ws/main.tf", `resource "terraform_data" "counted" {
  count = 2
  input = "n-${count.index}"
}`, "")
			f.commit(t, "Drop counted")
		}, says: []string{"Resources not in the template", "terraform_data.counted[0], terraform_data.counted[1]", "terraform state rm", "ws.hcl:1"}},
		{name: "fewer count instances", state: golden, edit: func(t *testing.T, f *fixture) {
			replaceIn(t, f.repo, "templates/ws/main.tf", "count = 2", "count = 1")
			f.commit(t, "One counted")
		}, says: []string{"terraform_data.counted[1]"}},
		{name: "format version 3", state: `{"version": 3, "terraform_version": "0.11.14", "serial": 1, "modules": []}`, says: []string{"format version 3", "Terraform 0.12 or newer"}},
		{name: "OpenTofu encrypted", state: `{"serial": 2, "lineage": "l", "meta": {"key_provider.pbkdf2.main": "e30="}, "encrypted_data": "ZW5jcnlwdGVk", "encryption_version": "v0"}`, says: []string{"encrypted", "tofu state pull"}},
		{name: "tampered", state: strings.Replace(golden, `"attributes": {`, `"attributes": "`, 1), says: []string{"not a state file", "invalid JSON"}},
		{name: "type changed", state: strings.Replace(golden, `"type": "terraform_data",
      "name": "single"`, `"type": "terraform_other",
      "name": "single"`, 1), says: []string{"terraform_other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := importFixture(t, `"111111111111"`)
			if tc.edit != nil {
				tc.edit(t, f)
			}
			file := filepath.Join(t.TempDir(), "terraform.tfstate")
			writeTree(t, filepath.Dir(file), map[string]string{"terraform.tfstate": tc.state})
			res := stackd(t, append([]string{"import-state", "ws", "--target", "eu-west-1/111111111111", file}, f.flags()...)...)
			if res.code() != 1 {
				t.Fatalf("exit %d, want 1:\n%s", res.code(), res)
			}
			msg := res.stderr + res.err.Error()
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("the refusal does not say %q:\n%s", s, res)
				}
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("the refusal quotes a sensitive value:\n%s", res)
			}
			if _, err := os.Stat(f.state); err == nil {
				st, err := state.Open(f.state)
				if err != nil {
					t.Fatal(err)
				}
				sets, err := st.ListStackSets()
				st.Close()
				if err != nil || len(sets) != 0 {
					t.Errorf("the refused import wrote stack sets %v (%v)", sets, err)
				}
			}
		})
	}
}

// TestImportStateKeepsManagedInstances: an instance stackd already
// manages is not overwritten without --force, nor while a daemon holds
// the state; --force replaces its resources with the state's.
func TestImportStateKeepsManagedInstances(t *testing.T) {
	t.Parallel()
	f := importFixture(t, `"111111111111"`)
	f.mustApply(t)
	created := recordedIDs(t, f, "111111111111")
	golden := filepath.Join(importGolden, "terraform.tfstate")
	args := append([]string{"import-state", "ws", "--target", "eu-west-1/111111111111", golden}, f.flags()...)
	res := stackd(t, args...)
	if res.code() != 1 || !strings.Contains(res.stderr, "already has 7 resource(s)") || !strings.Contains(res.stderr, "--force") {
		t.Fatalf("import over a managed instance: want a refusal naming --force, got:\n%s", res)
	}
	if d := recordedIDs(t, f, "111111111111"); len(d) != len(created) || d["terraform_data.single"] != created["terraform_data.single"] {
		t.Fatalf("the refused import changed the instance: %v, was %v", d, created)
	}
	held, err := state.Open(f.state)
	if err != nil {
		t.Fatal(err)
	}
	res = stackd(t, append(args, "--force")...)
	held.Close()
	if res.code() != 1 || !strings.Contains(res.err.Error(), "stop the daemon") {
		t.Fatalf("import while the state is held: want a refusal, got:\n%s", res)
	}
	mustStackd(t, append(args, "--force")...)
	st := goldenState(t)
	var single struct {
		ID string `json:"id"`
	}
	for _, o := range st.Objects {
		if o.Address == "terraform_data.single" {
			if err := json.Unmarshal(o.Attributes, &single); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := recordedIDs(t, f, "111111111111")["terraform_data.single"]; got != single.ID {
		t.Fatalf("after --force: terraform_data.single is %q, want the state's %q", got, single.ID)
	}
}

// TestImportStateTainted: an object Terraform marked tainted is imported
// tainted, and the plan replaces it as Terraform's next plan would.
func TestImportStateTainted(t *testing.T) {
	t.Parallel()
	f := importFixture(t, `"111111111111"`)
	golden := readFile(t, filepath.Join(importGolden, "terraform.tfstate"))
	at := strings.Index(golden, `"name": "single"`)
	if at < 0 {
		t.Fatal("the golden state has no terraform_data.single")
	}
	tainted := golden[:at] + strings.Replace(golden[at:], `"schema_version": 0,`, `"status": "tainted", "schema_version": 0,`, 1)
	file := filepath.Join(t.TempDir(), "terraform.tfstate")
	writeTree(t, filepath.Dir(file), map[string]string{"terraform.tfstate": tainted})
	res := mustStackd(t, append([]string{"import-state", "ws", "--target", "eu-west-1/111111111111", file}, f.flags()...)...)
	if !strings.Contains(res.stdout, "1 to replace") {
		t.Fatalf("import-state said:\n%s", res)
	}
	plan := stackd(t, append([]string{"plan", "--detailed-exitcode"}, f.flags()...)...)
	if plan.code() != 2 || !strings.Contains(plan.stdout, "terraform_data.single") || !strings.Contains(plan.stdout, "tainted") {
		t.Fatalf("plan: exit %d, want 2 with the tainted terraform_data.single replaced:\n%s", plan.code(), plan)
	}
}

// TestImportStateTerraformProvider: a workspace of a Terraform provider
// plugin (p6, built from source; its state written once by Terraform
// 1.11.4 from internal/tfstate/testdata/p6) imports with the provider's
// schema version, configuration and sensitive attributes; the plan after
// it is a no-op and a change of one argument updates that object only.
func TestImportStateTerraformProvider(t *testing.T) {
	t.Parallel()
	plugins := providerPluginDir(t)
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "stackd", "state"), targets: filepath.Join(dir, "targets")}
	world := filepath.Join(dir, "world")
	if err := os.MkdirAll(world, 0o755); err != nil {
		t.Fatal(err)
	}
	golden := "../../internal/tfstate/testdata/p6"
	writeTree(t, f.repo, map[string]string{
		"things.hcl": `stack_set "things" {
  template = "./templates/things"
  vars     = { world = "` + world + `" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`,
		"templates/things/main.tf": readFile(t, filepath.Join(golden, "main.tf")),
	})
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "The p6 workspace as a stack set")
	flags := f.flags("--plugin-dir", plugins)
	res := mustStackd(t, append([]string{"import-state", "things", "--target", "eu-west-1/111111111111", filepath.Join(golden, "terraform.tfstate")}, flags...)...)
	if !strings.Contains(res.stdout, "Imported 2 resources") || !strings.Contains(res.stdout, "no changes") {
		t.Fatalf("import-state said:\n%s", res)
	}
	plan := stackd(t, append([]string{"plan", "--detailed-exitcode", "-o", "json"}, flags...)...)
	if plan.code() != 0 {
		t.Fatalf("plan after the import: exit %d, want 0:\n%s", plan.code(), plan)
	}
	for _, secret := range []string{"resource-secret-value", "provider-token-secret"} {
		if strings.Contains(res.stdout+res.stderr+plan.stdout+plan.stderr, secret) {
			t.Fatalf("%s shows:\n%s\n%s", secret, res, plan)
		}
	}
	st, err := state.Open(f.state)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := st.StackSetByName("things")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.Resources(ss.ID, "eu-west-1", "111111111111")
	st.Close()
	if err != nil || len(recs) != 2 {
		t.Fatalf("got %d records (%v), want 2", len(recs), err)
	}
	for _, r := range recs {
		if r.SchemaVersion != 1 || r.Provider == "" || len(r.ProviderConfig) == 0 || r.PhysicalID != "eu-west-1-app-"+r.Address[len(`p6_thing.app["`):len(`p6_thing.app["`)+1] {
			t.Errorf("%s: schema version %d, provider %q, config %d bytes, id %q", r.Address, r.SchemaVersion, r.Provider, len(r.ProviderConfig), r.PhysicalID)
		}
		if !slices.Contains(r.Sensitive, "secret") {
			t.Errorf("%s: sensitive %v, want secret among them", r.Address, r.Sensitive)
		}
	}
	replaceIn(t, f.repo, "templates/things/main.tf", `content  = "hello ${each.key}"`, `content  = each.key == "a" ? "changed" : "hello ${each.key}"`)
	f.commit(t, "Change a's content")
	plan = stackd(t, append([]string{"plan", "--detailed-exitcode"}, flags...)...)
	if plan.code() != 2 || !strings.Contains(plan.stdout, `p6_thing.app["a"]`) || strings.Contains(plan.stdout, `p6_thing.app["b"]`) || !strings.Contains(plan.stdout, "0 to add, 1 to change, 0 to replace") {
		t.Fatalf("plan: exit %d, want an update of p6_thing.app[\"a\"] only:\n%s", plan.code(), plan)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/state"
)

// Every example repository validates, and the organization example deploys
// as documented.
func TestExamples(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		dir := filepath.Join("..", "..", "examples", e.Name())
		if hcl, _ := filepath.Glob(filepath.Join(dir, "*.hcl")); !e.IsDir() || len(hcl) == 0 {
			continue // not a definitions repository (e.g. systemd)
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			if e.Name() == "terraform-providers" {
				// It needs hashicorp/local and hashicorp/random, which CI
				// cannot download: everything but the providers loads, and
				// their absence is the one thing reported.
				// (TestTerraformProviderEndToEnd runs a real provider.)
				res := stackd(t, "validate", dir, "--plugin-no-registry", "--state-dir", filepath.Join(t.TempDir(), "state"))
				if res.code() != 1 || !strings.Contains(res.stdout+res.stderr, "Cannot install the required providers") || !strings.Contains(res.stderr, "hashicorp/local") {
					t.Fatalf("validate %s without its providers: %s", dir, res)
				}
				return
			}
			res := stackd(t, "validate", dir)
			if res.code() != 0 || !strings.Contains(res.stdout, "is valid") {
				t.Fatalf("validate %s: %s", dir, res)
			}
		})
	}
	if n < 3 {
		t.Fatalf("found %d examples, want quickstart, organization and custom-resource at least", n)
	}

	t.Run("terraform-module deploys", func(t *testing.T) {
		// An ordinary Terraform root module (*.tf, terraform.tfvars, a
		// local module with for_each, an implied provider) unchanged.
		tmp := t.TempDir()
		f := &fixture{repo: filepath.Join(tmp, "repo"), state: filepath.Join(tmp, "state"), targets: filepath.Join(tmp, "targets")}
		if err := os.CopyFS(f.repo, os.DirFS(filepath.Join("..", "..", "examples", "terraform-module"))); err != nil {
			t.Fatal(err)
		}
		runGit(t, f.repo, "init", "-q")
		f.commit(t, "service")
		f.mustApply(t)
		doc := statusHead(t, f.repo).stackSetStatus(t, "service")
		if len(doc.Instances) != 4 {
			t.Fatalf("instances: %+v, want 4", doc.Instances)
		}
		for _, in := range doc.Instances {
			if in.Status != state.InstanceOperationComplete {
				t.Errorf("%s/%s: %s", in.Region, in.Account, in.Status)
			}
		}
		res := stackd(t, "plan", "--repo", f.repo, "--state-dir", f.state)
		if res.code() != 0 || !strings.Contains(res.stdout, "0 to add, 0 to change, 0 to replace, 0 to destroy") {
			t.Fatalf("plan after the deployment is not a no-op: %s", res)
		}
	})

	t.Run("organization deploys", func(t *testing.T) {
		tmp := t.TempDir()
		f := &fixture{repo: filepath.Join(tmp, "repo"), state: filepath.Join(tmp, "state"), targets: filepath.Join(tmp, "targets")}
		if err := os.CopyFS(f.repo, os.DirFS(filepath.Join("..", "..", "examples", "organization"))); err != nil {
			t.Fatal(err)
		}
		runGit(t, f.repo, "init", "-q")
		f.commit(t, "baseline")
		f.mustApply(t)
		doc := statusHead(t, f.repo).stackSetStatus(t, "baseline")
		got := map[string]string{}
		for _, in := range doc.Instances {
			got[in.Region+"/"+in.Account] = string(in.Status)
		}
		if len(got) != 10 || got["eu-west-1/555555555555"] != string(state.InstanceSkippedSuspendedAccount) || got["us-east-1/111111111111"] != string(state.InstanceOperationComplete) {
			t.Errorf("instances: %v", got)
		}
		if _, ok := got["eu-west-1/000000000000"]; ok {
			t.Error("the management account was targeted")
		}
		if _, ok := got["eu-west-1/666666666666"]; ok {
			t.Error("the DIFFERENCE account was targeted")
		}
		prod := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "222222222222"), "baseline", "logging.conf"))
		dev := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "444444444444"), "baseline", "logging.conf"))
		if !strings.Contains(prod, "ou=ou-prod") || !strings.Contains(prod, "retention_days=365") || !strings.Contains(dev, "retention_days=30") {
			t.Errorf("override not applied as documented:\nprod:\n%s\ndev:\n%s", prod, dev)
		}
	})
}

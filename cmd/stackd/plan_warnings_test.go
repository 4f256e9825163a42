package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A revision with warnings only (a backend block stackd ignores, a file
// of the template directory it does not read) plans as Terraform plans
// with its warnings: exit 0, the warnings shown, the change set below
// them. An error still refuses the revision (exit 1).
func TestPlanWithWarningsOnly(t *testing.T) {
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	writeTree(t, f.repo, map[string]string{
		"app.hcl": `stack_set "app" {
  template = "./templates/app"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`,
		"templates/app/main.tf": `terraform {
  backend "s3" {
    bucket = "states"
    key    = "app"
  }
}

resource "terraform_data" "app" {
  input = "v1"
}
`,
		"templates/app/old.tfstate": `{"version": 4}`,
	})
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "app")

	res := stackd(t, append([]string{"plan"}, f.flags()...)...)
	if res.code() != 0 {
		t.Fatalf("plan with warnings only: %s", res)
	}
	for _, want := range []string{"Warnings of revision", "Backend configuration ignored", "File not read", "terraform_data.app", "1 to create"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("plan output lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "does not validate") {
		t.Errorf("a revision with warnings only is said not to validate:\n%s", res.stdout)
	}
	js := stackd(t, append([]string{"plan", "-o", "json"}, f.flags()...)...)
	if js.code() != 0 || !strings.Contains(js.stdout, `"severity": "warning"`) {
		t.Errorf("plan -o json with warnings only: %s", js)
	}

	// An error besides the warnings refuses the revision.
	writeTree(t, f.repo, map[string]string{"templates/app/bad.tf": "resource \"terraform_data\" \"bad\" {\n  input = var.missing\n}\n"})
	f.commit(t, "bad")
	bad := stackd(t, append([]string{"plan"}, f.flags()...)...)
	if bad.code() != 1 || !strings.Contains(bad.stdout, "does not validate") {
		t.Errorf("plan of a revision with an error: %s", bad)
	}
}

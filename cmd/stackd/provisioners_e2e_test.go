package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// provStackSet deploys ./templates/prov to eu-west-1 in the given
// accounts.
func provStackSet(accounts string) string {
	return `stack_set "prov" {
  template = "./templates/prov"
  vars     = { token = "tok-very-secret-value" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = [` + accounts + `]
  }
}
`
}

const provTemplate = `variable "token" {
  type      = string
  sensitive = true
}
resource "terraform_data" "app" {
  input = "v1"
  provisioner "local-exec" {
    command = "echo created ${self.id} > created.txt"
  }
  provisioner "local-exec" {
    command = "echo token=${var.token}"
  }
  provisioner "local-exec" {
    when    = destroy
    command = "echo destroyed ${self.id} > destroyed.txt"
  }
}
`

// TestProvisionersEndToEnd: a Terraform template's local-exec
// provisioners run in the instance's directory when its object is
// created, not when it is updated, and before it is destroyed when a
// target is removed; the output of one given a sensitive value is not
// logged.
func TestProvisionersEndToEnd(t *testing.T) {
	t.Parallel()
	f := newEmptyFixture(t, map[string]string{
		"prov.hcl":                   provStackSet(`"111111111111", "222222222222"`),
		"templates/prov/main.tf":     provTemplate,
		"templates/prov/versions.tf": `terraform { required_version = ">= 1.5" }` + "\n",
	})
	res := f.mustApply(t)
	checkNoSecret(t, "apply", res.stdout+res.stderr)
	if strings.Contains(res.stdout+res.stderr, "tok-very-secret-value") {
		t.Fatalf("the sensitive provisioner's output leaked:\n%s", res)
	}
	if !strings.Contains(res.stdout+res.stderr, "output suppressed due to sensitive value in config") {
		t.Errorf("the suppressed output is not said:\n%s", res)
	}
	for _, acct := range []string{"111111111111", "222222222222"} {
		got := readFile(t, filepath.Join(f.instanceDir("eu-west-1", acct), "created.txt"))
		if !strings.HasPrefix(got, "created ") || len(strings.TrimSpace(got)) < len("created ")+10 {
			t.Errorf("%s: created.txt is %q, want the object's id", acct, got)
		}
		if err := os.Remove(filepath.Join(f.instanceDir("eu-west-1", acct), "created.txt")); err != nil {
			t.Fatal(err)
		}
	}
	plan := stackd(t, append([]string{"plan", "--detailed-exitcode"}, f.flags()...)...)
	if plan.code() != 0 {
		t.Fatalf("plan after the apply: exit %d, want 0:\n%s", plan.code(), plan)
	}
	replaceIn(t, f.repo, "templates/prov/main.tf", `input = "v1"`, `input = "v2"`)
	f.commit(t, "Update the input")
	f.mustApply(t)
	if _, err := os.Stat(filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "created.txt")); err == nil {
		t.Error("an update ran the create-time provisioner")
	}
	replaceIn(t, f.repo, "prov.hcl", `"111111111111", "222222222222"`, `"111111111111"`)
	f.commit(t, "Remove a target")
	f.mustApply(t)
	if got := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "222222222222"), "destroyed.txt")); !strings.HasPrefix(got, "destroyed ") {
		t.Errorf("destroyed.txt is %q, want the destroyed object's id", got)
	}
	if _, err := os.Stat(filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "destroyed.txt")); err == nil {
		t.Error("the destroy-time provisioner ran for an object that stays")
	}
}

// TestProvisionersRefused: remote provisioners and connection blocks are
// refused at their line, and local-exec with commands disabled.
func TestProvisionersRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		flags      []string
		says       []string
	}{
		{"remote-exec", `provisioner "remote-exec" { inline = ["uptime"] }`, nil,
			[]string{"main.tf:7", "stackd does not run remote provisioners"}},
		{"connection", `connection { host = "10.0.0.1" }`, nil, []string{"main.tf:7", "connection block"}},
		{"commands disabled", `provisioner "local-exec" { command = "true" }`, []string{"--allow-command=false"},
			[]string{"main.tf:7", "--allow-command=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newEmptyFixture(t, map[string]string{
				"prov.hcl": provStackSet(`"111111111111"`),
				"templates/prov/main.tf": `variable "token" { type = string }

resource "terraform_data" "app" {
  input = "v1"


  ` + tc.body + `
}
`,
			})
			res := stackd(t, append([]string{"plan"}, f.flags(tc.flags...)...)...)
			if res.code() != 1 {
				t.Fatalf("plan: exit %d, want 1:\n%s", res.code(), res)
			}
			for _, s := range tc.says {
				if !strings.Contains(res.stdout+res.stderr, s) {
					t.Errorf("the refusal does not say %q:\n%s", s, res)
				}
			}
		})
	}
}

// newEmptyFixture is a repository on main whose first commit holds files.
func newEmptyFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "stackd", "state"), targets: filepath.Join(dir, "targets")}
	writeTree(t, f.repo, files)
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "First commit")
	return f
}

package config

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// local-exec provisioners decode with Terraform's arguments and keywords;
// their references (but self) are dependencies.
func TestProvisionerDecoding(t *testing.T) {
	defs, diags := loadTF(t, "", map[string]string{"main.tf": `
variable "greeting" { default = "hi" }
resource "file" "a" {
  path    = "a"
  content = "a"
}
resource "file" "b" {
  count   = 2
  path    = "b${count.index}"
  content = "b"
  provisioner "local-exec" {
    command     = "echo ${var.greeting} ${self.path} ${file.a.id} ${count.index}"
    working_dir = "sub/dir"
    environment = { X = "1" }
    interpreter = ["/bin/bash", "-c"]
    quiet       = true
    on_failure  = continue
  }
  provisioner "local-exec" {
    when    = destroy
    command = "echo bye ${self.path} ${count.index}"
  }
}
`})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r := defs.StackSets[0].Template.Resources["file.b"]
	if len(r.Provisioners) != 2 {
		t.Fatalf("got %d provisioners, want 2", len(r.Provisioners))
	}
	create, destroy := r.Provisioners[0], r.Provisioners[1]
	if create.Destroy || !create.Continue || create.WorkingDir == nil || create.Environment == nil || create.Interpreter == nil || create.Quiet == nil {
		t.Errorf("create-time provisioner: got %+v", create)
	}
	if !destroy.Destroy || destroy.Continue {
		t.Errorf("destroy-time provisioner: got destroy=%v continue=%v, want true false", destroy.Destroy, destroy.Continue)
	}
	if len(r.Deps) != 1 || r.Deps[0] != "file.a" {
		t.Errorf("deps: got %v, want [file.a] (the provisioner's reference)", r.Deps)
	}
}

// What stackd does not run is refused with a diagnostic at its line,
// never skipped.
func TestProvisionerRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, body, at, want string
	}{
		{"remote-exec", `provisioner "remote-exec" { inline = ["uptime"] }`, "t/main.tf:5", "stackd does not run remote provisioners"},
		{"file", `provisioner "file" {
    source      = "a"
    destination = "/tmp/a"
  }`, "t/main.tf:5", "stackd does not run remote provisioners"},
		{"connection", `connection {
    host = "10.0.0.1"
  }`, "t/main.tf:5", "connection block"},
		{"connection in local-exec", `provisioner "local-exec" {
    command = "true"
    connection { host = "x" }
  }`, "t/main.tf:7", "connection block"},
		{"removed type", `provisioner "chef" {}`, "t/main.tf:5", "Invalid provisioner type"},
		{"when quoted", `provisioner "local-exec" {
    command = "true"
    when    = "destroy"
  }`, "t/main.tf:7", "without quotes"},
		{"on_failure unknown", `provisioner "local-exec" {
    command    = "true"
    on_failure = ignore
  }`, "t/main.tf:7", "continue or fail"},
		{"no command", `provisioner "local-exec" {}`, "t/main.tf:5", "command"},
		{"absolute working_dir", `provisioner "local-exec" {
    command     = "true"
    working_dir = "/etc"
  }`, "t/main.tf:7", "relative path"},
		{"destroy refers to a variable", `provisioner "local-exec" {
    when    = destroy
    command = "echo ${var.v}"
  }`, "t/main.tf:7", "may refer only to self"},
		{"self outside provisioners", `provisioner "local-exec" { command = "true" }
  metadata = self.path`, "t/main.tf:6", ""},
		{"self alone", `provisioner "local-exec" { command = "echo ${self}" }`, "t/main.tf:5", "Invalid self reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := loadTF(t, "", map[string]string{"main.tf": `variable "v" { default = "x" }
resource "file" "a" {
  path    = "a"
  content = "a"
  ` + tc.body + `
}
`})
			if !hasDiag(diags, hcl.DiagError, tc.at, tc.want) {
				t.Fatalf("want an error at %s saying %q, got:\n%s", tc.at, tc.want, diags.Error())
			}
		})
	}
}

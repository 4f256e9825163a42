package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSOPSVarsFile: a vars_file encrypted with sops for an age recipient is
// decrypted with --age-key-file; its values deploy, are sensitive
// everywhere (the template does not declare db_password sensitive, yet the
// plan shows <sensitive>), and without the key the revision is rejected
// saying what to give.
func TestSOPSVarsFile(t *testing.T) {
	f := newFixture(t)
	enc, err := os.ReadFile(filepath.Join("..", "..", "internal", "secrets", "testdata", "secrets.enc.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.repo, "secrets.enc.json"), enc, 0o644); err != nil {
		t.Fatal(err)
	}
	replaceIn(t, f.repo, "web.hcl", `  template    = "./templates/web"`, "  template    = \"./templates/web\"\n  vars_file   = \"./secrets.enc.json\"")
	replaceIn(t, f.repo, "templates/web/main.hcl", "variable \"api_key\" {", "variable \"db_password\" {\n  type = string\n}\n\nresource \"file\" \"db\" {\n  path    = \"web/db.conf\"\n  content = \"password=${var.db_password}\\n\"\n}\n\nvariable \"api_key\" {")
	f.commit(t, "db_password from a SOPS file")
	key, _ := filepath.Abs(filepath.Join("..", "..", "internal", "secrets", "testdata", "age-key.txt"))

	t.Setenv("SOPS_AGE_KEY_FILE", filepath.Join(t.TempDir(), "no-key"))
	if res := stackd(t, append([]string{"plan"}, f.flags()...)...); !strings.Contains(res.stdout+res.stderr, "--age-key-file") {
		t.Errorf("plan without the age key: %s", res)
	}

	plan := mustStackd(t, append([]string{"plan", "-o", "json"}, f.flags("--age-key-file", key)...)...)
	if strings.Contains(plan.stdout, "hunter2") || !strings.Contains(plan.stdout, "<sensitive>") {
		t.Errorf("plan with a SOPS vars_file shows a secret or no <sensitive>:\n%s", plan.stdout)
	}
	res := mustStackd(t, append([]string{"apply"}, f.flags("--age-key-file", key)...)...)
	if strings.Contains(res.stdout+res.stderr, "hunter2") {
		t.Errorf("apply printed a value from the SOPS file")
	}
	conf := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "web", "db.conf"))
	if conf != "password=hunter2-from-sops\n" {
		t.Errorf("db.conf deployed from the SOPS file: %q", conf)
	}
	st := mustStackd(t, "status", "--json", "--state-dir", f.state)
	if strings.Contains(st.stdout, "hunter2") {
		t.Errorf("status shows a value from the SOPS file")
	}

	// A branch cannot compute on the secret: whether a line fails would
	// tell it one bit at a time (every error message about it is hidden,
	// not whether there is one). For a branch the SOPS values are unknown,
	// so a right guess and a wrong one plan alike, without error.
	main := runGit(t, f.repo, "rev-parse", "--abbrev-ref", "HEAD")
	for _, guess := range []string{"hunter2-from-sops", "wrong"} {
		runGit(t, f.repo, "checkout", "-q", "-b", "guess-"+guess, main)
		writeTree(t, f.repo, map[string]string{"templates/web/probe.hcl": `resource "file" "probe" {
  path    = "web/probe"
  content = tobool(var.db_password == "` + guess + `" ? "nope" : "true") ? "x" : "y"
}
`})
		f.commit(t, "probe "+guess)
		res := stackd(t, append([]string{"plan", "--ref", "guess-" + guess}, f.flags("--age-key-file", key)...)...)
		if res.code() != 0 || strings.Contains(res.stdout+res.stderr, "Invalid") || strings.Contains(res.stdout+res.stderr, "hunter2") {
			t.Errorf("a branch computing on the SOPS value (guess %q): %s", guess, res)
		}
		runGit(t, f.repo, "checkout", "-q", main)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Identity (RFS seed): a stack set's id is created once and kept across
// updates; removing the block deletes it (DeleteStackSet) and adding it back
// creates a new id; an id pin must equal the recorded id.
func TestStackSetIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.mustApply(t)
	first := statusHead(t, f.repo).stackSetStatus(t, "web").ID

	// An update keeps the id; pinning it is accepted.
	replaceIn(t, f.repo, "web.hcl", `description = "frontend configuration"`, `description = "frontend configuration"`+"\n  id          = \""+first+"\"")
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.26"`)
	f.commit(t, "pin and update")
	f.mustApply(t)
	if got := statusHead(t, f.repo).stackSetStatus(t, "web").ID; got != first {
		t.Fatalf("id changed on update: %s -> %s", first, got)
	}

	// Removing the block deletes the stack set and its instances.
	web := readFile(t, filepath.Join(f.repo, "web.hcl"))
	if err := os.Remove(filepath.Join(f.repo, "web.hcl")); err != nil {
		t.Fatal(err)
	}
	// (A definitions directory without any *.hcl file is refused as a
	// likely mistake; an empty definitions file deletes what was deployed.)
	if err := os.WriteFile(filepath.Join(f.repo, "none.hcl"), []byte("# no stack sets for now\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.commit(t, "remove web")
	res := f.mustApply(t)
	if !strings.Contains(res.stdout, "DeleteStackSet") {
		t.Errorf("apply output %q, want a DeleteStackSet operation", res.stdout)
	}
	st := statusHead(t, f.repo)
	if _, ok := st.Files["status/web.json"]; ok {
		t.Error("status/web.json left after the stack set was deleted")
	}
	if entries, _ := os.ReadDir(f.instanceDir("eu-west-1", "111111111111") + "/web"); len(entries) != 0 {
		t.Errorf("files left after DeleteStackSet: %v", entries)
	}

	// Adding it back with the old pin is rejected: it was deleted.
	if err := os.WriteFile(filepath.Join(f.repo, "web.hcl"), []byte(web), 0o644); err != nil {
		t.Fatal(err)
	}
	f.commit(t, "web again, old pin")
	res = f.apply(t)
	if res.code() == 0 || !strings.Contains(res.stdout, "Stack set id mismatch") || !strings.Contains(res.stdout, "no stack set of that name exists") {
		t.Fatalf("re-created stack set with the old pin: %s", res)
	}
	if strings.Contains(res.stdout, "recorded stack set") {
		t.Errorf("the diagnostic speaks of a recorded stack set where there is none: %s", res)
	}

	// Without the pin it is created again, with a new id.
	replaceIn(t, f.repo, "web.hcl", "\n  id          = \""+first+"\"", "")
	f.commit(t, "web again")
	f.mustApply(t)
	second := statusHead(t, f.repo).stackSetStatus(t, "web").ID
	if second == "" || second == first {
		t.Errorf("re-created stack set id %q, want a new id (old %s)", second, first)
	}
	out := mustStackd(t, "status", "--state-dir", f.state).stdout
	if !strings.Contains(out, second) {
		t.Errorf("stackd status does not show the id:\n%s", out)
	}
}

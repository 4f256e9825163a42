package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The recorder (-record): runs Terraform on a case as a Terraform user
// would — init offline with the plugin directory, plan -out, show -json,
// apply the saved plan, show -json the state, plan again, and after the
// last step plan -destroy and apply it — and writes what Terraform said as
// golden files, trimmed to what the suite compares and with the paths of
// this machine replaced by placeholders.

// Placeholders for the paths of the machine the recording was made on.
const (
	worldPlaceholder = "${world}"
	workPlaceholder  = "${work}"
)

// terraformBinary is the Terraform the recorder runs.
func terraformBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TERRAFORM"); p != "" {
		return p
	}
	p, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("-record needs the terraform binary (Terraform 1.11) on PATH or in TERRAFORM: %v", err)
	}
	return p
}

// recorder runs Terraform in one working directory across the steps of a
// case.
type recorder struct {
	t     *testing.T
	bin   string
	work  string
	world string
	env   []string
	files []string // configuration files of the current step, by slash path
}

func newRecorder(t *testing.T) *recorder {
	work, world := t.TempDir(), t.TempDir()
	rc := filepath.Join(t.TempDir(), "terraformrc")
	if err := os.WriteFile(rc, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1",
		"TF_INPUT=0", "TF_VAR_world="+world, "TF_PLUGIN_CACHE_DIR=", "TF_LOG=")
	return &recorder{t: t, bin: terraformBinary(t), work: work, world: world, env: env}
}

func (r *recorder) run(args ...string) []byte {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.work
	cmd.Env = r.env
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("terraform %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), stderr.String())
	}
	return out.Bytes()
}

// setFiles replaces the configuration in the working directory (state,
// .terraform and the lock file stay).
func (r *recorder) setFiles(files map[string][]byte) {
	r.t.Helper()
	for _, f := range r.files {
		if err := os.Remove(filepath.Join(r.work, filepath.FromSlash(f))); err != nil {
			r.t.Fatal(err)
		}
	}
	r.files = nil
	for name, b := range files {
		p := filepath.Join(r.work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			r.t.Fatal(err)
		}
		r.files = append(r.files, name)
	}
}

// show writes terraform show -json of file ("" : the state) to the
// golden file dst, trimmed and scrubbed.
func (r *recorder) show(file, dst string) {
	r.t.Helper()
	args := []string{"show", "-json", "-no-color"}
	if file != "" {
		args = append(args, file)
	}
	b := r.run(args...)
	out, err := trimGolden(b, r.world, r.work)
	if err != nil {
		r.t.Fatalf("terraform show -json %s: %v", file, err)
	}
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// recordCase records every step of c, then its destroy.
func recordCase(t *testing.T, c tcase) {
	r := newRecorder(t)
	for i, dir := range c.steps {
		files, err := configFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		r.setFiles(files)
		r.run("init", "-input=false", "-no-color", "-plugin-dir="+pluginDir)
		r.run("plan", "-input=false", "-no-color", "-out=step.tfplan")
		r.show("step.tfplan", filepath.Join(dir, goldenPlan))
		r.run("apply", "-input=false", "-no-color", "step.tfplan")
		r.show("", filepath.Join(dir, goldenState))
		r.run("plan", "-input=false", "-no-color", "-out=replan.tfplan")
		r.show("replan.tfplan", filepath.Join(dir, goldenReplan))
		if i == len(c.steps)-1 {
			r.run("plan", "-destroy", "-input=false", "-no-color", "-out=destroy.tfplan")
			r.show("destroy.tfplan", filepath.Join(dir, goldenDestroy))
			r.run("apply", "-input=false", "-no-color", "destroy.tfplan")
		}
	}
	t.Logf("recorded %d step(s) with %s", len(c.steps), r.bin)
}

// goldenKeys are the parts of terraform show -json kept in golden files:
// what the suite compares and what a reviewer needs to read a diff. The
// configuration (expressions), relevant_attributes and the timestamp are
// dropped.
var goldenKeys = map[string]bool{
	"format_version": true, "terraform_version": true, "variables": true, "values": true,
	"resource_changes": true, "resource_drift": true, "output_changes": true, "errored": true,
	"applyable": true, "complete": true, "checks": true, "deferred_changes": true,
}

// trimGolden keeps goldenKeys of a terraform show -json document and
// replaces the paths world and work with placeholders.
func trimGolden(b []byte, world, work string) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	for k := range doc {
		if !goldenKeys[k] {
			delete(doc, k)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	s := strings.ReplaceAll(buf.String(), world, worldPlaceholder)
	s = strings.ReplaceAll(s, work, workPlaceholder)
	if strings.Contains(s, os.TempDir()+"/") {
		return nil, fmt.Errorf("a path of this machine is left in the recording")
	}
	return []byte(s), nil
}

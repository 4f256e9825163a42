package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIPolish: validate defaults to the working directory and names a
// missing one; counts are singular or plural; an unknown log format or
// level is an error; apply logs a line per finished instance at info level,
// with a duration that has its unit.
func TestCLIPolish(t *testing.T) {
	f := newFixture(t)
	t.Chdir(f.repo)
	res := stackd(t, "validate")
	if res.err != nil || !strings.Contains(res.stdout, ". is valid") {
		t.Errorf("validate without an argument in the repository: %s", res)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if res := stackd(t, "validate", missing); res.err == nil || !strings.Contains(res.err.Error(), missing+": not a directory") {
		t.Errorf("validate of a missing directory: %s", res)
	}
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25"`, `"nginx:1.25" +`)
	// The count agrees with the errors listed, in the singular for one.
	res = stackd(t, "validate", f.repo)
	listed := strings.Count(res.stdout, "\n  ")
	want := fmt.Sprintf("%d errors: ", listed)
	if listed == 1 {
		want = "1 error: "
	}
	if listed == 0 || !strings.HasPrefix(res.stdout, want) {
		t.Errorf("validate with %d errors listed: %q, want it to start %q", listed, res.stdout, want)
	}
	replaceIn(t, f.repo, "web.hcl", `"nginx:1.25" +`, `"nginx:1.25"`)
	if res := stackd(t, append([]string{"apply"}, f.flags("--log-format", "xml")...)...); res.err == nil || !strings.Contains(res.err.Error(), "use json, console or auto") {
		t.Errorf("--log-format xml: %s", res)
	}
	if res := stackd(t, append([]string{"apply"}, f.flags("--log-level", "loud")...)...); res.err == nil || !strings.Contains(res.err.Error(), "--log-level") {
		t.Errorf("--log-level loud: %s", res)
	}
	res = mustStackd(t, append([]string{"apply"}, f.flags()...)...)
	n := 0
	for _, l := range logLines(res.stderr) {
		if l["message"] == "instance complete" && l["level"] == "info" {
			if d, _ := l["duration"].(string); !strings.HasSuffix(d, "s") {
				t.Errorf("duration %q has no unit", d)
			}
			n++
		}
	}
	if n == 0 {
		t.Errorf("apply logged no line per finished instance at info level:\n%s", res.stderr)
	}
}

// TestApplyOnTerminal runs stackd apply on a real pseudo-terminal (util-linux
// script): the log is in the console format, a progress bar counts the
// instances to the end and is taken off before the summary, and NO_COLOR
// leaves no colour escapes.
func TestApplyOnTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script (util-linux) is not installed")
	}
	f := newFixture(t)
	args := []string{stackdBinary(t), "apply"}
	args = append(args, f.flags("--log-format", "auto")...)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + a + "'"
	}
	cmd := exec.Command(script, "-qefc", strings.Join(quoted, " "), "/dev/null")
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "COLUMNS=120")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stackd apply on a terminal: %v\n%s", err, out)
	}
	text := string(out)
	total := strings.Count(text, "instance complete")
	if total == 0 {
		t.Fatalf("no console log line per instance on the terminal:\n%s", text)
	}
	if !strings.Contains(text, fmt.Sprintf("%d/%d", total, total)) || !strings.Contains(text, "instances") {
		t.Errorf("the progress bar never showed %d/%d instances:\n%q", total, total, text)
	}
	if strings.Contains(text, "\x1b[3") || strings.Contains(text, "\x1b[9") {
		t.Errorf("colour escapes despite NO_COLOR:\n%q", text)
	}
	// The summary comes after the bar was taken off: its line is whole.
	i := strings.LastIndex(text, "instances)")
	if i < 0 || !strings.Contains(text[:i], "SUCCEEDED (") {
		t.Errorf("no summary line after the bar:\n%q", text)
	}
}

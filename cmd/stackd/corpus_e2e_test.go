package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPublicCorpus measures issue 29's figure of compatibility: Terraform
// configurations written by others (provider examples, Terraform's own
// fixtures, public modules), each deployed with its files verbatim as the
// template of a stack set on two targets, against Terraform 1.11's plan
// of the same directory. It runs only where the corpus is (STACKD_CORPUS,
// laid out by testdata/corpus/build-corpus.sh; never in CI) and writes the
// results table to STACKD_CORPUS_REPORT when set (docs/compatibility.md);
// STACKD_CORPUS_LOCK names a lock file taken for each configuration's
// run (flock), STACKD_CORPUS_RUN selects configurations by a regular expression of
// their names, STACKD_CORPUS_STACKD names a stackd binary built already.
//
// For each configuration, Terraform (TERRAFORM, or terraform on PATH) is
// the oracle: init from the providers built from source
// (STACKD_CORPUS_PLUGINS, the filesystem-mirror layout; no network),
// plan, apply, plan again, destroy. A configuration Terraform itself
// cannot plan here (a provider not in the corpus, a module from the
// network, a required variable without a value, a fixture that is not a
// whole configuration) is excluded with Terraform's reason. Otherwise
// stackd must: plan the same action on every resource address for each
// of the two targets, apply, plan nothing after the apply when Terraform
// plans nothing after its apply (the same actions when it does), and
// delete everything when the stack set is removed. A refusal is a
// failure with stackd's diagnostic; a plan that differs without one is a
// silent difference.
func TestPublicCorpus(t *testing.T) {
	root := os.Getenv("STACKD_CORPUS")
	if root == "" {
		t.Skip("STACKD_CORPUS is not set: the public corpus is built on demand (testdata/corpus/build-corpus.sh), never in CI")
	}
	plugins := os.Getenv("STACKD_CORPUS_PLUGINS")
	if plugins == "" {
		plugins = filepath.Join(root, "plugins")
	}
	tf := os.Getenv("TERRAFORM")
	if tf == "" {
		var err error
		if tf, err = exec.LookPath("terraform"); err != nil {
			t.Skip("terraform is not on PATH (or TERRAFORM): it is the oracle")
		}
	}
	entries := readCorpusManifest(t, filepath.Join(root, "manifest.tsv"))
	if only := os.Getenv("STACKD_CORPUS_RUN"); only != "" {
		re := regexp.MustCompile(only)
		entries = filterEntries(entries, re)
	}
	binary := os.Getenv("STACKD_CORPUS_STACKD") // a stackd binary built already
	if binary == "" {
		binary = stackdBinary(t)
	}
	work := t.TempDir()
	tfrc := filepath.Join(work, "terraformrc")
	writeFile(t, tfrc, fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\ndisable_checkpoint = true\n", plugins))
	cx := &corpusRun{t: t, root: root, plugins: plugins, tf: tf, tfrc: tfrc, binary: binary}

	var results []corpusResult
	for i, e := range entries {
		dir := filepath.Join(work, fmt.Sprint(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		unlock := heavyLock(t)
		r := cx.run(e, dir)
		unlock()
		t.Logf("%-60s %s %s", e.name, r.result, r.reason)
		results = append(results, r)
		os.RemoveAll(dir)
	}
	pass, fail, excl, silent := 0, 0, 0, 0
	for _, r := range results {
		switch r.result {
		case resPass:
			pass++
		case resExcluded:
			excl++
		case resSilent:
			silent++
			fail++
		default:
			fail++
		}
	}
	t.Logf("public corpus: %d of %d configurations pass (%d excluded, %d silent differences)", pass, pass+fail, excl, silent)
	if out := os.Getenv("STACKD_CORPUS_REPORT"); out != "" {
		writeCorpusReport(t, out, results, pass, fail, excl, silent)
	}
	if silent > 0 {
		t.Errorf("%d silent differences", silent)
	}
}

// A corpusEntry is a line of the manifest: name, source, the tree copied
// (relative to the corpus), the configuration's directory in it, and
// optionally why it is excluded without being run (it would reach the
// network).
// heavyLock takes the lock file STACKD_CORPUS_LOCK names, if any, for one
// configuration's run: a machine shared by several runs of heavy work
// runs one at a time, and a long corpus run lets the others in between
// its configurations.
func heavyLock(t *testing.T) func() {
	path := os.Getenv("STACKD_CORPUS_LOCK")
	if path == "" {
		return func() {}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

type corpusEntry struct {
	name, source, tree, sub, exclude string
}

func readCorpusManifest(t *testing.T, path string) []corpusEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) < 4 {
			continue
		}
		e := corpusEntry{name: parts[0], source: parts[1], tree: parts[2], sub: parts[3]}
		if len(parts) > 4 {
			e.exclude = parts[4]
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func filterEntries(es []corpusEntry, re *regexp.Regexp) []corpusEntry {
	var out []corpusEntry
	for _, e := range es {
		if re.MatchString(e.name) {
			out = append(out, e)
		}
	}
	return out
}

const (
	resPass     = "pass"
	resFail     = "fail"
	resSilent   = "fail (silent difference)"
	resExcluded = "excluded"
)

type corpusResult struct {
	corpusEntry
	result, reason string
	resources      int
}

type corpusRun struct {
	t                       *testing.T
	root, plugins, tf, tfrc string
	binary                  string
}

// offlineEnv keeps every process of the run off the network: a proxy
// that is nobody, on 127.0.0.1.
func offlineEnv(extra ...string) []string {
	env := append(os.Environ(),
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY=",
		"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "no_proxy=",
		"CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
	return append(env, extra...)
}

type procResult struct {
	stdout, stderr string
	code           int
}

func (p procResult) String() string { return p.stdout + p.stderr }

func runIn(dir string, env []string, name string, args ...string) procResult {
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	res := procResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		res.code, res.stderr = -1, err.Error()
	}
	return res
}

// firstError is the first error line Terraform or stackd printed.
var (
	ansi       = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	sourceLine = regexp.MustCompile(`^[0-9]+:`)
)

func firstError(s string) string {
	s = ansi.ReplaceAllString(s, "")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(strings.TrimLeft(l, "│╷╵ "))
		if !strings.HasPrefix(l, "Error: ") {
			continue
		}
		// Terraform: the summary, the source lines, then the detail up
		// to the box's end.
		var detail []string
		for _, m := range lines[i+1:] {
			if strings.HasPrefix(strings.TrimSpace(m), "╵") {
				break
			}
			m = strings.TrimSpace(strings.TrimLeft(m, "│ "))
			if m != "" && !strings.HasPrefix(m, "on ") && !sourceLine.MatchString(m) {
				detail = append(detail, m)
			}
		}
		return strings.TrimPrefix(l, "Error: ") + " — " + strings.Join(detail, " ")
	}
	for i, l := range lines {
		// stackd plan: "Revision R does not validate:", a diagnostic a
		// line.
		if strings.HasSuffix(l, "does not validate:") && i+1 < len(lines) {
			return strings.TrimSpace(lines[i+1])
		}
	}
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "{") {
			return l
		}
	}
	return "(no message)"
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}

// tfPlanJSON is what the test reads of `terraform show -json PLAN`.
type tfPlanJSON struct {
	ResourceChanges []struct {
		Address string `json:"address"`
		Mode    string `json:"mode"`
		Change  struct {
			Actions []string `json:"actions"`
		} `json:"change"`
	} `json:"resource_changes"`
}

// tfActions maps each managed resource instance Terraform plans a change
// of to stackd's name of that change: Add, Modify, Replace, Remove.
func tfActions(b []byte) (map[string]string, error) {
	var p tfPlanJSON
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, rc := range p.ResourceChanges {
		if rc.Mode != "managed" {
			continue
		}
		a := strings.Join(rc.Change.Actions, ",")
		switch a {
		case "no-op", "read":
			continue
		case "create":
			out[rc.Address] = "Add"
		case "update":
			out[rc.Address] = "Modify"
		case "delete":
			out[rc.Address] = "Remove"
		case "delete,create", "create,delete":
			out[rc.Address] = "Replace"
		default:
			out[rc.Address] = a
		}
	}
	return out, nil
}

// stackdPlanJSON is what the test reads of `stackd plan -o json`.
type stackdPlanJSON struct {
	ChangeSets []struct {
		StackSetName string `json:"StackSetName"`
		Action       string `json:"Action"`
		Instances    []struct {
			Region, Account, Action string
			Changes                 []struct {
				ResourceChange struct {
					Action            string `json:"Action"`
					LogicalResourceId string `json:"LogicalResourceId"`
					Replacement       string `json:"Replacement"`
					ModuleInfo        *struct {
						LogicalIdHierarchy string `json:"LogicalIdHierarchy"`
					} `json:"ModuleInfo"`
				} `json:"ResourceChange"`
			} `json:"Changes"`
		} `json:"Instances"`
	} `json:"ChangeSets"`
}

// stackdActions maps, per target "REGION/ACCOUNT", each resource address
// of the plan to its action (Add, Modify, Replace, Remove).
func stackdActions(b []byte) (map[string]map[string]string, error) {
	var p stackdPlanJSON
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, cs := range p.ChangeSets {
		for _, in := range cs.Instances {
			m := map[string]string{}
			for _, c := range in.Changes {
				rc := c.ResourceChange
				addr := rc.LogicalResourceId
				if rc.ModuleInfo != nil && rc.ModuleInfo.LogicalIdHierarchy != "" && !strings.HasPrefix(addr, "module.") {
					// "a[0]/b" is module.a[0].module.b.
					addr = "module." + strings.ReplaceAll(rc.ModuleInfo.LogicalIdHierarchy, "/", ".module.") + "." + addr
				}
				a := rc.Action
				if a == "Modify" && rc.Replacement == "True" {
					a = "Replace"
				}
				m[addr] = a
			}
			out[in.Region+"/"+in.Account] = m
		}
	}
	return out, nil
}

func diffActions(want, got map[string]string) string {
	var d []string
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		if want[k] != got[k] {
			d = append(d, fmt.Sprintf("%s: terraform %q, stackd %q", k, want[k], got[k]))
		}
	}
	return strings.Join(d, "; ")
}

// saidDifferences are the summaries of stackd's warnings that say its
// plan differs from Terraform's (engine/config/impure_args.go).
var saidDifferences = []string{"Argument changes at every run in Terraform"}

var corpusTargets = []string{"eu-west-1/111111111111", "eu-west-1/222222222222"}

const corpusStackSet = `stack_set "corpus" {
  template = "./templates/corpus/%s"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111", "222222222222"]
  }
}
`

func (cx *corpusRun) run(e corpusEntry, work string) corpusResult {
	r := corpusResult{corpusEntry: e}
	if e.exclude != "" {
		r.result, r.reason = resExcluded, e.exclude
		return r
	}
	src := filepath.Join(cx.root, e.tree)

	// Terraform, the oracle.
	tfDir := filepath.Join(work, "tf")
	if err := os.CopyFS(tfDir, os.DirFS(src)); err != nil {
		r.result, r.reason = resExcluded, "copy: "+err.Error()
		return r
	}
	cfg := filepath.Join(tfDir, e.sub)
	tfEnv := offlineEnv("TF_CLI_CONFIG_FILE="+cx.tfrc, "TF_DATA_DIR="+filepath.Join(work, "tfdata"), "TF_INPUT=0")
	tfRun := func(args ...string) procResult {
		return runIn(cfg, tfEnv, cx.tf, append([]string{args[0], "-no-color"}, args[1:]...)...)
	}
	exclude := func(stage string, p procResult) corpusResult {
		msg := strings.NewReplacer(cx.plugins, "PLUGIN_DIR", cx.root, "CORPUS", work, "WORK").Replace(p.String())
		r.result, r.reason = resExcluded, "terraform "+stage+": "+oneLine(firstError(msg))
		return r
	}
	// A backend or cloud block: stackd ignores it (its state replaces
	// it), and Terraform is given the local backend by an override file
	// in its copy only, so that its plan needs no network.
	if usesBackend(cfg) {
		writeFile(cx.t, filepath.Join(cfg, "zz_corpus_backend_override.tf"), "terraform {\n  backend \"local\" {}\n}\n")
	}
	if p := tfRun("init", "-input=false"); p.code != 0 {
		return exclude("init", p)
	}
	if p := tfRun("plan", "-input=false", "-lock=false", "-out=p1"); p.code != 0 {
		return exclude("plan", p)
	}
	show := tfRun("show", "-json", "p1")
	want, err := tfActions([]byte(show.stdout))
	if show.code != 0 || err != nil {
		return exclude("show", show)
	}
	r.resources = len(want)
	if p := tfRun("apply", "-input=false", "-lock=false", "p1"); p.code != 0 {
		return exclude("apply", p)
	}
	var want2 map[string]string
	if p := tfRun("plan", "-input=false", "-lock=false", "-out=p2"); p.code != 0 {
		return exclude("plan after apply", p)
	}
	show2 := tfRun("show", "-json", "p2")
	if want2, err = tfActions([]byte(show2.stdout)); show2.code != 0 || err != nil {
		return exclude("show after apply", show2)
	}
	tfRun("destroy", "-input=false", "-lock=false", "-auto-approve")

	// stackd: the files verbatim as the template of a stack set on two
	// targets.
	repo := filepath.Join(work, "repo")
	if err := os.CopyFS(filepath.Join(repo, "templates", "corpus"), os.DirFS(src)); err != nil {
		r.result, r.reason = resFail, "copy: "+err.Error()
		return r
	}
	sub := filepath.ToSlash(filepath.Clean(e.sub))
	if sub == "." {
		sub = ""
	}
	writeFile(cx.t, filepath.Join(repo, "corpus.hcl"), fmt.Sprintf(corpusStackSet, sub))
	gitEnv := offlineEnv("GIT_AUTHOR_NAME=corpus", "GIT_AUTHOR_EMAIL=corpus@example.com", "GIT_COMMITTER_NAME=corpus", "GIT_COMMITTER_EMAIL=corpus@example.com")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A", "-f"}, {"commit", "-q", "-m", "corpus"}} {
		if p := runIn(repo, gitEnv, "git", args...); p.code != 0 {
			cx.t.Fatalf("git %v: %s", args, p)
		}
	}
	run := filepath.Join(work, "run") // the providers' working directory
	if err := os.MkdirAll(run, 0o755); err != nil {
		cx.t.Fatal(err)
	}
	flags := []string{"--repo", repo, "--state-dir", filepath.Join(work, "state"), "--targets-root", filepath.Join(work, "targets"),
		"--plugin-dir", cx.plugins, "--plugin-no-registry", "--module-cache-dir", filepath.Join(work, "modules")}
	sd := func(args ...string) procResult {
		return runIn(run, offlineEnv(), cx.binary, append(args, flags...)...)
	}
	fail := func(stage string, p procResult) corpusResult {
		msg := strings.NewReplacer(cx.plugins, "PLUGIN_DIR", cx.root, "CORPUS", work, "WORK").Replace(p.String())
		r.result, r.reason = resFail, "stackd "+stage+": "+oneLine(firstError(msg))
		return r
	}
	compare := func(stage string, want map[string]string, p procResult) (corpusResult, bool) {
		got, err := stackdActions([]byte(p.stdout))
		if err != nil {
			return fail(stage+" (output)", p), false
		}
		for _, tg := range corpusTargets {
			g, ok := got[tg]
			if !ok && len(want) == 0 {
				continue
			}
			if d := diffActions(want, g); d != "" {
				r.result, r.reason = resSilent, fmt.Sprintf("stackd %s for %s: %s", stage, tg, d)
				return r, false
			}
		}
		return r, true
	}

	first := sd("plan")
	if first.code != 0 {
		return fail("plan", first)
	}
	p := sd("plan", "-o", "json")
	if p.code != 0 {
		return fail("plan", p)
	}
	if res, ok := compare("plan", want, p); !ok {
		return res
	}
	if p := sd("apply"); p.code != 0 {
		return fail("apply", p)
	}
	p = sd("plan", "-o", "json")
	if p.code != 0 {
		return fail("plan after apply", p)
	}
	if res, ok := compare("plan after apply", want2, p); !ok {
		// A difference stackd's plan said, with a warning, is a failure
		// with a diagnostic, not a silent one.
		for _, said := range saidDifferences {
			if strings.Contains(first.stdout, said) {
				res.result, res.reason = resFail, res.reason+" (said by stackd's warning: "+said+")"
			}
		}
		return res
	}
	if len(want2) > 0 {
		// Terraform plans again after its apply (a perpetual diff):
		// stackd's plan said the same; nothing more to check here.
		r.result, r.reason = resPass, "terraform plans changes after apply too: "+diffActions(nil, want2)
	}

	// The stack set removed: everything it made is deleted.
	if err := os.RemoveAll(filepath.Join(repo, "templates")); err != nil {
		cx.t.Fatal(err)
	}
	writeFile(cx.t, filepath.Join(repo, "corpus.hcl"), "# nothing deployed\n")
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "remove"}} {
		if p := runIn(repo, gitEnv, "git", args...); p.code != 0 {
			cx.t.Fatalf("git %v: %s", args, p)
		}
	}
	if p := sd("apply"); p.code != 0 {
		return fail("destroy", p)
	}
	if p := sd("plan", "--detailed-exitcode"); p.code != 0 {
		return fail("plan after destroy", p)
	}
	if r.result == "" {
		r.result = resPass
	}
	return r
}

var backendBlock = regexp.MustCompile(`(?m)^\s*(backend\s+"[^"]*"|cloud)\s*\{`)

// usesBackend reports whether a configuration directory has a backend or
// cloud block.
func usesBackend(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && backendBlock.Match(b) {
			return true
		}
	}
	return false
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeCorpusReport(t *testing.T, path string, rs []corpusResult, pass, fail, excl, silent int) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "| Configuration | Source (repo@commit:path) | Resources | Result | Reason |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", r.name, r.source, r.resources, r.result, oneLine(r.reason))
	}
	fmt.Fprintf(&b, "\n**%d of %d configurations pass** (%d excluded, %d silent differences).\n", pass, pass+fail, excl, silent)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

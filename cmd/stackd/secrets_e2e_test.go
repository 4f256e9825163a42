package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
)

// Secrets never leave stackd (docs/design.md §9): the values of sensitive
// variables and the Data of NoEcho custom-resource responses are looked for
// in every channel a user or a reviewer reads — the daemon's logs at debug
// level, every file and message of every status commit, change sets in
// every format (CLI text/json/markdown, the PR change sets on the status
// branch, the forge's comments), every API response, the CLI's errors, and
// the reasons of failures whose provider echoed the secret back.

// The secrets of the test, each distinctive enough that a substring match
// is a leak and nothing else.
const (
	secretPassword    = "pw-Kq7rZt2Lm9Xv"  // a sensitive variable, in vars
	secretRotated     = "pw-R0tat3dW8yHn"  // its next value, on a PR branch
	secretTFVars      = "tfv-Ap1K3yQ5sJd"  // a sensitive variable, in a vars_file
	secretNoEcho      = "ne-T0k3nB4fG6pWc" // NoEcho Data of a custom resource
	secretBadPIN      = "pin-N0tANumb3rZz" // a sensitive number given a non-number
	secretWorkerToken = "wrk-S1gn4lT0k3nX" // a sensitive variable only a failing command prints
	secretOverride    = "pw-0v3rr1d3Jk4Q"  // the password of one account, by instance_override
)

var allSecrets = []string{secretPassword, secretRotated, secretTFVars, secretNoEcho, secretBadPIN, secretWorkerToken, secretOverride}

// tokenProvider is a custom-resource provider that answers with NoEcho Data
// and, when its properties say so, fails with a reason that echoes the
// sensitive property it was sent (as careless providers do).
type tokenProvider struct {
	mu       sync.Mutex
	requests int
}

func (p *tokenProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RequestType, RequestID, StackID, LogicalResourceID, PhysicalResourceID string
		ResourceProperties                                                     map[string]any
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var raw map[string]any
	_ = json.Unmarshal(body, &raw)
	p.mu.Lock()
	p.requests++
	p.mu.Unlock()
	props, _ := raw["ResourceProperties"].(map[string]any)
	resp := map[string]any{
		"RequestId": raw["RequestId"], "StackId": raw["StackId"], "LogicalResourceId": raw["LogicalResourceId"],
		"PhysicalResourceId": "token-" + fmt.Sprint(props["app"]),
	}
	switch {
	case raw["RequestType"] == "Delete":
		resp["Status"] = "SUCCESS"
	case fmt.Sprint(props["fail"]) == "true":
		resp["Status"] = "FAILED"
		resp["Reason"] = fmt.Sprintf("refusing seed %v: it was rotated (token %s)", props["seed"], secretNoEcho)
	default:
		resp["Status"] = "SUCCESS"
		resp["NoEcho"] = true
		resp["Data"] = map[string]any{"token": secretNoEcho, "expires": "2030-01-01"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

const secretsTemplate = `variable "db_password" {
  type      = string
  sensitive = true
}

variable "api_key" {
  type      = string
  sensitive = true
}

variable "worker_token" {
  type      = string
  sensitive = true
}

variable "app" {
  type = string
}

variable "fail_custom" {
  type    = bool
  default = false
}

variable "fail_command" {
  type    = bool
  default = false
}

resource "file" "conf" {
  path    = "vault/app.conf"
  content = "password=${var.db_password}\napi_key=${var.api_key}\n"
}

resource "custom" "token" {
  type       = "Custom::Token"
  properties = { seed = var.db_password, app = var.app, fail = var.fail_custom }
}

resource "file" "token" {
  path    = "vault/token"
  content = custom.token.data.token
}

resource "command" "check" {
  create      = "echo \"checking with $WORKER_TOKEN\" >&2; test \"$FAIL\" != true"
  update      = "echo \"checking with $WORKER_TOKEN\" >&2; test \"$FAIL\" != true"
  environment = { WORKER_TOKEN = var.worker_token, FAIL = tostring(var.fail_command) }
}

output "dsn" {
  value     = "postgres://app:${var.db_password}@db.internal/app"
  sensitive = true
}

output "token_expires" {
  value = custom.token.data.expires
}

output "app" {
  value = var.app
}
`

// secretsDefs is the vault stack set: password for every instance but
// account 222222222222's, which an instance_override gives
// secretOverride; extra are more vars (name = HCL value).
func secretsDefs(providerURL, password string, extra map[string]string) string {
	vars := map[string]string{"db_password": strconv.Quote(password), "app": `"billing"`, "worker_token": strconv.Quote(secretWorkerToken)}
	for k, v := range extra {
		vars[k] = v
	}
	var names, keep []string
	for k := range vars {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "    %s = %s\n", k, vars[k])
		if k != "db_password" {
			keep = append(keep, strconv.Quote(k))
		}
	}
	return `resource_type "Custom::Token" {
  service_token = "` + providerURL + `"
}

stack_set "vault" {
  template  = "./templates/vault"
  vars_file = "./vault.tfvars"
  vars = {
` + b.String() + `  }

  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = ["111111111111", "222222222222"]
  }

  instance_override {
    accounts           = ["222222222222"]
    vars               = { db_password = "` + secretOverride + `" }
    use_stack_set_vars = ["api_key", ` + strings.Join(keep, ", ") + `]
  }

  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 2
    failure_tolerance_count = 1
  }
}
`
}

// leakCheck collects every output a test saw, by channel, and reports
// which of them hold a secret.
type leakCheck struct {
	t        *testing.T
	channels []string
	bytes    int
}

func (lc *leakCheck) check(channel, s string) {
	lc.t.Helper()
	lc.channels = append(lc.channels, channel)
	lc.bytes += len(s)
	for _, sec := range allSecrets {
		if i := strings.Index(s, sec); i >= 0 {
			lo, hi := max(0, i-120), min(len(s), i+len(sec)+60)
			lc.t.Errorf("secret %q leaks into %s: …%s…", sec, channel, s[lo:hi])
		}
	}
}

func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	lc := &leakCheck{t: t}
	prov := &tokenProvider{}
	psrv := httptest.NewServer(prov)
	t.Cleanup(psrv.Close)
	ff := &fakeForge{branch: "feature/rotate", comments: map[int]string{}}
	fsrv := httptest.NewServer(ff)
	t.Cleanup(fsrv.Close)

	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	tok := filepath.Join(dir, "forge-token")
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(f.repo, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(tok, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write("vault.hcl", secretsDefs(psrv.URL, secretPassword, nil))
	write("vault.tfvars", `api_key = "`+secretTFVars+`"`+"\n")
	write("templates/vault/main.hcl", secretsTemplate)
	runGit(t, f.repo, "init", "-q")
	rev1 := f.commit(t, "vault")

	// Plans in every format, before anything is deployed (the daemon holds
	// the state once it runs).
	for _, o := range []string{"text", "json", "markdown"} {
		res := stackd(t, append([]string{"plan", "-o", o, "--log-level", "debug"}, f.flags()...)...)
		if res.err != nil {
			t.Fatalf("plan -o %s: %s", o, res)
		}
		lc.check("stackd plan -o "+o, res.stdout+res.stderr)
	}

	listen := freePort(t)
	d := startDaemon(t, f.flags("--listen", listen, "--external-url", "http://"+listen, "--interval", "1h",
		"--log-level", "debug", "--forge-url", fsrv.URL, "--forge-repo", "o/r", "--forge-token-file", tok)...)
	waitFor := func(rev, status string) {
		t.Helper()
		eventually(t, 30*time.Second, func() bool {
			st := statusHead(t, f.repo)
			return strings.Contains(st.Message, rev[:7]) && strings.Contains(st.Message, status)
		}, "no %s status commit for %s; logs:\n%s", status, rev[:7], d.logs)
	}
	waitFor(rev1, "SUCCEEDED")
	// The secrets reached the instances: the test looks for values that
	// are really there.
	conf := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "vault", "app.conf"))
	token := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "111111111111"), "vault", "token"))
	confOverride := readFile(t, filepath.Join(f.instanceDir("eu-west-1", "222222222222"), "vault", "app.conf"))
	if !strings.Contains(conf, secretPassword) || !strings.Contains(conf, secretTFVars) || token != secretNoEcho || !strings.Contains(confOverride, secretOverride) {
		t.Fatalf("the deployed files do not hold the secrets (conf %q and %q, token %q): the test would prove nothing", conf, confOverride, token)
	}

	// A pull request rotating the password: its change set goes to the
	// status branch and the forge.
	runGit(t, f.repo, "checkout", "-q", "-b", "feature/rotate")
	write("vault.hcl", secretsDefs(psrv.URL, secretRotated, nil))
	prHead := f.commit(t, "rotate the password")
	runGit(t, f.repo, "checkout", "-q", "main")
	eventually(t, 30*time.Second, func() bool {
		return strings.Contains(statusHead(t, f.repo).Message, "plan feature/rotate "+prHead[:7])
	}, "the PR branch was never planned; logs:\n%s", d.logs)
	eventually(t, 10*time.Second, func() bool {
		ff.mu.Lock()
		defer ff.mu.Unlock()
		return len(ff.comments) > 0
	}, "no PR comment was posted; logs:\n%s", d.logs)

	// Failing deployments: the provider echoes the password and its
	// NoEcho token in its reason; the command prints a sensitive variable
	// to stderr.
	write("vault.hcl", secretsDefs(psrv.URL, secretPassword, map[string]string{"fail_custom": "true"}))
	rev2 := f.commit(t, "the provider refuses")
	waitFor(rev2, "FAILED")
	write("vault.hcl", secretsDefs(psrv.URL, secretPassword, map[string]string{"fail_command": "true"}))
	rev2 = f.commit(t, "the command fails")
	waitFor(rev2, "FAILED")

	// A sensitive number given a value that is not one: a diagnostic.
	write("templates/vault/main.hcl", secretsTemplate+`
variable "pin" {
  type      = number
  sensitive = true
}
`)
	write("vault.hcl", secretsDefs(psrv.URL, secretPassword, map[string]string{"pin": strconv.Quote(secretBadPIN)}))
	rev3 := f.commit(t, "a pin that is not a number")
	waitFor(rev3, "rejected")

	// Every API response.
	api := func(path string) string {
		t.Helper()
		resp, err := httpClient.Get("http://" + listen + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		lc.check("GET "+path, string(b))
		return string(b)
	}
	api("/readyz")
	api("/metrics")
	api("/v1/resource_types")
	api("/v1/resource_types/Custom::Token")
	api("/v1/stack_sets")
	api("/v1/stack_sets/vault")
	api("/v1/stack_sets/vault/instances")
	api("/v1/changesets?ref=feature/rotate")
	api("/v1/changesets?ref=main")
	ops := map[string]bool{}
	hist, _, err := readStatusHistory(f.repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range hist {
		lc.check("status commit message "+c.Hash[:7], c.Message)
		for name, b := range c.Files {
			lc.check(fmt.Sprintf("%s of status commit %s", name, c.Hash[:7]), string(b))
			if strings.HasPrefix(name, "status/") && name != "status/stackd.json" {
				var doc struct {
					LastOperation struct {
						ID string `json:"id"`
					} `json:"last_operation"`
				}
				if json.Unmarshal(b, &doc) == nil && doc.LastOperation.ID != "" {
					ops[doc.LastOperation.ID] = true
				}
			}
		}
	}
	if len(ops) < 3 {
		t.Errorf("the status branch names %d operations, want the deployment and the two failures", len(ops))
	}
	for id := range ops {
		api("/v1/operations/" + id)
		api("/v1/operations/" + id + "/events")
	}
	ff.mu.Lock()
	for id, body := range ff.comments {
		lc.check(fmt.Sprintf("PR comment %d", id), body)
	}
	ff.mu.Unlock()

	if err := d.stop(t); err != nil {
		t.Errorf("stackd run: %v", err)
	}
	logs := d.logs.String()
	if !strings.Contains(logs, `"level":"debug"`) {
		t.Errorf("the daemon logged nothing at debug level: the test would prove nothing")
	}
	if !strings.Contains(logs, "refusing seed <sensitive>") || !strings.Contains(logs, "checking with <sensitive>") {
		t.Errorf("the logs do not hold the failures' reasons (redacted): the test would prove nothing")
	}
	lc.check("the daemon's logs", logs)

	// The CLI, after the daemon: status, plan of the PR branch in every
	// format, validate of the rejected commit.
	for _, args := range [][]string{
		{"status"}, {"status", "vault"}, {"status", "--json"},
	} {
		res := stackd(t, append(args, "--state-dir", f.state, "--log-level", "debug")...)
		lc.check("stackd "+strings.Join(args, " "), res.stdout+res.stderr+fmt.Sprint(res.err))
	}
	for _, o := range []string{"text", "json", "markdown"} {
		res := stackd(t, append([]string{"plan", "-o", o, "--ref", "feature/rotate", "--log-level", "debug"}, f.flags()...)...)
		lc.check("stackd plan --ref feature/rotate -o "+o, res.stdout+res.stderr+fmt.Sprint(res.err))
	}
	res := stackd(t, "validate", f.repo)
	if res.err == nil || !strings.Contains(res.stderr, "Invalid value for variable") || !strings.Contains(res.stderr, "pin = \"<sensitive>\"") {
		t.Errorf("validate did not show the bad pin's line with its value redacted: %s", res)
	}
	lc.check("stackd validate", res.stdout+res.stderr+res.err.Error())
	res = stackd(t, append([]string{"apply", "--log-level", "debug"}, f.flags()...)...)
	lc.check("stackd apply of the rejected commit", res.stdout+res.stderr+fmt.Sprint(res.err))
	t.Logf("looked for %d secrets in %d outputs (%d KB)", len(allSecrets), len(lc.channels), lc.bytes/1024)
}

// ---- untrusted branches and process arguments ------------------------------

// The secrets of TestUntrustedBranchSeesNoSecrets; neither is a number, so
// parseint fails on them (and on their reverses).
const (
	secretAPIKey = "ak-Vz8Qw3Rt6Yp"  // a sensitive variable, in a vars_file
	secretDBPass = "db-Hn4Jc7Ws2MxL" // NoEcho Data of a custom resource
)

// secretForms are the secrets and what a template makes of them: their
// reverses and base64 encodings.
func secretForms() []string {
	var out []string
	for _, s := range []string{secretAPIKey, secretDBPass} {
		r := []rune(s)
		slices.Reverse(r)
		out = append(out, s, string(r), base64.StdEncoding.EncodeToString([]byte(s)), base64.StdEncoding.EncodeToString([]byte(string(r))))
	}
	return out
}

// dbProvider is a custom-resource provider that answers every request with
// NoEcho Data holding the database password.
func dbProvider(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"Status": "SUCCESS", "RequestId": req["RequestId"], "StackId": req["StackId"],
		"LogicalResourceId": req["LogicalResourceId"], "PhysicalResourceId": "db-main",
		"NoEcho": true, "Data": map[string]any{"password": secretDBPass},
	})
}

// untrustedTemplate is the deploy branch's template: a custom resource
// with NoEcho data, a file made of it, a file whose path is the API key,
// and a command whose text and environment hold the API key, which waits
// on the fifo "release" in the instance root before printing a token made
// from it.
const untrustedTemplate = `variable "api_key" {
  type      = string
  sensitive = true
}

resource "custom" "db" {
  type       = "Custom::DB"
  properties = { name = "main" }
}

resource "file" "db_conf" {
  path    = "db.conf"
  content = custom.db.data.password
}

resource "file" "keyed" {
  path    = "keys/${var.api_key}.txt"
  content = "v1"
}

resource "command" "hold" {
  create      = "key='${var.api_key}'; touch started; cat release >/dev/null; printf '{\"token\": \"tok-%s\"}' \"$TOKEN\""
  environment = { TOKEN = var.api_key }
}

output "token" {
  value = command.hold.token
}
`

// A pull-request branch computes on the secrets stackd holds — the NoEcho
// data recorded in the state, a sensitive variable — with functions that
// fail and quote their argument; the deploy branch runs a command whose
// text holds a secret. Nothing of the secrets (nor their reverses, nor
// their base64) reaches the status branch, the daemon's logs, the API, the
// CLI, or the argument list of any process on the machine.
func TestUntrustedBranchSeesNoSecrets(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	psrv := httptest.NewServer(http.HandlerFunc(dbProvider))
	t.Cleanup(psrv.Close)
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	defs := `resource_type "Custom::DB" {
  service_token = "` + psrv.URL + `"
}

stack_set "vault" {
  template  = "./templates/vault"
  vars_file = "./vault.tfvars"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`
	writeTree(t, f.repo, map[string]string{
		"vault.hcl":                defs,
		"vault.tfvars":             `api_key = "` + secretAPIKey + `"` + "\n",
		"templates/vault/main.hcl": untrustedTemplate,
	})
	runGit(t, f.repo, "init", "-q")
	rev1 := f.commit(t, "vault")
	inst := f.instanceDir("eu-west-1", "111111111111")
	if err := os.MkdirAll(inst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(inst, "release"), 0o600); err != nil {
		t.Fatal(err)
	}

	forms := secretForms()
	var channels []string
	check := func(channel, s string) {
		t.Helper()
		channels = append(channels, channel)
		for _, sec := range forms {
			if i := strings.Index(s, sec); i >= 0 {
				lo, hi := max(0, i-120), min(len(s), i+len(sec)+60)
				t.Errorf("%q leaks into %s: …%s…", sec, channel, s[lo:hi])
			}
		}
	}

	p := startProc(t, binary, nil, append([]string{"run"}, f.flags("--listen", "127.0.0.1:0", "--interval", "1h", "--log-level", "debug")...)...)
	addr := p.addr(t)

	// While the command runs (it waits on the fifo): every process's
	// argument list.
	eventually(t, 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(inst, "started"))
		return err == nil
	}, "the command never started; logs:\n%s", p.log)
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	commandProcs := 0
	for _, d := range procs {
		args, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue // exited meanwhile
		}
		check("the arguments of process "+filepath.Base(d), string(bytes.ReplaceAll(args, []byte{0}, []byte{' '})))
		if env, _ := os.ReadFile(filepath.Join(d, "environ")); bytes.Contains(env, []byte("STACKD_LOGICAL_ID=command.hold\x00")) {
			commandProcs++
		}
	}
	if commandProcs == 0 {
		t.Errorf("found no process of the command among %d: the test would prove nothing", len(procs))
	}
	release, err := os.OpenFile(filepath.Join(inst, "release"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	release.Close()
	eventually(t, 30*time.Second, func() bool {
		st := statusHead(t, f.repo)
		return strings.Contains(st.Message, rev1[:7]) && strings.Contains(st.Message, "SUCCEEDED")
	}, "the deploy branch was never deployed; logs:\n%s", p.log)
	if got := readFile(t, filepath.Join(inst, "db.conf")); got != secretDBPass {
		t.Fatalf("db.conf = %q, want the NoEcho password: the test would prove nothing", got)
	}
	if _, err := os.Stat(filepath.Join(inst, "keys", secretAPIKey+".txt")); err != nil {
		t.Fatalf("the file named after the API key is missing (%v): the test would prove nothing", err)
	}

	// Pull requests: one computes on the NoEcho password and changes the
	// file named after the API key, one on the API key itself.
	branch := func(name, extra string, change func()) string {
		t.Helper()
		runGit(t, f.repo, "checkout", "-q", "-b", name, "main")
		appendTo(t, f.repo, "templates/vault/main.hcl", extra)
		if change != nil {
			change()
		}
		head := f.commit(t, name)
		runGit(t, f.repo, "checkout", "-q", "main")
		eventually(t, 30*time.Second, func() bool {
			return strings.Contains(statusHead(t, f.repo).Message, "plan "+name+" "+head[:7])
		}, "%s was never planned; logs:\n%s", name, p.log)
		return head
	}
	branch("feature/probe", `
resource "file" "probe" {
  path    = "probe.txt"
  content = "${parseint(strrev(custom.db.data.password), 10)}"
}
`, func() { replaceIn(t, f.repo, "templates/vault/main.hcl", `content = "v1"`, `content = "v2"`) })
	branch("feature/apikey", `
resource "file" "probe" {
  path    = "probe.txt"
  content = "${parseint(var.api_key, 10)}"
}
`, nil)

	st := statusHead(t, f.repo)
	var probe changeset.StackSetChangeSet
	if err := json.Unmarshal(st.Files[reconciler.ChangeSetPath("feature/probe", "vault", "json")], &probe); err != nil {
		t.Errorf("no change set of feature/probe: %v (files %v)", err, keys(st.Files))
	}
	var probeContent any
	var keyedID string
	for _, ic := range probe.Instances {
		for _, c := range ic.Changes {
			rc := c.ResourceChange
			switch rc.LogicalResourceId {
			case "file.keyed":
				keyedID = rc.PhysicalResourceId
			case "file.probe":
				for _, pc := range rc.PropertyChanges {
					if pc.Name == "content" {
						probeContent = pc.AfterValue
					}
				}
			}
		}
	}
	if len(probe.Diagnostics) > 0 || probeContent != engine.SensitivePlaceholder || keyedID != engine.SensitivePlaceholder {
		t.Errorf("feature/probe: diagnostics %v, file.probe content %v, file.keyed physical id %q; want none, %s, %s",
			probe.Diagnostics, probeContent, keyedID, engine.SensitivePlaceholder, engine.SensitivePlaceholder)
	}
	if md := string(st.Files[reconciler.ChangeSetPath("feature/apikey", "stackd", "md")]); !strings.Contains(md, "hidden because an argument is sensitive") {
		t.Errorf("feature/apikey's diagnostics do not say the message is hidden:\n%s", md)
	}

	// The deploy branch computes on them too: rejected, and its
	// diagnostics hide the messages.
	appendTo(t, f.repo, "templates/vault/main.hcl", `
resource "file" "probe" {
  path    = "probe.txt"
  content = "${parseint(strrev(custom.db.data.password), 10)}${parseint(var.api_key, 10)}"
}
`)
	rev2 := f.commit(t, "compute on the secrets")
	eventually(t, 30*time.Second, func() bool {
		st := statusHead(t, f.repo)
		return strings.Contains(st.Message, rev2[:7]) && strings.Contains(st.Message, "rejected")
	}, "the deploy branch's bad commit was never rejected; logs:\n%s", p.log)

	// Every API response.
	api := func(path string) string {
		t.Helper()
		resp, err := httpClient.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		check("GET "+path, string(b))
		return string(b)
	}
	if body := api("/v1/changesets?ref=feature/probe"); !strings.Contains(body, "file.probe") {
		t.Errorf("GET /v1/changesets?ref=feature/probe does not show the probe: %s", body)
	}
	api("/v1/changesets?ref=feature/apikey")
	api("/v1/changesets?ref=main")
	api("/v1/stack_sets")
	api("/v1/stack_sets/vault")
	api("/v1/stack_sets/vault/instances")
	api("/readyz")
	api("/metrics")
	hist, _, err := readStatusHistory(f.repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range hist {
		check("status commit message "+c.Hash[:7], c.Message)
		for name, b := range c.Files {
			check(fmt.Sprintf("%s of status commit %s", name, c.Hash[:7]), string(b))
			var doc struct {
				LastOperation struct {
					ID string `json:"id"`
				} `json:"last_operation"`
			}
			if strings.HasPrefix(name, "status/") && json.Unmarshal(b, &doc) == nil && doc.LastOperation.ID != "" {
				api("/v1/operations/" + doc.LastOperation.ID)
				api("/v1/operations/" + doc.LastOperation.ID + "/events")
			}
		}
	}

	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Errorf("stackd run exited with %d", code)
	}
	logs := p.log.String()
	if !strings.Contains(logs, `"level":"debug"`) {
		t.Errorf("the daemon logged nothing at debug level: the test would prove nothing")
	}
	check("the daemon's logs", logs)

	// The CLI, once the daemon is gone.
	for _, args := range [][]string{
		{"status", "--state-dir", f.state},
		{"status", "vault", "--state-dir", f.state},
		{"status", "--json", "--state-dir", f.state},
		append([]string{"plan", "--ref", "feature/probe", "-o", "text"}, f.flags()...),
		append([]string{"plan", "--ref", "feature/probe", "-o", "json"}, f.flags()...),
		append([]string{"plan", "--ref", "feature/probe", "-o", "markdown"}, f.flags()...),
		append([]string{"plan", "--ref", "feature/apikey", "-o", "json"}, f.flags()...),
		append([]string{"plan", "-o", "text"}, f.flags()...),
		append([]string{"plan", "-o", "markdown"}, f.flags()...),
		{"validate", f.repo},
		append([]string{"apply", "--log-level", "debug"}, f.flags()...),
	} {
		res := runBinary(t, binary, args...)
		check("stackd "+strings.Join(args, " "), res.stdout+res.stderr)
	}
	t.Logf("looked for %d forms of 2 secrets in %d outputs", len(forms), len(channels))
}

package main

import (
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
	"testing"
	"time"
)

// Secrets never leave stackd (DESIGN §9): the values of sensitive
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

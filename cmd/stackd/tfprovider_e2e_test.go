package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/stackd/stackd/internal/testkit"
)

// testProvider builds the protocol 6 test provider of
// engine/provider/tfplugin/testdata once per test binary and lays it out
// in a plugin directory (the filesystem-mirror layout) at version 1.0.0.
var testProvider struct {
	once sync.Once
	dir  string
	err  error
}

func providerPluginDir(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the Go toolchain is not on PATH: the test provider cannot be built")
	}
	testProvider.once.Do(func() {
		dir, err := os.MkdirTemp("", "stackd-plugins-")
		if err != nil {
			testProvider.err = err
			return
		}
		pkg := filepath.Join(dir, "registry.example.com", "stackd", "p6", "1.0.0", runtime.GOOS+"_"+runtime.GOARCH)
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			testProvider.err = err
			return
		}
		cmd := exec.Command(goTool, "build", "-o", filepath.Join(pkg, "terraform-provider-p6_v1.0.0"), ".")
		cmd.Dir = filepath.Join("..", "..", "engine", "provider", "tfplugin", "testdata", "p6provider")
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			testProvider.err = err
			testProvider.dir = string(out)
			return
		}
		testProvider.dir = dir
	})
	if testProvider.err != nil {
		t.Fatalf("build the test provider: %v\n%s", testProvider.err, testProvider.dir)
	}
	return testProvider.dir
}

// p6Fixture is a definitions repository whose stack set "things" deploys
// template (p6Template or a variant of it) to 2 regions x 2 accounts of
// the world directory, committed with msg; dir holds it all.
func p6Fixture(t *testing.T, template, msg string) (f *fixture, world, dir string) {
	t.Helper()
	dir = t.TempDir()
	f = &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "stackd", "state"), targets: filepath.Join(dir, "targets")}
	world = filepath.Join(dir, "world")
	for _, acct := range []string{"111111111111", "222222222222"} {
		if err := os.MkdirAll(filepath.Join(world, acct), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, f.repo, map[string]string{
		"things.hcl":                p6StackSet(world, "app", ""),
		"templates/things/main.hcl": template,
	})
	runGit(t, f.repo, "init", "-q")
	f.commit(t, msg)
	return f, world, dir
}

// p6Provider requires the test provider and configures it per target
// (its objects go to the target account's directory of var.world).
const p6Provider = `terraform {
  required_providers {
    p6 = { source = "registry.example.com/stackd/p6", version = "~> 1.0" }
  }
}
variable "world" { type = string }

provider "p6" {
  region = target.region
  dir    = "${var.world}/${target.account}"
  prefix = "${target.region}-"
  token  = "provider-token-secret"
}
`

const p6Template = p6Provider + `variable "name" { type = string }
variable "crash_account" {
  type    = string
  default = ""
}

resource "p6_thing" "app" {
  name    = var.name
  content = "hello ${target.account}"
  secret  = "resource-secret-value"
  crash   = var.crash_account == target.account
  tag {
    key   = "owner"
    value = "platform"
  }
}

output "id" { value = p6_thing.app.id }
`

func p6StackSet(world, name, crashAccount string) string {
	return `stack_set "things" {
  template = "./templates/things"
  vars = {
    world         = "` + world + `"
    name          = "` + name + `"
    crash_account = "` + crashAccount + `"
  }
  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = ["111111111111", "222222222222"]
  }
  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 2
    failure_tolerance_count = 2
  }
}
`
}

// TestTerraformProviderEndToEnd: a real Terraform provider plugin (built
// from Go source, protocol 6) installed from a plugin directory deploys
// per-target objects through stackd apply; plan shows the provider's own
// replacement in the JSON change set without a secret; a provider crashing
// mid-apply fails its instances and nothing else; deleting the stack set
// deletes the objects.
func TestTerraformProviderEndToEnd(t *testing.T) {
	t.Parallel()
	plugins := providerPluginDir(t)
	f, world, dir := p6Fixture(t, p6Template, "things")
	// Every process serves one use and is replaced: everything below runs
	// on processes started and retired per use (the pool's own tests hold
	// leases on a retired process).
	flags := f.flags("--plugin-dir", plugins, "--plugin-recycle-after", "1")
	binary := stackdBinary(t)

	res := runBinary(t, binary, append([]string{"apply"}, append(flags, "--log-level", "debug")...)...)
	if res.err != nil || !strings.Contains(res.stdout, "SUCCEEDED (4/4") {
		t.Fatalf("first apply: %s", res)
	}
	// Without replacement 6 processes start (the schema read, the
	// validating process, one per configuration); every one started was
	// stopped by the end.
	started, stopped := strings.Count(res.stderr, "provider started"), strings.Count(res.stderr, "provider stopped")
	if started <= 6 || stopped != started {
		t.Errorf("%d provider processes started and %d stopped; want more than 6 (each replaced after a use), all stopped", started, stopped)
	}
	// The provider's own log lines reach stackd's log (debug level),
	// without the secret of its configuration it printed.
	if !strings.Contains(res.stderr, "p6provider configured for region") {
		t.Errorf("the provider's stderr is not in the debug log")
	}
	for _, tg := range [][2]string{{"eu-west-1", "111111111111"}, {"us-east-1", "222222222222"}} {
		b, err := os.ReadFile(filepath.Join(world, tg[1], tg[0]+"-app.json"))
		if err != nil || !strings.Contains(string(b), `"region":"`+tg[0]+`"`) {
			t.Errorf("object of %s/%s: %v %s", tg[0], tg[1], err, b)
		}
	}
	for _, out := range []string{res.stdout, res.stderr} {
		if strings.Contains(out, "resource-secret-value") || strings.Contains(out, "provider-token-secret") {
			t.Errorf("a secret reached the output:\n%s", out)
		}
	}
	if lock, err := os.ReadFile(filepath.Join(dir, "stackd", ".terraform.lock.hcl")); err != nil || !strings.Contains(string(lock), "h1:") {
		t.Errorf("lock file: %v\n%s", err, lock)
	}

	// A new name replaces every object: the provider says so.
	writeTree(t, f.repo, map[string]string{"things.hcl": p6StackSet(world, "app2", "")})
	f.commit(t, "rename")
	plan := runBinary(t, binary, append([]string{"plan", "-o", "json"}, flags...)...)
	if plan.err != nil {
		t.Fatalf("plan: %s", plan)
	}
	if !strings.Contains(plan.stdout, `"Replacement": "True"`) || !strings.Contains(plan.stdout, `"RequiresRecreation": "Always"`) {
		t.Errorf("plan -o json does not show the provider's replacement:\n%s", plan.stdout)
	}
	if strings.Contains(plan.stdout, "resource-secret-value") || strings.Contains(plan.stdout, "provider-token-secret") {
		t.Errorf("a secret is in the change set")
	}
	if res := runBinary(t, binary, append([]string{"apply"}, flags...)...); res.err != nil {
		t.Fatalf("apply of the rename: %s", res)
	}
	if _, err := os.Stat(filepath.Join(world, "111111111111", "eu-west-1-app.json")); !os.IsNotExist(err) {
		t.Errorf("the replaced object is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(world, "111111111111", "eu-west-1-app2.json")); err != nil {
		t.Errorf("the replacement: %v", err)
	}

	// The provider process crashes in the middle of the applies of one
	// account: those instances fail, the others are untouched, stackd
	// goes on; the next commit converges.
	writeTree(t, f.repo, map[string]string{"things.hcl": p6StackSet(world, "app3", "222222222222")})
	f.commit(t, "crash in 222222222222")
	crash := runBinary(t, binary, append([]string{"apply"}, flags...)...)
	if crash.code() != 1 || strings.Count(crash.stdout, "OPERATION_FAILED") != 2 || !strings.Contains(crash.stdout, "provider process exited") {
		t.Fatalf("apply with a crashing provider: %s", crash)
	}
	if _, err := os.Stat(filepath.Join(world, "111111111111", "eu-west-1-app3.json")); err != nil {
		t.Errorf("an account without the crash was not deployed: %v", err)
	}
	writeTree(t, f.repo, map[string]string{"things.hcl": p6StackSet(world, "app3", "")})
	f.commit(t, "no crash")
	if res := runBinary(t, binary, append([]string{"apply"}, flags...)...); res.err != nil {
		t.Fatalf("apply after the crash: %s", res)
	}
	if _, err := os.Stat(filepath.Join(world, "222222222222", "us-east-1-app3.json")); err != nil {
		t.Errorf("the crashed account did not converge: %v", err)
	}

	// Drift: an object deleted out of band is found by ReadResource.
	if err := os.Remove(filepath.Join(world, "222222222222", "eu-west-1-app3.json")); err != nil {
		t.Fatal(err)
	}
	drift := runBinary(t, binary, append([]string{"drift", "--json"}, flags...)...)
	var reps []struct {
		Status           string `json:"status"`
		DriftedResources int    `json:"drifted_resources"`
	}
	if err := json.Unmarshal([]byte(drift.stdout), &reps); err != nil || len(reps) != 1 || reps[0].Status != "DRIFTED" || reps[0].DriftedResources != 1 {
		t.Errorf("drift: %v %s", err, drift)
	}

	// The stack set removed: its objects are deleted, its template gone.
	if err := os.RemoveAll(filepath.Join(f.repo, "templates")); err != nil {
		t.Fatal(err)
	}
	writeTree(t, f.repo, map[string]string{"things.hcl": "# nothing deployed\n"})
	f.commit(t, "remove")
	if res := runBinary(t, binary, append([]string{"apply"}, flags...)...); res.err != nil || !strings.Contains(res.stdout, "DeleteStackSet") {
		t.Fatalf("apply of the removal: %s", res)
	}
	left, _ := filepath.Glob(filepath.Join(world, "*", "*.json"))
	if len(left) != 0 {
		t.Errorf("objects left after the stack set was deleted: %v", left)
	}
}

// TestTerraformProviderKilledMidApply: stackd run is killed (SIGKILL) while
// provider calls are in flight; after the restart the operation resumes
// and every object exists, nothing is left in progress. Killed before the
// provider made its object, the create is repeated; killed after it made
// a named object (whose id the provider planned, so it was journaled
// before the create), the object is adopted, where repeating the create
// would fail on it ("already exists") or, with a cloud that does not
// refuse, make a second one.
func TestTerraformProviderKilledMidApply(t *testing.T) {
	t.Parallel()
	plugins := providerPluginDir(t)
	binary := stackdBinary(t)
	for _, tc := range []struct {
		name, attrs string
		adopted     bool
	}{
		{"before the object was made", "  sleep_ms = 1500\n", false},
		{"after a named object was made", "  sleep_ms = 1500\n  named    = true\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slow := strings.Replace(p6Template, "  crash   = var.crash_account == target.account\n", "  crash   = var.crash_account == target.account\n"+tc.attrs, 1)
			f, world, _ := p6Fixture(t, slow, "slow things")
			args := f.flags("--plugin-dir", plugins, "--listen", "127.0.0.1:0", "--interval", "1h", "--log-level", "debug")
			p := startProc(t, binary, nil, append([]string{"run"}, args...)...)
			// Killed while a create is inside the provider (each sleeps
			// 1.5 s after saying so on its stderr, which stackd logs at
			// debug level).
			p.waitLine(t, 60*time.Second, 0, "a create in the provider", func(l map[string]any) bool {
				msg, _ := l["message"].(string)
				return l["stream"] == "stderr" && strings.HasPrefix(msg, "sleeping ")
			})
			p.kill(t)
			p = startProc(t, binary, nil, append([]string{"run"}, args...)...)
			done := p.waitLine(t, 90*time.Second, 0, "the resumed operation", func(l map[string]any) bool {
				return l["message"] == "operation finished" && l["status"] == "SUCCEEDED"
			})
			adopted := false
			lines, _ := p.log.since(0)
			for _, l := range lines[:done] {
				msg, _ := l["message"].(string)
				if strings.Contains(msg, "a create a crash interrupted") && (l["stack_set"] == nil || l["region"] == nil || l["account"] == nil) {
					// In a fleet, the instance is how to find what it made.
					t.Errorf("%q does not name its instance: %v", msg, l)
				}
				adopted = adopted || msg == "adopted the object a create a crash interrupted made"
			}
			if adopted != tc.adopted {
				t.Errorf("the resumed operation adopted an object: %v, want %v; logs:\n%s", adopted, tc.adopted, p.log)
			}
			for _, tg := range [][2]string{{"eu-west-1", "111111111111"}, {"us-east-1", "111111111111"}, {"eu-west-1", "222222222222"}, {"us-east-1", "222222222222"}} {
				if _, err := os.Stat(filepath.Join(world, tg[1], tg[0]+"-app.json")); err != nil {
					t.Errorf("object of %s/%s after the restart: %v", tg[0], tg[1], err)
				}
			}
			p.signal(t, syscall.SIGTERM)
			p.wait(t, 30*time.Second)
			st := runBinary(t, binary, "status", "--state-dir", f.state)
			if strings.Contains(st.stdout, "IN_PROGRESS") || !strings.Contains(st.stdout, "OPERATION_COMPLETE") {
				t.Errorf("status after the restart:\n%s", st.stdout)
			}
			chk := runBinary(t, binary, "state", "check", "--state-dir", f.state)
			if chk.err != nil {
				t.Errorf("state check: %s", chk)
			}
		})
	}
}

// registryForP6 serves the test provider over the provider registry
// protocol on 127.0.0.1 (TLS): service discovery, versions, download,
// SHA256SUMS. With corrupt set, the zip served is not the one summed.
// signer signs SHA256SUMS for registryForP6; its armored public key is
// written to keyFile.
type signer struct {
	entity  *openpgp.Entity
	keyFile string
}

func newSigner(t *testing.T, name string) *signer {
	t.Helper()
	e, pub := testkit.OpenPGPKey(t, name)
	keyFile := filepath.Join(t.TempDir(), name+".asc")
	if err := os.WriteFile(keyFile, []byte(pub), 0o600); err != nil {
		t.Fatal(err)
	}
	return &signer{entity: e, keyFile: keyFile}
}

func registryForP6(t *testing.T, corrupt bool, signedBy ...*signer) (host, caFile string) {
	t.Helper()
	plugins := providerPluginDir(t)
	exe := filepath.Join(plugins, "registry.example.com", "stackd", "p6", "1.0.0", runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-p6_v1.0.0")
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	hdr := &zip.FileHeader{Name: "terraform-provider-p6_v1.0.0", Method: zip.Store}
	hdr.SetMode(0o755)
	w, err := zw.CreateHeader(hdr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bin); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zipBytes := zbuf.Bytes()
	name := fmt.Sprintf("terraform-provider-p6_1.0.0_%s_%s.zip", runtime.GOOS, runtime.GOARCH)
	sum := sha256.Sum256(zipBytes)
	sums := fmt.Sprintf("%x  %s\n", sum, name)
	served := zipBytes
	if corrupt {
		served = append(append([]byte{}, zipBytes...), "tampered"...)
	}
	mux := http.NewServeMux()
	writeJSONDoc := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSONDoc(w, map[string]any{"providers.v1": "/v1/providers/"})
	})
	mux.HandleFunc("GET /v1/providers/stackd/p6/versions", func(w http.ResponseWriter, _ *http.Request) {
		writeJSONDoc(w, map[string]any{"versions": []any{map[string]any{"version": "1.0.0", "protocols": []string{"6.0"},
			"platforms": []any{map[string]string{"os": runtime.GOOS, "arch": runtime.GOARCH}}}}})
	})
	var sig []byte
	if len(signedBy) > 0 {
		sig = testkit.DetachSign(t, signedBy[0].entity, []byte(sums))
	}
	mux.HandleFunc("GET /v1/providers/stackd/p6/1.0.0/download/{os}/{arch}", func(w http.ResponseWriter, _ *http.Request) {
		meta := map[string]any{"protocols": []string{"6.0"}, "os": runtime.GOOS, "arch": runtime.GOARCH, "filename": name,
			"download_url": "/files/" + name, "shasums_url": "/files/SHA256SUMS", "shasum": fmt.Sprintf("%x", sum),
			"signing_keys": map[string]any{"gpg_public_keys": []any{}}}
		if sig != nil {
			meta["shasums_signature_url"] = "/files/SHA256SUMS.sig"
		}
		writeJSONDoc(w, meta)
	})
	mux.HandleFunc("GET /files/SHA256SUMS.sig", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(sig) })
	mux.HandleFunc("GET /files/"+name, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(served) })
	mux.HandleFunc("GET /files/SHA256SUMS", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(sums)) })
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(srv.URL, "https://"), caFile
}

// TestTerraformProviderFromRegistry: a provider downloaded from a registry
// served on 127.0.0.1 (HTTPS, SHA256SUMS verified) deploys, is cached and
// locked; a registry serving a package that does not match its checksum
// is refused and nothing is deployed.
func TestTerraformProviderFromRegistry(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	for _, corrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("corrupt=%v", corrupt), func(t *testing.T) {
			host, ca := registryForP6(t, corrupt)
			f, world, dir := p6Fixture(t, strings.Replace(p6Template, "registry.example.com/stackd/p6", host+"/stackd/p6", 1), "things from a registry")
			cache := filepath.Join(dir, "plugin-cache")
			res := runBinary(t, binary, append([]string{"apply"}, f.flags("--plugin-cache-dir", cache, "--plugin-registry-ca-file", ca)...)...)
			if corrupt {
				if res.code() != 1 || !strings.Contains(res.stdout, "rejected") || !strings.Contains(res.stdout, "SHA-256 of the downloaded") || strings.Contains(res.stdout, "Unknown resource type") {
					t.Fatalf("apply with a tampered package: %s", res)
				}
				if left, _ := filepath.Glob(filepath.Join(world, "*", "*.json")); len(left) != 0 {
					t.Errorf("deployed from a tampered package: %v", left)
				}
				return
			}
			if res.err != nil || !strings.Contains(res.stdout, "SUCCEEDED (4/4") {
				t.Fatalf("apply from the registry: %s", res)
			}
			if exes, _ := filepath.Glob(filepath.Join(cache, "*", "stackd", "p6", "1.0.0", "*", "terraform-provider-p6_v1.0.0")); len(exes) != 1 {
				t.Errorf("the provider is not in the cache: %v", exes)
			}
			lock, err := os.ReadFile(filepath.Join(dir, "stackd", ".terraform.lock.hcl"))
			if err != nil || !strings.Contains(string(lock), "zh:") || !strings.Contains(string(lock), "h1:") {
				t.Errorf("lock file after a registry install: %v\n%s", err, lock)
			}
		})
	}
}

// TestTerraformProviderSignature: with --plugin-signing-key-file, a
// registry's SHA256SUMS must carry a signature by that key: one signed by
// another key, or none, is refused.
func TestTerraformProviderSignature(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	trusted, other := newSigner(t, "publisher"), newSigner(t, "someone-else")
	for _, tc := range []struct {
		name   string
		signer *signer
		ok     bool
	}{{"signed by the trusted key", trusted, true}, {"signed by another key", other, false}, {"not signed", nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var host, ca string
			if tc.signer != nil {
				host, ca = registryForP6(t, false, tc.signer)
			} else {
				host, ca = registryForP6(t, false)
			}
			f, _, dir := p6Fixture(t, strings.Replace(p6Template, "registry.example.com/stackd/p6", host+"/stackd/p6", 1), "signed things")
			res := runBinary(t, binary, append([]string{"apply"}, f.flags("--plugin-cache-dir", filepath.Join(dir, "cache"),
				"--plugin-registry-ca-file", ca, "--plugin-signing-key-file", trusted.keyFile)...)...)
			if tc.ok != (res.err == nil) {
				t.Fatalf("apply: %s", res)
			}
			if !tc.ok && (!strings.Contains(res.stdout, "rejected") || !strings.Contains(strings.ToLower(res.stdout), "signature")) {
				t.Errorf("refusal does not say why: %s", res)
			}
		})
	}
}

// TestTerraformProviderMoreConfigurationsThanProcesses: with a provider
// configured per target (as the StackSets execution-role model makes
// every account's configuration different) and more targets applied at
// once than --plugin-max-processes, each target's configuration is
// started once, not once per resource call: a process an instance used a
// moment ago is not ended to make room for another's.
func TestTerraformProviderMoreConfigurationsThanProcesses(t *testing.T) {
	t.Parallel()
	plugins := providerPluginDir(t)
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "stackd", "state"), targets: filepath.Join(dir, "targets")}
	world := filepath.Join(dir, "world")
	var accounts []string
	for i := range 10 {
		acct := fmt.Sprintf("%012d", i+1)
		accounts = append(accounts, `"`+acct+`"`)
		if err := os.MkdirAll(filepath.Join(world, acct), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const targets = 20
	writeTree(t, f.repo, map[string]string{
		"things.hcl": `stack_set "things" {
  template = "./templates/things"
  vars     = { world = "` + world + `" }
  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = [` + strings.Join(accounts, ", ") + `]
  }
  operation_preferences {
    region_concurrency_type = "PARALLEL"
    max_concurrent_count    = 10
    failure_tolerance_mode  = "SOFT_FAILURE_TOLERANCE"
  }
}
`,
		"templates/things/main.hcl": p6Provider + `resource "p6_thing" "app" {
  count   = 4
  name    = "app${count.index}"
  content = "hello ${target.account}"
}
`,
	})
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "things")
	res := runBinary(t, stackdBinary(t), append([]string{"apply"}, f.flags("--plugin-dir", plugins, "--plugin-max-processes", "2", "--log-level", "debug")...)...)
	if res.err != nil || !strings.Contains(res.stdout, fmt.Sprintf("SUCCEEDED (%d/%d", targets, targets)) {
		t.Fatalf("apply: %s", res)
	}
	// One process per target's configuration for its plan (a create is
	// planned by the provider, as Terraform plans it) and one for its
	// apply (the other targets' processes took its place in between), plus
	// the schema read and the validating process; one start per resource
	// call would be 8 a target (4 plans, 4 creates). A process idle for
	// longer than its start cost may make room (a loaded machine
	// stretches the pauses between an instance's calls and so restarts a
	// few): the bound is 5 a target, well under the failure's 8. (Measured
	// on 2 cores: 67–83 in all for 20 targets, idle or loaded; 4 a target
	// was the edge of that range and failed now and then.)
	started := strings.Count(res.stderr, "provider started")
	t.Logf("%d provider processes started", started)
	if started > 5*targets {
		t.Errorf("%d provider processes started for %d configurations of %d resources each: processes were ended between the calls of one instance", started, targets, 4)
	}
	objects, _ := filepath.Glob(filepath.Join(world, "*", "*-app*.json"))
	if len(objects) != targets*4 {
		t.Errorf("%d objects, want %d", len(objects), targets*4)
	}
}

// TestTerraformProviderStoppedOnShutdown: SIGTERM to `stackd run` while a
// provider call is in flight: once --shutdown-grace is over the provider
// is asked to stop it (StopProvider) and the daemon exits 0; the next
// start repeats the interrupted create and leaves one object per target.
func TestTerraformProviderStoppedOnShutdown(t *testing.T) {
	t.Parallel()
	plugins := providerPluginDir(t)
	// Each create sleeps 6 s: SIGTERM comes well before the calls could
	// end by themselves, and all 4 instances run at once (2 per region).
	slow := strings.Replace(p6Template, `  secret  = "resource-secret-value"`, "  secret  = \"resource-secret-value\"\n  sleep_ms = 6000", 1)
	f, world, _ := p6Fixture(t, slow, "slow things")
	binary := stackdBinary(t)
	p := startProc(t, binary, nil, append([]string{"run"}, f.flags("--plugin-dir", plugins, "--listen", "127.0.0.1:0", "--interval", "1h",
		"--shutdown-grace", "300ms", "--log-level", "debug")...)...)
	p.waitLine(t, 60*time.Second, 0, "a create in flight", func(l map[string]any) bool {
		m, _ := l["message"].(string)
		return strings.HasPrefix(m, "sleeping app")
	})
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("stackd run exited %d after SIGTERM, want 0; logs:\n%s", code, p.log)
	}
	if p.log.count("provider asked to stop its calls in flight") == 0 {
		t.Errorf("no provider was asked to stop its calls in flight (StopProvider); logs:\n%s", p.log)
	}
	if n := p.log.count("operation interrupted; it resumes on restart"); n != 1 {
		t.Errorf("logged the interrupted operation %d times, want once; logs:\n%s", n, p.log)
	}
	res := runBinary(t, binary, append([]string{"apply"}, f.flags("--plugin-dir", plugins)...)...)
	if res.err != nil || !strings.Contains(res.stdout, "SUCCEEDED (4/4") {
		t.Fatalf("apply after the stop: %s", res)
	}
	objects, _ := filepath.Glob(filepath.Join(world, "*", "*-app.json"))
	if len(objects) != 4 {
		t.Errorf("objects %v, want one per target", objects)
	}
	if strings.Contains(p.log.String(), "provider-token-secret") || strings.Contains(p.log.String(), "resource-secret-value") {
		t.Error("a secret reached the log")
	}

	// stackd apply interrupted (Ctrl-C) asks the providers too.
	f2, _, _ := p6Fixture(t, strings.Replace(slow, "sleep_ms = 6000", "sleep_ms = 600000", 1), "slower things")
	a := startProc(t, binary, nil, append([]string{"apply"}, f2.flags("--plugin-dir", plugins, "--log-level", "debug")...)...)
	a.waitLine(t, 60*time.Second, 0, "a create in flight", func(l map[string]any) bool {
		m, _ := l["message"].(string)
		return strings.HasPrefix(m, "sleeping app")
	})
	a.signal(t, syscall.SIGINT)
	a.wait(t, 30*time.Second)
	if a.log.count("provider asked to stop its calls in flight") == 0 {
		t.Errorf("stackd apply interrupted asked no provider to stop its calls in flight; logs:\n%s", a.log)
	}
}

// TestValidateRunsProviderValidators: stackd validate has the provider's
// validators check every instance's configuration, as terraform validate
// does, with the diagnostic at the attribute; the provider is not
// configured (its validators of the provider block still run).
func TestValidateRunsProviderValidators(t *testing.T) {
	t.Parallel()
	plugins := providerPluginDir(t)
	bad := strings.Replace(p6Template, `    key   = "owner"`, `    key   = "Not-Lower"`, 1)
	f, _, dir := p6Fixture(t, bad, "a tag key the provider refuses")
	res := stackd(t, "validate", f.repo, "--plugin-dir", plugins, "--state-dir", filepath.Join(dir, "validate", "state"))
	loc := fmt.Sprintf("templates/things/main.hcl:%d", lineOf(t, f.repo, "templates/things/main.hcl", "Not-Lower"))
	if res.code() != 1 || !strings.Contains(res.stdout, loc) || !strings.Contains(res.stderr, "p6_thing.app.tag[0].key") {
		t.Errorf("validate: exit %d; want 1 and the provider's diagnostic at %s\n%s", res.code(), loc, res)
	}
	if strings.Contains(res.stdout+res.stderr, "resource-secret-value") || strings.Contains(res.stdout+res.stderr, "provider-token-secret") {
		t.Errorf("a secret reached validate's output:\n%s", res)
	}
}

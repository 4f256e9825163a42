package main

// End-to-end tests of the ROS custom-resource seed's rules (issue 16,
// items 13-15): CallerId under call_identity, a Create answered without
// PhysicalResourceId, an HTTP error status carrying a SUCCESS body, and
// response URLs stackd cannot receive.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// seedProvider is a custom-resource provider on 127.0.0.1 that records
// every request as JSON and answers synchronously with answer's status
// and body (default: 200 and a SUCCESS with a physical id).
type seedProvider struct {
	mu       sync.Mutex
	requests []map[string]any
	answer   func(req map[string]any) (int, map[string]any)
}

func (p *seedProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.requests = append(p.requests, req)
	answer := p.answer
	p.mu.Unlock()
	status, body := http.StatusOK, map[string]any{
		"Status": "SUCCESS", "PhysicalResourceId": fmt.Sprintf("phys-%v", req["RequestId"]),
		"Data": map[string]any{"caller": req["CallerId"]},
	}
	if answer != nil {
		status, body = answer(req)
	}
	if body == nil {
		w.WriteHeader(status)
		return
	}
	for _, k := range []string{"RequestId", "StackId", "LogicalResourceId"} {
		body[k] = req[k]
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func (p *seedProvider) all() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]any(nil), p.requests...)
}

func startSeedProvider(t *testing.T, answer func(req map[string]any) (int, map[string]any)) (*seedProvider, string) {
	t.Helper()
	p := &seedProvider{answer: answer}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL + "/hook"
}

// newSeedFixture is an empty fixture (no quickstart) with files committed.
func newSeedFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	writeTree(t, f.repo, files)
	runGit(t, f.repo, "init", "-q")
	f.commit(t, "definitions")
	return f
}

const seedOrgHCL = `organization {
  management_account = "000000000000"
  delegated_admins   = ["444444444444", "555555555555"]

  organizational_unit "ou-root" {
    accounts = ["000000000000", "111111111111", "222222222222", "444444444444", "555555555555"]
  }
}
`

// seedCallerHCL: "admin" is DELEGATED_ADMIN, "self" SERVICE_MANAGED SELF,
// "plain" SELF_MANAGED, each with one custom resource.
func seedCallerHCL(token, adminAccounts string) string {
	return `resource_type "Custom::Probe" {
  service_token = "` + token + `"
}

stack_set "admin" {
  template         = "./template"
  permission_model = "SERVICE_MANAGED"
  call_identity    = "DELEGATED_ADMIN"
  deployment_targets {
    regions              = ["eu-west-1"]
    organizational_units = ["ou-root"]
    account_filter_type  = "INTERSECTION"
    accounts             = [` + adminAccounts + `]
  }
}

stack_set "self" {
  template         = "./template"
  permission_model = "SERVICE_MANAGED"
  call_identity    = "SELF"
  deployment_targets {
    regions              = ["eu-west-1"]
    organizational_units = ["ou-root"]
    account_filter_type  = "INTERSECTION"
    accounts             = ["111111111111"]
  }
}

stack_set "plain" {
  template = "./template"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["333333333333"]
  }
}
`
}

const seedProbeTemplate = `resource "custom" "probe" {
  type       = "Custom::Probe"
  properties = { at = target.account }
}
output "caller" { value = custom.probe.data.caller }
`

// Item 13: CallerId is the delegated admin (the first of delegated_admins)
// under call_identity = "DELEGATED_ADMIN", for creates and for the deletes
// of an account leaving the stack set; the target account otherwise.
func TestCustomCallerIDFollowsCallIdentity(t *testing.T) {
	t.Parallel()
	prov, token := startSeedProvider(t, nil)
	f := newSeedFixture(t, map[string]string{
		"org.hcl":           seedOrgHCL,
		"sets.hcl":          seedCallerHCL(token, `"111111111111", "222222222222"`),
		"template/main.hcl": seedProbeTemplate,
	})
	f.mustApply(t)

	got := func(kind string) []string {
		var out []string
		for _, r := range prov.all() {
			if r["RequestType"] == kind {
				out = append(out, fmt.Sprintf("%v %v caller=%v", r["StackName"], r["ResourceOwnerId"], r["CallerId"]))
			}
		}
		sort.Strings(out)
		return out
	}
	want := []string{
		"admin 111111111111 caller=444444444444",
		"admin 222222222222 caller=444444444444",
		"plain 333333333333 caller=333333333333",
		"self 111111111111 caller=111111111111",
	}
	if g := got("Create"); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("creates:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
	// The caller is what the provider saw: its Data echoes it into the output.
	doc := statusHead(t, f.repo).stackSetStatus(t, "admin")
	for _, in := range doc.Instances {
		var out map[string]string
		json.Unmarshal(in.Outputs, &out)
		if out["caller"] != "444444444444" {
			t.Errorf("admin/%s output caller %q, want 444444444444", in.Account, out["caller"])
		}
	}

	// 222222222222 leaves the stack set: its instance's delete is made as
	// the delegated admin too.
	replaceIn(t, f.repo, "sets.hcl", `accounts             = ["111111111111", "222222222222"]`, `accounts             = ["111111111111"]`)
	f.commit(t, "admin: one account fewer")
	f.mustApply(t)
	if g := got("Delete"); strings.Join(g, "\n") != "admin 222222222222 caller=444444444444" {
		t.Errorf("deletes: %q, want the delegated admin's delete of 222222222222", g)
	}
}

// seedSingleHCL is one SELF_MANAGED stack set in one region and account
// whose template holds one custom resource of type Custom::Probe.
func seedSingleHCL(token string) string {
	return `resource_type "Custom::Probe" {
  service_token = "` + token + `"
}

stack_set "probe" {
  template = "./template"
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111"]
  }
}
`
}

// Item 14: the seed requires PhysicalResourceId in a response; a Create
// answered SUCCESS without one fails the resource with a reason saying so,
// and an HTTP error status is a failure whatever the body says. The
// failed create is cleaned up with a Delete naming the RequestId.
func TestCustomSuccessThatIsNot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		status  int
		body    map[string]any
		reason  string
		cleanup bool // the service made something: a Delete removes it
	}{
		{name: "no PhysicalResourceId", status: http.StatusOK, body: map[string]any{"Status": "SUCCESS", "Data": map[string]any{"caller": "x"}},
			reason: "answered SUCCESS without a PhysicalResourceId, which a Create response must carry", cleanup: true},
		{name: "empty PhysicalResourceId", status: http.StatusCreated, body: map[string]any{"Status": "SUCCESS", "PhysicalResourceId": ""},
			reason: "answered SUCCESS without a PhysicalResourceId", cleanup: true},
		{name: "SUCCESS in a 400", status: http.StatusBadRequest, body: map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "p-1"},
			reason: "answered 400 Bad Request with a SUCCESS body: an HTTP error status is a failure"},
		{name: "SUCCESS in a 404", status: http.StatusNotFound, body: map[string]any{"Status": "SUCCESS", "PhysicalResourceId": "p-1"},
			reason: "answered 404 Not Found with a SUCCESS body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prov, token := startSeedProvider(t, func(req map[string]any) (int, map[string]any) {
				if req["RequestType"] == "Create" {
					return tc.status, tc.body
				}
				return http.StatusOK, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": req["PhysicalResourceId"]}
			})
			f := newSeedFixture(t, map[string]string{
				"sets.hcl":          seedSingleHCL(token),
				"template/main.hcl": seedProbeTemplate,
			})
			res := f.apply(t)
			if res.code() != 1 {
				t.Fatalf("apply exit %d, want 1 (a failed instance):\n%s", res.code(), res)
			}
			if !strings.Contains(res.stdout, tc.reason) {
				t.Errorf("apply output does not give the reason %q:\n%s", tc.reason, res)
			}
			doc := statusHead(t, f.repo).stackSetStatus(t, "probe")
			if len(doc.Instances) != 1 || !strings.Contains(doc.Instances[0].Reason, tc.reason) || doc.Instances[0].Status == "SUCCEEDED" {
				t.Errorf("status instances %+v, want one failed with reason %q", doc.Instances, tc.reason)
			}

			// What a SUCCESS made is deleted at once, by the RequestId the
			// Create carried; a failure status made nothing to delete.
			var createID string
			var deleted []string
			for _, r := range prov.all() {
				switch r["RequestType"] {
				case "Create":
					createID = fmt.Sprint(r["RequestId"])
				case "Delete":
					deleted = append(deleted, fmt.Sprint(r["PhysicalResourceId"]))
				}
			}
			switch {
			case createID == "":
				t.Errorf("no Create request")
			case tc.cleanup && (len(deleted) != 1 || deleted[0] != createID):
				t.Errorf("deletes %q, want one naming the create's RequestId %q", deleted, createID)
			case !tc.cleanup && len(deleted) != 0:
				t.Errorf("deletes %q after a failure status, want none", deleted)
			}
		})
	}
}

// Item 15, no listener: stackd apply without --listen says at plan time
// that asynchronous answers cannot arrive (naming --listen), a service
// answering in the body still works, and one that only acknowledges fails
// its resource at once with the reason — not at its timeout.
func TestCustomApplyWithoutListener(t *testing.T) {
	t.Parallel()
	prov, token := startSeedProvider(t, func(req map[string]any) (int, map[string]any) {
		props, _ := req["ResourceProperties"].(map[string]any)
		if props["mode"] == "async" && req["RequestType"] == "Create" {
			return http.StatusAccepted, nil // the answer would come on the ResponseURL
		}
		return http.StatusOK, map[string]any{"Status": "SUCCESS", "PhysicalResourceId": fmt.Sprintf("p-%v", props["mode"])}
	})
	f := newSeedFixture(t, map[string]string{
		"sets.hcl": seedSingleHCL(token) + `resource_type "Custom::Later" {
  service_token = "` + token + `"
}
`,
		"template/main.hcl": `resource "custom" "sync" {
  type       = "Custom::Probe"
  properties = { mode = "sync" }
}
resource "custom" "async" {
  type       = "Custom::Later"
  properties = { mode = "async" }
  depends_on = [custom.sync]
  timeout    = "20s" # were the failure to wait for it, the reason would be the timeout
}
`,
	})
	res := f.apply(t)
	if res.code() != 1 {
		t.Fatalf("apply exit %d, want 1:\n%s", res.code(), res)
	}
	const reason = "the service acknowledged the request without answering in the body, so its response would come to the ResponseURL, but stackd apply serves no HTTP API without --listen"
	if !strings.Contains(res.stdout, reason) {
		t.Errorf("apply output does not say why (%q):\n%s", reason, res)
	}
	// The plan-time warning, once per type, before any request was sent.
	var warned []string
	for _, l := range logLines(res.stderr) {
		if l["level"] == "warn" && strings.Contains(fmt.Sprint(l["message"]), "--listen") {
			warned = append(warned, fmt.Sprint(l["resource_type"]))
		}
	}
	sort.Strings(warned)
	if strings.Join(warned, " ") != "Custom::Later Custom::Probe" {
		t.Errorf("plan-time warnings for %q, want one per type; stderr:\n%s", warned, res.stderr)
	}
	var modes []string
	for _, r := range prov.all() {
		props, _ := r["ResourceProperties"].(map[string]any)
		modes = append(modes, fmt.Sprint(r["RequestType"], " ", props["mode"]))
	}
	sort.Strings(modes)
	if strings.Join(modes, ", ") != "Create async, Create sync" {
		t.Errorf("requests %q, want one Create each", modes)
	}
}

// Item 15, https on 443: a resource whose service answers the way AWS's
// Node.js cfn-response does (https to port 443, whatever the URL says)
// declares response_over_https; an external URL that is not https on 443,
// or no API at all, is a diagnostic at plan time naming the flag, and no
// request is sent.
func TestCustomResponseOverHTTPS(t *testing.T) {
	t.Parallel()
	prov, token := startSeedProvider(t, nil)
	files := map[string]string{
		"sets.hcl": seedSingleHCL(token),
		"template/main.hcl": `resource "custom" "probe" {
  type                = "Custom::Probe"
  properties          = {}
  response_over_https = true
}
`,
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // "" : valid
	}{
		{name: "plan, http default", args: []string{"plan"}, want: "but stackd's external URL is http://127.0.0.1:7070; set --external-url to an https URL on port 443"},
		{name: "plan, https on 8443", args: []string{"plan", "--external-url", "https://stackd.example.com:8443"}, want: "external URL is https://stackd.example.com:8443"},
		{name: "plan, https", args: []string{"plan", "--external-url", "https://stackd.example.com"}},
		{name: "plan, https on 443", args: []string{"plan", "--external-url", "https://stackd.example.com:443/stackd"}},
		{name: "apply --listen, http", args: []string{"apply", "--listen", "127.0.0.1:0"}, want: "but stackd's external URL is http://127.0.0.1:"},
		{name: "apply without --listen", args: []string{"apply", "--external-url", "https://stackd.example.com"}, want: "response_over_https: the service answers only at the ResponseURL, but stackd apply serves no HTTP API without --listen"},
	} {
		// A fresh repository each: a rejected revision is not planned again.
		f := newSeedFixture(t, files)
		res := stackd(t, append(tc.args, f.flags()...)...)
		out := res.stdout + res.stderr
		switch {
		case tc.want == "" && res.err != nil:
			t.Errorf("%s: %s", tc.name, res)
		case tc.want != "" && (res.code() != 1 || !strings.Contains(out, tc.want)):
			t.Errorf("%s: exit %d, want 1 with %q:\n%s", tc.name, res.code(), tc.want, res)
		}
	}
	if n := len(prov.all()); n != 0 {
		t.Errorf("the service got %d requests, want none", n)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/internal/pgtest"
	"github.com/stackd/stackd/state"
)

// TestDeliveryToTheOtherReplica (issue 31, docs/design.md §13): two
// `stackd run` replicas on one PostgreSQL state. Everything that must
// reach the owner of the stack set is sent to the replica that does NOT
// own it: each custom resource's response (the provider answers on the
// ResponseURL with the other replica's address), each wait condition's
// signal, and the promote of the rollout holding after batch 1. The
// rollout completes.
func TestDeliveryToTheOtherReplica(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	st, err := state.OpenPostgres(dsn, state.PostgresOptions{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	// The replicas' addresses are chosen first: the provider sends each
	// response to the replica its ResponseURL does not name.
	addrs := [2]string{freePort(t), freePort(t)}
	other := func(host string) string {
		if host == addrs[0] {
			return addrs[1]
		}
		return addrs[0]
	}
	prov := &forwardingProvider{other: other, hosts: map[string]bool{}}
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	repo, targets := filepath.Join(dir, "repo"), filepath.Join(dir, "targets")
	accounts := []string{"111111111111", "222222222222"}
	writeTree(t, repo, map[string]string{"README.md": "fleet\n"})
	runGit(t, repo, "init", "-q")
	commitAllIn(t, repo, "empty")

	var reps [2]*proc
	for i, addr := range addrs {
		reps[i] = startProc(t, binary, nil, "run", "--repo", repo, "--state-url", dsn, "--targets-root", targets, "--shared-targets-root",
			"--interval", "300ms", "--listen", addr, "--external-url", "http://"+addr, "--log-format", "json", "--log-level", "debug")
	}
	ids := map[string]string{} // replica id → address
	for i, p := range reps {
		j := p.waitLine(t, time.Minute, 0, "running as a replica", message("running as a replica of a shared state"))
		lines, _ := p.log.since(j)
		id, _ := lines[0]["replica"].(string)
		ids[id] = addrs[i]
		p.waitLine(t, time.Minute, 0, `"stackd running"`, message("stackd running"))
	}
	logs := func() string {
		var b strings.Builder
		for i, p := range reps {
			fmt.Fprintf(&b, "\n--- replica at %s:\n%s", addrs[i], tailLines(p.log.String(), 40))
		}
		return b.String()
	}

	writeTree(t, repo, map[string]string{
		"types.hcl": fmt.Sprintf("resource_type \"Custom::Dns\" {\n  service_token = %q\n}\n", srv.URL+"/dns"),
		"app.hcl": fmt.Sprintf(`stack_set "app" {
  template = "./template"
  vars     = { version = "v1" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = %s
  }
  rollout {
    batch_size = 1
    pause      = "until_promoted"
  }
}
`, hclList(accounts)),
		"template/main.hcl": `variable "version" { type = string }

resource "custom" "dns" {
  type       = "Custom::Dns"
  properties = { name = "app" }
}

resource "wait_condition" "ready" {
  count   = 1
  timeout = "5m"
}

# The "server" gets its handle URL, as in its user data.
resource "file" "boot" {
  path    = "signal_url"
  content = wait_condition.ready.handle_url
}

output "fqdn" { value = custom.dns.data.fqdn }
output "ready" { value = wait_condition.ready.status }
`,
	})
	rev := commitAllIn(t, repo, "app: a custom resource, a wait condition, a held rollout")

	// The "servers" signal the replica that does not own the stack set.
	signalled := map[string]bool{}
	signalOthers := func() {
		for _, a := range accounts {
			if signalled[a] {
				continue
			}
			b, err := os.ReadFile(filepath.Join(targets, a, "eu-west-1", "signal_url"))
			if err != nil || len(b) == 0 {
				continue
			}
			u, err := url.Parse(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("handle URL %q: %v", b, err)
			}
			u.Host = other(u.Host)
			res, err := http.Post(u.String(), "application/json", strings.NewReader(`{"status": "SUCCESS", "reason": "booted"}`))
			if err != nil {
				t.Fatalf("signal to the other replica: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("signal to the other replica (%s): %s %s", u.Host, res.Status, body)
			}
			signalled[a] = true
		}
	}
	operation := func() (state.Operation, bool) {
		ss, err := st.StackSetByName("app")
		if err != nil {
			return state.Operation{}, false
		}
		op, err := st.OperationForRevision(ss.ID, rev)
		return op, err == nil
	}
	eventually(t, 2*time.Minute, func() bool {
		signalOthers()
		op, ok := operation()
		return ok && op.Rollout != nil && op.Rollout.Phase == state.RolloutWaitingForPromotion && op.Rollout.Batch == 1
	}, "the rollout to hold after batch 1 (the response and the signal went to the other replica)%s", logs())

	// The owner is the replica whose ResponseURLs the provider got;
	// promote is sent to the other one, which names the owner.
	prov.mu.Lock()
	hosts := prov.hosts
	prov.mu.Unlock()
	if len(hosts) != 1 {
		t.Fatalf("ResponseURLs named %v, want the one owner", hosts)
	}
	ownerAddr, owner := "", ""
	for h := range hosts {
		ownerAddr = h
	}
	for id, a := range ids {
		if a == ownerAddr {
			owner = id
		}
	}
	if owner == "" {
		t.Fatalf("the owner's address %s is no replica's %v", ownerAddr, ids)
	}
	// stackd promote pointed at the other replica.
	res := runBinary(t, binary, "promote", "app", "--server", "http://"+other(ownerAddr))
	if res.err != nil || !strings.Contains(res.stdout, "forwarded to the owner replica "+owner) {
		t.Fatalf("stackd promote on the other replica: %v\n%s\nwant it forwarded to %s", res.err, res, owner)
	}
	eventually(t, 2*time.Minute, func() bool {
		signalOthers()
		op, ok := operation()
		return ok && op.Status.Done()
	}, "the promoted rollout to end%s", logs())
	op, _ := operation()
	if op.Status != state.OperationSucceeded {
		t.Fatalf("operation %s (%s), want SUCCEEDED%s", op.Status, op.Reason, logs())
	}

	prov.mu.Lock()
	defer prov.mu.Unlock()
	if len(prov.failures) > 0 {
		t.Errorf("responses the other replica refused: %v", prov.failures)
	}
	if prov.forwarded != len(accounts) {
		t.Errorf("%d responses sent to the other replica, want %d (one Create per account)", prov.forwarded, len(accounts))
	}
	for _, p := range reps {
		if strings.Contains(p.log.String(), "fqdn-secret") {
			t.Error("a replica logged a forwarded response's data")
		}
	}
}

// forwardingProvider is a custom-resource provider on 127.0.0.1 that
// acknowledges each Create and answers it on the ResponseURL, with the
// host changed to the other replica's (other), as a load balancer in
// front of the replicas might; Deletes are answered synchronously.
type forwardingProvider struct {
	other func(host string) string

	mu        sync.Mutex
	hosts     map[string]bool // the hosts of the ResponseURLs: the owners
	forwarded int
	failures  []string
}

func (p *forwardingProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req crRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := req.success()
	resp["Data"] = map[string]any{"fqdn": "app.example.", "note": "fqdn-secret"}
	if req.RequestType != "Create" {
		json.NewEncoder(w).Encode(resp)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	go func() {
		u, err := url.Parse(req.ResponseURL)
		if err == nil {
			p.mu.Lock()
			p.hosts[u.Host] = true
			p.mu.Unlock()
			u.Host = p.other(u.Host)
			body, _ := json.Marshal(resp)
			put, _ := http.NewRequest(http.MethodPut, u.String(), bytes.NewReader(body))
			var res *http.Response
			if res, err = http.DefaultClient.Do(put); err == nil {
				msg, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					err = fmt.Errorf("PUT to %s answered %s: %s", u.Host, res.Status, msg)
				}
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.failures = append(p.failures, err.Error())
			return
		}
		p.forwarded++
	}()
}

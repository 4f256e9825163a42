package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// dnsProvider is a real custom-resource provider on 127.0.0.1: Creates are
// answered asynchronously by PUT to the ResponseURL (as cfn-response does,
// with an empty Content-Type), Updates and Deletes synchronously.
type dnsProvider struct {
	// newIDOnUpdate answers Updates with a new physical id (a replacement).
	newIDOnUpdate bool
	mu            sync.Mutex
	requests      []map[string]any
	creates       map[string][]string // logical id + stack id -> request ids
	failures      []string
}

func (p *dnsProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.requests = append(p.requests, req)
	key := fmt.Sprint(req["LogicalResourceId"], " ", req["StackId"])
	props, _ := req["ResourceProperties"].(map[string]any)
	resp := map[string]any{
		"Status": "SUCCESS", "RequestId": req["RequestId"], "StackId": req["StackId"],
		"LogicalResourceId":  req["LogicalResourceId"],
		"PhysicalResourceId": fmt.Sprintf("dns-%v-%v", props["name"], req["RequestType"]),
		"Data":               map[string]any{"fqdn": fmt.Sprintf("%v.example.", props["name"])},
	}
	switch req["RequestType"] {
	case "Create":
		p.creates[key] = append(p.creates[key], fmt.Sprint(req["RequestId"]))
		p.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		go func() {
			body, _ := json.Marshal(resp)
			put, _ := http.NewRequest(http.MethodPut, fmt.Sprint(req["ResponseURL"]), bytes.NewReader(body))
			put.Header.Del("Content-Type")
			res, err := http.DefaultClient.Do(put)
			if err == nil {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					err = fmt.Errorf("PUT answered %s", res.Status)
				}
			}
			if err != nil {
				p.mu.Lock()
				p.failures = append(p.failures, err.Error())
				p.mu.Unlock()
			}
		}()
		return
	case "Update":
		resp["PhysicalResourceId"] = req["PhysicalResourceId"]
		if p.newIDOnUpdate {
			resp["PhysicalResourceId"] = fmt.Sprintf("%v-v2", req["PhysicalResourceId"])
		}
	case "Delete":
		resp["PhysicalResourceId"] = req["PhysicalResourceId"]
		delete(resp, "Data")
	}
	p.mu.Unlock()
	json.NewEncoder(w).Encode(resp)
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestCustomResourceThroughTheDaemon(t *testing.T) {
	t.Parallel()
	prov := &dnsProvider{creates: map[string][]string{}}
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)
	runCustomLifecycle(t, prov, srv.URL)
}

// Over HTTPS with a private CA (--custom-ca-file), and a provider whose
// Update returns a new physical id: the old one gets a Delete.
func TestCustomResourceHTTPSReplacement(t *testing.T) {
	t.Parallel()
	prov := &dnsProvider{creates: map[string][]string{}, newIDOnUpdate: true}
	srv := httptest.NewTLSServer(prov)
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	runCustomLifecycle(t, prov, srv.URL, "--custom-ca-file", ca)
	prov.mu.Lock()
	defer prov.mu.Unlock()
	var deletedOld []string
	for _, req := range prov.requests {
		if req["RequestType"] == "Delete" && !strings.HasSuffix(fmt.Sprint(req["PhysicalResourceId"]), "-v2") {
			deletedOld = append(deletedOld, fmt.Sprint(req["PhysicalResourceId"]))
		}
	}
	if len(deletedOld) != 2 {
		t.Errorf("old physical ids deleted after the replacing update: %v, want one per instance", deletedOld)
	}
}

func runCustomLifecycle(t *testing.T, prov *dnsProvider, url string, extra ...string) {
	t.Helper()

	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(f.repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("dns.hcl", `resource_type "Custom::DNSRecord" {
  service_token = "`+url+`/hook"
}

stack_set "dns" {
  template = "./template"
  vars     = { zone = "internal" }
  deployment_targets {
    regions  = ["eu-west-1", "us-east-1"]
    accounts = ["111111111111"]
  }
}
`)
	write("template/main.hcl", `variable "zone" { type = string }
resource "custom" "record" {
  type       = "Custom::DNSRecord"
  properties = { name = "web-${target.region}", zone = var.zone }
}
resource "file" "hosts" {
  path    = "hosts"
  content = "${custom.record.data.fqdn} ${custom.record.id}\n"
}
output "fqdn" { value = custom.record.data.fqdn }
`)
	runGit(t, f.repo, "init", "-q")
	rev := f.commit(t, "dns records")

	listen := freePort(t)
	d := startDaemon(t, f.flags(append([]string{"--listen", listen, "--external-url", "http://" + listen, "--interval", "1h"}, extra...)...)...)
	waitStatus := func(rev string) {
		t.Helper()
		eventually(t, 20*time.Second, func() bool {
			st := statusHead(t, f.repo)
			return strings.Contains(st.Message, rev[:7]) && strings.Contains(st.Message, "SUCCEEDED")
		}, "no successful status commit for %s; logs:\n%s", rev[:7], d.logs)
	}
	waitStatus(rev)
	doc := statusHead(t, f.repo).stackSetStatus(t, "dns")
	for _, in := range doc.Instances {
		var out map[string]string
		json.Unmarshal(in.Outputs, &out)
		if want := "web-" + in.Region + ".example."; out["fqdn"] != want {
			t.Errorf("%s output fqdn %q, want %q", in.Region, out["fqdn"], want)
		}
		hosts := readFile(t, f.instanceDir(in.Region, in.Account)+"/hosts")
		if want := "web-" + in.Region + ".example. dns-web-" + in.Region + "-Create\n"; hosts != want {
			t.Errorf("%s hosts file %q, want %q", in.Region, hosts, want)
		}
	}

	// A property change: an Update, answered synchronously.
	replaceIn(t, f.repo, "dns.hcl", `zone = "internal"`, `zone = "corp"`)
	rev = f.commit(t, "new zone")
	waitStatus(rev)

	// Removing the resource sends Deletes.
	write("template/main.hcl", `variable "zone" { type = string }
`)
	rev = f.commit(t, "no more records")
	waitStatus(rev)
	if err := d.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}

	prov.mu.Lock()
	defer prov.mu.Unlock()
	if len(prov.failures) > 0 {
		t.Errorf("async responses refused: %v", prov.failures)
	}
	counts := map[string]int{}
	for _, req := range prov.requests {
		counts[fmt.Sprint(req["RequestType"])]++
		if req["ResourceType"] != "Custom::DNSRecord" || !strings.HasSuffix(fmt.Sprint(req["StackId"]), "/111111111111") || req["StackName"] != "dns" {
			t.Errorf("request fields: %v", req)
		}
		if req["RequestType"] == "Update" {
			old, _ := req["OldResourceProperties"].(map[string]any)
			if old["zone"] != "internal" {
				t.Errorf("update without old properties: %v", req)
			}
		}
	}
	wantDeletes := 2
	if prov.newIDOnUpdate {
		wantDeletes = 4 // the replaced ids, then the resources
	}
	if counts["Create"] != 2 || counts["Update"] != 2 || counts["Delete"] != wantDeletes {
		t.Errorf("requests by type %v, want 2 creates, 2 updates, %d deletes", counts, wantDeletes)
	}
	for key, ids := range prov.creates {
		if len(ids) != 1 {
			t.Errorf("%s created %d times: %v", key, len(ids), ids)
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Wait conditions and update patterns through `stackd run`: each instance
// writes its handle URL to a file (as a booting server would receive it
// in its user data), the test plays the server and POSTs the signal to
// the daemon's API on 127.0.0.1, and a file that needs the signal's data
// is written only after it. A new version replaces the wait condition
// (triggers) and updates a counted resource in update_pattern batches.
func TestWaitConditionAndUpdatePatternThroughTheDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), state: filepath.Join(dir, "state"), targets: filepath.Join(dir, "targets")}
	accounts := []string{"111111111111", "222222222222"}
	writeTree(t, f.repo, map[string]string{
		"app.hcl": `stack_set "app" {
  template = "./template"
  vars     = { version = "v1" }
  deployment_targets {
    regions  = ["eu-west-1"]
    accounts = ["111111111111", "222222222222"]
  }
}
`,
		"template/main.hcl": `variable "version" { type = string }

resource "wait_condition" "ready" {
  count    = 1
  timeout  = "5m"
  triggers = { version = var.version }
}

# The "server": receives the handle URL and signals when it is up.
resource "file" "boot" {
  path    = "signal_url"
  content = wait_condition.ready.handle_url
}

# Needs the server's address, which only its signal tells.
resource "file" "lb" {
  path    = "lb.conf"
  content = "backend ${wait_condition.ready.data["web"]} ${var.version}\n"
}

resource "file" "shard" {
  count   = 3
  path    = "shard-${count.index}"
  content = var.version
  update_pattern {
    batch_size = 2
  }
}

output "ready" { value = wait_condition.ready.status }
`,
	})
	runGit(t, f.repo, "init", "-q")
	rev := f.commit(t, "app with a wait condition")

	listen := freePort(t)
	d := startDaemon(t, f.flags("--listen", listen, "--external-url", "http://"+listen, "--interval", "1h")...)
	post := func(url, body string) int {
		t.Helper()
		res, err := httpClient.Post(url, "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	// signalEach plays each instance's server: when its handle URL file
	// holds a URL not signalled yet, POST the signal.
	signalled := map[string]bool{}
	signalEach := func(version string) {
		t.Helper()
		for _, acct := range accounts {
			urlFile := filepath.Join(f.instanceDir("eu-west-1", acct), "signal_url")
			var url string
			eventually(t, 20*time.Second, func() bool {
				b, err := os.ReadFile(urlFile)
				url = string(b)
				return err == nil && !signalled[url]
			}, "%s never received a new handle URL for %s; logs:\n%s", acct, version, d.logs)
			if !strings.HasPrefix(url, "http://"+listen+"/v1/signals/") {
				t.Fatalf("handle URL %q", url)
			}
			if _, err := os.Stat(filepath.Join(f.instanceDir("eu-west-1", acct), "lb.conf")); err == nil && version == "v1" {
				t.Fatalf("%s: lb.conf was written before the signal", acct)
			}
			// A tampered URL is refused by the real API and counts nothing.
			if code := post(url[:len(url)-3]+"AAA", `{"status":"SUCCESS","id":"web"}`); code != http.StatusUnauthorized && code != http.StatusNotFound {
				t.Errorf("tampered handle URL answered %d", code)
			}
			if code := post(url, `{"status":"SUCCESS","id":"web","data":"10.0.0.7:8080","reason":"up"}`); code != http.StatusOK {
				t.Fatalf("signal answered %d", code)
			}
			signalled[url] = true
		}
	}
	waitStatus := func(rev string) {
		t.Helper()
		eventually(t, 20*time.Second, func() bool {
			st := statusHead(t, f.repo)
			return strings.Contains(st.Message, rev[:7]) && strings.Contains(st.Message, "SUCCEEDED")
		}, "no successful status commit for %s; logs:\n%s", rev[:7], d.logs)
	}

	signalEach("v1")
	waitStatus(rev)
	for _, acct := range accounts {
		if got := readFile(t, filepath.Join(f.instanceDir("eu-west-1", acct), "lb.conf")); got != "backend 10.0.0.7:8080 v1\n" {
			t.Errorf("%s lb.conf %q", acct, got)
		}
	}
	doc := statusHead(t, f.repo).stackSetStatus(t, "app")
	for _, in := range doc.Instances {
		var out map[string]string
		json.Unmarshal(in.Outputs, &out)
		if out["ready"] != "SUCCESS" {
			t.Errorf("%s output ready %q", in.Account, out["ready"])
		}
	}
	// A signal after completion is refused.
	for url := range signalled {
		if code := post(url, `{"id":"late"}`); code != http.StatusConflict {
			t.Errorf("signal after completion answered %d, want 409", code)
		}
	}

	// v2: a new wait condition (new handle, new signals), and the shards in
	// update_pattern batches of 2 then 1.
	replaceIn(t, f.repo, "app.hcl", `version = "v1"`, `version = "v2"`)
	rev = f.commit(t, "v2")
	signalEach("v2")
	waitStatus(rev)
	for _, acct := range accounts {
		if got := readFile(t, filepath.Join(f.instanceDir("eu-west-1", acct), "lb.conf")); got != "backend 10.0.0.7:8080 v2\n" {
			t.Errorf("%s lb.conf %q", acct, got)
		}
		if got := readFile(t, filepath.Join(f.instanceDir("eu-west-1", acct), "shard-2")); got != "v2" {
			t.Errorf("%s shard-2 %q", acct, got)
		}
	}
	var batches []string
	for _, line := range logLines(d.logs.String()) {
		if msg, _ := line["message"].(string); strings.HasPrefix(msg, "batch ") && line["resource"] == "file.shard" {
			batches = append(batches, msg)
		}
	}
	want := []string{
		"batch 1 of 2 (update_pattern rolling, batch_size 2): file.shard[0], file.shard[1]",
		"batch 2 of 2 (update_pattern rolling, batch_size 2): file.shard[2]",
	}
	if len(batches) != 4 || batches[0] != want[0] || batches[1] != want[1] || batches[2] != want[0] || batches[3] != want[1] {
		t.Errorf("update_pattern log lines %q, want %q for each instance", batches, want)
	}
	// The handle URL is a credential: never in the logs or status commits.
	for url := range signalled {
		_, token, _ := strings.Cut(url, "/v1/signals/")
		if strings.Contains(d.logs.String(), token) {
			t.Error("a handle URL token is in the logs")
		}
		for _, c := range mustHistory(t, f.repo) {
			if strings.Contains(c, token) {
				t.Error("a handle URL token is in a status commit")
			}
		}
	}
	if err := d.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// mustHistory returns every status commit's message and files, as text.
func mustHistory(t *testing.T, repo string) []string {
	t.Helper()
	commits, ok, err := readStatusHistory(repo)
	if err != nil || !ok {
		t.Fatalf("status history: %v %v", ok, err)
	}
	var out []string
	for _, c := range commits {
		var b strings.Builder
		b.WriteString(c.Message)
		for name, content := range c.Files {
			b.WriteString("\n" + name + "\n")
			b.Write(content)
		}
		out = append(out, b.String())
	}
	return out
}

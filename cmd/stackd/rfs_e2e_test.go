package main

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The override an instance was deployed with is visible through the
// daemon's API and `stackd status`, sensitive values redacted and the
// digest kept in the state (issue 16, item 6); `stackd validate` without
// the state reports an incomplete override as a warning only.
func TestOverridesVisibleThroughAPIAndStatus(t *testing.T) {
	t.Parallel()
	binary := stackdBinary(t)
	f := newFixture(t)
	replaceIn(t, f.repo, "web.hcl", "  operation_preferences {", `  instance_override { # e2e override
    regions            = ["us-east-1"]
    accounts           = ["222222222222"]
    vars               = { replicas = 5, api_key = "override-secret-e2e" }
    use_stack_set_vars = ["image"]
  }

  operation_preferences {`)
	rev := f.commit(t, "override us-east-1/222222222222")
	line := lineOf(t, f.repo, "web.hcl", "# e2e override")
	if res := stackd(t, "validate", f.repo); res.code() != 0 || strings.Contains(res.stdout+res.stderr, "Incomplete override") {
		t.Fatalf("validate of a complete override: %s", res)
	}

	p := startRunning(t, binary, f)
	addr := p.addr(t)
	head := waitSucceeded(t, p, f.repo, "web", rev)
	doc := head.stackSetStatus(t, "web")
	want := `{"block":"web.hcl:` + itoa(line) + `","use_stack_set_vars":["image"],"vars":{"api_key":"<sensitive>","replicas":5}}`
	for _, in := range doc.Instances {
		got := compactJSON(t, in.Overrides)
		if in.Region == "us-east-1" && in.Account == "222222222222" {
			if got != want {
				t.Errorf("status/web.json overrides of us-east-1/222222222222: %s, want %s", got, want)
			}
		} else if got != "" {
			t.Errorf("status/web.json shows overrides %s on %s/%s, which no override matches", got, in.Region, in.Account)
		}
	}

	resp, err := httpClient.Get("http://" + addr + "/v1/stack_sets/web/instances")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list struct {
		Instances []struct {
			Region, Account string
			Overrides       json.RawMessage `json:"overrides"`
		} `json:"instances"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET instances: %v\n%s", err, body)
	}
	found := false
	for _, in := range list.Instances {
		if in.Region == "us-east-1" && in.Account == "222222222222" {
			found = true
			// The API escapes < and > as every JSON response does; the
			// value is the same.
			if !sameJSON(t, in.Overrides, want) {
				t.Errorf("API overrides: %s, want %s", in.Overrides, want)
			}
		}
	}
	if !found || strings.Contains(string(body), "override-secret-e2e") || strings.Contains(string(body), "digest") {
		t.Errorf("GET /v1/stack_sets/web/instances (found the instance: %v) shows a secret or the digest:\n%s", found, body)
	}

	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("stackd run exited %d", code)
	}
	out := mustStackd(t, "status", "web", "--state-dir", f.state).stdout
	if !strings.Contains(out, "us-east-1/222222222222 override "+want) || strings.Contains(out, "override-secret-e2e") {
		t.Errorf("stackd status:\n%s\nwant a line us-east-1/222222222222 override %s", out, want)
	}

	// validate cannot see the state: an override that misses a variable is
	// a warning there (an error only if the block changed).
	replaceIn(t, f.repo, "web.hcl", `use_stack_set_vars = ["image"]`, `use_stack_set_vars = []`)
	res := stackd(t, "validate", f.repo)
	if res.code() != 0 || !strings.Contains(res.stderr, "Incomplete override") {
		t.Errorf("validate of an override missing image: %s\nwant exit 0 with an Incomplete override warning", res)
	}
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b.String()
}

func sameJSON(t *testing.T, a json.RawMessage, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

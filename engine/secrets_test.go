package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

// The values a stack set gives sensitive variables — in vars, vars_file,
// overrides, and values of the wrong type — are what its Redactor and the
// snippets of WriteDiagnostics hide.
func TestStackSetRedactor(t *testing.T) {
	files := map[string]string{
		"defs.hcl": `
stack_set "web" {
  template  = "./t"
  vars      = { password = "pw-vars-1", pin = "not-a-number", name = "public-name" }
  vars_file = "./web.tfvars"
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111", "222"]
  }
  instance_override {
    accounts           = ["222"]
    vars               = { password = "pw-override-2" }
    use_stack_set_vars = ["pin", "name", "key"]
  }
}`,
		"web.tfvars": `key = "key-tfvars-3"`,
		"t/main.hcl": `
variable "password" {
  type      = string
  sensitive = true
}
variable "key" {
  type      = string
  sensitive = true
}
variable "pin" {
  type      = number
  sensitive = true
}
variable "name" { type = string }
`,
	}
	defs, diags := load(t, files, provider.Registry{})
	if !diags.HasErrors() {
		t.Fatal("a sensitive number given a string loaded without error")
	}
	red := defs.Redactor()
	text := "pw-vars-1 pw-override-2 key-tfvars-3 not-a-number public-name"
	if got, want := red.Redact(text), "<sensitive> <sensitive> <sensitive> <sensitive> public-name"; got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, defs, diags, false); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `pin = "<sensitive>"`) || !strings.Contains(out, "public-name") {
		t.Errorf("diagnostics do not show the line with the value redacted:\n%s", out)
	}
	for _, s := range []string{"pw-vars-1", "not-a-number", "pw-override-2"} {
		if strings.Contains(out, s) {
			t.Errorf("diagnostics show %q:\n%s", s, out)
		}
	}
}

// echoing is a provider that returns NoEcho-like sensitive attributes and
// fails echoing everything it was sent.
type echoing struct {
	mu     sync.Mutex
	failOn string
}

func (p *echoing) Schema() provider.Schema {
	return provider.Schema{
		Properties: map[string]provider.Property{"input": {Type: cty.String}},
		Attributes: []string{"token"},
	}
}

func (p *echoing) Create(_ context.Context, req provider.Request) (provider.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := req.Properties.GetAttr("input").AsString()
	if req.LogicalID == p.failOn {
		return provider.Result{}, fmt.Errorf("refusing input %q", in)
	}
	return provider.Result{
		PhysicalID:          "id-" + req.LogicalID,
		Attributes:          map[string]cty.Value{"token": cty.StringVal("noecho-" + req.LogicalID + "-xyz")},
		SensitiveAttributes: []string{"token"},
	}, nil
}

func (p *echoing) Read(_ context.Context, req provider.Request) (provider.Result, error) {
	return provider.Result{PhysicalID: req.PhysicalID}, nil
}

func (p *echoing) Update(ctx context.Context, req provider.Request) (provider.Result, error) {
	return p.Create(ctx, req)
}

func (p *echoing) Delete(context.Context, provider.Request) error { return nil }

// A provider that echoes a sensitive variable, a value derived from one or
// another resource's sensitive attribute in its error: Apply's error and
// the observer's event say <sensitive> instead.
func TestApplyRedactsProviderErrors(t *testing.T) {
	tmpl := `
variable "password" {
  type      = string
  sensitive = true
}
resource "echo" "first" {
  input = "public"
}
resource "echo" "second" {
  input = "${echo.first.token}|${var.password}|${upper(var.password)}"
}
`
	prov := &echoing{failOn: "echo.second"}
	reg := provider.Registry{"echo": prov}
	defs := mustLoad(t, map[string]string{"defs.hcl": `
stack_set "web" {
  template = "./t"
  vars     = { password = "pw-abcdef" }
  deployment_targets {
    regions  = ["eu"]
    accounts = ["111"]
  }
}`, "t/main.hcl": tmpl}, reg)
	e := New(reg)
	inst := &Instance{StackSet: defs.StackSets[0], StackSetID: "ss-1", Target: config.Target{Region: "eu", Account: "111"}}
	j := newJournal()
	p, diags := e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var events []string
	_, err := e.Apply(context.Background(), p, j, func(ev Event) {
		if ev.Err != nil {
			events = append(events, ev.Err.Error())
		}
	})
	if err == nil {
		t.Fatal("apply succeeded; the provider should have failed")
	}
	for _, s := range append([]string{err.Error()}, events...) {
		for _, secret := range []string{"pw-abcdef", "PW-ABCDEF", "noecho-echo.first-xyz"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q leaks %q", s, secret)
			}
		}
	}
	// The whole input is derived from sensitive values, so it is
	// sensitive as a whole.
	if !strings.Contains(err.Error(), `refusing input "<sensitive>"`) {
		t.Errorf("error %q does not show the redacted input", err)
	}
	if len(events) == 0 {
		t.Errorf("the observer saw no failed event")
	}

	// The next apply knows the recorded sensitive attribute from the state.
	p2, diags := e.Plan(inst, j.list())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, err = e.Apply(context.Background(), p2, j, nil)
	if err == nil || strings.Contains(err.Error(), "noecho-") {
		t.Errorf("second apply: %v", err)
	}
}

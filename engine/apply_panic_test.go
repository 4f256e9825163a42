package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/stackd/stackd/engine/provider"
)

// buggyCreate is a provider with a bug: its Create panics with a message that
// quotes the resource's properties.
type buggyCreate struct{ *recorder }

func (p buggyCreate) Create(_ context.Context, req provider.Request) (provider.Result, error) {
	panic("cannot handle " + req.Properties.GoString())
}

// A panic while applying fails the instance with an internal error that
// does not quote the panic's message (it may hold values), and the engine
// goes on applying other instances.
func TestApplyPanicFailsTheInstance(t *testing.T) {
	reg := provider.Registry{"rec": buggyCreate{newRecorder()}}
	e := New(reg)
	ss := mustLoad(t, map[string]string{"web.hcl": defsHCL, "tmpl/main.hcl": tmplHCL}, reg).StackSet("web")
	for _, tgt := range ss.Targets()[:2] {
		j := newJournal()
		p, diags := e.Plan(&Instance{StackSet: ss, StackSetID: "id", Target: tgt}, nil)
		if diags.HasErrors() {
			t.Fatalf("plan: %s", diags.Error())
		}
		_, err := e.Apply(context.Background(), p, j, nil)
		if err == nil || !strings.Contains(err.Error(), "internal error while applying") {
			t.Fatalf("Apply with a panicking provider: got %v, want an internal error", err)
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "cannot handle") {
			t.Errorf("the error quotes the panic's message: %v", err)
		}
	}
}

package reconciler_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/command"
	"github.com/stackd/stackd/state"
)

// An update of a command resource interrupted by a crash is repeated,
// with its request id, by the next run: by the resumed operation, or by
// the operation of a commit that reverts the change. Its change set says
// so; the properties it sends again unchanged (after the revert) do not
// claim to require recreation, whatever a change of them would do (the
// command's create: Always), and Replacement follows from the details.
func TestRepeatedUpdateAfterCrash(t *testing.T) {
	dir := t.TempDir()
	updates := filepath.Join(dir, "updates.log")
	release := filepath.Join(dir, "release")
	tmpl := `variable "tag" {
  type = string
}

resource "command" "slow" {
  create   = "echo '{}'"
  update   = "echo \"$STACKD_REQUEST_ID\" >> ` + updates + `; [ -f ` + release + ` ] || sleep 600; echo '{}'"
  delete   = "true"
  triggers = { tag = var.tag }
}
`
	ss := func(tag string) string {
		return `stack_set "slow" {
  template = "./templates/cmd"
  vars     = { tag = "` + tag + `" }
  deployment_targets {
    regions  = ["r1"]
    accounts = ["100000000001"]
  }
}
`
	}
	reg := provider.Registry{"command": command.New(command.Options{Root: filepath.Join(dir, "targets"), Enabled: true})}
	h, _, restart := newHarnessWith(t, newCtl(), nil, reg, map[string]string{"templates/cmd/main.hcl": tmpl, "slow.hcl": ss("v1")})
	wantSucceeded(t, reconcileRev(t, h), "slow")

	// v2 starts the update; the daemon dies while it runs.
	v2 := commitFiles(t, h.repo, map[string]string{"slow.hcl": ss("v2")}, "v2")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.rec.Reconcile(ctx) // interrupted: its error says so
	}()
	eventually(t, "the update command to start", func() (bool, string) {
		b, err := os.ReadFile(updates)
		return err == nil && len(bytes.TrimSpace(b)) > 0, "no update ran yet"
	})
	cancel()
	<-done
	h.rec.Wait()
	op, err := operationAt(h.store, "slow", v2)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != state.OperationRunning {
		t.Fatalf("operation of v2 after the crash: %s (%s), want RUNNING", op.Status, op.Reason)
	}
	h.rec = restart()

	// The operation resumed at v2 repeats the update with v2's change.
	rc := planned(t, h, "command.slow")
	if !rc.RepeatsInterruptedUpdate {
		t.Errorf("at v2: the change does not say it repeats the interrupted update: %+v", rc)
	}
	var got []string
	for _, d := range rc.Details {
		got = append(got, d.ChangeSource+" "+d.Target.Name+" "+d.Target.RequiresRecreation)
	}
	if diff := cmp.Diff([]string{"ParameterReference triggers Conditionally"}, got); diff != "" {
		t.Errorf("at v2: details (-want +got):\n%s", diff)
	}
	if rc.Replacement != changeset.ReplacementConditional {
		t.Errorf("at v2: Replacement %s, want Conditional (triggers: Conditionally)", rc.Replacement)
	}

	// Reverted before it resumed: the update is repeated with the
	// properties it started from, none of them changed (System).
	commitFiles(t, h.repo, map[string]string{"slow.hcl": ss("v1")}, "revert v2")
	rc = planned(t, h, "command.slow")
	got = nil
	for _, d := range rc.Details {
		got = append(got, d.ChangeSource+" "+d.Target.Name+" "+d.Target.RequiresRecreation)
	}
	want := []string{"System create Never", "System delete Never", "System triggers Never", "System update Never"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the revert: details (-want +got):\n%s", diff)
	}
	if !rc.RepeatsInterruptedUpdate || rc.Replacement != changeset.ReplacementFalse {
		t.Errorf("after the revert: repeats %v, Replacement %s; want a repeated update, Replacement False", rc.RepeatsInterruptedUpdate, rc.Replacement)
	}
	plan, err := h.rec.Plan(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	for _, cs := range plan.ChangeSets {
		if err := changeset.RenderText(&text, cs, false); err != nil {
			t.Fatal(err)
		}
	}
	if s := text.String(); !strings.Contains(s, "command.slow will be updated again: its last update was interrupted") || strings.Contains(s, "changes (System") {
		t.Errorf("text plan:\n%s\nwant it to say the interrupted update is repeated, and no property changes", s)
	}

	// Applied: the same update once more, with the same request id.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantSucceeded(t, reconcileRev(t, h), "slow")
	b, err := os.ReadFile(updates)
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Fields(string(b))
	if len(ids) != 2 || ids[0] != ids[1] || ids[0] == "" {
		t.Errorf("update request ids %q, want the interrupted one repeated once", ids)
	}
	if st := instanceStatuses(t, h.store, "slow")["r1/100000000001"].Status; st != state.InstanceOperationComplete {
		t.Errorf("instance %s, want OPERATION_COMPLETE", st)
	}
}

// planned is the planned change of the resource at addr in the deploy
// branch's plan of the only instance.
func planned(t *testing.T, h *harness, addr string) changeset.ResourceChange {
	t.Helper()
	plan, err := h.rec.Plan(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range plan.ChangeSets {
		for _, ic := range cs.Instances {
			for _, c := range ic.Changes {
				if c.ResourceChange.FullAddress() == addr {
					if want := changeset.ReplacementOf(c.ResourceChange.Details); c.ResourceChange.Replacement != want {
						t.Errorf("%s: Replacement %s, its details say %s", addr, c.ResourceChange.Replacement, want)
					}
					return c.ResourceChange
				}
			}
		}
	}
	t.Fatalf("no planned change of %s: %+v", addr, plan)
	return changeset.ResourceChange{}
}

package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stackd/stackd/reconciler"
)

// fakeForwarder stands in for the daemon's forwarder (cmd/stackd, tested
// there with a real state): it answers by stack set name.
type fakeForwarder struct {
	calls []string
}

func (f *fakeForwarder) ForwardRollout(name, verb string) (string, error) {
	f.calls = append(f.calls, verb+" "+name)
	switch name {
	case "idle":
		return "", fmt.Errorf("stack set %s: %w", name, reconciler.ErrNoRollout)
	case "busy":
		return "", fmt.Errorf("stack set %s: %w", name, reconciler.ErrNotWaiting)
	case "orphan":
		return "", nil
	}
	return "replica-b", nil
}

// A promote or abort of a rollout this replica does not run goes to the
// forwarder: 202 forwarded naming the owner, 404 when none runs anywhere,
// 409 when the rollout does not hold; one this replica runs never does.
func TestRolloutControlForwarded(t *testing.T) {
	ctl := &fakeController{errs: map[string]error{}}
	for _, name := range []string{"remote", "idle", "busy", "orphan"} {
		for _, verb := range []string{"promote", "abort"} {
			ctl.errs[verb+" "+name] = fmt.Errorf("stack set %s: %w", name, reconciler.ErrNoRollout)
		}
	}
	fwd := &fakeForwarder{}
	e := newEnv(t, func(o *Options) { o.Controller, o.Rollouts = ctl, fwd })
	for _, tc := range []struct {
		path          string
		status        int
		code          string
		ackStatus     string
		owner, detail string
	}{
		{"/v1/stack_sets/web/promote", http.StatusAccepted, "", "accepted", "", ""},
		{"/v1/stack_sets/remote/promote", http.StatusAccepted, "", "forwarded", "replica-b", "forwarded to the owner replica replica-b"},
		{"/v1/stack_sets/remote/abort", http.StatusAccepted, "", "forwarded", "replica-b", "forwarded to the owner replica replica-b"},
		{"/v1/stack_sets/orphan/abort", http.StatusAccepted, "", "forwarded", "", "the next owner applies it"},
		{"/v1/stack_sets/idle/promote", http.StatusNotFound, CodeNoRollout, "", "", ""},
		{"/v1/stack_sets/busy/promote", http.StatusConflict, CodeNotWaiting, "", "", ""},
	} {
		r := e.do(req{method: http.MethodPost, path: tc.path})
		r.wantStatus(t, tc.path, tc.status)
		if tc.code != "" {
			if got := r.apiErr(t).Code; got != tc.code {
				t.Errorf("%s: code %q, want %q", tc.path, got, tc.code)
			}
			continue
		}
		var ack rolloutAck
		r.decode(t, &ack)
		if ack.Status != tc.ackStatus || ack.Owner != tc.owner || !strings.Contains(ack.Detail, tc.detail) {
			t.Errorf("%s: body %s, want %s owner %q detail %q", tc.path, r.body, tc.ackStatus, tc.owner, tc.detail)
		}
	}
	want := []string{"promote remote", "abort remote", "abort orphan", "promote idle", "promote busy"}
	if fmt.Sprint(fwd.calls) != fmt.Sprint(want) {
		t.Errorf("forwarder calls %v, want %v (never for a rollout run here)", fwd.calls, want)
	}
}

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// stackd status NAME lists the instances like kubectl get (-o wide adds
// columns, -o json the documents), and --watch follows the next rollout
// through the daemon's live events until it ends.
func TestStatusListsAndWatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := startDaemon(t, f.flags("--interval", "200ms", "--listen", "127.0.0.1:0")...)
	d.addr(t)
	rev1 := runGit(t, f.repo, "rev-parse", "HEAD")
	eventually(t, time.Minute, func() bool {
		h, ok, err := readStatusHistory(f.repo)
		return err == nil && ok && strings.Contains(h[0].Message, rev1[:7]+" SUCCEEDED")
	}, "the first revision never deployed; logs:\n%s", d.logs)

	out := mustStackd(t, "status", "web", "--state-dir", f.state).stdout
	lines := strings.Split(out, "\n")
	header := -1
	for i, l := range lines {
		if strings.Fields(l) != nil && strings.Join(strings.Fields(l), " ") == "REGION ACCOUNT STATUS REASON" {
			header = i
		}
	}
	if header < 0 {
		t.Fatalf("status web has no REGION ACCOUNT STATUS REASON header:\n%s", out)
	}
	rows := 0
	for _, l := range lines[header+1:] {
		if f := strings.Fields(l); len(f) == 4 && f[2] == "OPERATION_COMPLETE" && f[3] == "-" {
			rows++
		}
	}
	if rows != 6 {
		t.Errorf("status web lists %d complete instances, want 6:\n%s", rows, out)
	}
	if wide := mustStackd(t, "status", "web", "-o", "wide", "--state-dir", f.state).stdout; !strings.Contains(wide, "REVISION") || strings.Count(wide, rev1[:7]) < 7 {
		t.Errorf("status web -o wide lacks the revision column:\n%s", wide)
	}
	var docs []map[string]any
	if err := json.Unmarshal([]byte(mustStackd(t, "status", "web", "-o", "json", "--state-dir", f.state).stdout), &docs); err != nil || len(docs) != 1 {
		t.Errorf("status web -o json: %v, %d documents", err, len(docs))
	}
	if res := stackd(t, "status", "--watch", "--state-dir", f.state); res.code() == 0 {
		t.Error("status --watch without a name succeeded")
	}

	// Watch, then start a rollout: the watch follows it to its end.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	watchOut := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runCLI(ctx, watchOut, &syncBuffer{}, "status", "web", "--watch", "--state-dir", f.state)
	}()
	eventually(t, 30*time.Second, func() bool { return strings.Contains(watchOut.String(), "REGION") }, "the watch printed no table")
	// Whenever it subscribes, the watch follows the next operation, even
	// one that ended before its stream was connected.
	replaceIn(t, f.repo, "web.hcl", "  operation_preferences {", `  rollout {
    batch_size = 2
    pause      = "until_promoted"
  }

  operation_preferences {`)
	replaceIn(t, f.repo, "web.hcl", `image    = "nginx:1.25"`, `image    = "nginx:1.27"`)
	rev2 := f.commit(t, "nginx 1.27 in batches of 2, held after each")
	// Each hold the watch shows is promoted, until the watch ends.
	promoted := 0
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for ended := false; !ended; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("status --watch: %v\n%s", err, watchOut)
			}
			ended = true
		case <-ctx.Done():
			t.Fatalf("status --watch did not end with the rollout:\n%s\nlogs:\n%s", watchOut, d.logs)
		case <-tick.C:
			if strings.Count(watchOut.String(), "WAITING_FOR_PROMOTION") > promoted {
				promoted++
				mustStackd(t, "promote", "web", "--state-dir", f.state)
			}
		}
	}
	got := watchOut.String()
	for _, want := range []string{"DeployStackSet RUNNING at " + rev2[:7] + " (2/6), batch 1 of 3 WAITING_FOR_PROMOTION",
		"DeployStackSet RUNNING at " + rev2[:7] + " (4/6), batch 2 of 3 WAITING_FOR_PROMOTION",
		"DeployStackSet SUCCEEDED at " + rev2[:7] + " (6/6)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the watch printed no %q:\n%s", want, got)
		}
	}
	if promoted != 2 {
		t.Errorf("promoted %d times, want 2 (after batches 1 and 2)", promoted)
	}
}

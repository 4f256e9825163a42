package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// listThenChange is a real API client whose first listing is followed,
// before the watch gets it back, by change: what happens in the window
// between the watch's read and its stream.
type listThenChange struct {
	*api.Client
	change func()
}

func (c *listThenChange) StackSets(ctx context.Context) ([]*reconciler.StackSetStatus, error) {
	docs, err := c.Client.StackSets(ctx)
	if f := c.change; f != nil {
		c.change = nil
		f()
	}
	return docs, err
}

// `stackd status NAME --watch` misses nothing that happens between its
// listing and its event stream: an instance that fails and the operation
// that ends right after the listing was read are printed, and the watch
// ends with that operation (it used to read the stack set again before
// subscribing, and then waited for an operation that had already ended).
func TestStatusWatchMissesNothingAfterItsListing(t *testing.T) {
	t.Parallel()
	st, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	ss, err := st.CreateStackSet("web", now)
	if err != nil {
		t.Fatal(err)
	}
	rev := strings.Repeat("a1", 20)
	op := state.Operation{ID: state.NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: state.KindDeployStackSet,
		Revision: rev, Status: state.OperationRunning, Created: now, Started: now, Instances: 2}
	if err := st.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	ss.Revision, ss.LastOperation = rev, op.ID
	if err := st.PutStackSet(ss); err != nil {
		t.Fatal(err)
	}
	ins := []state.Instance{
		{StackSetID: ss.ID, Region: "eu-west-1", Account: "111111111111", Status: state.InstanceOperationComplete, Revision: rev, Updated: now},
		{StackSetID: ss.ID, Region: "us-east-1", Account: "111111111111", Status: state.InstanceOperationInProgress, Updated: now},
	}
	if err := st.PutInstances(ins); err != nil {
		t.Fatal(err)
	}
	hub := api.NewEventHub(st, api.HubOptions{})
	if err := hub.Poll(); err != nil { // the hub's first look: the state as it is
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Store: st, Token: "watch-token", Events: hub})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	client, err := api.NewClient(api.ClientOptions{URL: hs.URL, Token: "watch-token"})
	if err != nil {
		t.Fatal(err)
	}
	c := &listThenChange{Client: client, change: func() {
		// The second instance fails and the operation ends, and the hub
		// publishes it, all before the watch has its listing back.
		in := ins[1]
		in.Status, in.StatusReason = state.InstanceOperationFailed, "apply failed: quota exceeded"
		if err := st.PutInstance(in); err != nil {
			t.Error(err)
		}
		op.Status, op.Ended, op.Reason = state.OperationFailed, now.Add(time.Minute), "1 of 2 instances failed"
		op.Results = []state.InstanceResult{{Region: "us-east-1", Account: "111111111111", Status: state.InstanceOperationFailed, Reason: in.StatusReason}}
		if err := st.PutOperation(op); err != nil {
			t.Error(err)
		}
		if err := hub.Poll(); err != nil {
			t.Error(err)
		}
	}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out syncBuffer
	if err := watchStatus(ctx, c, "web", &out, false); err != nil {
		t.Fatalf("watch: %v (it should end with the operation)\n%s", err, out.String())
	}
	got := out.String()
	header := strings.Index(got, "REGION")
	failed := strings.Index(got, "us-east-1   111111111111   OPERATION_FAILED")
	ended := strings.Index(got, "# "+op.ID+" DeployStackSet FAILED at "+rev[:7])
	if header < 0 || failed < header || ended < 0 {
		t.Errorf("the watch printed (table at %d, failed instance at %d, end at %d):\n%s", header, failed, ended, got)
	}
	if strings.Count(got, "us-east-1   111111111111   OPERATION_IN_PROGRESS") != 1 {
		t.Errorf("the listing should show the instance in progress once, before it failed:\n%s", got)
	}
}

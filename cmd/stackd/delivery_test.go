package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/engine/provider"
	"github.com/stackd/stackd/engine/provider/custom"
	"github.com/stackd/stackd/engine/provider/waitcondition"
	"github.com/stackd/stackd/state"
)

// stoppedClock never fires: the rescan and the waits' timeouts stay out
// of the way, so what the tests see is the notifications' doing. armed,
// if set, is told of each After (a wait is about to block).
type stoppedClock struct{ armed chan struct{} }

func (stoppedClock) Now() time.Time { return time.Now() }
func (c stoppedClock) After(time.Duration) <-chan time.Time {
	if c.armed != nil {
		c.armed <- struct{}{}
	}
	return nil
}

// rolloutLog records the operation ids the listener applies.
type rolloutLog struct {
	mu      sync.Mutex
	applied []string
}

func (r *rolloutLog) RecordRolloutRequest(string, string) (string, error) { return "op-1", nil }
func (r *rolloutLog) ApplyRolloutRequests(opID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = append(r.applied, opID)
}

func (r *rolloutLog) saw(opID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.applied {
		if a == opID {
			return true
		}
	}
	return false
}

// deliveryReplicas are the broker and wait-condition provider of two
// replicas on one Badger state (whose notifications are in-process, as
// PostgreSQL's are between processes), and the listening side of the
// first.
type deliveryReplicas struct {
	st               *state.Store
	owner, other     *custom.Broker
	ownerWC, otherWC *waitcondition.Provider
	d                *delivery
	kicks            atomic.Int64
	rollouts         *rolloutLog
}

func newDeliveryReplicas(t *testing.T) *deliveryReplicas {
	t.Helper()
	st, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &repoConfig{}
	c.replica.enabled = true
	if fwd, _ := c.sharedDelivery(st, zerolog.Nop()); fwd != nil {
		t.Fatal("a run on a Badger directory got a Forwarder: responses nobody awaits must stay 404")
	}
	r := &deliveryReplicas{st: st, rollouts: &rolloutLog{}}
	onSignal := func(h string) { _ = st.Notify(state.ChannelSignal, h) }
	_, r.owner, err = newCustomWith(st, "http://127.0.0.1:7001", "", nil, "", responseRows{st})
	if err != nil {
		t.Fatal(err)
	}
	_, r.other, err = newCustomWith(st, "http://127.0.0.1:7002", "", nil, "", responseRows{st})
	if err != nil {
		t.Fatal(err)
	}
	if r.ownerWC, err = newWaitConditionWith(st, "http://127.0.0.1:7001", "", onSignal); err != nil {
		t.Fatal(err)
	}
	if r.otherWC, err = newWaitConditionWith(st, "http://127.0.0.1:7002", "", onSignal); err != nil {
		t.Fatal(err)
	}
	r.d = &delivery{st: st, rows: responseRows{st}, broker: r.owner, signals: r.ownerWC, rec: r.rollouts,
		kick: func() { r.kicks.Add(1) }, log: zerolog.Nop(), clock: stoppedClock{}, rescan: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	wait := r.d.start(ctx)
	t.Cleanup(func() { cancel(); wait() })
	return r
}

func responseBody(id custom.Identity, status string) []byte {
	b, _ := json.Marshal(map[string]any{"Status": status, "RequestId": id.RequestID, "StackId": id.StackID,
		"LogicalResourceId": id.LogicalResourceID, "PhysicalResourceId": "phys-1", "Data": map[string]string{"secret": "s3cr3t"}})
	return b
}

// A custom-resource response sent to the replica without the waiter is
// recorded in the state and, woken by the notification, the owner's
// broker answers its waiter and deletes the row.
func TestDeliveryForwardsResponseToOwner(t *testing.T) {
	r := newDeliveryReplicas(t)
	id := custom.Identity{RequestID: "req-1", StackID: "arn:stackd:web/eu-west-1/1111", LogicalResourceID: "custom.dns"}
	w, err := r.owner.Expect(id, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	token := w.URL()[strings.LastIndex(w.URL(), "/")+1:]
	if err := r.other.Deliver(token, responseBody(id, custom.StatusSuccess), ""); err != nil {
		t.Fatalf("Deliver to the other replica: %v, want it accepted", err)
	}
	eventually(t, 10*time.Second, func() bool { _, ok := w.Poll(); return ok }, "the owner's waiter to get the forwarded response")
	resp, _ := w.Poll()
	if resp.Status != custom.StatusSuccess || resp.PhysicalResourceID != "phys-1" {
		t.Errorf("response %+v", resp)
	}
	if keys, err := r.st.MetaKeys(metaResponse); err != nil || len(keys) != 0 {
		t.Errorf("rows left after delivery: %v %v", keys, err)
	}
}

// A row older than its URL is swept; a live one stays.
func TestDeliveryResponseRowsExpire(t *testing.T) {
	st, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows := responseRows{st}
	now := time.Now()
	if err := rows.Forward("old", []byte(`{}`), now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := rows.Forward("live", []byte(`{"a":1}`), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := rows.Forward("live", []byte(`{}`), now.Add(time.Hour)); !errors.Is(err, custom.ErrAlreadyForwarded) {
		t.Errorf("second Forward: %v, want ErrAlreadyForwarded", err)
	}
	rows.sweep(now)
	if _, ok, _ := rows.Take("old"); ok {
		t.Error("an expired row survived the sweep")
	}
	b, ok, err := rows.Take("live")
	if err != nil || !ok || string(b) != `{"a":1}` {
		t.Fatalf("Take(live): %q %t %v", b, ok, err)
	}
	if _, ok, _ := rows.Take("live"); ok {
		t.Error("a row was taken twice")
	}
}

// A wait-condition signal sent to the other replica is stored in the
// shared state and the notification wakes the owner's wait.
func TestDeliveryWakesWaitOnOwner(t *testing.T) {
	r := newDeliveryReplicas(t)
	armed := make(chan struct{}, 10)
	key, err := r.st.Meta(brokerKeyMeta)
	if err != nil {
		t.Fatal(err)
	}
	// The owner's provider as newWaitConditionWith makes it, with a clock
	// that says when its wait blocks.
	owner, err := waitcondition.New(waitcondition.Options{Key: key, ExternalURL: "http://127.0.0.1:7001", Store: metaStore{r.st}, Clock: stoppedClock{armed: armed}})
	if err != nil {
		t.Fatal(err)
	}
	r.d.signals = owner // read by the listener only when a payload comes
	req := provider.Request{
		Target:    provider.Target{StackSetName: "web", StackSetID: "ss-1", Region: "eu-west-1", Account: "111111111111"},
		LogicalID: "wait_condition.ready", RequestID: "req-w",
		Properties: cty.ObjectVal(map[string]cty.Value{"count": cty.NumberIntVal(1), "timeout": cty.StringVal("1h"),
			"triggers": cty.NullVal(cty.DynamicPseudoType)}),
	}
	res, err := owner.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	req.PhysicalID = res.PhysicalID
	done := make(chan error, 1)
	go func() {
		_, err := owner.Wait(t.Context(), req, res)
		done <- err
	}()
	u := res.Attributes["handle_url"].AsString()
	token := u[strings.LastIndex(u, "/")+1:]
	select {
	case <-armed: // blocked: only the notification can wake it now
	case <-time.After(10 * time.Second):
		t.Fatal("the wait never blocked")
	}
	if err := r.otherWC.Deliver(token, []byte(`{"status": "SUCCESS"}`), ""); err != nil {
		t.Fatalf("signal to the other replica: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's wait was not woken by a signal to the other replica")
	}
}

// A webhook on any replica kicks every replica; a promote or abort
// recorded elsewhere reaches the reconciler's ApplyRolloutRequests.
func TestDeliveryTriggerAndRolloutChannels(t *testing.T) {
	r := newDeliveryReplicas(t)
	var local atomic.Int64
	o := api.Options{Trigger: func() { local.Add(1) }}
	r.d.apiOptions(&o)
	if o.Rollouts == nil {
		t.Fatal("no RolloutForwarder on a replica")
	}
	o.Trigger()
	if local.Load() != 1 {
		t.Errorf("the webhook kicked this replica %d times, want 1", local.Load())
	}
	eventually(t, 10*time.Second, func() bool { return r.kicks.Load() >= 1 }, "the listener to kick the reconciler on the webhook")

	owner, err := o.Rollouts.ForwardRollout("web", "promote")
	if err != nil || owner != "" {
		t.Fatalf("ForwardRollout: %q %v, want no owner (no lease held) and no error", owner, err)
	}
	eventually(t, 10*time.Second, func() bool { return r.rollouts.saw("op-1") }, "the listener to apply the recorded request of op-1")
	var nilDelivery *delivery
	nilDelivery.apiOptions(&o) // not a replica: no change, no panic
}

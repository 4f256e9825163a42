package custom_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/engine/provider/custom"
)

// rows is a Forwarder over a map: the table the replicas of a shared
// state write responses to (the daemon's is the state, tested in
// cmd/stackd; engine cannot import state).
type rows struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (r *rows) Forward(reqID string, body []byte, _ time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[reqID]; ok {
		return custom.ErrAlreadyForwarded
	}
	r.m[reqID] = append([]byte(nil), body...)
	return nil
}

func (r *rows) Take(reqID string) ([]byte, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.m[reqID]
	delete(r.m, reqID)
	return b, ok, nil
}

func (r *rows) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// replicaBrokers are two replicas' brokers: the same key (kept in the
// shared state), another external URL each, one table of forwarded rows.
func replicaBrokers(t *testing.T, clk *fakeClock) (a, b *custom.Broker, fwd *rows) {
	t.Helper()
	fwd = &rows{m: map[string][]byte{}}
	for i, ext := range []string{"https://stackd.example:7070/", "https://other.example:7070/"} {
		br, err := custom.NewBroker(custom.BrokerOptions{Key: testKey, ExternalURL: ext, Now: clk.Now, Forwarder: fwd})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			a = br
		} else {
			b = br
		}
	}
	return a, b, fwd
}

// A response that reaches a replica without the waiter is recorded there
// and delivered by the replica whose call awaits it, once.
func TestBrokerForwardToWaitingReplica(t *testing.T) {
	clk := newClock()
	a, b, fwd := replicaBrokers(t, clk)
	w, err := a.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenOf(t, w)
	if err := b.Deliver(tok, bodyFor(ident, custom.StatusSuccess), ""); err != nil {
		t.Fatalf("Deliver on the other replica: %v, want it accepted (forwarded)", err)
	}
	if fwd.len() != 1 {
		t.Fatalf("%d rows recorded, want 1", fwd.len())
	}
	wantRefusal(t, b.Deliver(tok, bodyFor(ident, custom.StatusFailed), ""), http.StatusConflict, custom.CodeAlreadyAnswered)
	if _, ok := w.Poll(); ok {
		t.Fatal("the waiter has a response before it was told of the row")
	}
	// The other replica's broker has no waiter: told, it leaves the row.
	if err := b.Forwarded(ident.RequestID); err != nil || fwd.len() != 1 {
		t.Fatalf("Forwarded on a replica without the waiter: %v, %d rows, want the row kept", err, fwd.len())
	}
	if err := a.Forwarded(ident.RequestID); err != nil {
		t.Fatal(err)
	}
	r, ok := w.Poll()
	if !ok || r.Status != custom.StatusSuccess || r.PhysicalResourceID != "p-1" || r.Data.GetAttr("k").AsString() != "v" {
		t.Fatalf("Poll after Forwarded: %+v %t, want the forwarded response", r, ok)
	}
	if fwd.len() != 0 {
		t.Errorf("%d rows left after delivery, want the row deleted", fwd.len())
	}
	if got, err := w.Await(context.Background()); err != nil || got.Status != custom.StatusSuccess {
		t.Fatalf("Await: %+v %v", got, err)
	}
	// Answered: a late response to the owner is refused as before.
	wantRefusal(t, a.Deliver(tok, bodyFor(ident, custom.StatusSuccess), ""), http.StatusConflict, custom.CodeAlreadyAnswered)
}

// A row written before Await starts (the call was resumed by a new owner
// after the response arrived elsewhere) is found at once, without a
// wake-up.
func TestBrokerForwardedBeforeAwait(t *testing.T) {
	clk := newClock()
	a, b, fwd := replicaBrokers(t, clk)
	w, err := a.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Deliver(tokenOf(t, w), bodyFor(ident, custom.StatusFailed), ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing to wait for: the row is there
	r, err := w.Await(ctx)
	if err != nil || r.Status != custom.StatusFailed {
		t.Fatalf("Await: %+v %v, want the recorded FAILED response", r, err)
	}
	if fwd.len() != 0 {
		t.Errorf("%d rows left, want 0", fwd.len())
	}
}

// Forwarded("") (wake-ups lost) looks for every waiter's row; a row whose
// body answers another resource is dropped, not delivered.
func TestBrokerForwardedAllAndMismatch(t *testing.T) {
	clk := newClock()
	a, _, fwd := replicaBrokers(t, clk)
	w, err := a.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	other := ident
	other.LogicalResourceID = "custom.other"
	fwd.m[ident.RequestID] = bodyFor(other, custom.StatusSuccess)
	if err := a.Forwarded(""); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Poll(); ok {
		t.Fatal("a row for another resource answered the waiter")
	}
	fwd.m[ident.RequestID] = bodyFor(ident, custom.StatusSuccess)
	if err := a.Forwarded(""); err != nil {
		t.Fatal(err)
	}
	if r, ok := w.Poll(); !ok || r.Status != custom.StatusSuccess {
		t.Fatalf("Poll after Forwarded(\"\"): %+v %t", r, ok)
	}
}

// Refusals that do not depend on a waiter stay refusals: nothing is
// recorded for a bad signature or a malformed body.
func TestBrokerForwardRefusals(t *testing.T) {
	clk := newClock()
	a, b, fwd := replicaBrokers(t, clk)
	w, err := a.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tok := tokenOf(t, w)
	foreign, err := custom.NewBroker(custom.BrokerOptions{Key: []byte("another key of 32 bytes, not ours"), ExternalURL: "https://stackd.example:7070/", Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	fw, err := foreign.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	wantRefusal(t, b.Deliver(tokenOf(t, fw), bodyFor(ident, custom.StatusSuccess), ""), http.StatusUnauthorized, custom.CodeInvalidSignature)
	wantRefusal(t, b.Deliver(tok, []byte(`[1]`), ""), http.StatusBadRequest, custom.CodeMalformed)
	clk.Advance(2 * time.Minute)
	wantRefusal(t, b.Deliver(tok, bodyFor(ident, custom.StatusSuccess), ""), http.StatusGone, custom.CodeExpired)
	if fwd.len() != 0 {
		t.Errorf("%d rows recorded for refused responses, want 0", fwd.len())
	}
}

// A call given up on one replica (its lease was lost) is resumed on
// another: a response that reaches the first is recorded for the second,
// not refused with 410; one the first saw answered is still 409.
func TestBrokerForwardAfterGivingUp(t *testing.T) {
	clk := newClock()
	a, b, fwd := replicaBrokers(t, clk)
	gaveUp, err := b.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	gaveUp.Close() // abandoned on b
	w, err := a.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Deliver(tokenOf(t, w), bodyFor(ident, custom.StatusSuccess), ""); err != nil {
		t.Fatalf("Deliver to the replica that gave up: %v, want it recorded for the other", err)
	}
	if err := a.Forwarded(ident.RequestID); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Poll(); !ok {
		t.Fatal("the resumed call did not get the response")
	}
	w.Close()
	if fwd.len() != 0 {
		t.Errorf("%d rows left", fwd.len())
	}
	wantRefusal(t, a.Deliver(tokenOf(t, w), bodyFor(ident, custom.StatusSuccess), ""), http.StatusConflict, custom.CodeAlreadyAnswered)
}

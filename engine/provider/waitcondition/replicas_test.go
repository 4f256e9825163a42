package waitcondition

import (
	"testing"
	"time"
)

// Two processes share the Store (replicas of a shared state): a signal
// delivered to the one that does not wait is stored there, OnSignal names
// the handle, and Changed on the waiting one wakes its Wait, which
// completes from the Store.
func TestSignalToAnotherProcessWakesTheWait(t *testing.T) {
	e := newEnv(t)
	told := make(chan string, 4)
	other, err := New(Options{Key: key, ExternalURL: "https://other.example:7070/", Store: e.store, Clock: e.clk,
		OnSignal: func(h string) { told <- h }})
	if err != nil {
		t.Fatal(err)
	}
	req, res, tok := e.create("req-1", 1, "5m")
	done := e.waitAsync(e.p, req, res)
	e.clk.blocked(t)
	e.signal(other, tok, `{"status": "SUCCESS", "data": "up"}`)
	var handle string
	select {
	case handle = <-told:
	default:
		t.Fatal("OnSignal was not called for a stored signal")
	}
	if handle != req.PhysicalID {
		t.Fatalf("OnSignal(%q), want the handle %q", handle, req.PhysicalID)
	}
	e.p.Changed(handle)
	select {
	case r := <-done:
		if r.err != nil || r.res.Attributes["status"].AsString() != StatusSuccess {
			t.Fatalf("Wait: %+v %v, want SUCCESS", r.res.Attributes, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Changed did not wake the Wait")
	}
	// Refused signals are not announced.
	wantRefusal(t, other.Deliver(tok, []byte(`{"status": "SUCCESS"}`), ""), 409, CodeComplete)
	if len(told) != 0 {
		t.Errorf("OnSignal called for a refused signal")
	}
}

// Changed("") wakes every wait (the other processes' wake-ups were lost).
func TestChangedAllWakesEveryWait(t *testing.T) {
	e := newEnv(t)
	other := e.restart()
	req, res, tok := e.create("req-1", 1, "5m")
	done := e.waitAsync(e.p, req, res)
	e.clk.blocked(t)
	e.signal(other, tok, `{}`)
	e.p.Changed("")
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Wait: %v", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Changed(\"\") did not wake the Wait")
	}
}

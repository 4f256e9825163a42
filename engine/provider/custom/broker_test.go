package custom_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/engine/provider/custom"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func newBroker(t *testing.T, clk *fakeClock) *custom.Broker {
	t.Helper()
	b, err := custom.NewBroker(custom.BrokerOptions{Key: testKey, ExternalURL: "https://stackd.example:7070/", Now: clk.Now})
	if err != nil {
		t.Fatalf("NewBroker: %v", err)
	}
	return b
}

var ident = custom.Identity{RequestID: "req-1", StackID: stackID, LogicalResourceID: "custom.dns"}

func tokenOf(t *testing.T, w *custom.Waiter) string {
	t.Helper()
	tok, ok := strings.CutPrefix(w.URL(), "https://stackd.example:7070"+custom.ResponsesPath)
	if !ok {
		t.Fatalf("URL %s is not under the external URL", w.URL())
	}
	return tok
}

func bodyFor(id custom.Identity, status string) []byte {
	b, _ := json.Marshal(map[string]any{
		"Status": status, "RequestId": id.RequestID, "StackId": id.StackID, "LogicalResourceId": id.LogicalResourceID,
		"PhysicalResourceId": "p-1", "Data": map[string]any{"k": "v"},
	})
	return b
}

func wantRefusal(t *testing.T, err error, status int, code string) {
	t.Helper()
	var de *custom.DeliveryError
	if !errors.As(err, &de) || de.Status != status || de.Code != code {
		t.Fatalf("Deliver: %v, want %d %s", err, status, code)
	}
}

func TestBrokerResponseBeforeAwait(t *testing.T) {
	clk := newClock()
	b := newBroker(t, clk)
	w, err := b.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	tok := tokenOf(t, w)
	if err := b.Deliver(tok, bodyFor(ident, custom.StatusSuccess), ""); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	wantRefusal(t, b.Deliver(tok, bodyFor(ident, custom.StatusFailed), ""), http.StatusConflict, custom.CodeAlreadyAnswered)
	if r, ok := w.Poll(); !ok || r.Status != custom.StatusSuccess {
		t.Fatalf("Poll: %+v %t, want the first response", r, ok)
	}
	r, err := w.Await(context.Background())
	if err != nil || r.Status != custom.StatusSuccess || r.PhysicalResourceID != "p-1" {
		t.Fatalf("Await: %+v %v", r, err)
	}
	if b.Waiting() != 0 {
		t.Errorf("%d waiters after Await, want 0", b.Waiting())
	}
	wantRefusal(t, b.Deliver(tok, bodyFor(ident, custom.StatusSuccess), ""), http.StatusConflict, custom.CodeAlreadyAnswered)
	if _, err := w.Await(context.Background()); !errors.Is(err, custom.ErrWaiterClosed) {
		t.Errorf("Await on a closed waiter: %v, want ErrWaiterClosed", err)
	}
}

func TestBrokerExpiredToken(t *testing.T) {
	clk := newClock()
	b := newBroker(t, clk)
	w, err := b.Expect(ident, clk.Now().Add(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if want := epoch.Add(2 * time.Second); !w.Expires().Equal(want) {
		t.Errorf("expiry %s, want it rounded up to %s", w.Expires(), want)
	}
	clk.Advance(2 * time.Second)
	wantRefusal(t, b.Deliver(tokenOf(t, w), bodyFor(ident, custom.StatusSuccess), ""), http.StatusGone, custom.CodeExpired)
	if _, ok := w.Poll(); ok || b.Waiting() != 1 {
		t.Errorf("a refused delivery changed the waiter")
	}
}

func TestBrokerAbandonedWaiter(t *testing.T) {
	clk := newClock()
	b := newBroker(t, clk)
	w, err := b.Expect(ident, clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Await(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Await: %v, want context.Canceled", err)
	}
	tok := tokenOf(t, w)
	wantRefusal(t, b.Deliver(tok, bodyFor(ident, custom.StatusSuccess), ""), http.StatusGone, custom.CodeNoLongerAwaited)
	clk.Advance(2 * time.Hour) // past the expiry: the tombstone is swept, the token expired
	wantRefusal(t, b.Deliver(tok, bodyFor(ident, custom.StatusSuccess), ""), http.StatusGone, custom.CodeExpired)
}

func TestBrokerAcrossRestart(t *testing.T) {
	clk := newClock()
	before := newBroker(t, clk) // the daemon before the restart, same key
	w, err := before.Expect(ident, clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	oldToken := tokenOf(t, w)

	after := newBroker(t, clk)
	wantRefusal(t, after.Deliver(oldToken, bodyFor(ident, custom.StatusSuccess), ""), http.StatusNotFound, custom.CodeNotAwaited)
	// The resumed call waits again for the same request id: the response to
	// the URL sent before the restart is taken.
	w2, err := after.Expect(ident, clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := after.Deliver(oldToken, bodyFor(ident, custom.StatusSuccess), ""); err != nil {
		t.Fatalf("Deliver to the pre-restart URL: %v", err)
	}
	if r, err := w2.Await(context.Background()); err != nil || r.PhysicalResourceID != "p-1" {
		t.Fatalf("Await: %+v %v", r, err)
	}
	// Another resource's waiter with the same request id does not take it.
	other := custom.Identity{RequestID: "req-2", StackID: stackID, LogicalResourceID: "custom.a"}
	w3, err := after.Expect(other, clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close()
	wx, err := before.Expect(custom.Identity{RequestID: "req-2", StackID: stackID, LogicalResourceID: "custom.b"}, clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer wx.Close()
	wantRefusal(t, after.Deliver(tokenOf(t, wx), bodyFor(custom.Identity{RequestID: "req-2", StackID: stackID, LogicalResourceID: "custom.b"}, custom.StatusSuccess), ""), http.StatusConflict, custom.CodeIdentityConflict)
}

func TestBrokerExpect(t *testing.T) {
	clk := newClock()
	b := newBroker(t, clk)
	w, err := b.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Expect(ident, clk.Now().Add(time.Minute)); !errors.Is(err, custom.ErrAlreadyWaiting) {
		t.Errorf("second Expect: %v, want ErrAlreadyWaiting", err)
	}
	w.MarkAnswered()
	wantRefusal(t, b.Deliver(tokenOf(t, w), bodyFor(ident, custom.StatusSuccess), ""), http.StatusConflict, custom.CodeAlreadyAnswered)
	w.Close()
	w.Close()
	w2, err := b.Expect(ident, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("Expect after Close: %v", err)
	}
	w2.Close()
	if _, err := b.Expect(custom.Identity{}, clk.Now()); err == nil {
		t.Errorf("Expect with an empty request id succeeded")
	}
	if _, err := b.Expect(custom.Identity{RequestID: strings.Repeat("x", 513)}, clk.Now()); err == nil {
		t.Errorf("Expect with a huge request id succeeded")
	}
}

func TestNewBroker(t *testing.T) {
	tests := []struct {
		name string
		opts custom.BrokerOptions
		want string
	}{
		{"random key", custom.BrokerOptions{ExternalURL: "http://127.0.0.1:7070"}, ""},
		{"path prefix", custom.BrokerOptions{ExternalURL: "https://ops.example/stackd/"}, ""},
		{"short key", custom.BrokerOptions{Key: []byte("short"), ExternalURL: "http://127.0.0.1:7070"}, "at least 16 bytes"},
		{"no URL", custom.BrokerOptions{}, "external URL"},
		{"relative URL", custom.BrokerOptions{ExternalURL: "/v1"}, "external URL"},
		{"ftp URL", custom.BrokerOptions{ExternalURL: "ftp://x"}, "external URL"},
		{"query", custom.BrokerOptions{ExternalURL: "https://x/?a=b"}, "external URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := custom.NewBroker(tc.opts)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("NewBroker: %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewBroker: %v", err)
			}
			w, err := b.Expect(ident, time.Now().Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if want := strings.TrimSuffix(tc.opts.ExternalURL, "/") + custom.ResponsesPath; !strings.HasPrefix(w.URL(), want) || strings.Contains(strings.TrimPrefix(w.URL(), want), "/") {
				t.Errorf("URL %s, want %s<token>", w.URL(), want)
			}
		})
	}
}

func TestBrokerKeysDiffer(t *testing.T) {
	a, _ := custom.NewBroker(custom.BrokerOptions{ExternalURL: "https://stackd.example:7070"})
	b, _ := custom.NewBroker(custom.BrokerOptions{ExternalURL: "https://stackd.example:7070"})
	w, err := a.Expect(ident, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tok := strings.TrimPrefix(w.URL(), "https://stackd.example:7070"+custom.ResponsesPath)
	wantRefusal(t, b.Deliver(tok, bodyFor(ident, custom.StatusSuccess), ""), http.StatusUnauthorized, custom.CodeInvalidSignature)
}

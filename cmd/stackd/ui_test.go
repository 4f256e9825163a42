package main

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/api"
	"github.com/stackd/stackd/internal/notify"
	"github.com/stackd/stackd/state"
)

func TestCommitURLFor(t *testing.T) {
	rev := strings.Repeat("ab", 20)
	for _, tc := range []struct{ forge, repo, want string }{
		{"https://api.github.com", "o/r", "https://github.com/o/r/commit/" + rev},
		{"https://ghe.example/api/v3", "o/r", "https://ghe.example/o/r/commit/" + rev},
		{"https://gitea.example/api/v1/", "o/r", "https://gitea.example/o/r/commit/" + rev},
		{"https://gitlab.example/api/v4", "group/r", "https://gitlab.example/group/r/-/commit/" + rev},
		{"https://user:secret@api.github.com", "o/r", "https://github.com/o/r/commit/" + rev},
		{"", "o/r", ""},
		{"https://api.github.com", "", ""},
		{"javascript:alert(1)", "o/r", ""},
	} {
		f := commitURLFor(tc.forge, tc.repo)
		got := ""
		if f != nil {
			got = f(rev)
		}
		if got != tc.want {
			t.Errorf("commitURLFor(%q, %q) = %q, want %q", tc.forge, tc.repo, got, tc.want)
		}
	}
}

// stackd ui prints the console's URL of the daemon found from --state-dir.
func TestUICommandFindsTheDaemon(t *testing.T) {
	f := newFixture(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.MkdirAll(filepath.Dir(f.state), 0o755); err != nil {
		t.Fatal(err)
	}
	c := repoConfig{repo: f.repo, branch: "main", path: "."}
	remove, err := writeDaemonFile(f.state, ln.Addr(), false, "", "", &c)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	res := mustStackd(t, "ui", "--no-open", "--state-dir", f.state)
	if want := "http://" + ln.Addr().String() + "/ui/\n"; res.stdout != want {
		t.Errorf("stackd ui printed %q, want %q", res.stdout, want)
	}
	if res := stackd(t, "ui", "--no-open", "--state-dir", t.TempDir()); res.code() == 0 {
		t.Error("stackd ui without a daemon succeeded")
	}
}

// afterClock is a clock.Clock whose After channels fire only when the
// test fires them; each After call is reported on calls.
type afterClock struct{ calls chan afterCall }

type afterCall struct {
	d  time.Duration
	ch chan time.Time
}

func (c *afterClock) Now() time.Time { return time.Now() }
func (c *afterClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.calls <- afterCall{d, ch}
	return ch
}

// next returns the next After call for d (other durations, the streams'
// heartbeats, are left unfired).
func (c *afterClock) next(t *testing.T, d time.Duration) afterCall {
	t.Helper()
	for {
		select {
		case call := <-c.calls:
			if call.d == d {
				return call
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no After(%s) within 30s", d)
		}
	}
}

type recordingSink struct {
	mu      sync.Mutex
	events  []notify.Event
	settled []state.InstanceStatus
	started []string
}

func (r *recordingSink) Send(e notify.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}
func (r *recordingSink) OperationStarted(s string, _ int) {
	r.mu.Lock()
	r.started = append(r.started, s)
	r.mu.Unlock()
}

func (r *recordingSink) InstanceSettled(_ string, st state.InstanceStatus) {
	r.mu.Lock()
	r.settled = append(r.settled, st)
	r.mu.Unlock()
}

// What the reconciler tells wakes the console's event hub: with a polling
// interval of an hour, an operation's end reaches a stream once an
// instance settles, WakeDelay after the wake; the wrapped sinks are still
// told everything.
func TestLiveWakeWakesTheHub(t *testing.T) {
	st, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	ss, err := st.CreateStackSet("web", now)
	if err != nil {
		t.Fatal(err)
	}
	op := state.Operation{ID: state.NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: state.KindDeployStackSet,
		Revision: strings.Repeat("b", 40), Status: state.OperationRunning, Created: now}
	if err := st.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	ss.LastOperation = op.ID
	if err := st.PutStackSet(ss); err != nil {
		t.Fatal(err)
	}
	clk := &afterClock{calls: make(chan afterCall, 64)}
	hub := api.NewEventHub(st, api.HubOptions{Interval: time.Hour, WakeDelay: 7 * time.Millisecond, Clock: clk})
	if err := hub.Poll(); err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Store: st, Token: "wake-token", Events: hub})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	client, err := api.NewClient(api.ClientOptions{URL: hs.URL, Token: "wake-token"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan string, 16)
	go func() {
		_ = client.Events(ctx, func(typ string, _ []byte) error { got <- typ; return nil })
	}()
	if typ := <-got; typ != "" {
		t.Fatalf("first callback %q, want the connection's", typ)
	}
	rec := &recordingSink{}
	c := &repoConfig{}
	events, prog := c.liveSinks(rec, rec)
	c.live.hub.Store(hub)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	clk.next(t, time.Hour) // Run read the state and waits for its tick

	op.Status, op.Ended = state.OperationSucceeded, now.Add(time.Second)
	if err := st.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	prog.InstanceSettled("web", state.InstanceOperationComplete)
	clk.next(t, 7*time.Millisecond).ch <- time.Now() // woken: WakeDelay, then a read
	select {
	case typ := <-got:
		if typ != api.EventOperation {
			t.Errorf("event %q, want %s", typ, api.EventOperation)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the operation's end never reached the stream: the hub was not woken")
	}
	events.Send(notify.Event{Type: notify.TypeOperationSucceeded, StackSet: "web"})
	prog.OperationStarted("web", 1)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.events) != 1 || len(rec.started) != 1 || len(rec.settled) != 1 {
		t.Errorf("the wrapped sinks were told %d events, %d starts, %d settles; want 1 each", len(rec.events), len(rec.started), len(rec.settled))
	}
}

package state

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stackd/stackd/internal/pgtest"
)

// waitTime bounds every wait for a notification: long, since a loaded
// machine can be slow, and only reached when the test fails.
const waitTime = time.Minute

// next returns the next payload of ch, failing t if none comes in time or
// ch is closed.
func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case p, ok := <-ch:
		if !ok {
			t.Fatal("the listen channel was closed")
		}
		return p
	case <-time.After(waitTime):
		t.Fatalf("no notification within %s", waitTime)
	}
	return ""
}

// nextNonEmpty returns the next payload of ch that is not "".
func nextNonEmpty(t *testing.T, ch <-chan string) string {
	t.Helper()
	for {
		if p := next(t, ch); p != "" {
			return p
		}
	}
}

// closes fails t unless ch is closed in time (draining what it holds).
func closes(t *testing.T, ch <-chan string) {
	t.Helper()
	deadline := time.After(waitTime)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("the listen channel is still open %s after its end", waitTime)
		}
	}
}

func listen(t *testing.T, s *Store, ctx context.Context, channel string) <-chan string {
	t.Helper()
	ch, err := s.Listen(ctx, channel)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestNotifyInProcess: on any state (Badger here; PostgreSQL in the
// conformance run), a notification reaches the Listen calls of its
// channel and no other, and a listener ends with its ctx or the store.
func TestNotifyInProcess(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rollout1 := listen(t, s, ctx, ChannelRollout)
	rollout2 := listen(t, s, ctx, ChannelRollout)
	signal := listen(t, s, ctx, ChannelSignal)
	if err := s.Notify(ChannelRollout, "op-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Notify(ChannelSignal, "handle-1"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan string{rollout1, rollout2} {
		if p := nextNonEmpty(t, ch); p != "op-1" {
			t.Errorf("rollout listener got %q, want op-1", p)
		}
	}
	if p := nextNonEmpty(t, signal); p != "handle-1" {
		t.Errorf("signal listener got %q, want handle-1 (and not the rollout's op-1)", p)
	}

	// Ending one listener's ctx closes its channel only.
	lctx, lcancel := context.WithCancel(ctx)
	trigger := listen(t, s, lctx, ChannelTrigger)
	lcancel()
	closes(t, trigger)
	if err := s.Notify(ChannelRollout, "op-2"); err != nil {
		t.Fatal(err)
	}
	if p := nextNonEmpty(t, rollout1); p != "op-2" {
		t.Errorf("after another listener ended, got %q, want op-2", p)
	}

	// A listener whose ctx has ended already gets a closed channel.
	done, dcancel := context.WithCancel(ctx)
	dcancel()
	ch, err := s.Listen(done, ChannelLease)
	if err != nil {
		t.Fatalf("Listen with an ended ctx: %v", err)
	}
	closes(t, ch)

	// Closing the store ends its listeners.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan string{rollout1, rollout2, signal} {
		closes(t, ch)
	}
	if err := s.Notify(ChannelRollout, "late"); !errors.Is(err, ErrClosed) {
		t.Errorf("Notify after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Listen(context.Background(), ChannelRollout); !errors.Is(err, ErrClosed) {
		t.Errorf("Listen after Close: %v, want ErrClosed", err)
	}
}

// TestNotifyInput: unknown channels and payloads PostgreSQL could not
// carry are refused on every state.
func TestNotifyInput(t *testing.T) {
	s := newStore(t)
	for _, tc := range []struct {
		name, channel, payload string
		want                   error
	}{
		{"unknown channel", "other", "x", ErrInvalidKey},
		{"empty channel", "", "x", ErrInvalidKey},
		{"NUL", ChannelTrigger, "a\x00b", ErrInvalidKey},
		{"not UTF-8", ChannelTrigger, "\xff", ErrInvalidKey},
		{"too large", ChannelTrigger, strings.Repeat("x", MaxNotifyPayload+1), ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Notify(tc.channel, tc.payload); !errors.Is(err, tc.want) {
				t.Errorf("Notify: %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := s.Listen(context.Background(), "other"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Listen on an unknown channel: %v, want ErrInvalidKey", err)
	}
	if err := s.Notify(ChannelTrigger, strings.Repeat("x", MaxNotifyPayload)); err != nil {
		t.Errorf("Notify of the largest payload: %v", err)
	}
}

// TestListenSlowListener: a listener that does not read never blocks the
// sender; what waits for it is coalesced, and an overflow becomes one ""
// after which nothing is lost that was sent later.
func TestListenSlowListener(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := listen(t, s, ctx, ChannelResponse)
	const n = 10 * listenBuffer
	sent := make([]string, n)
	for i := range sent {
		sent[i] = "req-" + itoa(i)
		if err := s.Notify(ChannelResponse, sent[i]); err != nil { // returns: it does not wait for the listener
			t.Fatal(err)
		}
	}
	// What arrives is, in order, some of the payloads sent, and a ""
	// standing for the others unless all came one by one.
	var got []string
	reset := false
	for !reset && len(got) < n {
		p := next(t, ch)
		if p == "" {
			reset = true
			continue
		}
		got = append(got, p)
	}
	if !reset && !openedOnPostgres() {
		t.Errorf("%d payloads sent to a listener that did not read arrived one by one; want an overflow into \"\"", n)
	}
	if len(got) > listenBuffer+1 && !openedOnPostgres() {
		t.Errorf("%d payloads waited for a listener that did not read; at most %d are kept", len(got), listenBuffer+1)
	}
	j := 0
	for _, p := range got {
		for j < n && sent[j] != p {
			j++
		}
		if j == n {
			t.Fatalf("got %v: not the payloads sent, in order", got)
		}
	}
	// After an overflow, a payload sent later arrives, or a "" that
	// stands for it (one more "" may wait from a second overflow, while
	// the first was on its way): once what waits is drained, payloads
	// arrive one by one again.
	for i := 0; ; i++ {
		want := "after-" + itoa(i)
		if err := s.Notify(ChannelResponse, want); err != nil {
			t.Fatal(err)
		}
		p := next(t, ch)
		for p != want && p != "" {
			if !slices.Contains(sent, p) {
				t.Fatalf("got %q, which was not sent", p)
			}
			p = next(t, ch)
		}
		if p == want {
			break
		}
		if i == 3 {
			t.Fatalf("%d payloads sent after the overflow each arrived as \"\"", i+1)
		}
	}
}

// TestListenerQueue: the coalescing rules of a listener's queue.
func TestListenerQueue(t *testing.T) {
	l := &listener{wake: make(chan struct{}, 1)}
	l.push("a")
	l.push("b")
	l.push("a")
	if !slices.Equal(l.queue, []string{"a", "b"}) {
		t.Errorf("after a, b, a: %q, want a payload waiting queued once", l.queue)
	}
	l.push("")
	l.push("c")
	if !slices.Equal(l.queue, []string{""}) {
		t.Errorf("after \"\" and c: %q, want one \"\" standing for all", l.queue)
	}
	l.queue = nil
	for i := range listenBuffer + 1 {
		l.push(itoa(i))
	}
	if !slices.Equal(l.queue, []string{""}) {
		t.Errorf("after %d payloads: %d queued, want one \"\"", listenBuffer+1, len(l.queue))
	}
}

// TestNotifyAcrossReplicas: a notification from one store reaches the
// listeners of another (another pool, another connection) on the same
// database, after the change it announces is visible.
func TestNotifyAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dsn := pgDatabase(t)
	a, b := openShared(t, dsn), openShared(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rollout := listen(t, b, ctx, ChannelRollout)
	lease := listen(t, b, ctx, ChannelLease)
	if err := a.Notify(ChannelRollout, "op-1"); err != nil {
		t.Fatal(err)
	}
	if p := nextNonEmpty(t, rollout); p != "op-1" {
		t.Errorf("got %q, want op-1", p)
	}

	// A join, a release and a leave wake the others, and what woke them
	// is committed when they look.
	if err := a.Heartbeat("replica-a", "host-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	if p := nextNonEmpty(t, lease); p != "member:replica-a" {
		t.Fatalf("after a join: %q, want member:replica-a", p)
	}
	if ms, _ := b.Members(); !slices.Equal(memberIDs(ms), []string{"replica-a"}) {
		t.Errorf("members when woken by the join = %v", memberIDs(ms))
	}
	// A heartbeat of a live member is no join: the next wake-up is the
	// release's.
	if err := a.Heartbeat("replica-a", "host-a", time.Hour); err != nil {
		t.Fatal(err)
	}
	ss := mustCreate(t, a, "web")
	l, err := a.AcquireLease(ss.ID, "replica-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseLease(l); err != nil {
		t.Fatal(err)
	}
	if p := nextNonEmpty(t, lease); p != ss.ID {
		t.Fatalf("after a release: %q, want the stack set id %s", p, ss.ID)
	}
	ls, err := b.Leases()
	if err != nil {
		t.Fatal(err)
	}
	now, _ := b.DBNow()
	if len(ls) != 1 || ls[0].Expires.After(now) {
		t.Errorf("leases when woken by the release: %+v (now %s), want it expired", ls, now)
	}
	// Releasing it again notifies no one; leaving does.
	if err := a.ReleaseLease(l); err != nil {
		t.Fatal(err)
	}
	if err := a.Leave("replica-a"); err != nil {
		t.Fatal(err)
	}
	if p := nextNonEmpty(t, lease); p != "member:replica-a" {
		t.Fatalf("after a leave: %q, want member:replica-a", p)
	}
	if ms, _ := b.Members(); len(ms) != 0 {
		t.Errorf("members when woken by the leave = %v", memberIDs(ms))
	}

	// A NOTIFY in a transaction is delivered when it commits, and not at
	// all if it rolls back.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rolloutName string
	if err := conn.QueryRow(ctx, `SELECT $1 || CASE WHEN current_schema() = 'public' THEN '' ELSE '_' || left(encode(sha256(convert_to(current_schema(), 'UTF8')), 'hex'), 8) END`, ChannelRollout).Scan(&rolloutName); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		payload := "rolled-back"
		if commit {
			payload = "committed"
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, rolloutName, payload); err != nil {
			t.Fatal(err)
		}
		if err := a.Notify(ChannelRollout, "outside-"+payload); err != nil {
			t.Fatal(err)
		}
		if p := nextNonEmpty(t, rollout); p != "outside-"+payload {
			t.Fatalf("got %q before the transaction ended, want outside-%s", p, payload)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if p := nextNonEmpty(t, rollout); p != "committed" {
		t.Errorf("after a rolled back and a committed NOTIFY: %q, want committed", p)
	}

	// Closing b ends its listeners.
	b.Close()
	closes(t, rollout)
	closes(t, lease)
}

// TestNotifySchemas: two states in two schemas of one database do not
// hear each other.
func TestNotifySchemas(t *testing.T) {
	if testing.Short() || openedOnPostgres() {
		t.Skip("-short, or the conformance run (which runs the tests in schemas already)")
	}
	dsn := pgDatabase(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(context.Background(), `CREATE SCHEMA other`)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pub, other := openShared(t, dsn), openShared(t, schemaDSN(t, dsn, "other"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chPub, chOther := listen(t, pub, ctx, ChannelTrigger), listen(t, other, ctx, ChannelTrigger)
	if err := pub.Notify(ChannelTrigger, "public-1"); err != nil {
		t.Fatal(err)
	}
	if err := other.Notify(ChannelTrigger, "other-1"); err != nil {
		t.Fatal(err)
	}
	if p := nextNonEmpty(t, chOther); p != "other-1" {
		t.Errorf("the state in schema other heard %q first, want its own other-1", p)
	}
	if p := nextNonEmpty(t, chPub); p != "public-1" {
		t.Errorf("the state in schema public heard %q first, want its own public-1", p)
	}
	if err := pub.Notify(ChannelTrigger, "public-2"); err != nil {
		t.Fatal(err)
	}
	if p := nextNonEmpty(t, chPub); p != "public-2" {
		t.Errorf("the state in schema public heard %q, want public-2 (not other-1)", p)
	}
}

// TestListenSurvivesRestart: a crash and restart of PostgreSQL (pg_ctl
// restart -m immediate) cuts the listener's connection; it reconnects,
// tells its caller "" (re-read), and hears later notifications.
func TestListenSurvivesRestart(t *testing.T) {
	if testing.Short() || openedOnPostgres() {
		t.Skip("-short, or the conformance run (this test restarts its own cluster)")
	}
	c := pgtest.Start(t)
	dsn := c.NewDatabase(t)
	a, b := openShared(t, dsn), openShared(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := listen(t, b, ctx, ChannelTrigger)
	if err := a.Notify(ChannelTrigger, "before"); err != nil {
		t.Fatal(err)
	}
	if p := next(t, ch); p != "before" {
		t.Fatalf("got %q, want before", p)
	}
	for round := range 2 {
		if err := c.Restart(); err != nil {
			t.Fatal(err)
		}
		if p := next(t, ch); p != "" {
			t.Fatalf("round %d: the first delivery after a restart is %q, want \"\" (re-read)", round, p)
		}
		// Once told "", the listener listens again: what is sent now
		// arrives (the sender's pool recovers from the restart too).
		want := "after-" + itoa(round)
		if err := a.Notify(ChannelTrigger, want); err != nil {
			t.Fatalf("round %d: Notify after the restart: %v", round, err)
		}
		if p := nextNonEmpty(t, ch); p != want {
			t.Fatalf("round %d: got %q, want %s", round, p, want)
		}
	}
	cancel()
	closes(t, ch)
}

// TestListenBeforeServer: a Listen whose first connection fails returns
// all the same, and once the server is back it listens and says "".
func TestListenBeforeServer(t *testing.T) {
	if testing.Short() || openedOnPostgres() {
		t.Skip("-short, or the conformance run (this test stops its own cluster)")
	}
	c := pgtest.Start(t)
	a := openShared(t, c.NewDatabase(t))
	if err := a.Notify(ChannelTrigger, "x"); err != nil { // the channel's name is known now
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := listen(t, a, ctx, ChannelTrigger)
	if err := c.Restart(); err != nil { // starts the stopped server
		t.Fatal(err)
	}
	if p := next(t, ch); p != "" {
		t.Fatalf("the first delivery once the server is up is %q, want \"\"", p)
	}
	if err := a.Notify(ChannelTrigger, "up"); err != nil {
		t.Fatal(err)
	}
	if p := nextNonEmpty(t, ch); p != "up" {
		t.Fatalf("got %q, want up", p)
	}
	// Closing the store ends the listener.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	closes(t, ch)
}

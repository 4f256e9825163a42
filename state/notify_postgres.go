package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
)

// LISTEN/NOTIFY on PostgreSQL. A listener has a connection of its own,
// kept by jackc/pgxlisten: it LISTENs, waits for notifications, and on a
// lost connection connects again (with backoff, below) and LISTENs again,
// and then tells its Listen caller "" (pgxlisten's backlog hook, called
// once LISTEN is in effect), as what was sent meanwhile is lost. A first
// connection that fails is the same: Listen returns, and the listener
// says "" once it listens. TCP
// keepalives find a connection cut without a word (a partition) within
// about half a minute.

const (
	// listenBackoffMin and listenBackoffMax bound the wait before a
	// listener's reconnection attempt (doubling from the min, jittered).
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenConnectTimeout bounds one connection attempt of a listener.
	listenConnectTimeout = 10 * time.Second
)

var _ notifier = (*pgBackend)(nil)

// listenKeepAlive probes an idle listener connection's peer.
var listenKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// channel returns the PostgreSQL channel name of name: name itself for a
// state in schema public, else name and a hash of the schema (channels
// are per database, and must not cross between states in two schemas of
// one database). Identifiers are at most 63 bytes; these are at most 25.
func (b *pgBackend) channel(ctx context.Context, name string) (string, error) {
	b.channelMu.Lock()
	defer b.channelMu.Unlock()
	if b.channelSuffix == nil {
		var schema *string
		if err := b.retryLost(ctx, func() error {
			return b.pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema)
		}); err != nil {
			return "", err
		}
		suffix := ""
		if schema != nil && *schema != "public" {
			sum := sha256.Sum256([]byte(*schema))
			suffix = "_" + hex.EncodeToString(sum[:4])
		}
		b.channelSuffix = &suffix
	}
	return name + *b.channelSuffix, nil
}

// retryLost runs fn, a statement that may be repeated (it is idempotent,
// or only wakes), again after a connection that was lost (the pool drops
// it; a server restart cuts all of them), and converts its error.
func (b *pgBackend) retryLost(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || !connLost(err) || ctx.Err() != nil || b.isClosed.Load() || attempt == pgConnRetries {
			return pgConvert(err)
		}
		t := time.NewTimer(listenBackoff(attempt + 1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// connLost reports whether err is a connection's loss: an error that is
// not the server's, or the server's that it is ending the session
// (SQLSTATE class 08, connection exception, and 57P..., a shutdown,
// a crash of another backend, a server still starting).
func connLost(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
}

func isLeaseLost(err error) bool { return errors.Is(err, ErrLeaseLost) }

func (b *pgBackend) notify(channel, payload string) error {
	return b.leaseQuery(func(ctx context.Context) error {
		ch, err := b.channel(ctx, channel)
		if err != nil {
			return err
		}
		return b.retryLost(ctx, func() error {
			_, err := b.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, ch, payload)
			return err
		})
	})
}

func (b *pgBackend) listen(ctx context.Context, channel string, l *listener, h *notifyHub) error {
	if b.isClosed.Load() {
		return ErrClosed
	}
	ch, err := b.channel(ctx, channel)
	if err != nil {
		return err
	}
	cfg := b.pool.Config().ConnConfig
	cfg.DialFunc = (&net.Dialer{KeepAliveConfig: listenKeepAlive}).DialContext
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > listenConnectTimeout {
		cfg.ConnectTimeout = listenConnectTimeout
	}
	// Everything below but the wait for answered runs in pgxlisten's
	// one goroutine.
	answered := make(chan struct{})
	hd := &pgListenHandler{l: l, answered: answered}
	ls := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			if hd.attempt > 0 {
				t := time.NewTimer(listenBackoff(hd.attempt))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return nil, ctx.Err()
				}
			}
			hd.attempt++
			return pgx.ConnectConfig(ctx, cfg)
		},
		// A failure of the first attempt answers Listen; the listener
		// goes on trying, and says "" once it listens.
		LogError:       func(context.Context, error) { hd.answer() },
		ReconnectDelay: -1, // Connect waits
	}
	ls.Handle(ch, hd)
	if !h.goroutine(func() { _ = ls.Listen(ctx) }) {
		return ErrClosed
	}
	select {
	case <-answered:
	case <-ctx.Done(): // the pump closes the channel
	}
	return nil
}

// listenBackoff is the wait before reconnection attempt n (1-based).
func listenBackoff(n int) time.Duration {
	d := listenBackoffMin
	for i := 1; i < n && d < listenBackoffMax; i++ {
		d *= 2
	}
	d = min(d, listenBackoffMax)
	return d/2 + rand.N(d/2+1)
}

// pgListenHandler passes one listener's notifications on.
type pgListenHandler struct {
	l *listener
	// answered is closed when the first connection attempt has ended
	// (listening, or failed): then Listen returns.
	answered chan struct{}
	done     bool
	// attempt counts connection attempts since the last that listened.
	attempt int
}

var _ pgxlisten.BacklogHandler = (*pgListenHandler)(nil)

// answer ends Listen's wait, once.
func (h *pgListenHandler) answer() {
	if !h.done {
		h.done = true
		close(h.answered)
	}
}

func (h *pgListenHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	h.l.push(n.Payload)
	return nil
}

// HandleBacklog is called once LISTEN is in effect on a new connection:
// the first answers Listen, and any other (a reconnection, or a first
// connection after the first attempt failed) says "", as notifications
// may have been missed.
func (h *pgListenHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.attempt = 1 // a connection that is cut at once is not retried in a busy loop
	if !h.done {
		h.answer()
		return nil
	}
	h.l.push("")
	return nil
}

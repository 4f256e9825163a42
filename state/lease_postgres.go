package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgLeaseLost is the SQLSTATE stackd_fence raises.
const pgLeaseLost = "SDL01"

var _ leaser = (*pgBackend)(nil)

// leaseQuery runs one statement on the pool (its own transaction).
func (b *pgBackend) leaseQuery(fn func(ctx context.Context) error) error {
	if b.isClosed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgTxnTimeout)
	defer cancel()
	return fn(ctx)
}

// acquireLease: one statement, so the take is atomic; under READ
// COMMITTED an ON CONFLICT DO UPDATE re-checks its WHERE on the row's
// latest version, after any transaction holding it (a fenced write) ends.
func (b *pgBackend) acquireLease(ss, holder string, ttl time.Duration) (Lease, error) {
	l := Lease{StackSet: ss, Holder: holder}
	start := time.Now()
	err := b.leaseQuery(func(ctx context.Context) error {
		var epoch int64
		err := b.pool.QueryRow(ctx, `
			INSERT INTO stackd_leases AS l (stack_set, holder, epoch, expires)
			VALUES ($1, $2, 1, clock_timestamp() + $3::bigint * interval '1 microsecond')
			ON CONFLICT (stack_set) DO UPDATE
				SET holder = EXCLUDED.holder, epoch = l.epoch + 1, expires = EXCLUDED.expires
				WHERE l.expires <= clock_timestamp() OR l.holder = EXCLUDED.holder
			RETURNING epoch, expires`, ss, holder, ttl.Microseconds()).Scan(&epoch, &l.Expires)
		if errors.Is(err, pgx.ErrNoRows) {
			var other string
			var until time.Time
			if err := b.pool.QueryRow(ctx, `SELECT holder, expires FROM stackd_leases WHERE stack_set = $1`, ss).Scan(&other, &until); err != nil {
				return pgConvert(err)
			}
			return fmt.Errorf("%w: %s holds it until %s", ErrLeaseHeld, other, until.UTC().Format(time.RFC3339Nano))
		}
		l.Epoch = uint64(epoch)
		return pgConvert(err)
	})
	if err != nil {
		return Lease{}, err
	}
	l.Deadline = start.Add(ttl)
	return l, nil
}

func (b *pgBackend) renewLease(l Lease, ttl time.Duration) (Lease, error) {
	start := time.Now()
	err := b.leaseQuery(func(ctx context.Context) error {
		err := b.pool.QueryRow(ctx, `
			UPDATE stackd_leases SET expires = clock_timestamp() + $4::bigint * interval '1 microsecond'
			WHERE stack_set = $1 AND holder = $2 AND epoch = $3 AND expires > clock_timestamp()
			RETURNING expires`, l.StackSet, l.Holder, int64(l.Epoch), ttl.Microseconds()).Scan(&l.Expires)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		return pgConvert(err)
	})
	if err != nil {
		return Lease{}, err
	}
	l.Deadline = start.Add(ttl)
	return l, nil
}

// releaseLease notifies ChannelLease (the stack set id) in the same
// statement, so the notification is sent when the release commits.
func (b *pgBackend) releaseLease(l Lease) error {
	return b.leaseQuery(func(ctx context.Context) error {
		ch, err := b.channel(ctx, ChannelLease)
		if err != nil {
			return err
		}
		_, err = b.pool.Exec(ctx, `
			WITH released AS (
				UPDATE stackd_leases SET expires = clock_timestamp() - interval '1 microsecond'
				WHERE stack_set = $1 AND holder = $2 AND epoch = $3 AND expires > clock_timestamp()
				RETURNING stack_set)
			SELECT pg_notify($4, stack_set) FROM released`,
			l.StackSet, l.Holder, int64(l.Epoch), ch)
		return pgConvert(err)
	})
}

func (b *pgBackend) leases() ([]Lease, error) {
	var out []Lease
	err := b.leaseQuery(func(ctx context.Context) error {
		rows, err := b.pool.Query(ctx, `SELECT stack_set, holder, epoch, expires FROM stackd_leases ORDER BY stack_set`)
		if err != nil {
			return pgConvert(err)
		}
		defer rows.Close()
		for rows.Next() {
			var l Lease
			var epoch int64
			if err := rows.Scan(&l.StackSet, &l.Holder, &epoch, &l.Expires); err != nil {
				return pgConvert(err)
			}
			l.Epoch = uint64(epoch)
			out = append(out, l)
		}
		return pgConvert(rows.Err())
	})
	return out, err
}

package state

import (
	"context"
	"time"
)

var (
	_ memberBackend = (*pgBackend)(nil)
	_ fenceCounter  = (*pgBackend)(nil)
)

// heartbeat: one statement, so the upsert, the join's notification and
// the forgetting of long-dead members commit together (the notification
// is sent when it commits, after the row is visible). The times are the
// statement's (statement_timestamp), so a join is a row whose started is
// this statement's time. A heartbeat changes nothing but the row: it is
// safe to repeat after a lost connection.
func (b *pgBackend) heartbeat(id, info string, ttl time.Duration) (bool, error) {
	var joined bool
	err := b.leaseQuery(func(ctx context.Context) error {
		ch, err := b.channel(ctx, ChannelLease)
		if err != nil {
			return err
		}
		return b.retryLost(ctx, func() error {
			return b.pool.QueryRow(ctx, `
				WITH forget AS (
					DELETE FROM stackd_members
					WHERE expires < statement_timestamp() - $4::bigint * interval '1 microsecond' AND id <> $1),
				up AS (
					INSERT INTO stackd_members AS m (id, info, started, expires)
					VALUES ($1, $2, statement_timestamp(), statement_timestamp() + $3::bigint * interval '1 microsecond')
					ON CONFLICT (id) DO UPDATE
						SET info = EXCLUDED.info, expires = EXCLUDED.expires,
							started = CASE WHEN m.expires <= statement_timestamp() THEN EXCLUDED.started ELSE m.started END
					RETURNING started = statement_timestamp() AS joined),
				note AS (
					SELECT pg_notify($5, $6) FROM up WHERE joined)
				SELECT joined, (SELECT count(*) FROM note) FROM up`,
				id, info, ttl.Microseconds(), memberForget.Microseconds(), ch, memberPayload(id)).Scan(&joined, new(int64))
		})
	})
	return joined, err
}

func (b *pgBackend) leave(id string) error {
	return b.leaseQuery(func(ctx context.Context) error {
		ch, err := b.channel(ctx, ChannelLease)
		if err != nil {
			return err
		}
		return b.retryLost(ctx, func() error {
			_, err := b.pool.Exec(ctx, `
				WITH gone AS (
					DELETE FROM stackd_members WHERE id = $1 RETURNING expires > clock_timestamp() AS live)
				SELECT pg_notify($2, $3) FROM gone WHERE live`, id, ch, memberPayload(id))
			return err
		})
	})
}

func (b *pgBackend) members() ([]Member, error) {
	var out []Member
	err := b.leaseQuery(func(ctx context.Context) error {
		return b.retryLost(ctx, func() error {
			out = out[:0]
			rows, err := b.pool.Query(ctx, `
				SELECT id, info, started, expires FROM stackd_members
				WHERE expires > clock_timestamp() ORDER BY id`)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var m Member
				if err := rows.Scan(&m.ID, &m.Info, &m.Started, &m.Expires); err != nil {
					return err
				}
				m.Started, m.Expires = m.Started.UTC(), m.Expires.UTC()
				out = append(out, m)
			}
			return rows.Err()
		})
	})
	return out, err
}

func (b *pgBackend) dbNow() (time.Time, error) {
	var now time.Time
	err := b.leaseQuery(func(ctx context.Context) error {
		return b.retryLost(ctx, func() error {
			return b.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
		})
	})
	return now.UTC(), err
}

func (b *pgBackend) fencedWritesRefused() uint64 { return b.fencedRefused.Load() }

// countRefused counts err if it is a fenced write's refusal, and returns
// it.
func (b *pgBackend) countRefused(err error) error {
	if isLeaseLost(err) {
		b.fencedRefused.Add(1)
	}
	return err
}

package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newDatabase creates a database of its own for one fleet on the
// PostgreSQL server of dsn (stackd bench --state-url), and returns its DSN
// and a function that drops it.
func newDatabase(ctx context.Context, dsn string) (string, func(), error) {
	pcfg, err := pgxpool.ParseConfig(dsn) // takes the pool's own parameters too
	if err != nil {
		return "", nil, fmt.Errorf("--state-url: invalid database URL")
	}
	cfg := pcfg.ConnConfig
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", nil, fmt.Errorf("--state-url: %w", err)
	}
	defer conn.Close(ctx)
	name := "stackd_bench_" + strings.ToLower(rand.Text()[:10])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("--state-url: create the fleet's database: %w", err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			conn.Close(ctx)
		}
	}
	return withDatabase(dsn, name), drop, nil
}

// withDatabase is dsn naming database db instead.
func withDatabase(dsn, db string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		rest := dsn
		query := ""
		if i := strings.IndexByte(rest, '?'); i >= 0 {
			rest, query = rest[:i], rest[i:]
		}
		scheme := rest[:strings.Index(rest, "://")+3]
		hostPart := rest[len(scheme):]
		if i := strings.IndexByte(hostPart, '/'); i >= 0 {
			hostPart = hostPart[:i]
		}
		return scheme + hostPart + "/" + db + query
	}
	return dsn + " dbname=" + db
}

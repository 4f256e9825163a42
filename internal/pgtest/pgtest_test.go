package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func query(t *testing.T, dsn, password, sql string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = password
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var s string
	err = conn.QueryRow(ctx, sql).Scan(&s)
	return s, err
}

// TestClusterSurvivesImmediateRestart: a committed row is there after
// pg_ctl restart -m immediate, on the same DSN.
func TestClusterSurvivesImmediateRestart(t *testing.T) {
	c := Start(t)
	dsn := c.NewDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE x (v text); INSERT INTO x VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	// The old connection was cut by the crash.
	if err := conn.Ping(ctx); err == nil {
		t.Error("a connection survived pg_ctl restart -m immediate")
	}
	conn.Close(ctx)
	got, err := query(t, dsn, "", "SELECT v FROM x")
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if got != "kept" {
		t.Errorf("after restart got %q, want %q", got, "kept")
	}
	// It listens on 127.0.0.1 only, on the port of the DSN.
	addr, err := query(t, dsn, "", "SELECT current_setting('listen_addresses')")
	if err != nil || addr != "127.0.0.1" {
		t.Errorf("listen_addresses = %q, %v; want 127.0.0.1", addr, err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := query(t, dsn, "", "SELECT 'x'"); err == nil {
		t.Error("the cluster still answers after Stop")
	}
}

// TestClusterPassword: with a password, TCP connections without it are
// refused and with it accepted.
func TestClusterPassword(t *testing.T) {
	c := Start(t, Options{Password: "s3cret pass"})
	if _, err := query(t, c.DSN(), "", "SELECT 'x'"); err == nil {
		t.Error("connected without the password")
	}
	got, err := query(t, c.DSN(), "s3cret pass", "SELECT current_user::text")
	if err != nil || got != "postgres" {
		t.Errorf("with the password: %q, %v", got, err)
	}
	dsn := c.NewDatabase(t, "s3cret pass")
	if _, err := query(t, dsn, "s3cret pass", "SELECT current_database()::text"); err != nil {
		t.Error(err)
	}
}

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stackd/stackd/internal/pgtest"
)

// TestStateURL: apply, status and the state commands on a PostgreSQL
// state (--state-url), the password only from a file and never printed,
// and backups that move the state between a directory and the database.
func TestStateURL(t *testing.T) {
	t.Parallel()
	const password = "pg-pa55-word"
	c := pgtest.Start(t, pgtest.Options{Password: password})
	pwFile := filepath.Join(t.TempDir(), "pgpassword")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := c.NewDatabase(t, password)
	db := []string{"--state-url", dsn, "--state-password-file", pwFile}
	f := newFixture(t)
	flags := append([]string{"--repo", f.repo, "--targets-root", f.targets, "--shared-targets-root", "--log-format", "json"}, db...)

	// Refusals: both state flags; a password in the URL; none at all.
	withPW := strings.Replace(dsn, "postgres@", "postgres:"+password+"@", 1)
	for name, args := range map[string][]string{
		"--state-url and --state-dir": append([]string{"state", "check", "--state-dir", f.state}, db...),
		"a password in the URL":       {"state", "check", "--state-url", withPW},
		"no password":                 {"state", "check", "--state-url", dsn},
		"a password file alone":       {"state", "check", "--state-password-file", pwFile, "--state-dir", f.state},
	} {
		res := stackd(t, args...)
		if res.err == nil {
			t.Errorf("%s: stackd %v succeeded, want a refusal", name, args)
		}
		if strings.Contains(res.String(), password) {
			t.Errorf("%s: the password was printed: %s", name, res)
		}
	}
	if res := stackd(t, append([]string{"state", "check", "--state-dir", f.state}, db...)...); !errors.Is(res.err, errStateFlags) {
		t.Errorf("--state-url with --state-dir: %v, want %v", res.err, errStateFlags)
	}

	res := mustStackd(t, append([]string{"apply"}, flags...)...)
	if strings.Contains(res.String(), password) {
		t.Errorf("apply printed the password: %s", res)
	}
	if _, err := os.Stat(f.state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("apply with --state-url made a state directory %s (%v)", f.state, err)
	}
	if res := mustStackd(t, append([]string{"state", "check"}, db...)...); !strings.Contains(res.stdout, "state is consistent") {
		t.Errorf("state check: %s", res)
	}
	status := mustStackd(t, append([]string{"status", "--json"}, db...)...).stdout
	if !strings.Contains(status, `"web"`) {
		t.Fatalf("status --json on the database shows no stack set web:\n%s", status)
	}

	// The database's backup restores into a directory with the same status.
	backup := filepath.Join(t.TempDir(), "pg.backup")
	mustStackd(t, append([]string{"state", "backup", backup}, db...)...)
	dir := filepath.Join(t.TempDir(), "state")
	mustStackd(t, "state", "restore", backup, "--state-dir", dir)
	if diff := cmp.Diff(status, mustStackd(t, "status", "--json", "--state-dir", dir).stdout); diff != "" {
		t.Errorf("status from the restored directory (-database +directory):\n%s", diff)
	}
	// And back into a new database; not into one that holds records.
	back := filepath.Join(t.TempDir(), "dir.backup")
	mustStackd(t, "state", "backup", back, "--state-dir", dir)
	if res := stackd(t, append([]string{"state", "restore", back}, db...)...); res.err == nil {
		t.Errorf("restore into a database with records succeeded: %s", res)
	}
	db2 := []string{"--state-url", c.NewDatabase(t, password), "--state-password-file", pwFile}
	if res := mustStackd(t, append([]string{"state", "restore", back}, db2...)...); strings.Contains(res.String(), password) {
		t.Errorf("restore printed the password: %s", res)
	}
	if diff := cmp.Diff(status, mustStackd(t, append([]string{"status", "--json"}, db2...)...).stdout); diff != "" {
		t.Errorf("status from the second database (-first +second):\n%s", diff)
	}
	// A second apply on the restored database changes nothing.
	f2 := append([]string{"apply", "--repo", f.repo, "--targets-root", f.targets, "--shared-targets-root", "--log-format", "json"}, db2...)
	mustStackd(t, f2...)
	if res := mustStackd(t, append([]string{"state", "check"}, db2...)...); !strings.Contains(res.stdout, "state is consistent") {
		t.Errorf("state check after apply on the restored database: %s", res)
	}
}

// TestRunStateURL: `stackd run --state-url` deploys into the database and
// never logs the password; its state survives the daemon.
func TestRunStateURL(t *testing.T) {
	t.Parallel()
	const password = "run-pa55-word"
	c := pgtest.Start(t, pgtest.Options{Password: password})
	pwFile := filepath.Join(t.TempDir(), "pgpassword")
	if err := os.WriteFile(pwFile, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	db := []string{"--state-url", c.NewDatabase(t, password), "--state-password-file", pwFile}
	f := newFixture(t)
	rev := runGit(t, f.repo, "rev-parse", "HEAD")
	d := startDaemon(t, append([]string{"--repo", f.repo, "--targets-root", f.targets, "--shared-targets-root", "--log-format", "json", "--log-level", "debug",
		"--interval", "1h", "--listen", "127.0.0.1:0"}, db...)...)
	addr := d.addr(t)
	eventually(t, time.Minute, func() bool {
		code, h, _ := readyz(addr)
		return code == 200 && h.Revision == rev
	}, "the daemon never deployed %s; logs:\n%s", rev, d.logs)
	if err := d.stop(t); err != nil {
		t.Fatalf("stackd run: %v\n%s", err, d.logs)
	}
	if strings.Contains(d.logs.String(), password) {
		t.Error("the daemon logged the database password")
	}
	status := mustStackd(t, append([]string{"status", "--json"}, db...)...).stdout
	if !strings.Contains(status, `"web"`) {
		t.Errorf("status after the daemon stopped shows no stack set web:\n%s", status)
	}
	if res := mustStackd(t, append([]string{"state", "check"}, db...)...); !strings.Contains(res.stdout, "state is consistent") {
		t.Errorf("state check: %s", res)
	}
}

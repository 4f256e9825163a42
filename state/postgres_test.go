package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stackd/stackd/internal/pgtest"
)

// envTestDSN, when set, makes the tests of this package that open their
// store through openAt (newStore) run on PostgreSQL: each state directory
// becomes a schema of that database. TestPostgresConformance sets it for
// a second run of this test binary against a throwaway cluster.
const envTestDSN = "STACKD_TEST_STATE_DSN"

// badgerOnly lists the tests that are about Badger itself (its directory,
// damage, free disk space, value-log GC, its encryption and raw backup
// stream, restore into a directory) and so do not run on PostgreSQL.
var badgerOnly = []string{
	"TestOpen", "TestRestore", "TestLegacyBackup", "TestLocked", "TestEncryptionAtRest",
	"TestWritesRefusedWhenDiskNearlyFull", "TestFreeSpace", "TestCloseWhenDiskNearlyFull",
	"TestValueLogGCStopsOnClose", "TestReopenPersists", "TestBackupRestore", "TestPostgres",
}

// schemaDSN returns dsn with search_path set to schema.
func schemaDSN(t testing.TB, dsn, schema string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// openPostgresAt opens the store of "directory" dir in its own schema of
// database dsn, creating the schema if needed, and closes it after the test.
func openPostgresAt(t testing.TB, dsn, dir string) *Store {
	t.Helper()
	sum := sha256.Sum256([]byte(dir))
	schema := "s_" + hex.EncodeToString(sum[:8])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenPostgres(schemaDSN(t, dsn, schema), PostgresOptions{})
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// pgCluster starts a cluster for t, unless this is the conformance run's
// child (which has one already): it returns a DSN of a fresh database.
func pgDatabase(t *testing.T) string {
	t.Helper()
	if dsn := os.Getenv(envTestDSN); dsn != "" {
		return freshSchema(t, dsn)
	}
	return pgtest.Start(t).NewDatabase(t)
}

// freshSchema returns dsn pointed at a new, empty schema.
func freshSchema(t *testing.T, dsn string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(t.Name() + t.TempDir()))
	schema := "f_" + hex.EncodeToString(sum[:8])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	return schemaDSN(t, dsn, schema)
}

// TestPostgresConformance runs this package's store tests a second time,
// on PostgreSQL (every test that opens its store with newStore or openAt;
// the Badger-specific ones are skipped), in a child of this test binary.
func TestPostgresConformance(t *testing.T) {
	if os.Getenv(envTestDSN) != "" {
		t.Skip("this is the PostgreSQL run")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	c := pgtest.Start(t)
	dsn := c.NewDatabase(t)
	args := []string{"-test.run", ".", "-test.skip", "^(" + strings.Join(badgerOnly, "|") + ")", "-test.count=1", "-test.v", "-test.timeout=15m"}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envTestDSN+"="+dsn)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	passed := regexp.MustCompile(`(?m)^--- PASS: (\S+)`).FindAllSubmatch(out, -1)
	if err != nil {
		t.Fatalf("the store tests failed on PostgreSQL: %v\n%s", err, tail(failures(string(out)), 200))
	}
	// The run must have run the store's tests, not skipped them all.
	for _, want := range []string{"TestClaimOperationConcurrent", "TestAppendEventConcurrent", "TestAppendEventVisibleInOrder", "TestCheck", "TestSaveBackup"} {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + want + `\b`).Match(out) {
			t.Errorf("%s did not pass on PostgreSQL", want)
		}
	}
	t.Logf("%d tests passed on PostgreSQL", len(passed))
}

// failures drops the lines of a verbose test run that report success.
func failures(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- PASS") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// openedOnPostgres reports whether newStore opens PostgreSQL stores.
func openedOnPostgres() bool { return os.Getenv(envTestDSN) != "" }

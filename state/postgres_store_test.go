package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/stackd/stackd/internal/pgtest"
)

// TestPostgres covers what only a shared database has: several stores
// (replicas) on one state, schema migrations, restarts of the server, and
// backups moving between the backends. One cluster serves the subtests;
// each has its own database.
func TestPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	c := pgtest.Start(t)
	open := func(t *testing.T, dsn string, o PostgresOptions) *Store {
		t.Helper()
		s, err := OpenPostgres(dsn, o)
		if err != nil {
			t.Fatalf("OpenPostgres: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}

	t.Run("two stores claim: exactly one winner", func(t *testing.T) {
		dsn := c.NewDatabase(t)
		a, b := open(t, dsn, PostgresOptions{}), open(t, dsn, PostgresOptions{})
		ss := mustCreate(t, a, "web")
		for round := range 20 {
			rev := fmt.Sprintf("rev-%d", round)
			type result struct {
				op      Operation
				created bool
				err     error
			}
			res := make([]result, 2)
			var wg sync.WaitGroup
			for i, s := range []*Store{a, b} {
				wg.Go(func() {
					op, created, err := s.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: "DeployStackSet", Revision: rev, Status: "QUEUED", Created: t0})
					res[i] = result{op, created, err}
				})
			}
			wg.Wait()
			for _, r := range res {
				if r.err != nil {
					t.Fatalf("round %d: ClaimOperation: %v", round, r.err)
				}
			}
			if res[0].created == res[1].created {
				t.Errorf("round %d: created = %v and %v, want exactly one winner", round, res[0].created, res[1].created)
			}
			if res[0].op.ID != res[1].op.ID {
				t.Errorf("round %d: the stores see operations %s and %s for one revision", round, res[0].op.ID, res[1].op.ID)
			}
			// The same for idempotency keys and stack set names.
			key := fmt.Sprintf("req-%d", round)
			wins := make([]bool, 2)
			names := make([]error, 2)
			for i, s := range []*Store{a, b} {
				wg.Go(func() {
					created, _, err := s.PutIdem(key, []byte{byte(i)})
					if err != nil {
						t.Errorf("PutIdem: %v", err)
					}
					wins[i] = created
					_, names[i] = s.CreateStackSet(fmt.Sprintf("app-%d", round), t0)
				})
			}
			wg.Wait()
			if wins[0] == wins[1] {
				t.Errorf("round %d: PutIdem created = %v, want exactly one winner", round, wins)
			}
			if (names[0] == nil) == (names[1] == nil) {
				t.Errorf("round %d: CreateStackSet of one name from two stores: %v, %v; want one success and one ErrExists", round, names[0], names[1])
			}
			for _, err := range names {
				if err != nil && !errors.Is(err, ErrExists) {
					t.Errorf("round %d: CreateStackSet: %v, want ErrExists", round, err)
				}
			}
		}
		checkClean(t, a)
	})

	t.Run("two stores append events: 1..n, no duplicates, in order", func(t *testing.T) {
		dsn := c.NewDatabase(t)
		a, b := open(t, dsn, PostgresOptions{}), open(t, dsn, PostgresOptions{})
		ss := mustCreate(t, a, "web")
		op, _, err := a.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: "DeployStackSet", Revision: "r1", Status: "RUNNING", Created: t0})
		if err != nil {
			t.Fatal(err)
		}
		const perWriter, writers = 40, 4
		var wg sync.WaitGroup
		var mu sync.Mutex
		var seqs []uint64
		for w := range writers {
			s := []*Store{a, b}[w%2]
			wg.Go(func() {
				for i := range perWriter {
					ev, err := s.AppendEvent(Event{OperationID: op.ID, Status: "INFO", Message: fmt.Sprintf("w%d-%d", w, i)})
					if err != nil {
						t.Errorf("AppendEvent: %v", err)
						return
					}
					mu.Lock()
					seqs = append(seqs, ev.Seq)
					mu.Unlock()
				}
			})
		}
		// A reader on the other store: whenever it sees event n, it sees
		// every event before it.
		stop := make(chan struct{})
		var rg sync.WaitGroup
		rg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				evs, err := b.Events(op.ID)
				if err != nil {
					t.Errorf("Events: %v", err)
					return
				}
				for i, ev := range evs {
					if ev.Seq != uint64(i+1) {
						t.Errorf("a reader saw event %d at position %d: a gap", ev.Seq, i+1)
						return
					}
				}
			}
		})
		wg.Wait()
		close(stop)
		rg.Wait()
		slices.Sort(seqs)
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("sequence numbers %v..., want 1..%d without duplicates", seqs[:min(len(seqs), i+3)], perWriter*writers)
			}
		}
		evs, err := a.Events(op.ID)
		if err != nil || len(evs) != perWriter*writers {
			t.Fatalf("Events = %d, %v; want %d", len(evs), err, perWriter*writers)
		}
		checkClean(t, a)
	})

	t.Run("backup moves Badger to PostgreSQL and back", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		bs := openAt(t, dir)
		populate(t, bs)
		want := dump(t, bs)
		var buf bytes.Buffer
		if _, err := bs.Backup(&buf); err != nil {
			t.Fatal(err)
		}
		ps := open(t, c.NewDatabase(t), PostgresOptions{})
		if err := ps.SetMeta("node", []byte("replica-1")); err != nil { // metadata only: restorable
			t.Fatal(err)
		}
		info, err := ps.RestoreInto(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("RestoreInto: %v", err)
		}
		if info.Records != uint64(len(want)) {
			t.Errorf("restored %d records, want %d", info.Records, len(want))
		}
		if diff := cmp.Diff(want, dump(t, ps)); diff != "" {
			t.Errorf("PostgreSQL after restore (-Badger +PostgreSQL):\n%s", diff)
		}
		checkClean(t, ps)
		// A state with records is not overwritten.
		if _, err := ps.RestoreInto(bytes.NewReader(buf.Bytes())); !errors.Is(err, ErrNotEmpty) {
			t.Errorf("RestoreInto a state with records: %v, want ErrNotEmpty", err)
		}
		// A truncated backup changes nothing.
		empty := open(t, c.NewDatabase(t), PostgresOptions{})
		if _, err := empty.RestoreInto(bytes.NewReader(buf.Bytes()[:buf.Len()-5])); !errors.Is(err, ErrBadBackup) {
			t.Errorf("RestoreInto a truncated backup: %v, want ErrBadBackup", err)
		}
		if got := dump(t, empty); len(got) != 0 {
			t.Errorf("a refused restore wrote %d records", len(got))
		}
		// And back: PostgreSQL's backup restores into a directory.
		var back bytes.Buffer
		if _, err := ps.Backup(&back); err != nil {
			t.Fatal(err)
		}
		dir2 := filepath.Join(t.TempDir(), "state")
		if _, err := Restore(dir2, bytes.NewReader(back.Bytes())); err != nil {
			t.Fatalf("Restore from PostgreSQL's backup: %v", err)
		}
		bs2, err := Open(dir2)
		if err != nil {
			t.Fatal(err)
		}
		defer bs2.Close()
		if diff := cmp.Diff(want, dump(t, bs2)); diff != "" {
			t.Errorf("Badger after the round trip (-before +after):\n%s", diff)
		}
	})

	t.Run("encrypted values, and the key is checked", func(t *testing.T) {
		dsn := c.NewDatabase(t)
		key := bytes.Repeat([]byte{7}, 32)
		s := open(t, dsn, PostgresOptions{EncryptionKey: key})
		if err := s.SetMeta("secret", []byte("hunter2-value")); err != nil {
			t.Fatal(err)
		}
		got, err := s.Meta("secret")
		if err != nil || string(got) != "hunter2-value" {
			t.Fatalf("Meta = %q, %v", got, err)
		}
		s.Close()
		var raw []byte
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, `SELECT v FROM stackd_kv WHERE k = $1`, metaKey("secret")).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("hunter2")) {
			t.Errorf("the value is stored in plain text: %q", raw)
		}
		for name, o := range map[string]PostgresOptions{
			"no key":    {},
			"other key": {EncryptionKey: bytes.Repeat([]byte{8}, 32)},
		} {
			if s, err := OpenPostgres(dsn, o); !errors.Is(err, ErrEncryptionKey) {
				if s != nil {
					s.Close()
				}
				t.Errorf("%s: OpenPostgres = %v, want ErrEncryptionKey", name, err)
			}
		}
		// A plain state with records refuses a key.
		plain := c.NewDatabase(t)
		ps := open(t, plain, PostgresOptions{})
		mustCreate(t, ps, "web")
		if s, err := OpenPostgres(plain, PostgresOptions{EncryptionKey: key}); !errors.Is(err, ErrEncryptionKey) {
			if s != nil {
				s.Close()
			}
			t.Errorf("key for a plain state: %v, want ErrEncryptionKey", err)
		}
	})

	t.Run("schema: migrated once, a newer one refused", func(t *testing.T) {
		dsn := c.NewDatabase(t)
		// Replicas starting at once migrate once.
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				s, err := OpenPostgres(dsn, PostgresOptions{})
				if err != nil {
					t.Errorf("concurrent OpenPostgres: %v", err)
					return
				}
				s.Close()
			})
		}
		wg.Wait()
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var versions []int32
		rows, _ := conn.Query(ctx, `SELECT version FROM stackd_schema ORDER BY version`)
		versions, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		if len(versions) != len(pgMigrations) || versions[len(versions)-1] != int32(len(pgMigrations)) {
			t.Errorf("schema versions %v, want 1..%d once each", versions, len(pgMigrations))
		}
		if _, err := conn.Exec(ctx, `INSERT INTO stackd_schema (version) VALUES ($1)`, len(pgMigrations)+1); err != nil {
			t.Fatal(err)
		}
		s, err := OpenPostgres(dsn, PostgresOptions{})
		if !errors.Is(err, ErrSchemaTooNew) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("OpenPostgres of a newer schema: %v, want ErrSchemaTooNew", err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("version %d", len(pgMigrations)+1)) {
			t.Errorf("the error does not say which version: %v", err)
		}
	})

	t.Run("password never in errors", func(t *testing.T) {
		pc := pgtest.Start(t, pgtest.Options{Password: "pa55-w0rd"})
		u := strings.Replace(pc.DSN(), "postgres@", "postgres:wrong-pa55@", 1)
		s, err := OpenPostgres(u, PostgresOptions{})
		if err == nil {
			s.Close()
			t.Fatal("opened with a wrong password")
		}
		if strings.Contains(err.Error(), "wrong-pa55") {
			t.Errorf("the error shows the password: %v", err)
		}
		s = open(t, pc.DSN(), PostgresOptions{Password: "pa55-w0rd"})
		mustCreate(t, s, "web")
		for in, want := range map[string]string{
			"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
			"postgres://u@h/db?password=secret":             "postgres://u@h/db?password=xxxxx",
			"host=h user=u password=secret dbname=db":       "host=h user=u password=xxxxx dbname=db",
			"host=h password='se cret' dbname=db":           "host=h password=xxxxx dbname=db",
			"postgresql://h/db":                             "postgresql://h/db",
		} {
			if got := RedactDSN(in); got != want {
				t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
			}
		}
	})

	t.Run("the server crashes and restarts", func(t *testing.T) {
		dsn := c.NewDatabase(t)
		s := open(t, dsn, PostgresOptions{})
		ss := mustCreate(t, s, "web")
		if err := s.PutInstances(testInstances(ss.ID, 20)); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart(); err != nil {
			t.Fatal(err)
		}
		// The pool's connections were cut: reads run again on new ones.
		got, err := s.StackSetByName("web")
		if err != nil || got.ID != ss.ID {
			t.Fatalf("StackSetByName after a restart: %v, %v", got.ID, err)
		}
		ins, err := s.Instances(ss.ID)
		if err != nil || len(ins) != 20 {
			t.Fatalf("Instances after a restart: %d, %v", len(ins), err)
		}
		if _, _, err := s.PutIdem("after-restart", []byte("x")); err != nil {
			t.Errorf("PutIdem after a restart: %v", err)
		}
		checkClean(t, s)
	})
}

package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// t0 is a fixed time for records.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// cmpOpts compares records: nil and empty slices are equal.
var cmpOpts = []cmp.Option{cmpopts.EquateEmpty()}

// newStore opens a store in a fresh directory and closes it after the test.
func newStore(t testing.TB) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "state"))
}

// openAt opens a store at dir and closes it after the test (a second Close
// by the test is harmless).
func openAt(t testing.TB, dir string) *Store {
	t.Helper()
	if dsn := os.Getenv(envTestDSN); dsn != "" {
		return openPostgresAt(t, dsn, dir)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// rawSet writes val at key, bypassing every rule of the store.
func rawSet(t testing.TB, s *Store, key string, val []byte) {
	t.Helper()
	if err := s.kv.update(func(txn kvTxn) error { return txn.Set([]byte(key), val) }); err != nil {
		t.Fatalf("raw set %q: %v", key, err)
	}
}

// rawPut writes record v (encoded like the store does) at key.
func rawPut(t testing.TB, s *Store, key string, v any) {
	t.Helper()
	b, err := encode(v)
	if err != nil {
		t.Fatal(err)
	}
	rawSet(t, s, key, b)
}

// rawDelete deletes key, bypassing every rule of the store.
func rawDelete(t testing.TB, s *Store, key string) {
	t.Helper()
	if err := s.kv.update(func(txn kvTxn) error { return txn.Delete([]byte(key)) }); err != nil {
		t.Fatalf("raw delete %q: %v", key, err)
	}
}

// rawKeys returns every key with prefix.
func rawKeys(t testing.TB, s *Store, prefix string) []string {
	t.Helper()
	var out []string
	err := s.view(func(txn kvTxn) error {
		for _, k := range scanKeys(txn, []byte(prefix)) {
			out = append(out, string(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dump returns every key and value of the store.
func dump(t testing.TB, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.view(func(txn kvTxn) error {
		return txn.Scan(nil, false, func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// putResourcesBatch writes n resources into each instance with a write batch
// (fast fixture for big states).
func putResourcesBatch(t testing.TB, s *Store, ins []Instance, n int) {
	t.Helper()
	if s.db == nil {
		putResourcesTxn(t, s, ins, n)
		return
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, in := range ins {
		for i := range n {
			r := testResource(i)
			b, err := encode(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := wb.Set(resourceKey(in.StackSetID, in.Region, in.Account, r.Address), b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
}

// putResourcesTxn is putResourcesBatch for a backend without write
// batches: one transaction per instance.
func putResourcesTxn(t testing.TB, s *Store, ins []Instance, n int) {
	t.Helper()
	for _, in := range ins {
		err := s.kv.update(func(txn kvTxn) error {
			for i := range n {
				r := testResource(i)
				b, err := encode(r)
				if err != nil {
					return err
				}
				if err := txn.Set(resourceKey(in.StackSetID, in.Region, in.Account, r.Address), b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func testResource(i int) Resource {
	return Resource{
		Address:    "file.config[" + itoa(i) + "]",
		Type:       "file",
		PhysicalID: "/srv/targets/config-" + itoa(i),
		Inputs:     json.RawMessage(`{"path":"config","content":"hello"}`),
		Attributes: json.RawMessage(`{"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}`),
		Status:     ResourceApplied,
		Updated:    t0,
	}
}

// testInstances returns n instances of ssID over a few regions.
func testInstances(ssID string, n int) []Instance {
	regions := []string{"eu-west-1", "us-east-1", "ap-south-1", "sa-east-1"}
	out := make([]Instance, n)
	for i := range out {
		out[i] = Instance{
			StackSetID: ssID,
			Region:     regions[i%len(regions)],
			Account:    "acct-" + itoa(100000+i),
			Status:     InstanceOperationComplete,
			Revision:   "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
			Outputs:    json.RawMessage(`{"url":"http://example.test"}`),
			Updated:    t0,
		}
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

// mustCreate creates a stack set or fails the test.
func mustCreate(t testing.TB, s *Store, name string) StackSet {
	t.Helper()
	ss, err := s.CreateStackSet(name, t0)
	if err != nil {
		t.Fatalf("CreateStackSet(%q): %v", name, err)
	}
	return ss
}

// checkClean fails the test if Check finds problems.
func checkClean(t testing.TB, s *Store) {
	t.Helper()
	for _, err := range s.Check() {
		t.Errorf("Check: %v", err)
	}
}

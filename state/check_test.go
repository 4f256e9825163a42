package state

import (
	"errors"
	"strings"
	"testing"
)

// checkFixture is a clean state with one of everything.
type checkFixture struct {
	web StackSet
	op  Operation
}

func newCheckFixture(t *testing.T, s *Store) checkFixture {
	t.Helper()
	web := mustCreate(t, s, "web")
	if err := s.PutInstance(Instance{StackSetID: web.ID, Region: "eu", Account: "1", Status: InstanceOperationComplete}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutResource(web.ID, "eu", "1", Resource{Address: "file.a", Status: ResourceApplied}); err != nil {
		t.Fatal(err)
	}
	op, _, err := s.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: web.ID, Revision: "abc", Status: OperationSucceeded})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(Event{OperationID: op.ID, Status: "INFO"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutIdem("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("m", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutResourceType(ResourceType{Name: "Custom::X"}); err != nil {
		t.Fatal(err)
	}
	return checkFixture{web: web, op: op}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, s *Store, f checkFixture)
		// want holds one substring per expected problem.
		want []string
	}{
		{
			name:   "clean",
			mutate: func(*testing.T, *Store, checkFixture) {},
		},
		{
			name: "running operation allows pending and in-progress",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				run := Operation{ID: NewOperationID(), StackSetID: f.web.ID, Revision: "def", Status: OperationRunning}
				if _, _, err := s.ClaimOperation(run); err != nil {
					t.Fatal(err)
				}
				if err := s.PutInstance(Instance{StackSetID: f.web.ID, Region: "eu", Account: "1", Status: InstanceOperationInProgress}); err != nil {
					t.Fatal(err)
				}
				if err := s.PutResource(f.web.ID, "eu", "1", Resource{Address: "file.a", Status: ResourcePendingUpdate}); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "queued operation allows waiting instances",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				if _, _, err := s.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: f.web.ID, Revision: "def", Status: OperationQueued}); err != nil {
					t.Fatal(err)
				}
				if err := s.PutInstance(Instance{StackSetID: f.web.ID, Region: "eu", Account: "1", Status: InstanceWaitInProgress}); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "name index points at missing stack set",
			mutate: func(t *testing.T, s *Store, _ checkFixture) {
				rawSet(t, s, "ssname/ghost", []byte("no-such-id"))
			},
			want: []string{`"ssname/ghost": points at missing stack set no-such-id`},
		},
		{
			name: "stack set without name index",
			mutate: func(t *testing.T, s *Store, _ checkFixture) {
				rawDelete(t, s, "ssname/web")
			},
			want: []string{`name "web" has no ssname/ entry`},
		},
		{
			name: "name index points at stack set of another name",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawSet(t, s, "ssname/alias", []byte(f.web.ID))
			},
			want: []string{`named "web"`},
		},
		{
			name: "stack set record under the wrong id",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawPut(t, s, "ss/other-id", f.web)
			},
			// Its id is wrong, and the name index points elsewhere.
			want: []string{`record has id`, `is indexed to stack set`},
		},
		{
			name: "instance of missing stack set",
			mutate: func(t *testing.T, s *Store, _ checkFixture) {
				rawPut(t, s, "inst/ghost/eu/1", Instance{StackSetID: "ghost", Region: "eu", Account: "1"})
			},
			want: []string{"instance of missing stack set ghost"},
		},
		{
			name: "resource of missing instance",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawPut(t, s, "res/"+f.web.ID+"/eu/12/file.a", Resource{Address: "file.a", Status: ResourceApplied})
			},
			want: []string{"resource of missing instance eu/12"},
		},
		{
			name: "resource of missing stack set",
			mutate: func(t *testing.T, s *Store, _ checkFixture) {
				rawPut(t, s, "res/ghost/eu/1/file.a", Resource{Address: "file.a", Status: ResourceApplied})
			},
			want: []string{"resource of missing stack set ghost", "resource of missing instance eu/1"},
		},
		{
			name: "instance record disagrees with its key",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawPut(t, s, "inst/"+f.web.ID+"/eu/2", Instance{StackSetID: f.web.ID, Region: "eu", Account: "3"})
			},
			want: []string{`account "3"`},
		},
		{
			name: "operation without id index",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawDelete(t, s, "opid/"+f.op.ID)
			},
			// Its events still belong to an operation record.
			want: []string{"no opid/ index entry"},
		},
		{
			name: "id index points at missing operation",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawSet(t, s, "opid/"+NewOperationID(), []byte(f.web.ID))
			},
			want: []string{"points at missing operation"},
		},
		{
			name: "id index points at another stack set",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawSet(t, s, "opid/"+f.op.ID, []byte("other"))
			},
			want: []string{"opid/ index points at stack set other", "points at missing operation op/other/"},
		},
		{
			name: "revision key points at missing operation",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawSet(t, s, "opkey/"+f.web.ID+"/zzz", []byte(NewOperationID()))
			},
			want: []string{"points at missing operation"},
		},
		{
			name: "event of missing operation",
			mutate: func(t *testing.T, s *Store, _ checkFixture) {
				rawPut(t, s, string(eventKey("ghost", 1)), Event{OperationID: "ghost", Seq: 1})
			},
			want: []string{"event of missing operation ghost"},
		},
		{
			name: "pending resource without running operation",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				if err := s.PutResource(f.web.ID, "eu", "1", Resource{Address: "file.b", Status: ResourcePendingCreate}); err != nil {
					t.Fatal(err)
				}
				// A queued operation is not enough for a pending resource.
				if _, _, err := s.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: f.web.ID, Revision: "def", Status: OperationQueued}); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"resource is PENDING_CREATE but no operation"},
		},
		{
			name: "instance in progress without operation",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				for _, st := range []InstanceStatus{InstanceOperationInProgress, InstanceWaitInProgress} {
					if err := s.PutInstance(Instance{StackSetID: f.web.ID, Region: "us", Account: string(st), Status: st}); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []string{"instance is OPERATION_IN_PROGRESS", "instance is WAIT_IN_PROGRESS"},
		},
		{
			name: "undecodable records",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawSet(t, s, "inst/"+f.web.ID+"/eu/9", []byte("{not json"))
				rawSet(t, s, "meta/bad", []byte{7})
			},
			want: []string{"corrupt record: unknown record version", "corrupt record: unknown value encoding"},
		},
		{
			name: "malformed and unknown keys",
			mutate: func(t *testing.T, s *Store, f checkFixture) {
				rawPut(t, s, "inst/"+f.web.ID+"/eu", Instance{})
				rawSet(t, s, "zzz/1", []byte("x"))
			},
			want: []string{"malformed key", "unknown key prefix"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			f := newCheckFixture(t, s)
			tc.mutate(t, s, f)
			got := s.Check()
			for _, err := range got {
				if !errors.Is(err, ErrInconsistent) {
					t.Errorf("problem %v does not wrap ErrInconsistent", err)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Check found %d problems, want %d:\n%s", len(got), len(tc.want), joinErrs(got))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("problem %d = %v, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}

func joinErrs(errs []error) string {
	var b strings.Builder
	for _, err := range errs {
		b.WriteString("  " + err.Error() + "\n")
	}
	return b.String()
}

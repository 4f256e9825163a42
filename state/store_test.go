package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

func TestStackSetLifecycle(t *testing.T) {
	s := newStore(t)
	web := mustCreate(t, s, "web")
	if _, err := uuid.Parse(web.ID); err != nil {
		t.Fatalf("id %q is not a uuid: %v", web.ID, err)
	}
	if web.Status != StackSetActive || web.Name != "web" || !web.Created.Equal(t0) {
		t.Errorf("CreateStackSet = %+v, want name web, status ACTIVE, created %v", web, t0)
	}
	db := mustCreate(t, s, "db/primary") // names may contain "/"

	if _, err := s.CreateStackSet("web", t0); !errors.Is(err, ErrExists) {
		t.Errorf("CreateStackSet(web) again: got %v, want ErrExists", err)
	}

	got, err := s.StackSet(web.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(web, got, cmpOpts...); diff != "" {
		t.Errorf("StackSet (-want +got):\n%s", diff)
	}
	got, err = s.StackSetByName("db/primary")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(db, got, cmpOpts...); diff != "" {
		t.Errorf("StackSetByName (-want +got):\n%s", diff)
	}

	web.Revision = "abc123"
	web.Vars = json.RawMessage(`{"image":"nginx"}`)
	web.VarNames = []string{"image"}
	web.LastOperation = NewOperationID()
	if err := s.PutStackSet(web); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListStackSets()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]StackSet{db, web}, list, cmpOpts...); diff != "" {
		t.Errorf("ListStackSets (-want +got):\n%s", diff)
	}

	renamed := web
	renamed.Name = "web2"
	if err := s.PutStackSet(renamed); !errors.Is(err, ErrInvalid) {
		t.Errorf("PutStackSet(rename): got %v, want ErrInvalid", err)
	}
	if err := s.PutStackSet(StackSet{ID: uuid.NewString(), Name: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("PutStackSet(unknown id): got %v, want ErrNotFound", err)
	}

	if err := s.DeleteStackSet(web.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StackSet(web.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("StackSet after delete: got %v, want ErrNotFound", err)
	}
	if _, err := s.StackSetByName("web"); !errors.Is(err, ErrNotFound) {
		t.Errorf("StackSetByName after delete: got %v, want ErrNotFound", err)
	}
	again := mustCreate(t, s, "web")
	if again.ID == web.ID {
		t.Errorf("re-created stack set got the old id %s", web.ID)
	}
	checkClean(t, s)
}

func TestNotFound(t *testing.T) {
	s := newStore(t)
	ss := mustCreate(t, s, "web")
	id := uuid.NewString()
	tests := []struct {
		name string
		call func() error
	}{
		{"StackSet", func() error { _, err := s.StackSet(id); return err }},
		{"StackSetByName", func() error { _, err := s.StackSetByName("nope"); return err }},
		{"PutStackSet", func() error { return s.PutStackSet(StackSet{ID: id}) }},
		{"DeleteStackSet", func() error { return s.DeleteStackSet(id) }},
		{"Instance", func() error { _, err := s.Instance(ss.ID, "eu", "1"); return err }},
		{"PutInstance without stack set", func() error {
			return s.PutInstance(Instance{StackSetID: id, Region: "eu", Account: "1"})
		}},
		{"DeleteInstance", func() error { return s.DeleteInstance(ss.ID, "eu", "1") }},
		{"PutResource without instance", func() error {
			return s.PutResource(ss.ID, "eu", "1", Resource{Address: "file.a"})
		}},
		{"DeleteResource", func() error { return s.DeleteResource(ss.ID, "eu", "1", "file.a") }},
		{"Operation", func() error { _, err := s.Operation(NewOperationID()); return err }},
		{"OperationForRevision", func() error { _, err := s.OperationForRevision(ss.ID, "abc"); return err }},
		{"AppendEvent without operation", func() error {
			_, err := s.AppendEvent(Event{OperationID: NewOperationID()})
			return err
		}},
		{"Idem", func() error { _, err := s.Idem("k"); return err }},
		{"Meta", func() error { _, err := s.Meta("k"); return err }},
		{"ResourceType", func() error { _, err := s.ResourceType("Custom::X"); return err }},
		{"DeleteResourceType", func() error { return s.DeleteResourceType("Custom::X") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrNotFound) {
				t.Errorf("got %v, want ErrNotFound", err)
			}
		})
	}
}

func TestInvalidKeys(t *testing.T) {
	s := newStore(t)
	ss := mustCreate(t, s, "web")
	tests := []struct {
		name string
		call func() error
	}{
		{"region with slash", func() error {
			return s.PutInstance(Instance{StackSetID: ss.ID, Region: "eu/west", Account: "1"})
		}},
		{"account with slash", func() error { _, err := s.Instance(ss.ID, "eu", "1/2"); return err }},
		{"empty account", func() error { _, err := s.Resources(ss.ID, "eu", ""); return err }},
		{"region with NUL", func() error { return s.DeleteInstance(ss.ID, "eu\x00", "1") }},
		{"stack set id with slash", func() error { _, err := s.Instances("a/b"); return err }},
		{"address with NUL", func() error {
			return s.PutResource(ss.ID, "eu", "1", Resource{Address: "file.a\x00"})
		}},
		{"empty address", func() error { return s.DeleteResource(ss.ID, "eu", "1", "") }},
		{"empty name", func() error { _, err := s.CreateStackSet("", t0); return err }},
		{"operation id with slash", func() error {
			return s.PutOperation(Operation{ID: "a/b", StackSetID: ss.ID})
		}},
		{"claim without revision", func() error {
			_, _, err := s.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: ss.ID})
			return err
		}},
		{"empty idempotency key", func() error { _, _, err := s.PutIdem("", nil); return err }},
		{"huge region", func() error { _, err := s.Instance(ss.ID, strings.Repeat("r", 5000), "1"); return err }},
		{"huge address", func() error {
			return s.PutResource(ss.ID, "eu", "1", Resource{Address: strings.Repeat("a", 40000)})
		}},
		{"PutInstances validates all first", func() error {
			return s.PutInstances([]Instance{
				{StackSetID: ss.ID, Region: "eu", Account: "1"},
				{StackSetID: ss.ID, Region: "eu", Account: "a/b"},
			})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrInvalidKey) {
				t.Errorf("got %v, want ErrInvalidKey", err)
			}
		})
	}
	if got := rawKeys(t, s, prefixInstance); len(got) != 0 {
		t.Errorf("invalid PutInstances wrote %q, want nothing", got)
	}
}

func TestInstancesAndResources(t *testing.T) {
	s := newStore(t)
	ss := mustCreate(t, s, "web")
	in := Instance{
		StackSetID: ss.ID, Region: "eu-west-1", Account: "123",
		Status: InstanceOperationComplete, Revision: "abc", ConfigHash: "h1",
		Overrides: json.RawMessage(`{"size":2}`), Outputs: json.RawMessage(`{"url":"x"}`),
		Updated: t0,
	}
	if err := s.PutInstance(in); err != nil {
		t.Fatal(err)
	}
	got, err := s.Instance(ss.ID, "eu-west-1", "123")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got, cmpOpts...); diff != "" {
		t.Errorf("Instance (-want +got):\n%s", diff)
	}

	rs := []Resource{
		{Address: `file.cfg["a/b"]`, Type: "file", Status: ResourceApplied, Updated: t0,
			Inputs: json.RawMessage(`{"path":"a/b"}`), Sensitive: []string{"content"}, DependsOn: []string{"file.x"}},
		{Address: "file.a", Type: "file", Status: ResourcePendingCreate, RequestID: "r1",
			Inputs: json.RawMessage(`{"path":"a"}`), Updated: t0},
		{Address: "custom.dns", Type: "Custom::DNS", PhysicalID: "dns-1", Status: ResourceApplied,
			Attributes: json.RawMessage(`{"fqdn":"x.example"}`), Updated: t0},
	}
	for _, r := range rs {
		if err := s.PutResource(ss.ID, "eu-west-1", "123", r); err != nil {
			t.Fatal(err)
		}
	}
	// Settle the pending create.
	rs[1].Status, rs[1].PhysicalID = ResourceApplied, "/srv/a"
	if err := s.PutResource(ss.ID, "eu-west-1", "123", rs[1]); err != nil {
		t.Fatal(err)
	}
	gotRs, err := s.Resources(ss.ID, "eu-west-1", "123")
	if err != nil {
		t.Fatal(err)
	}
	want := []Resource{rs[2], rs[1], rs[0]} // by address
	if diff := cmp.Diff(want, gotRs, cmpOpts...); diff != "" {
		t.Errorf("Resources (-want +got):\n%s", diff)
	}

	if err := s.DeleteResource(ss.ID, "eu-west-1", "123", "file.a"); err != nil {
		t.Fatal(err)
	}
	gotRs, err = s.Resources(ss.ID, "eu-west-1", "123")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Resource{rs[2], rs[0]}, gotRs, cmpOpts...); diff != "" {
		t.Errorf("Resources after delete (-want +got):\n%s", diff)
	}
	checkClean(t, s)

	if err := s.DeleteInstance(ss.ID, "eu-west-1", "123"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Instance(ss.ID, "eu-west-1", "123"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Instance after DeleteInstance: got %v, want ErrNotFound", err)
	}
	if got := rawKeys(t, s, prefixResource); len(got) != 0 {
		t.Errorf("resources left after DeleteInstance: %q", got)
	}
}

// TestPrefixIsolation: instances whose region or account is a prefix of
// another's never see each other's resources.
func TestPrefixIsolation(t *testing.T) {
	s := newStore(t)
	a := mustCreate(t, s, "a")
	b := mustCreate(t, s, "b")
	type target struct{ ss, region, account string }
	targets := []target{
		{a.ID, "eu", "1"}, {a.ID, "eu", "12"}, {a.ID, "eu-west", "1"}, {a.ID, "eu-west", "12"},
		{a.ID, "eu-", "1"}, {b.ID, "eu", "1"},
	}
	for _, tg := range targets {
		if err := s.PutInstance(Instance{StackSetID: tg.ss, Region: tg.region, Account: tg.account, Status: InstanceOperationComplete}); err != nil {
			t.Fatal(err)
		}
		// The address names its own target, and contains "/" to try to
		// look like another key.
		for _, addr := range []string{tg.region + "/" + tg.account, `file.cfg["` + tg.account + `/x"]`} {
			if err := s.PutResource(tg.ss, tg.region, tg.account, Resource{Address: addr, Status: ResourceApplied}); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, tg := range targets {
		t.Run(tg.ss[:4]+"/"+tg.region+"/"+tg.account, func(t *testing.T) {
			rs, err := s.Resources(tg.ss, tg.region, tg.account)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.Address)
			}
			want := []string{tg.region + "/" + tg.account, `file.cfg["` + tg.account + `/x"]`}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Resources (-want +got):\n%s", diff)
			}
		})
	}

	ins, err := s.Instances(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range ins {
		got = append(got, in.Region+" "+in.Account)
	}
	want := []string{"eu 1", "eu 12", "eu- 1", "eu-west 1", "eu-west 12"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Instances sorted by region, account (-want +got):\n%s", diff)
	}

	// Deleting eu/1 of a leaves eu/12, eu-west/1 and b's eu/1 alone.
	if err := s.DeleteInstance(a.ID, "eu", "1"); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets[1:] {
		rs, err := s.Resources(tg.ss, tg.region, tg.account)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Errorf("Resources(%s/%s) after deleting eu/1: got %d, want 2", tg.region, tg.account, len(rs))
		}
	}
	checkClean(t, s)
}

func TestDeleteStackSetKeepsHistory(t *testing.T) {
	s := newStore(t)
	web := mustCreate(t, s, "web")
	other := mustCreate(t, s, "other")
	for _, ss := range []StackSet{web, other} {
		if err := s.PutInstances(testInstances(ss.ID, 4)); err != nil {
			t.Fatal(err)
		}
		putResourcesBatch(t, s, testInstances(ss.ID, 4), 3)
	}
	op, created, err := s.ClaimOperation(Operation{
		ID: NewOperationID(), StackSetID: web.ID, StackSet: "web", Kind: "DeleteStackSet",
		Revision: "abc", Status: OperationRunning, Created: t0,
	})
	if err != nil || !created {
		t.Fatalf("ClaimOperation = %v, %v", created, err)
	}
	if _, err := s.AppendEvent(Event{OperationID: op.ID, Status: "started", Time: t0}); err != nil {
		t.Fatal(err)
	}

	if err := s.DeleteStackSet(web.ID); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{string(instancesPrefix(web.ID)), string(stackSetResourcesPrefix(web.ID)), string(stackSetKey(web.ID)), string(stackSetNameKey("web"))} {
		if got := rawKeys(t, s, prefix); len(got) != 0 {
			t.Errorf("keys %q left after DeleteStackSet: %q", prefix, got)
		}
	}
	// The other stack set is untouched.
	if ins, err := s.Instances(other.ID); err != nil || len(ins) != 4 {
		t.Errorf("Instances(other) = %d, %v; want 4", len(ins), err)
	}
	// History stays.
	if _, err := s.Operation(op.ID); err != nil {
		t.Errorf("Operation after DeleteStackSet: %v", err)
	}
	if got, err := s.OperationForRevision(web.ID, "abc"); err != nil || got.ID != op.ID {
		t.Errorf("OperationForRevision after DeleteStackSet = %v, %v", got.ID, err)
	}
	if evs, err := s.Events(op.ID); err != nil || len(evs) != 1 {
		t.Errorf("Events after DeleteStackSet = %d, %v; want 1", len(evs), err)
	}
	// The operation can still be settled.
	op.Status = OperationSucceeded
	if err := s.PutOperation(op); err != nil {
		t.Errorf("PutOperation after DeleteStackSet: %v", err)
	}
	checkClean(t, s)
}

// TestBigWrites writes and deletes more keys than fit into one transaction
// (13,107 entries with the store's 8 MB memtables).
func TestBigWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("big state")
	}
	const many = 14000
	s := newStore(t)
	ss := mustCreate(t, s, "big")
	ins := testInstances(ss.ID, many)
	if err := s.PutInstances(ins); err != nil { // several transactions
		t.Fatal(err)
	}
	if got, err := s.Instances(ss.ID); err != nil || len(got) != many {
		t.Fatalf("Instances = %d, %v; want %d", len(got), err, many)
	}
	putResourcesBatch(t, s, ins[:1], many)
	putResourcesBatch(t, s, ins[1:100], 10)

	if err := s.DeleteInstance(ss.ID, ins[0].Region, ins[0].Account); err != nil {
		t.Fatal(err)
	}
	if got := rawKeys(t, s, string(resourcesPrefix(ss.ID, ins[0].Region, ins[0].Account))); len(got) != 0 {
		t.Errorf("DeleteInstance left %d resources", len(got))
	}
	if _, err := s.Instance(ss.ID, ins[0].Region, ins[0].Account); !errors.Is(err, ErrNotFound) {
		t.Errorf("Instance after DeleteInstance: got %v, want ErrNotFound", err)
	}
	checkClean(t, s)

	if err := s.DeleteStackSet(ss.ID); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, s); len(got) != 0 {
		t.Errorf("DeleteStackSet left %d keys", len(got))
	}
}

func TestOperationsAndEvents(t *testing.T) {
	s := newStore(t)
	web := mustCreate(t, s, "web")
	api := mustCreate(t, s, "api")

	var ops []Operation
	for i, st := range []OperationStatus{OperationSucceeded, OperationFailed, OperationRunning, OperationQueued} {
		ss := web
		if i == 1 {
			ss = api
		}
		op := Operation{
			ID: NewOperationID(), StackSetID: ss.ID, StackSet: ss.Name, Kind: "DeployStackSet",
			Revision: "rev" + itoa(i), Status: st, Created: t0.Add(time.Duration(i) * time.Minute),
			Results: []InstanceResult{{Region: "eu", Account: "1", Action: "update", Status: InstanceOperationComplete}},
		}
		if err := s.PutOperation(op); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}

	got, err := s.Operation(ops[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ops[1], got, cmpOpts...); diff != "" {
		t.Errorf("Operation (-want +got):\n%s", diff)
	}
	list, err := s.Operations(web.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Operation{ops[0], ops[2], ops[3]}, list, cmpOpts...); diff != "" {
		t.Errorf("Operations oldest first (-want +got):\n%s", diff)
	}

	tests := []struct {
		statuses []string
		want     []Operation
	}{
		{[]string{string(OperationRunning), string(OperationQueued)}, []Operation{ops[2], ops[3]}},
		{[]string{string(OperationFailed)}, []Operation{ops[1]}},
		{[]string{string(OperationStopped)}, nil},
		{nil, ops},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.statuses, ","), func(t *testing.T) {
			got, err := s.OperationsByStatus(tc.statuses...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpOpts...); diff != "" {
				t.Errorf("OperationsByStatus(%v) (-want +got):\n%s", tc.statuses, diff)
			}
		})
	}

	// An operation cannot move to another stack set.
	moved := ops[0]
	moved.StackSetID = api.ID
	if err := s.PutOperation(moved); !errors.Is(err, ErrInvalid) {
		t.Errorf("PutOperation(moved): got %v, want ErrInvalid", err)
	}

	// Claim: create, then verify.
	claim := Operation{ID: NewOperationID(), StackSetID: web.ID, Revision: "c1", Status: OperationQueued, Created: t0}
	got, created, err := s.ClaimOperation(claim)
	if err != nil || !created {
		t.Fatalf("ClaimOperation first = %v, %v; want created", created, err)
	}
	if diff := cmp.Diff(claim, got, cmpOpts...); diff != "" {
		t.Errorf("ClaimOperation (-want +got):\n%s", diff)
	}
	again := claim
	again.ID = NewOperationID()
	got, created, err = s.ClaimOperation(again)
	if err != nil || created || got.ID != claim.ID {
		t.Errorf("ClaimOperation again = %s, %v, %v; want %s, false, nil", got.ID, created, err, claim.ID)
	}
	// The same revision of another stack set is another operation.
	other := again
	other.StackSetID = api.ID
	if _, created, err := s.ClaimOperation(other); err != nil || !created {
		t.Errorf("ClaimOperation(other stack set) = %v, %v; want created", created, err)
	}
	// Reusing an operation id for another revision is refused.
	reuse := claim
	reuse.Revision = "c2"
	if _, _, err := s.ClaimOperation(reuse); !errors.Is(err, ErrExists) {
		t.Errorf("ClaimOperation(reused id): got %v, want ErrExists", err)
	}
	got, err = s.OperationForRevision(web.ID, "c1")
	if err != nil || got.ID != claim.ID {
		t.Errorf("OperationForRevision = %s, %v; want %s", got.ID, err, claim.ID)
	}

	// Events.
	var want []Event
	for i, msg := range []string{"started", "instance eu/1 in progress", "done"} {
		ev, err := s.AppendEvent(Event{OperationID: claim.ID, Time: t0, Region: "eu", Account: "1", Status: "INFO", Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq != uint64(i+1) {
			t.Errorf("AppendEvent #%d: got seq %d, want %d", i, ev.Seq, i+1)
		}
		want = append(want, ev)
	}
	ev, err := s.AppendEvent(Event{OperationID: ops[0].ID, Status: "INFO"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Seq != 1 || ev.Time.IsZero() {
		t.Errorf("AppendEvent to another operation = seq %d, time %v; want seq 1 and a time", ev.Seq, ev.Time)
	}
	evs, err := s.Events(claim.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, evs, cmpOpts...); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
	checkClean(t, s)
}

func TestNewOperationIDOrder(t *testing.T) {
	prev := NewOperationID()
	for range 1000 {
		id := NewOperationID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("NewOperationID() = %q (%v), want a v7 uuid", id, err)
		}
		if id <= prev {
			t.Fatalf("NewOperationID() = %s after %s: not increasing", id, prev)
		}
		prev = id
	}
}

// CreateOrGetMeta keeps the first value; concurrent callers all get it.
func TestCreateOrGetMeta(t *testing.T) {
	s := newStore(t)
	const n = 8
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = s.CreateOrGetMeta("key", []byte{byte('a' + i)}) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("caller %d got %q, %v; caller 0 got %q", i, got[i], errs[i], got[0])
		}
	}
	if v, err := s.Meta("key"); err != nil || !bytes.Equal(v, got[0]) {
		t.Errorf("Meta = %q, %v; want %q", v, err, got[0])
	}
	if v, err := s.CreateOrGetMeta("key", []byte("later")); err != nil || !bytes.Equal(v, got[0]) {
		t.Errorf("CreateOrGetMeta again = %q, %v; want %q", v, err, got[0])
	}
}

func TestIdemMetaResourceTypes(t *testing.T) {
	s := newStore(t)
	created, existing, err := s.PutIdem("req/1", []byte("201"))
	if err != nil || !created || existing != nil {
		t.Fatalf("PutIdem first = %v, %q, %v; want true, nil, nil", created, existing, err)
	}
	created, existing, err = s.PutIdem("req/1", []byte("other"))
	if err != nil || created || string(existing) != "201" {
		t.Errorf("PutIdem again = %v, %q, %v; want false, 201, nil", created, existing, err)
	}
	if v, err := s.Idem("req/1"); err != nil || string(v) != "201" {
		t.Errorf("Idem = %q, %v; want 201", v, err)
	}
	// An empty value is a value.
	if created, _, err := s.PutIdem("empty", nil); err != nil || !created {
		t.Errorf("PutIdem(empty) = %v, %v", created, err)
	}
	if v, err := s.Idem("empty"); err != nil || len(v) != 0 {
		t.Errorf("Idem(empty) = %q, %v; want empty, nil", v, err)
	}

	if err := s.SetMeta("schema", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("schema", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Meta("schema"); err != nil || string(v) != "2" {
		t.Errorf("Meta = %q, %v; want 2", v, err)
	}

	rt := ResourceType{Name: "Custom::DNS", Created: t0}
	got, created, err := s.PutResourceType(rt)
	if err != nil || !created || got != rt {
		t.Errorf("PutResourceType first = %+v, %v, %v", got, created, err)
	}
	got, created, err = s.PutResourceType(ResourceType{Name: "Custom::DNS", Created: t0.Add(time.Hour)})
	if err != nil || created || !got.Created.Equal(t0) {
		t.Errorf("PutResourceType again = %+v, %v, %v; want the first, false", got, created, err)
	}
	if _, _, err := s.PutResourceType(ResourceType{Name: "Custom::A", Created: t0}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ResourceTypes()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ResourceType{{Name: "Custom::A", Created: t0}, rt}, list); diff != "" {
		t.Errorf("ResourceTypes (-want +got):\n%s", diff)
	}
	if err := s.DeleteResourceType("Custom::A"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResourceType("Custom::A"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ResourceType after delete: got %v, want ErrNotFound", err)
	}
	checkClean(t, s)
}

// populate fills s with one of everything.
func populate(t testing.TB, s *Store) {
	t.Helper()
	ss := mustCreate(t, s, "web")
	ins := testInstances(ss.ID, 5)
	if err := s.PutInstances(ins); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.PutResource(ss.ID, ins[0].Region, ins[0].Account, testResource(i)); err != nil {
			t.Fatal(err)
		}
	}
	op, _, err := s.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: "DeployStackSet", Revision: "abc", Status: OperationSucceeded, Created: t0})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.AppendEvent(Event{OperationID: op.ID, Time: t0, Status: "INFO", Message: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.PutIdem("req-1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("schema", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutResourceType(ResourceType{Name: "Custom::DNS", Created: t0}); err != nil {
		t.Fatal(err)
	}
}

func TestReopenPersists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	populate(t, s)
	before := dump(t, s)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.StackSetByName("web"); !errors.Is(err, ErrClosed) {
		t.Errorf("StackSetByName after Close: got %v, want ErrClosed", err)
	}
	if err := s.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: got %v, want ErrClosed", err)
	}

	s2 := openAt(t, dir)
	if diff := cmp.Diff(before, dump(t, s2)); diff != "" {
		t.Errorf("state after reopen (-before +after):\n%s", diff)
	}
	ss, err := s2.StackSetByName("web")
	if err != nil {
		t.Fatal(err)
	}
	if ins, err := s2.Instances(ss.ID); err != nil || len(ins) != 5 {
		t.Errorf("Instances after reopen = %d, %v; want 5", len(ins), err)
	}
	// Sequence numbers continue after a reopen.
	ops, err := s2.Operations(ss.ID)
	if err != nil || len(ops) != 1 {
		t.Fatalf("Operations after reopen = %d, %v", len(ops), err)
	}
	ev, err := s2.AppendEvent(Event{OperationID: ops[0].ID, Status: "INFO"})
	if err != nil || ev.Seq != 4 {
		t.Errorf("AppendEvent after reopen = seq %d, %v; want 4", ev.Seq, err)
	}
	checkClean(t, s2)
}

func TestOpenLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := openAt(t, dir)
	s2, err := Open(dir)
	if err == nil {
		_ = s2.Close()
		t.Fatal("second Open of an open state succeeded")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "lock") {
		t.Errorf("second Open: got %v, want ErrLocked mentioning the lock", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestValueLogGCStopsOnClose(t *testing.T) {
	passes := make(chan struct{}, 1)
	s, err := open(filepath.Join(t.TempDir(), "state"), config{gcInterval: time.Millisecond, gcDone: func() {
		select {
		case passes <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Overwrite big values so the value log has garbage to collect.
	big := bytes.Repeat([]byte("x"), 2<<20)
	for i := range 5 {
		if err := s.SetMeta("big", append(big, byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	// Close while the loop runs: after a GC pass over the garbage, and
	// likely during the next.
	for range 2 {
		select {
		case <-passes:
		case <-time.After(time.Minute):
			t.Fatal("no value-log GC pass within a minute at a 1ms interval")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// goleak in TestMain fails the package if the GC goroutine survived.
}

func TestCodecVersion(t *testing.T) {
	b, err := encode(Event{OperationID: "x", Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != recordVersion || !json.Valid(b[1:]) {
		t.Errorf("encode = %q, want version byte then JSON", b)
	}
	var ev Event
	for _, bad := range [][]byte{nil, {9, '{', '}'}, {recordVersion, '{'}} {
		if err := decode(bad, &ev); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode(%q): got %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestKeyPrefixesDistinct(t *testing.T) {
	prefixes := []string{prefixStackSet, prefixStackSetName, prefixInstance, prefixResource,
		prefixOperation, prefixOperationID, prefixOperationKey, prefixEvent, prefixIdem,
		prefixResourceType, prefixMeta}
	for _, a := range prefixes {
		for _, b := range prefixes {
			if a != b && strings.HasPrefix(a, b) {
				t.Errorf("prefix %q starts with prefix %q", a, b)
			}
		}
	}
	// Event keys round-trip, whatever bytes the sequence number holds.
	for _, seq := range []uint64{0, 1, '/', 1 << 40, ^uint64(0)} {
		op, got, ok := parseEventKey(eventKey("op-1", seq))
		if !ok || op != "op-1" || got != seq {
			t.Errorf("parseEventKey(eventKey(op-1, %d)) = %q, %d, %v", seq, op, got, ok)
		}
	}
}

// TestEndOperation: the ended operation and its stack set's record are
// written together or not at all.
func TestEndOperation(t *testing.T) {
	s := newStore(t)
	web := mustCreate(t, s, "web")
	api := mustCreate(t, s, "api")
	running := Operation{ID: NewOperationID(), StackSetID: web.ID, StackSet: web.Name, Kind: KindDeployStackSet, Revision: "r2", Status: OperationRunning, Created: t0}
	if err := s.PutOperation(running); err != nil {
		t.Fatal(err)
	}

	ended := running
	ended.Status = OperationSucceeded
	renamed := web
	renamed.Name, renamed.LastOperation = "other", ended.ID
	if err := s.EndOperation(ended, renamed); !errors.Is(err, ErrInvalid) {
		t.Fatalf("EndOperation with a renamed stack set: err = %v, want ErrInvalid", err)
	}
	if err := s.EndOperation(ended, api); !errors.Is(err, ErrInvalid) {
		t.Fatalf("EndOperation with another stack set: err = %v, want ErrInvalid", err)
	}
	if got, err := s.Operation(ended.ID); err != nil || got.Status != OperationRunning {
		t.Fatalf("after refused EndOperations the operation is %v (err %v), want still RUNNING", got.Status, err)
	}

	ss := web
	ss.Revision, ss.LastOperation = "r2", ended.ID
	if err := s.EndOperation(ended, ss); err != nil {
		t.Fatal(err)
	}
	gotOp, err := s.Operation(ended.ID)
	if err != nil {
		t.Fatal(err)
	}
	gotSS, err := s.StackSet(web.ID)
	if err != nil {
		t.Fatal(err)
	}
	if gotOp.Status != OperationSucceeded || gotSS.LastOperation != ended.ID || gotSS.Revision != "r2" {
		t.Errorf("after EndOperation: operation %s, stack set last operation %q at %q; want SUCCEEDED, %q at r2", gotOp.Status, gotSS.LastOperation, gotSS.Revision, ended.ID)
	}
}

// TestWriteInstance: the instance record and its resources' writes go in
// one transaction; a stack set that does not exist writes nothing.
func TestWriteInstance(t *testing.T) {
	s := newStore(t)
	ss := mustCreate(t, s, "web")
	in := testInstances(ss.ID, 1)[0]
	if err := s.PutInstance(in); err != nil {
		t.Fatal(err)
	}
	gone := testResource(0)
	gone.Address = "file.gone"
	if err := s.PutResource(ss.ID, in.Region, in.Account, gone); err != nil {
		t.Fatal(err)
	}
	kept := testResource(1)
	kept.Address = "file.kept"
	in.Status = InstanceOperationComplete
	if err := s.WriteInstance(in, []ResourceWrite{{Resource: &kept}, {Delete: "file.gone"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Instance(ss.ID, in.Region, in.Account)
	if err != nil || got.Status != InstanceOperationComplete {
		t.Fatalf("instance after WriteInstance: %v, %v", got.Status, err)
	}
	res, err := s.Resources(ss.ID, in.Region, in.Account)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Address != "file.kept" {
		t.Errorf("resources after WriteInstance: %+v, want only file.kept", res)
	}

	orphan := in
	orphan.StackSetID = NewOperationID() // no such stack set
	if err := s.WriteInstance(orphan, []ResourceWrite{{Resource: &kept}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("WriteInstance without its stack set: %v, want ErrNotFound", err)
	}
	if res, _ := s.Resources(orphan.StackSetID, orphan.Region, orphan.Account); len(res) != 0 {
		t.Errorf("a refused WriteInstance wrote resources: %+v", res)
	}
}

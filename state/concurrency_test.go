package state

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// parallel runs fn(i) for i in [0, n) in n goroutines started together.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

func TestClaimOperationConcurrent(t *testing.T) {
	s := newStore(t)
	ss := mustCreate(t, s, "web")
	const n = 20
	var (
		mu      sync.Mutex
		winners []string
		seen    = map[string]bool{}
	)
	parallel(n, func(i int) {
		op := Operation{ID: NewOperationID(), StackSetID: ss.ID, Revision: "abc", Status: OperationQueued, Created: t0}
		got, created, err := s.ClaimOperation(op)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("ClaimOperation #%d: %v", i, err)
			return
		}
		if created {
			winners = append(winners, got.ID)
		}
		seen[got.ID] = true
	})
	if len(winners) != 1 {
		t.Fatalf("%d callers created the operation, want exactly 1", len(winners))
	}
	if len(seen) != 1 || !seen[winners[0]] {
		t.Errorf("callers saw operations %v, want only the winner %s", seen, winners[0])
	}
	ops, err := s.Operations(ss.ID)
	if err != nil || len(ops) != 1 {
		t.Errorf("Operations = %d, %v; want 1", len(ops), err)
	}
	checkClean(t, s)
}

func TestAppendEventConcurrent(t *testing.T) {
	s := newStore(t)
	ss := mustCreate(t, s, "web")
	ops := []Operation{
		{ID: NewOperationID(), StackSetID: ss.ID, Revision: "a", Status: OperationRunning},
		{ID: NewOperationID(), StackSetID: ss.ID, Revision: "b", Status: OperationRunning},
	}
	for _, op := range ops {
		if err := s.PutOperation(op); err != nil {
			t.Fatal(err)
		}
	}
	const goroutines, each = 10, 20
	parallel(goroutines, func(i int) {
		for range each {
			// Two operations interleaved: sequences are per operation.
			if _, err := s.AppendEvent(Event{OperationID: ops[i%2].ID, Status: "INFO", Time: t0}); err != nil {
				t.Errorf("AppendEvent: %v", err)
				return
			}
		}
	})
	for _, op := range ops {
		evs, err := s.Events(op.ID)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, ev := range evs {
			seqs = append(seqs, ev.Seq)
		}
		want := make([]uint64, goroutines/2*each)
		for i := range want {
			want[i] = uint64(i + 1)
		}
		if !slices.Equal(seqs, want) {
			t.Errorf("Events(%s) seqs = %v, want 1..%d", op.ID, seqs, len(want))
		}
	}
}

// TestAppendEventVisibleInOrder: while appends run concurrently, every
// read of the log sees 1..n, never a later event before an earlier one;
// after a reopen the numbering goes on from the log.
func TestAppendEventVisibleInOrder(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	ss := mustCreate(t, s, "web")
	op := Operation{ID: NewOperationID(), StackSetID: ss.ID, Revision: "a", Status: OperationRunning}
	if err := s.PutOperation(op); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 100
	done := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		reads := 0
		for {
			select {
			case <-done:
				if reads == 0 {
					readerErr <- errors.New("the reader never read")
				}
				return
			default:
			}
			evs, err := s.Events(op.ID)
			if err != nil {
				readerErr <- err
				return
			}
			reads++
			for i, ev := range evs {
				if ev.Seq != uint64(i+1) {
					readerErr <- fmt.Errorf("a read saw seq %d at position %d: a later event before an earlier one", ev.Seq, i+1)
					return
				}
			}
		}
	}()
	parallel(writers, func(int) {
		for range each {
			if _, err := s.AppendEvent(Event{OperationID: op.ID, Status: "INFO", Time: t0}); err != nil {
				t.Errorf("AppendEvent: %v", err)
				return
			}
		}
	})
	close(done)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	ev, err := s.AppendEvent(Event{OperationID: op.ID, Status: "INFO", Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Seq != writers*each+1 {
		t.Errorf("first append after a reopen got seq %d, want %d", ev.Seq, writers*each+1)
	}
}

func TestPutIdemConcurrent(t *testing.T) {
	s := newStore(t)
	const n = 20
	var (
		mu       sync.Mutex
		created  int
		existing = map[string]int{}
	)
	parallel(n, func(i int) {
		c, old, err := s.PutIdem("commit+web", []byte{byte('a' + i)})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			t.Errorf("PutIdem #%d: %v", i, err)
		case c:
			created++
		default:
			existing[string(old)]++
		}
	})
	if created != 1 {
		t.Fatalf("%d callers created the key, want exactly 1", created)
	}
	stored, err := s.Idem("commit+web")
	if err != nil {
		t.Fatal(err)
	}
	if len(existing) != 1 || existing[string(stored)] != n-1 {
		t.Errorf("losers saw %v, want %d times the stored %q", existing, n-1, stored)
	}
}

func TestCreateStackSetConcurrent(t *testing.T) {
	s := newStore(t)
	const n = 10
	var (
		mu     sync.Mutex
		ok     int
		exists int
	)
	parallel(n, func(int) {
		_, err := s.CreateStackSet("web", t0)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrExists):
			exists++
		default:
			t.Errorf("CreateStackSet: %v", err)
		}
	})
	if ok != 1 || exists != n-1 {
		t.Errorf("CreateStackSet: %d created, %d ErrExists; want 1 and %d", ok, exists, n-1)
	}
	list, err := s.ListStackSets()
	if err != nil || len(list) != 1 {
		t.Errorf("ListStackSets = %d, %v; want 1", len(list), err)
	}
	checkClean(t, s)
}

// TestParallelInstances: one operation per stack set, instances in parallel,
// with stack set updates racing instance writes.
func TestParallelInstances(t *testing.T) {
	s := newStore(t)
	sets := []StackSet{mustCreate(t, s, "a"), mustCreate(t, s, "b")}
	const perSet = 8
	parallel(len(sets)*perSet, func(i int) {
		ss := sets[i%len(sets)]
		in := testInstances(ss.ID, perSet)[i/len(sets)]
		if err := s.PutInstance(in); err != nil {
			t.Errorf("PutInstance: %v", err)
			return
		}
		for j := range 5 {
			if err := s.PutResource(ss.ID, in.Region, in.Account, testResource(j)); err != nil {
				t.Errorf("PutResource: %v", err)
				return
			}
		}
		ss.LastOperation = NewOperationID()
		if err := s.PutStackSet(ss); err != nil {
			t.Errorf("PutStackSet: %v", err)
		}
	})
	for _, ss := range sets {
		ins, err := s.Instances(ss.ID)
		if err != nil || len(ins) != perSet {
			t.Errorf("Instances(%s) = %d, %v; want %d", ss.Name, len(ins), err, perSet)
		}
		for _, in := range ins {
			rs, err := s.Resources(ss.ID, in.Region, in.Account)
			if err != nil || len(rs) != 5 {
				t.Errorf("Resources(%s/%s) = %d, %v; want 5", in.Region, in.Account, len(rs), err)
			}
		}
	}
	checkClean(t, s)
}

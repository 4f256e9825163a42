package state

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stackd/stackd/internal/pgtest"
)

// BenchmarkBackends measures the same store calls on Badger and on
// PostgreSQL (a throwaway local cluster: 127.0.0.1, fsync off, so the
// figures are round trips and server work, not disk): one journal write,
// an instance's journal settled in one transaction (a fleet create writes
// this way), a claim, an event, and listing 10,000 instances.
//
// Measured on the reference machine (2 cores, shared with other builds;
// -benchtime 100x -count 5; median, range), Badger / PostgreSQL:
//
//	PutResource                       28 (27-35) µs   /  408 (296-429) µs
//	FleetCreateInstance10            262 (255-297) µs / 1.83 (1.77-1.86) ms
//	FleetCreateInstance10/parallel   209 (183-265) µs / 1.59 (1.38-1.80) ms
//	ClaimOperation                    35 (26-38) µs   /  600 (444-702) µs
//	AppendEvent                       15 (13-22) µs   /  402 (389-453) µs
//	Instances10000                    77 (75-82) ms   /  132 (110-137) ms
//
// A PostgreSQL transaction costs its round trips (two for a read-then-
// write, ~0.15-0.2 ms each here under load); the instance journal is two
// transactions whatever the number of resources.
func BenchmarkBackends(b *testing.B) {
	c := pgtest.Start(b)
	backends := []struct {
		name string
		open func(b *testing.B) *Store
	}{
		{"badger", func(b *testing.B) *Store { return benchStore(b, SyncWrites) }},
		{"postgres", func(b *testing.B) *Store {
			s, err := OpenPostgres(c.NewDatabase(b), PostgresOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	}
	for _, be := range backends {
		b.Run(be.name+"/PutResource", func(b *testing.B) {
			s := be.open(b)
			ss := mustCreate(b, s, "web")
			in := testInstances(ss.ID, 1)[0]
			if err := s.PutInstance(in); err != nil {
				b.Fatal(err)
			}
			r := testResource(0)
			for i := 0; b.Loop(); i++ {
				r.Address = "file.config[" + itoa(i%100) + "]"
				if err := s.PutResource(ss.ID, in.Region, in.Account, r); err != nil {
					b.Fatal(err)
				}
			}
		})
		// One instance of a fleet create: its 10 resources journaled
		// pending in one write, then settled with the instance record.
		b.Run(be.name+"/FleetCreateInstance10", func(b *testing.B) {
			s := be.open(b)
			ss := mustCreate(b, s, "web")
			var n int
			for b.Loop() {
				in := testInstances(ss.ID, 1)[0]
				in.Account = fmt.Sprintf("acct-%d", n)
				n++
				if err := s.PutInstance(in); err != nil {
					b.Fatal(err)
				}
				pending := make([]ResourceWrite, 10)
				settled := make([]ResourceWrite, 10)
				for i := range pending {
					r := testResource(i)
					r.Status = ResourcePendingCreate
					pending[i] = ResourceWrite{Resource: &r}
					done := testResource(i)
					settled[i] = ResourceWrite{Resource: &done}
				}
				if err := s.WriteResources(ss.ID, in.Region, in.Account, pending); err != nil {
					b.Fatal(err)
				}
				if err := s.WriteInstance(in, settled); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"/FleetCreateInstance10/parallel", func(b *testing.B) {
			s := be.open(b)
			ss := mustCreate(b, s, "web")
			var next atomic.Int64
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					in := testInstances(ss.ID, 1)[0]
					in.Account = fmt.Sprintf("acct-%d", next.Add(1))
					if err := s.PutInstance(in); err != nil {
						b.Error(err)
						return
					}
					writes := make([]ResourceWrite, 10)
					for i := range writes {
						r := testResource(i)
						writes[i] = ResourceWrite{Resource: &r}
					}
					if err := s.WriteInstance(in, writes); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run(be.name+"/ClaimOperation", func(b *testing.B) {
			s := be.open(b)
			ss := mustCreate(b, s, "web")
			for i := 0; b.Loop(); i++ {
				if _, _, err := s.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: "DeployStackSet", Revision: itoa(i), Status: "QUEUED", Created: t0}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"/AppendEvent", func(b *testing.B) {
			s := be.open(b)
			ss := mustCreate(b, s, "web")
			op, _, err := s.ClaimOperation(Operation{ID: NewOperationID(), StackSetID: ss.ID, StackSet: "web", Kind: "DeployStackSet", Revision: "r", Status: "RUNNING", Created: t0})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.AppendEvent(Event{OperationID: op.ID, Status: "INFO", Message: "hello"}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(be.name+"/Instances10000", func(b *testing.B) {
			s := be.open(b)
			ss := mustCreate(b, s, "web")
			if err := s.PutInstances(testInstances(ss.ID, 10000)); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				ins, err := s.Instances(ss.ID)
				if err != nil || len(ins) != 10000 {
					b.Fatalf("Instances = %d, %v", len(ins), err)
				}
			}
		})
	}
}

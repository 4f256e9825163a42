package state

import (
	"path/filepath"
	"sync/atomic"
	"testing"
)

// benchStore opens a store with the given SyncWrites setting.
func benchStore(b *testing.B, syncWrites bool) *Store {
	b.Helper()
	c := defaultConfig()
	c.syncWrites = syncWrites
	s, err := open(filepath.Join(b.TempDir(), "state"), c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}

// BenchmarkPutResource measures one journal write; the sync=true case is the
// cost SyncWrites would add (see the SyncWrites constant).
func BenchmarkPutResource(b *testing.B) {
	for _, tc := range []struct {
		name string
		sync bool
	}{{"sync=false", false}, {"sync=true", true}} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchStore(b, tc.sync)
			ss := mustCreate(b, s, "web")
			in := testInstances(ss.ID, 1)[0]
			if err := s.PutInstance(in); err != nil {
				b.Fatal(err)
			}
			r := testResource(0)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r.Address = "file.config[" + itoa(i%100) + "]"
				if err := s.PutResource(ss.ID, in.Region, in.Account, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Parallel journal writes to different instances: concurrent commits
	// share fsyncs.
	b.Run("sync=true/parallel", func(b *testing.B) {
		s := benchStore(b, true)
		ss := mustCreate(b, s, "web")
		ins := testInstances(ss.ID, 64)
		if err := s.PutInstances(ins); err != nil {
			b.Fatal(err)
		}
		var next atomic.Int64
		b.SetParallelism(8)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			in := ins[next.Add(1)%int64(len(ins))]
			r := testResource(0)
			for i := 0; pb.Next(); i++ {
				r.Address = "file.config[" + itoa(i%100) + "]"
				if err := s.PutResource(ss.ID, in.Region, in.Account, r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkResources reads one instance with 10 resources.
func BenchmarkResources(b *testing.B) {
	s := benchStore(b, SyncWrites)
	ss := mustCreate(b, s, "web")
	ins := testInstances(ss.ID, 100)
	if err := s.PutInstances(ins); err != nil {
		b.Fatal(err)
	}
	putResourcesBatch(b, s, ins, 10)
	in := ins[50]
	b.ReportAllocs()
	for b.Loop() {
		rs, err := s.Resources(ss.ID, in.Region, in.Account)
		if err != nil || len(rs) != 10 {
			b.Fatalf("Resources = %d, %v", len(rs), err)
		}
	}
}

// BenchmarkPutInstances1000 writes 1,000 instances per iteration.
func BenchmarkPutInstances1000(b *testing.B) {
	s := benchStore(b, SyncWrites)
	ss := mustCreate(b, s, "web")
	ins := testInstances(ss.ID, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.PutInstances(ins); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstances10000 lists a stack set of 10,000 instances.
func BenchmarkInstances10000(b *testing.B) {
	s := benchStore(b, SyncWrites)
	ss := mustCreate(b, s, "web")
	if err := s.PutInstances(testInstances(ss.ID, 10000)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ins, err := s.Instances(ss.ID)
		if err != nil || len(ins) != 10000 {
			b.Fatalf("Instances = %d, %v", len(ins), err)
		}
	}
}

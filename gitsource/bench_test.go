package gitsource

import (
	"fmt"
	"testing"
)

// BenchmarkWriteStatus measures one status write on a local repository whose status
// branch already holds 1,000 files in 20 directories: 10 files spread over 10 of those
// directories (10 blobs, 12 trees, 1 commit written), and the common single-file case.
func BenchmarkWriteStatus(b *testing.B) {
	for _, files := range []int{10, 1} {
		b.Run(fmt.Sprintf("%d-files", files), func(b *testing.B) {
			ctx := testCtx(b)
			dir, _ := newWorkRepo(b, definitions)
			s := openT(b, Options{Repo: dir})
			seed := StatusWrite{Files: map[string][]byte{}}
			for i := range 1000 {
				seed.Files[fmt.Sprintf("status/dir-%02d/set-%03d.json", i%20, i)] = fmt.Appendf(nil, `{"n":%d}`, i)
			}
			if _, err := s.WriteStatus(ctx, seed); err != nil {
				b.Fatal(err)
			}
			for n := 0; b.Loop(); n++ {
				w := StatusWrite{Files: map[string][]byte{}}
				for i := range files {
					w.Files[fmt.Sprintf("status/dir-%02d/set-%03d.json", i*2, i*100)] = fmt.Appendf(nil, `{"n":%d,"run":%d}`, i, n)
				}
				if _, err := s.WriteStatus(ctx, w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

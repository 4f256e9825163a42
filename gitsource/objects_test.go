package gitsource

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"

	"github.com/stackd/stackd/internal/testkit"
)

// The header reader finds every object of a pack at the offset git gives, by looking it
// up in the pack's index on disk, and no object the pack lacks.
func TestPackIndexOnDisk(t *testing.T) {
	bare := filepath.Join(t.TempDir(), "remote.git")
	testkit.LongHistoryRemote(t, bare, 500, map[string]string{"stacks/web.hcl": "web\n"})
	runGit(t, bare, "repack", "-a", "-d", "-q")
	hd := newHeaders(dotgit.New(osfs.New(bare)))
	packs, err := hd.dg.ObjectPacks()
	if err != nil || len(packs) != 1 {
		t.Fatalf("packs: %v (%v), want one", packs, err)
	}
	p := packs[0]
	idx, err := hd.index(p)
	if err != nil {
		t.Fatal(err)
	}
	// verify-pack -v: "<hash> <type> <size> <size in pack> <offset> [<depth> <base>]".
	out := runGit(t, bare, "verify-pack", "-v", filepath.Join(bare, "objects", "pack", "pack-"+p.String()+".idx"))
	objects := 0
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 5 || len(f[0]) != 40 {
			continue
		}
		want, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			t.Fatal(line, err)
		}
		h := plumbing.NewHash(f[0])
		if got, err := hd.findOffset(p, idx, h); err != nil || got != want {
			t.Fatalf("%s: offset %d (%v), want %d", h, got, err, want)
		}
		objects++
		// The same name with its last byte changed is not in the pack.
		h[19] ^= 0xff
		if _, err := hd.findOffset(p, idx, h); !errors.Is(err, plumbing.ErrObjectNotFound) {
			t.Fatalf("%s (not in the pack): %v, want ErrObjectNotFound", h, err)
		}
	}
	if objects < 4*499 || int(idx.fanout[255]) != objects {
		t.Fatalf("%d objects checked, the index counts %d; want the whole history's", objects, idx.fanout[255])
	}
	for _, h := range []plumbing.Hash{{}, {0: 0xff, 19: 0xff}} {
		if _, err := hd.findOffset(p, idx, h); !errors.Is(err, plumbing.ErrObjectNotFound) {
			t.Fatalf("%s: %v, want ErrObjectNotFound", h, err)
		}
	}
	// Through stat, as the readers use it: a commit, its type from the pack.
	head := plumbing.NewHash(runGit(t, bare, "rev-parse", "main"))
	if info, err := hd.stat(head, 1<<20, 0, 0); err != nil || info.typ != plumbing.CommitObject {
		t.Fatalf("stat of the head: %+v (%v)", info, err)
	}
}

// Offsets beyond 2 GiB (the index's table of 64-bit offsets) and an index that is not
// version 2 are read as git writes them.
func TestPackIndexLargeOffsets(t *testing.T) {
	dir := t.TempDir()
	packDir := filepath.Join(dir, "objects", "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var w idxfile.Writer
	want := map[plumbing.Hash]int64{}
	for i := range 300 {
		h := plumbing.ComputeHash(plumbing.BlobObject, []byte(strconv.Itoa(i)))
		off := int64(12 + i*100)
		if i%3 == 0 {
			off = 1<<31 + int64(i)<<20 // past the 31-bit offsets
		}
		want[h] = off
		w.Add(h, uint64(off), uint32(i))
	}
	if err := w.OnFooter(plumbing.ComputeHash(plumbing.BlobObject, []byte("pack"))); err != nil {
		t.Fatal(err)
	}
	mi, err := w.Index()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := idxfile.NewEncoder(&buf).Encode(mi); err != nil {
		t.Fatal(err)
	}
	p := plumbing.ComputeHash(plumbing.BlobObject, []byte("pack"))
	base := filepath.Join(packDir, "pack-"+p.String())
	if err := os.WriteFile(base+".idx", buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".pack", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	hd := newHeaders(dotgit.New(osfs.New(dir)))
	idx, err := hd.index(p)
	if err != nil {
		t.Fatal(err)
	}
	for h, off := range want {
		if got, err := hd.findOffset(p, idx, h); err != nil || got != off {
			t.Fatalf("%s: offset %d (%v), want %d", h, got, err, off)
		}
	}
	// Version 1 (no magic) is refused, not misread.
	if err := os.WriteFile(base+".idx", buf.Bytes()[8:], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newHeaders(dotgit.New(osfs.New(dir))).index(p); !errors.Is(err, idxfile.ErrUnsupportedVersion) {
		t.Fatalf("an index without the version 2 header: %v", err)
	}
}

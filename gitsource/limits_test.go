package gitsource

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// hugeSize is the size of the blobs a hostile branch commits: 200 MB.
const hugeSize = 200 << 20

// allocated returns the bytes the process allocated while fn ran (all goroutines; the
// package's tests do not run in parallel).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// gitStdin runs the git CLI in dir with stdin and returns its trimmed standard output.
func gitStdin(t testing.TB, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// wantTooLarge fails unless err is an *fs.PathError for name wrapping ErrTooLarge whose
// message holds every string of want.
func wantTooLarge(t *testing.T, what string, err error, name string, want ...string) {
	t.Helper()
	var pe *fs.PathError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &pe) || pe.Path != name {
		t.Errorf("%s: error %v, want an *fs.PathError for %s wrapping ErrTooLarge", what, err, name)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not say %q", what, err, w)
		}
	}
}

// TestTreeHugeBlobIsNeverRead: a 200 MB blob, committed as a file, behind a *.hcl symbolic
// link and behind a vars file's link, is sized from its object header and refused, loose
// and packed, without the process allocating anything near its size.
func TestTreeHugeBlobIsNeverRead(t *testing.T) {
	dir, _ := newWorkRepo(t, map[string]string{"ok.hcl": "stack_set \"web\" {}\n", "stacks/web.tfvars": "replicas = 2\n"})
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "data", "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// Zeros: sparse on disk, and they compress to 200 KB in Git.
	if err := f.Truncate(hugeSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for link, target := range map[string]string{
		"big.hcl": "data/huge.bin", "stacks/big.tfvars": "../data/huge.bin", "link-ok.hcl": "ok.hcl",
	} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	head := commitAll(t, dir, "a hostile branch")
	s := openT(t, Options{Repo: dir})

	for _, form := range []string{"loose", "packed"} {
		if form == "packed" {
			runGit(t, dir, "repack", "-a", "-d", "-q")
			if n := runGit(t, dir, "count-objects"); !strings.HasPrefix(n, "0 objects") {
				t.Fatalf("after repack: %s, want no loose objects", n)
			}
		}
		ctx := testCtx(t) // after the slow part
		if form == "packed" {
			if err := s.Fetch(ctx); err != nil { // a fresh handle sees the pack
				t.Fatal(err)
			}
		}
		fsys, err := s.Tree(ctx, head)
		if err != nil {
			t.Fatal(err)
		}
		sizes := map[string]int64{}
		var infos []fs.FileInfo
		var readErrs = map[string]error{}
		var ok []byte
		alloc := allocated(func() {
			for _, name := range []string{"big.hcl", "data/huge.bin", "stacks/big.tfvars", "ok.hcl"} {
				fi, err := fs.Stat(fsys, name)
				if err != nil {
					t.Errorf("%s: Stat(%s): %v", form, name, err)
					continue
				}
				sizes[name] = fi.Size()
			}
			for _, d := range []string{".", "data", "stacks"} {
				ents, err := fs.ReadDir(fsys, d)
				if err != nil {
					t.Errorf("%s: ReadDir(%s): %v", form, d, err)
				}
				for _, e := range ents {
					fi, err := e.Info()
					if err != nil {
						t.Errorf("%s: Info of %s/%s: %v", form, d, e.Name(), err)
					}
					infos = append(infos, fi)
				}
			}
			for _, name := range []string{"big.hcl", "stacks/big.tfvars", "data/huge.bin"} {
				_, readErrs["read "+name] = fs.ReadFile(fsys, name)
				_, readErrs["open "+name] = fsys.Open(name)
			}
			ok, _ = fs.ReadFile(fsys, "link-ok.hcl")
		})
		t.Logf("%s: stat, list and refuse a %d-byte blob: %d bytes allocated", form, hugeSize, alloc)
		if alloc > 4<<20 {
			t.Errorf("%s: reading headers allocated %d bytes, want under 4 MiB (the blob is %d)", form, alloc, hugeSize)
		}
		for _, name := range []string{"big.hcl", "data/huge.bin", "stacks/big.tfvars"} {
			if sizes[name] != hugeSize {
				t.Errorf("%s: Stat(%s).Size() = %d, want %d", form, name, sizes[name], hugeSize)
			}
		}
		if len(infos) < 7 {
			t.Errorf("%s: %d directory entries described, want at least 7", form, len(infos))
		}
		for what, err := range readErrs {
			name := what[strings.Index(what, " ")+1:]
			wantTooLarge(t, form+": "+what, err, name, "209715200 bytes", "16777216")
		}
		if string(ok) != "stack_set \"web\" {}\n" {
			t.Errorf("%s: link-ok.hcl reads %q", form, ok)
		}
	}
}

// packWriter writes a version 2 packfile by hand, so that a test can store objects the way
// a hostile pusher could: a huge blob as a delta of a small one, a small file as a delta of
// a huge one.
type packWriter struct {
	buf     bytes.Buffer
	count   uint32
	offsets []int64
}

// object types of a pack entry.
const (
	packBlob     = 3
	packOFSDelta = 6
	packREFDelta = 7
)

// counter counts the bytes written to it.
type counter int64

func (c *counter) Write(p []byte) (int, error) { *c += counter(len(p)); return len(p), nil }

// add appends an entry of type typ whose inflated data data writes; base is the offset of
// an OFS delta's base, ref the base of a REF delta. It returns the entry's offset.
func (p *packWriter) add(t *testing.T, typ int, base int64, ref plumbing.Hash, data func(w io.Writer)) int64 {
	t.Helper()
	var n counter
	data(&n)
	size := int64(n)
	off := int64(p.buf.Len())
	c := byte(typ<<4) | byte(size&0x0f)
	size >>= 4
	for size > 0 {
		p.buf.WriteByte(c | 0x80)
		c, size = byte(size&0x7f), size>>7
	}
	p.buf.WriteByte(c)
	switch typ {
	case packOFSDelta:
		rel := off - base
		enc := []byte{byte(rel & 0x7f)}
		for rel >>= 7; rel > 0; rel >>= 7 {
			rel--
			enc = append([]byte{0x80 | byte(rel&0x7f)}, enc...)
		}
		p.buf.Write(enc)
	case packREFDelta:
		p.buf.Write(ref[:])
	}
	zw, _ := zlib.NewWriterLevel(&p.buf, zlib.BestSpeed)
	data(zw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p.count++
	p.offsets = append(p.offsets, off)
	return off
}

// install writes the pack into the bare repository's object directory, has git index it,
// and returns the hash of the object at each offset.
func (p *packWriter) install(t *testing.T, bare string) map[int64]plumbing.Hash {
	t.Helper()
	var out bytes.Buffer
	out.WriteString("PACK")
	binary.Write(&out, binary.BigEndian, uint32(2))
	binary.Write(&out, binary.BigEndian, p.count)
	out.Write(p.buf.Bytes()[12:])
	sum := sha1.Sum(out.Bytes())
	out.Write(sum[:])
	path := filepath.Join(bare, "objects", "pack", "pack-"+hex.EncodeToString(sum[:])+".pack")
	if err := os.WriteFile(path, out.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	runGit(t, bare, "index-pack", path)
	idx, err := os.ReadFile(strings.TrimSuffix(path, ".pack") + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	hashes := map[int64]plumbing.Hash{}
	for _, line := range strings.Split(gitStdin(t, bare, string(idx), "show-index"), "\n") {
		var off int64
		var h, crc string
		if _, err := fmt.Sscan(line, &off, &h, &crc); err != nil {
			t.Fatalf("show-index line %q: %v", line, err)
		}
		hashes[off] = plumbing.NewHash(h)
	}
	return hashes
}

func newPackWriter() *packWriter {
	p := &packWriter{}
	p.buf.Write(make([]byte, 12)) // the header, filled in by install
	return p
}

// leb writes a size of a delta header.
func leb(w io.Writer, n int64) {
	var b []byte
	for {
		c := byte(n & 0x7f)
		if n >>= 7; n > 0 {
			b = append(b, c|0x80)
			continue
		}
		b = append(b, c)
		break
	}
	w.Write(b)
}

// repeat writes n bytes of c.
func repeat(w io.Writer, c byte, n int64) {
	chunk := bytes.Repeat([]byte{c}, 1<<20)
	for n > 0 {
		k := min(n, int64(len(chunk)))
		w.Write(chunk[:k])
		n -= k
	}
}

// insertRepeat writes delta instructions inserting n bytes of c.
func insertRepeat(w io.Writer, c byte, n int64) {
	op := append([]byte{0x7f}, bytes.Repeat([]byte{c}, 0x7f)...)
	ops := bytes.Repeat(op, 8192)
	for n >= 0x7f {
		k := min(n/0x7f, 8192)
		w.Write(ops[:k*0x80])
		n -= k * 0x7f
	}
	if n > 0 {
		w.Write(append([]byte{byte(n)}, bytes.Repeat([]byte{c}, int(n))...))
	}
}

// blobHash is the Git hash of a blob of size bytes written by data.
func blobHash(size int64, data func(w io.Writer)) plumbing.Hash {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", size)
	data(h)
	var out plumbing.Hash
	copy(out[:], h.Sum(nil))
	return out
}

// TestTreeDeltaLimits: deltas are sized from the start of their delta data, and a file
// is refused when what go-git would inflate to read it is too much: the result, a base on
// its chain, or the delta data together; a chain deeper than git writes is refused too.
func TestTreeDeltaLimits(t *testing.T) {
	bare := filepath.Join(t.TempDir(), "hostile.git")
	runGit(t, filepath.Dir(bare), "init", "-q", "--bare", bare)

	hello := func(w io.Writer) { io.WriteString(w, "hello\n") }
	p := newPackWriter()
	at := map[string]int64{} // file name -> offset of its object in the pack
	// a.txt: a plain blob.
	a := p.add(t, packBlob, 0, plumbing.ZeroHash, hello)
	at["a.txt"] = a
	// huge-delta.bin: 200 MB of 'b' as a delta of a.txt, inserted 127 bytes at a time
	// (its delta data inflates to 201 MB).
	hugeDelta := func(w io.Writer) { leb(w, 6); leb(w, hugeSize); insertRepeat(w, 'b', hugeSize) }
	at["huge-delta.bin"] = p.add(t, packOFSDelta, a, plumbing.ZeroHash, hugeDelta)
	// huge.bin: 200 MB of zeros; small.hcl: 10 of them, as a delta of huge.bin.
	huge := p.add(t, packBlob, 0, plumbing.ZeroHash, func(w io.Writer) { repeat(w, 0, hugeSize) })
	at["huge.bin"] = huge
	var smallDelta bytes.Buffer
	leb(&smallDelta, hugeSize)
	leb(&smallDelta, 10)
	smallDelta.Write([]byte{0x90, 10}) // copy 10 bytes from offset 0
	at["small.hcl"] = p.add(t, packOFSDelta, huge, plumbing.ZeroHash, func(w io.Writer) { w.Write(smallDelta.Bytes()) })
	// e.txt: "hello" as a REF delta of a.txt.
	var ref bytes.Buffer
	leb(&ref, 6)
	leb(&ref, 5)
	ref.Write([]byte{0x90, 5})
	at["e.txt"] = p.add(t, packREFDelta, 0, blobHash(6, hello), func(w io.Writer) { w.Write(ref.Bytes()) })
	// copies.bin: 10 MiB of 'h' made one byte per instruction from a.txt: its delta data
	// (20 MiB) is more than the 16 MiB a file may be.
	const copies = 10 << 20
	copyOps := func(w io.Writer) {
		leb(w, 6)
		leb(w, copies)
		w.Write(bytes.Repeat([]byte{0x90, 1}, copies)) // copy 1 byte from offset 0
	}
	at["copies.bin"] = p.add(t, packOFSDelta, a, plumbing.ZeroHash, copyOps)
	// chain-N.txt: a chain of deltas, each adding one byte to the one before.
	content := []byte("hello\n")
	base := a
	var chain []string
	for depth := 1; depth <= maxDeltaChain+1; depth++ {
		next := append(bytes.Clone(content), byte('a'+depth%26))
		var d bytes.Buffer
		leb(&d, int64(len(content)))
		leb(&d, int64(len(next)))
		// copy len(content) bytes from offset 0 (size in two bytes), insert one byte
		d.Write([]byte{0x80 | 0x10 | 0x20, byte(len(content)), byte(len(content) >> 8), 1, next[len(next)-1]})
		base = p.add(t, packOFSDelta, base, plumbing.ZeroHash, func(w io.Writer) { w.Write(d.Bytes()) })
		content = next
		if depth == maxDeltaChain || depth == maxDeltaChain+1 {
			name := fmt.Sprintf("chain-%d.txt", depth)
			at[name] = base
			chain = append(chain, name)
		}
	}
	hashes := p.install(t, bare)
	files := map[string]plumbing.Hash{}
	for name, off := range at {
		files[name] = hashes[off]
	}

	var tree strings.Builder
	for name, h := range files {
		fmt.Fprintf(&tree, "100644 blob %s\t%s\n", h, name)
	}
	treeHash := gitStdin(t, bare, tree.String(), "mktree")
	commit := gitStdin(t, bare, "", "commit-tree", treeHash, "-m", "hostile pack")
	runGit(t, bare, "update-ref", "refs/heads/main", commit)

	ctx := testCtx(t) // after the slow part
	s := openT(t, Options{Repo: bare})
	fsys, err := s.Tree(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	errs := map[string]error{}
	alloc := allocated(func() {
		for name := range files {
			if fi, err := fs.Stat(fsys, name); err != nil {
				t.Errorf("Stat(%s): %v", name, err)
			} else {
				sizes[name] = fi.Size()
			}
		}
		for _, name := range []string{"huge-delta.bin", "huge.bin", "small.hcl", "copies.bin"} {
			_, errs[name] = fs.ReadFile(fsys, name)
		}
	})
	t.Logf("stat 8 files and refuse 4 (a 200 MB delta, a delta of a 200 MB base...): %d bytes allocated", alloc)
	// Outside the measure: 4096 header reads make garbage (an inflater each, which the
	// race detector's sync.Pool does not always reuse), none of it the size of the file.
	_, errs[chain[1]] = fs.ReadFile(fsys, chain[1])
	if alloc > 4<<20 {
		t.Errorf("reading headers allocated %d bytes, want under 4 MiB", alloc)
	}
	for name, want := range map[string]int64{
		"a.txt": 6, "huge-delta.bin": hugeSize, "huge.bin": hugeSize, "small.hcl": 10, "e.txt": 5, "copies.bin": copies,
		chain[0]: int64(6 + maxDeltaChain), chain[1]: int64(7 + maxDeltaChain),
	} {
		if sizes[name] != want {
			t.Errorf("Stat(%s).Size() = %d, want %d", name, sizes[name], want)
		}
	}
	wantTooLarge(t, "huge-delta.bin", errs["huge-delta.bin"], "huge-delta.bin", "209715200 bytes")
	wantTooLarge(t, "huge.bin", errs["huge.bin"], "huge.bin", "209715200 bytes")
	wantTooLarge(t, "small.hcl", errs["small.hcl"], "small.hcl", "10 bytes", "delta of an object of 209715200 bytes")
	wantTooLarge(t, "copies.bin", errs["copies.bin"], "copies.bin", "10485760 bytes", "deltas of more than 16777216 bytes")
	if err := errs[chain[1]]; err == nil || !strings.Contains(err.Error(), "delta chain longer than 4095") {
		t.Errorf("ReadFile(%s) = %v, want a delta chain error", chain[1], err)
	}
	for name, want := range map[string]string{"a.txt": "hello\n", "e.txt": "hello"} {
		if b, err := fs.ReadFile(fsys, name); err != nil || string(b) != want {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", name, b, err, want)
		}
	}
	if b, err := fs.ReadFile(fsys, chain[0]); err != nil || int64(len(b)) != sizes[chain[0]] || !bytes.HasPrefix(b, []byte("hello\n")) {
		t.Errorf("ReadFile(%s): %d bytes, %v", chain[0], len(b), err)
	}

	// What go-git's own sizer costs on the 200 MB delta, for comparison (a gigabyte of
	// copying, too slow under the race detector).
	if raceEnabled {
		return
	}
	var n int64
	goGit := allocated(func() {
		n, err = s.repo.Storer.EncodedObjectSize(files["huge-delta.bin"])
	})
	t.Logf("for comparison, go-git's EncodedObjectSize of the 200 MB delta: %d bytes (%v), %d bytes allocated", n, err, goGit)
}

// TestTreeLinkLimits: symbolic-link loops, a chain deeper than 40 links, a target longer
// than PATH_MAX and a path made deep through a link to "." all end in an error.
func TestTreeLinkLimits(t *testing.T) {
	ctx := testCtx(t)
	dir, _ := newWorkRepo(t, map[string]string{"ok.hcl": "ok\n", "sub/file": "file\n"})
	links := map[string]string{
		"loop-a": "loop-b", "loop-b": "loop-a", "self": "self", "x": ".", "up": "../outside",
		"link-0": "ok.hcl", "deep-link": strings.Repeat("sub/", 300) + "file",
	}
	// link-41 -> link-40 -> ... -> link-0 -> ok.hcl: 42 links to follow from link-41.
	for i := 1; i <= 41; i++ {
		links[fmt.Sprintf("link-%d", i)] = fmt.Sprintf("link-%d", i-1)
	}
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, dir, "add", "-A")
	// A link target longer than the kernel would create: written into Git directly.
	long := gitStdin(t, dir, strings.Repeat("a/", 2500)+"ok.hcl", "hash-object", "-w", "--stdin")
	runGit(t, dir, "update-index", "--add", "--cacheinfo", "120000,"+long+",long-link")
	runGit(t, dir, "commit", "-q", "-m", "links")
	head := runGit(t, dir, "rev-parse", "HEAD")

	s := openT(t, Options{Repo: dir})
	fsys, err := s.Tree(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat("x/", 300) + "ok.hcl"
	deepOK := strings.Repeat("x/", 39) + "ok.hcl"
	tests := []struct {
		name string
		want string // in the error; "" for success
	}{
		{"loop-a", "too many levels of symbolic links"},
		{"self", "too many levels of symbolic links"},
		{"loop-a/file", "too many levels of symbolic links"},
		{"link-39", ""},
		{"link-40", "too many levels of symbolic links"},
		{"link-41", "too many levels of symbolic links"},
		{"long-link", "symbolic link long-link: target too large: 5006 bytes, more than the 4096"},
		{deep, "path deeper than 256 components"},
		{deepOK, ""},
		{"deep-link", "path deeper than 256 components"},
		{"x/x/sub/x/file", "file does not exist"}, // sub/x is not there
		{"up", "file does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name[:min(len(tc.name), 20)], func(t *testing.T) {
			b, err := fs.ReadFile(fsys, tc.name)
			if tc.want == "" {
				if err != nil || string(b) != "ok\n" {
					t.Errorf("ReadFile = %q, %v; want ok", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadFile error %v, want one saying %q", err, tc.want)
			}
			if _, err := fs.Stat(fsys, tc.name); err == nil {
				t.Errorf("Stat succeeded")
			}
		})
	}
	// The links themselves are fine to describe.
	if target, err := fs.ReadLink(fsys, "loop-a"); err != nil || target != "loop-b" {
		t.Errorf("ReadLink(loop-a) = %q, %v", target, err)
	}
	if _, err := fs.ReadLink(fsys, "long-link"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadLink(long-link) error %v, want ErrTooLarge", err)
	}
	if fi, err := fs.Lstat(fsys, "long-link"); err != nil || fi.Size() != 5006 {
		t.Errorf("Lstat(long-link) = %v, %v; want size 5006", fi, err)
	}
}

// TestTreeDirectoryLimits: a directory object over 4 MiB is not decoded, and one FS stops
// decoding directories and reading files at its totals. A tree whose entries are out of
// Git's order (git fsck refuses it, a hostile pusher may not care) is still searched.
func TestTreeDirectoryLimits(t *testing.T) {
	ctx := testCtx(t)
	bare := filepath.Join(t.TempDir(), "dirs.git")
	runGit(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	blob := gitStdin(t, bare, "content\n", "hash-object", "-w", "--stdin")
	var big strings.Builder
	for i := range 70000 { // 70,000 × 68 bytes: 4.5 MiB
		fmt.Fprintf(&big, "100644 blob %s\t%040d\n", blob, i)
	}
	bigTree := gitStdin(t, bare, big.String(), "mktree")
	// Three small directories of 10 entries each.
	small := make([]string, 3)
	for d := range small {
		var b strings.Builder
		for i := range 10 {
			fmt.Fprintf(&b, "100644 blob %s\tf%d-%d\n", blob, d, i)
		}
		small[d] = gitStdin(t, bare, b.String(), "mktree")
	}
	// An unsorted tree: "b" before "a", written raw.
	var raw bytes.Buffer
	bh := plumbing.NewHash(blob)
	for _, name := range []string{"b", "a"} {
		fmt.Fprintf(&raw, "100644 %s\x00", name)
		raw.Write(bh[:])
	}
	unsorted := gitStdin(t, bare, raw.String(), "hash-object", "-w", "-t", "tree", "--literally", "--stdin")
	root := gitStdin(t, bare, fmt.Sprintf("040000 tree %s\tbig\n040000 tree %s\td0\n040000 tree %s\td1\n040000 tree %s\td2\n040000 tree %s\tunsorted\n",
		bigTree, small[0], small[1], small[2], unsorted), "mktree")
	commit := gitStdin(t, bare, "", "commit-tree", root, "-m", "directories")

	s := openT(t, Options{Repo: bare})
	fsys, err := s.Tree(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := fs.Stat(fsys, "big"); err != nil || !fi.IsDir() {
		t.Errorf("Stat(big) = %v, %v; want a directory", fi, err)
	}
	var alloc uint64
	var errList, errOpen error
	alloc = allocated(func() {
		_, errList = fs.ReadDir(fsys, "big")
		_, errOpen = fs.ReadFile(fsys, "big/"+fmt.Sprintf("%040d", 5))
	})
	wantTooLarge(t, "ReadDir(big)", errList, "big", "directory: too large")
	wantTooLarge(t, "ReadFile(big/...)", errOpen, "big/"+fmt.Sprintf("%040d", 5), "more than the 4194304 bytes")
	if alloc > 1<<20 {
		t.Errorf("refusing a 4.5 MiB directory allocated %d bytes", alloc)
	}
	for _, name := range []string{"a", "b"} {
		if b, err := fs.ReadFile(fsys, "unsorted/"+name); err != nil || string(b) != "content\n" {
			t.Errorf("ReadFile(unsorted/%s) = %q, %v", name, b, err)
		}
	}

	// Totals: with room for 25 entries, the root (5) and two small directories (10 each)
	// are decoded, the third is refused; with room for 20 bytes, two files are read.
	fsys, err = s.Tree(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	tfs := fsys.(*treeFS)
	tfs.maxEntries, tfs.maxBytes = 25, 20
	for _, d := range []string{"d0", "d1"} {
		if _, err := fs.ReadDir(fsys, d); err != nil {
			t.Errorf("ReadDir(%s): %v", d, err)
		}
	}
	_, err = fs.ReadDir(fsys, "d2")
	wantTooLarge(t, "ReadDir(d2)", err, "d2", "more than 25 directory entries read from one tree")
	for i, want := range []string{"", "", "more than 20 bytes of files read from one tree"} {
		_, err := fs.ReadFile(fsys, fmt.Sprintf("d0/f0-%d", i))
		if want == "" && err != nil {
			t.Errorf("file %d: %v", i, err)
		}
		if want != "" {
			wantTooLarge(t, fmt.Sprintf("file %d", i), err, fmt.Sprintf("d0/f0-%d", i), want)
		}
	}
}

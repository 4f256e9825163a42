package gitsource

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// Objects are sized from their headers before anything reads them: go-git's own
// EncodedObject inflates a loose object whole to learn its size, and its EncodedObjectSize
// inflates the whole delta data of a packed delta. A branch is untrusted (docs/design.md §9), so a
// 200 MB blob — or a small one stored as a delta of a huge one — must be refused before any
// of it is inflated. headers reads only: a loose object's zlib header, a packed object's
// header and, for a delta, the first bytes of its delta data (which start with the sizes of
// its base and its result), following the chain of bases to the end.

// maxDeltaChain bounds the chain of delta bases followed for one packed object: 4095 is the
// deepest chain git itself writes (pack.depth is capped there), and each step costs one
// header read.
const maxDeltaChain = 4095

// ErrTooLarge: an object is larger than stackd reads from Git, or is built from one (a delta
// whose bases or delta data exceed the limit). It is wrapped in an *fs.PathError naming the
// file when a Tree's fs.FS refuses to read it.
var ErrTooLarge = errors.New("too large")

// objectInfo is what an object's header says.
type objectInfo struct {
	typ  plumbing.ObjectType // the real type: a delta's is its base's
	size int64               // the object's size once inflated (and patched)
}

// headers reads object headers straight from a repository's object directory (loose objects,
// packs through their indexes, alternates). One belongs to one repository handle; callers
// hold s.sem.
type headers struct {
	dg    *dotgit.DotGit
	packs []plumbing.Hash
	idx   map[plumbing.Hash]*packIndex
	alts  []*headers
	// altsRead: alts was looked up (there may be none).
	altsRead bool
}

// objectHeaders returns the header reader of the current repository handle. Callers hold
// s.sem.
func (s *Source) objectHeaders() *headers {
	if s.hdrs == nil || s.hdrsOf != s.repo {
		s.hdrs, s.hdrsOf = nil, s.repo
		if st, ok := s.repo.Storer.(*filesystem.Storage); ok {
			s.hdrs = newHeaders(dotgit.New(st.Filesystem()))
		}
	}
	return s.hdrs
}

func newHeaders(dg *dotgit.DotGit) *headers {
	return &headers{dg: dg, idx: map[plumbing.Hash]*packIndex{}}
}

// objectStat returns the type and size of object h from its header alone. With limit >= 0
// it also checks that reading the object inflates at most that much: the object itself, each
// delta base it is built from and their delta data together (see headers.packed); an
// object over it is an error wrapping ErrTooLarge that gives its size. Callers hold s.sem.
func (s *Source) objectStat(r *git.Repository, h plumbing.Hash, limit int64) (objectInfo, error) {
	if hd := s.objectHeaders(); hd != nil {
		return hd.stat(h, limit, 0, 0)
	}
	// Not a repository on disk (never the case for a Source): go-git's own sizer.
	n, err := r.Storer.EncodedObjectSize(h)
	if err != nil {
		return objectInfo{}, err
	}
	if limit >= 0 && n > limit {
		return objectInfo{size: n}, tooLarge(n, limit)
	}
	return objectInfo{typ: plumbing.AnyObject, size: n}, nil
}

func tooLarge(size, limit int64) error {
	return fmt.Errorf("%w: %d bytes, more than the %d bytes stackd reads", ErrTooLarge, size, limit)
}

// stat finds h among the loose objects, the packs and the alternates. alt counts the
// alternates followed (git follows 5 levels), hops the delta bases looked up outside their
// pack on the way here.
func (hd *headers) stat(h plumbing.Hash, limit int64, alt, hops int) (objectInfo, error) {
	if info, err := hd.loose(h, limit); !errors.Is(err, plumbing.ErrObjectNotFound) {
		return info, err
	}
	for attempt := range 2 {
		if attempt == 1 || hd.packs == nil {
			// First use, or a pack written since (a fetch, git gc).
			packs, err := hd.dg.ObjectPacks()
			if err != nil {
				return objectInfo{}, err
			}
			hd.packs = packs
		}
		for _, p := range hd.packs {
			idx, err := hd.index(p)
			if err != nil {
				return objectInfo{}, err
			}
			off, err := hd.findOffset(p, idx, h)
			if err == nil {
				return hd.packed(p, idx, off, limit, hops)
			}
			if !errors.Is(err, plumbing.ErrObjectNotFound) {
				return objectInfo{}, err
			}
		}
	}
	if alt < 5 {
		if !hd.altsRead {
			hd.altsRead = true
			if alts, err := hd.dg.Alternates(); err == nil {
				for _, a := range alts {
					hd.alts = append(hd.alts, newHeaders(a))
				}
			}
		}
		for _, a := range hd.alts {
			if info, err := a.stat(h, limit, alt+1, hops); !errors.Is(err, plumbing.ErrObjectNotFound) {
				return info, err
			}
		}
	}
	return objectInfo{}, plumbing.ErrObjectNotFound
}

// packIndex is what headers keep of a pack's index (.idx, version 2): its fan-out table
// alone. Objects are looked up in the file on disk by binary search; the rest of the index
// (20 bytes of name and 8 of CRC and offset per object: megabytes for a long history) is
// not copied into memory, where go-git keeps its own copy already.
type packIndex struct {
	// fanout[b] is the number of objects whose name's first byte is at most b.
	fanout [256]uint32
}

// The layout of a version 2 pack index: a header, the fan-out table, then per object (in
// name order) its name, its CRC and its 31-bit offset (or, high bit set, the position of
// its offset in the table of 64-bit offsets after them).
const (
	idxHeaderLen = 8
	idxFanoutLen = 256 * 4
	idxNamesAt   = idxHeaderLen + idxFanoutLen
)

var idxMagic = []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}

// index returns pack p's fan-out table (packs never change under their name).
func (hd *headers) index(p plumbing.Hash) (*packIndex, error) {
	if idx, ok := hd.idx[p]; ok {
		return idx, nil
	}
	f, err := hd.dg.ObjectPackIdx(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var head [idxNamesAt]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return nil, fmt.Errorf("read index of pack %s: %w", p, err)
	}
	if !bytes.Equal(head[:idxHeaderLen], idxMagic) {
		return nil, fmt.Errorf("read index of pack %s: %w", p, idxfile.ErrUnsupportedVersion)
	}
	idx := &packIndex{}
	for i := range idx.fanout {
		idx.fanout[i] = binary.BigEndian.Uint32(head[idxHeaderLen+4*i:])
		if i > 0 && idx.fanout[i] < idx.fanout[i-1] {
			return nil, fmt.Errorf("read index of pack %s: %w", p, idxfile.ErrMalformedIdxFile)
		}
	}
	hd.idx[p] = idx
	return idx, nil
}

// findOffset returns the offset in pack p of object h, looked up in the pack's index on
// disk (plumbing.ErrObjectNotFound if the pack does not hold h).
func (hd *headers) findOffset(p plumbing.Hash, idx *packIndex, h plumbing.Hash) (int64, error) {
	lo := uint32(0)
	if h[0] > 0 {
		lo = idx.fanout[h[0]-1]
	}
	hi := idx.fanout[h[0]]
	if lo == hi {
		return 0, plumbing.ErrObjectNotFound
	}
	f, err := hd.dg.ObjectPackIdx(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := int64(idx.fanout[255])
	read := func(at int64, b []byte) error {
		if _, err := f.ReadAt(b, at); err != nil {
			return fmt.Errorf("read index of pack %s: %w", p, err)
		}
		return nil
	}
	var name plumbing.Hash
	for lo < hi {
		mid := lo + (hi-lo)/2
		if err := read(idxNamesAt+int64(mid)*20, name[:]); err != nil {
			return 0, err
		}
		switch c := bytes.Compare(name[:], h[:]); {
		case c < 0:
			lo = mid + 1
		case c > 0:
			hi = mid
		default:
			var b [8]byte
			offsets := idxNamesAt + n*24 // after the names and the CRCs
			if err := read(offsets+int64(mid)*4, b[:4]); err != nil {
				return 0, err
			}
			off := binary.BigEndian.Uint32(b[:4])
			if off&0x80000000 == 0 {
				return int64(off), nil
			}
			if err := read(offsets+n*4+int64(off&0x7fffffff)*8, b[:]); err != nil {
				return 0, err
			}
			return int64(binary.BigEndian.Uint64(b[:]) & (1<<63 - 1)), nil
		}
	}
	return 0, plumbing.ErrObjectNotFound
}

// loose reads the header of loose object h: its type and size are the first bytes of its
// zlib stream.
func (hd *headers) loose(h plumbing.Hash, limit int64) (objectInfo, error) {
	f, err := hd.dg.Object(h)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, plumbing.ErrObjectNotFound) {
		return objectInfo{}, plumbing.ErrObjectNotFound
	}
	if err != nil {
		return objectInfo{}, err
	}
	defer f.Close()
	r, err := objfile.NewReader(f)
	if err != nil {
		return objectInfo{}, fmt.Errorf("object %s: %w", short(h), err)
	}
	defer r.Close()
	t, size, err := r.Header()
	if err != nil {
		return objectInfo{}, fmt.Errorf("object %s: %w", short(h), err)
	}
	info := objectInfo{typ: t, size: size}
	if limit >= 0 && size > limit {
		return info, tooLarge(size, limit)
	}
	return info, nil
}

// packed reads the header of the object at off in pack p. A delta's size is the result
// size its delta data starts with; its type is its base's, so the chain of bases is
// followed to its end. With limit >= 0, every object on the chain (what go-git inflates to
// read the object: the base and each intermediate result) must be at most limit bytes, and
// so must the delta data on the chain together: reading the object then inflates at most
// about three times limit.
func (hd *headers) packed(p plumbing.Hash, idx *packIndex, off, limit int64, hops int) (objectInfo, error) {
	f, err := hd.dg.ObjectPack(p)
	if err != nil {
		return objectInfo{}, err
	}
	defer f.Close()
	sc := packfile.NewScanner(f)
	var info objectInfo
	var deltas int64
	for depth := 0; ; depth++ {
		if hops+depth > maxDeltaChain {
			return info, fmt.Errorf("object in pack %s at offset %d: delta chain longer than %d", short(p), off, maxDeltaChain)
		}
		oh, err := sc.SeekObjectHeader(off)
		if err != nil {
			return info, fmt.Errorf("object in pack %s at offset %d: %w", short(p), off, err)
		}
		size := oh.Length
		isDelta := oh.Type == plumbing.OFSDeltaObject || oh.Type == plumbing.REFDeltaObject
		if isDelta {
			if size, err = deltaResultSize(sc); err != nil {
				return info, fmt.Errorf("delta in pack %s at offset %d: %w", short(p), off, err)
			}
			deltas += oh.Length
		}
		if depth == 0 {
			info.size = size
			if limit < 0 {
				// Only the size is wanted: a delta's type would need its chain.
				info.typ = oh.Type
				if isDelta {
					info.typ = plumbing.AnyObject
				}
				return info, nil
			}
		}
		switch {
		case size > limit && depth == 0:
			return info, tooLarge(size, limit)
		case size > limit:
			return info, fmt.Errorf("%w: %d bytes, but stored as a delta of an object of %d bytes, more than the %d bytes stackd reads",
				ErrTooLarge, info.size, size, limit)
		case deltas > limit:
			return info, fmt.Errorf("%w: %d bytes, but stored as deltas of more than %d bytes together, more than stackd reads",
				ErrTooLarge, info.size, limit)
		}
		switch {
		case !isDelta:
			info.typ = oh.Type
			return info, nil
		case oh.Type == plumbing.OFSDeltaObject:
			off = oh.OffsetReference
		default:
			base, err := hd.findOffset(p, idx, oh.Reference)
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				// A base outside this pack (go-git completes thin packs, so this is
				// rare): look it up from the start, with what is left of the budget.
				bi, err := hd.stat(oh.Reference, limit-deltas, 0, hops+depth+1)
				if err != nil {
					return info, err
				}
				info.typ = bi.typ
				return info, nil
			}
			if err != nil {
				return info, err
			}
			off = base
		}
	}
}

// errEnough stops inflating delta data once its header has been read.
var errEnough = errors.New("enough")

// headWriter keeps the first bytes written to it and then refuses more.
type headWriter struct {
	buf [24]byte
	n   int
}

func (w *headWriter) Write(p []byte) (int, error) {
	n := copy(w.buf[w.n:], p)
	w.n += n
	if w.n == len(w.buf) {
		return n, errEnough
	}
	return n, nil
}

// deltaResultSize reads the result size from the start of the delta data the scanner is
// positioned at (after SeekObjectHeader): two little-endian base-128 numbers, the base's
// size and the result's. Only the first chunk of the zlib stream is inflated.
func deltaResultSize(sc *packfile.Scanner) (int64, error) {
	var w headWriter
	if _, _, err := sc.NextObject(&w); err != nil && !errors.Is(err, errEnough) {
		return 0, err
	}
	b := w.buf[:w.n]
	_, b, err := leb128(b) // the base's size
	if err != nil {
		return 0, err
	}
	size, _, err := leb128(b)
	return size, err
}

// leb128 decodes one size of a delta header.
func leb128(b []byte) (int64, []byte, error) {
	var v uint64
	for i, c := range b {
		if i == 9 {
			break
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if v > 1<<62 {
				break
			}
			return int64(v), b[i+1:], nil
		}
	}
	return 0, nil, errors.New("malformed delta header")
}

// readObject reads object h, of type want, whole: info is what objectStat said of it,
// having checked with a limit that it (and whatever it is built from) may be read. Callers
// hold s.sem.
func (s *Source) readObject(r *git.Repository, h plumbing.Hash, info objectInfo, want plumbing.ObjectType) ([]byte, error) {
	if info.typ != want && info.typ != plumbing.AnyObject {
		return nil, fmt.Errorf("object %s is a %s, not a %s", short(h), info.typ, want)
	}
	o, err := r.Storer.EncodedObject(want, h)
	if err != nil {
		return nil, err
	}
	rd, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	// Exactly what the header promised, whatever the stream holds.
	b := make([]byte, info.size)
	if _, err := io.ReadFull(rd, b); err != nil {
		return nil, fmt.Errorf("object %s is shorter than its header says (%d bytes): %w", short(h), info.size, err)
	}
	var extra [1]byte
	if n, _ := rd.Read(extra[:]); n > 0 {
		return nil, fmt.Errorf("object %s is longer than its header says (%d bytes)", short(h), info.size)
	}
	return b, nil
}

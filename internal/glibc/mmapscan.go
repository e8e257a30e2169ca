package glibc

import (
	"encoding/binary"
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"strings"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
)

// The one search for the chunks glibc mmapped of its own (requests at or
// above mp_.mmap_threshold, or any request when no arena can serve it).
// The walker, LeaveOut and growth's classes all find them here, so that
// they agree.
//
// What a header must be (malloc/malloc.c, sysmalloc_mmap in 2.35+,
// sysmalloc before): glibc maps the chunk's pages with mmap and puts the
// chunk at the start of the region (MALLOC_ALIGNMENT equals CHUNK_HDR_SZ on
// x86_64, so there is no front correction): prev_size 0, and the size, a
// multiple of the page that fits in the region, with IS_MMAPPED and no
// other flag bit (set_head (p, size | IS_MMAPPED)). mremap_chunk keeps it
// so. _int_memalign of an mmapped chunk leaves that first header and
// writes a second one further in, whose prev_size is its distance from the
// region's start (set_prev_size (newp, prev_size (p) + leadsize)):
// munmap_chunk unmaps from p - prev_size(p). From 2.43 (mmap_set_chunk) the
// region also holds CHUNK_HDR_SZ past the size (Layout.MmapTail), and
// prev_size's bit 0 may say huge pages: the region is then
// prev_size&^1 + size + 16 bytes, from p - prev_size&^1.
//
// Where: a region is page-aligned, but not where a mapping starts. The
// kernel merges an mmap with its anonymous neighbours of the same
// protection, and places a new one right below the last: a chunk's region
// may sit anywhere in a mapping, above memory the program mapped itself or
// below other chunks. So every page of a candidate mapping is looked at,
// not only its start, and a chunk found is stepped over whole (its
// contents are the program's and may hold anything). A page that holds no
// data (never touched, or given back) holds no header and is not read:
// reading it would map the zero page into a live process.

// MmappedChunk is one chunk found, with the region glibc mapped for it:
// [Addr-Pad, Addr+Size+Tail). Pad is 0 but for a chunk memalign moved in;
// Tail is Layout.MmapTail.
type MmappedChunk struct {
	Chunk
	Pad, Tail uint64
}

// Region is the memory glibc mapped for the chunk, which is what
// mp_.mmapped_mem counts.
func (c MmappedChunk) Region() maps.Range {
	return maps.Range{Start: c.Addr - c.Pad, End: c.Addr + c.Size + c.Tail}
}

// MayHoldMmapped says whether glibc's mmapped chunks can be in m: private,
// readable and writable anonymous memory that is not an arena's heap.
// Chunks are mapped MAP_PRIVATE|MAP_ANONYMOUS, named "[anon: glibc:
// malloc]" from 2.39 where the tunable glibc.mem.decorate_maps asks.
func MayHoldMmapped(m maps.Mapping) bool {
	anon := m.Path == "" || strings.HasPrefix(m.Path, "[anon:")
	return anon && m.Readable() && m.Writable() && len(m.Perms) > 3 && m.Perms[3] == 'p' &&
		m.Class != maps.ClassMainHeap && m.Class != maps.ClassArenaHeap
}

// ScanMmapped calls fn with every mmapped chunk in m, by address, until
// fn returns false. It reads 16 bytes of each page that holds data
// (mem's DataRuns, when it has them; every page otherwise) and is not
// inside a chunk found, plus a few more per chunk for memalign's second
// header. maxPages, when above 0, bounds the pages (the target's) read; complete is false
// when that bound or fn stopped the scan.
func ScanMmapped(mem Memory, lay layouts.Layout, m maps.Mapping, maxPages int, fn func(MmappedChunk) bool) (complete bool) {
	// glibc maps a chunk's region in the target's pages (sysmalloc:
	// ALIGN_UP(nb + SIZE_SZ, GLRO(dl_pagesize)), malloc/malloc.c), so
	// only their boundaries are looked at, and a region must be a
	// multiple of one.
	page := trimPage(mem)
	start, end := (m.Start+page-1)&^(page-1), m.End&^(page-1)
	if start >= end {
		return true
	}
	s := mmapScan{mem: mem, page: page, block: max(1, headBlockBytes/page), tail: lay.MmapTail, end: end, left: maxPages, fn: fn, next: start}
	s.buf = make([]byte, s.block*page)
	if dr, ok := mem.(memio.DataRuns); ok {
		// By pieces, so that a scan stopped early reads no more of the
		// page map (2 MiB of it per GiB).
		var err error
		for lo := start; lo < end && err == nil && !s.stopped; lo += dataRunsPiece {
			err = dr.DataRuns(max(lo, s.next), max(min(lo+dataRunsPiece, end), s.next), func(lo, hi uint64, data bool) {
				if data && !s.stopped {
					s.run(lo, hi)
				}
			})
		}
		if err == nil {
			return !s.stopped
		}
		// No pagemap: read every page not yet looked at.
		s.stopped = false
	}
	s.run(s.next, end)
	return !s.stopped
}

// dataRunsPiece is how much of a mapping one look at the page map covers.
const dataRunsPiece = 64 << 20

type mmapScan struct {
	mem     Memory
	page    uint64 // the target's page size (trimPage)
	block   uint64 // pages read at once: headBlockBytes of them
	tail    uint64 // Layout.MmapTail
	end     uint64 // the mapping's end: no chunk reaches past it
	next    uint64 // the first page not looked at or stepped over yet
	left    int    // pages still to read, when bounded
	buf     []byte // block pages
	probe   []byte // block pages, for a second header
	runEnd  uint64 // the end of the pages run looks at, all of which hold data
	stopped bool
	fn      func(MmappedChunk) bool
}

// run looks at the pages of [lo, hi) that the scan has not passed. It
// reads them up to headBlockBytes at a time (one copy of 64 KiB costs a
// few 16-byte reads), page by page where a block cannot be read.
func (s *mmapScan) run(lo, hi uint64) {
	s.runEnd = hi
	for p := max(lo, s.next); p < hi && !s.stopped; p = max(p, s.next) {
		n := min((hi-p)/s.page, s.block)
		blk := s.buf[:n*s.page]
		if n < 2 {
			blk = nil
		} else if got, err := s.mem.ReadAt(blk, p); err != nil || got != len(blk) {
			blk = nil
		}
		if blk == nil {
			n = 1
		}
		for i := uint64(0); i < n && !s.stopped; i, p = i+1, p+s.page {
			if s.left > 0 {
				if s.left--; s.left == 0 {
					s.stopped = true
				}
			}
			s.next = p + s.page
			var prev, raw uint64
			ok := true
			if blk != nil {
				prev, raw = binary.LittleEndian.Uint64(blk[i*s.page:]), binary.LittleEndian.Uint64(blk[i*s.page+8:])
			} else {
				prev, raw, ok = s.pair(p)
			}
			region, ok := s.header(p, prev, raw, ok)
			if !ok {
				continue
			}
			c := s.memaligned(p, region)
			s.next = c.Region().End
			if !s.fn(c) {
				s.stopped = true
			}
			break // on from the chunk's end
		}
	}
}

// headBlockBytes is how much run reads at once: 16 pages of 4 KiB, 4 of
// 16 KiB, one of 64 KiB.
const headBlockBytes = 64 << 10

// header judges the words at page p as the start of a chunk's region: the
// region's size when they are one.
func (s *mmapScan) header(p, prev, raw uint64, ok bool) (uint64, bool) {
	region := raw&^sizeBits + s.tail
	return region, ok && s.offset(prev) == 0 && raw&sizeBits == isMmapped && region >= s.page && region%s.page == 0 && region <= s.end-p
}

// offset is a header's prev_size read as its chunk's distance from its
// region's start; MMAP_HP is 0x1, from 2.43 only.
func (s *mmapScan) offset(prev uint64) uint64 {
	if s.tail > 0 {
		return prev &^ 1
	}
	return prev
}

// memaligned is the chunk whose region of size bytes starts at p: the one
// there, or the one memalign moved it to, where a second header says so.
// memalign's lead is fixed by the alignment it was asked for, a power of
// two (malloc/malloc.c, _int_memalign: the chunk's user pointer is rounded
// up to it, and up to 2.42 moved one alignment further when the lead would
// be less than MINSIZE); each alignment's is tried, the smallest first.
// The second header has the last word on the region's size: realloc of
// such a chunk (mremap_chunk) rewrites it and leaves the first as memalign
// found it.
func (s *mmapScan) memaligned(p, size uint64) MmappedChunk {
	c := MmappedChunk{Chunk: Chunk{Addr: p, Size: size - s.tail, Arena: -1, State: ChunkMmapped}, Tail: s.tail}
	for shift := 5; shift < 64 && uint64(1)<<shift < size; shift++ {
		a := uint64(1) << shift
		mem := (p + 2*8 + a - 1) &^ (a - 1)
		lead := mem - 2*8 - p
		for _, lead := range []uint64{lead, lead + a} {
			if lead == 0 || lead+minChunk > size {
				continue // memalign carved the chunk from the region its first header gives
			}
			if p+lead+2*8 > s.runEnd && !s.holdsData(p+lead) {
				continue // no page is read that holds nothing
			}
			prev, raw, ok := s.pair(p + lead)
			if ok && s.inner(&c, p, lead, prev, raw) {
				return c
			}
		}
	}
	// realloc may have moved the region (mremap), and the lead fitted to
	// where it was: a user pointer aligned to a page or more was then at a
	// page boundary, so the second header ends a page. The first
	// headBlockBytes that hold data are looked at, in one read.
	n := min(size/s.page, s.block, (s.runEnd-p)/s.page)
	if n == 0 {
		return c
	}
	if s.probe == nil {
		s.probe = make([]byte, s.block*s.page)
	}
	blk := s.probe[:n*s.page]
	if got, err := s.mem.ReadAt(blk, p); err != nil || got != len(blk) {
		return c
	}
	for k := uint64(1); k <= n; k++ {
		lead := k*s.page - 2*8
		prev, raw := binary.LittleEndian.Uint64(blk[lead:]), binary.LittleEndian.Uint64(blk[lead+8:])
		if s.inner(&c, p, lead, prev, raw) {
			break
		}
	}
	return c
}

// inner makes c the chunk whose second header, at lead bytes into the
// region at p, holds prev and raw, when they are one: its prev_size the
// lead, IS_MMAPPED alone, and with the lead a page multiple that fits.
func (s *mmapScan) inner(c *MmappedChunk, p, lead, prev, raw uint64) bool {
	size := raw &^ sizeBits
	if s.offset(prev) != lead || raw&sizeBits != isMmapped || size < minChunk || (lead+size+s.tail)%s.page != 0 || size+s.tail > s.end-p-lead {
		return false
	}
	c.Addr, c.Size, c.Pad = p+lead, size, lead
	return true
}

// holdsData says whether the page at addr holds data, as far as the
// memory can tell.
func (s *mmapScan) holdsData(addr uint64) bool {
	dr, ok := s.mem.(memio.DataRuns)
	if !ok {
		return true
	}
	data := true
	page := addr &^ (s.page - 1)
	if err := dr.DataRuns(page, page+s.page, func(_, _ uint64, d bool) { data = data && d }); err != nil {
		return true
	}
	return data
}

// pair reads the two words of a chunk header at p.
func (s *mmapScan) pair(p uint64) (prev, size uint64, ok bool) {
	var b [16]byte
	if n, err := s.mem.ReadAt(b[:], p); err != nil || n != len(b) {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:]), true
}

// Package reach owns what the heap's allocated chunks are to the program:
// which are reachable, and from where, and which are leaked, by a
// conservative scan from the roots (every aligned word that holds the
// address of a chunk's user bytes is taken for a reference to it), and of
// which C++ type each is, by its vtable pointer. It reads a debuggee.Target
// (a core, a snapshot, a copy-on-write image) through the chunk index of
// internal/chunks and knows nothing of how the heap was found.
//
// Roots are what the program can reach without the heap: the writable
// data and bss of every loaded object, each thread's static TLS, anonymous
// memory malloc does not own (another allocator's, a buffer pool, ld.so's
// own), every thread's stack from its stack pointer to the mapping's end,
// and every thread's registers. A chunk reachable from the first three is
// Static; one reachable only from stacks or registers is Stack; the rest
// are leaked: a Leaked chunk is pointed to by nothing, a LeakedInner one
// only by other leaked chunks (the rest of a lost list, or a lost cycle).
//
// Interior pointers count: a word that points anywhere into a chunk's user
// bytes references it, as chap does and as a program's own pointers into
// the middle of a struct, an array or a string (std::string's, after a
// header) do. It errs towards reachable: no chunk the program can still
// reach is ever reported leaked, and a leaked chunk one stale word points
// at is reported reachable.
package reach

import (
	"context"
	"encoding/binary"

	"github.com/arenactl/arenactl/internal/chunks"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
)

// Class is what the scan found a chunk to be.
type Class uint8

const (
	Unreached   Class = iota // not reached (before Scan ends: leaked)
	Static                   // reachable from static data, TLS or memory malloc does not own
	Stack                    // reachable only from a thread's stack or registers
	LeakedInner              // unreachable, referenced only by other leaked chunks
	Leaked                   // unreachable, referenced by nothing: a leak root
)

var classNames = [...]string{"unreached", "static", "stack", "leaked (only from leaked)", "leaked"}

func (c Class) String() string { return classNames[c] }

// IsLeaked reports whether the program can no longer reach the chunk.
func (c Class) IsLeaked() bool { return c == Leaked || c == LeakedInner }

// RootKind says what a root is.
type RootKind uint8

const (
	RootData  RootKind = iota // a loaded object's writable data or bss
	RootTLS                   // a thread's static TLS and thread control block
	RootAnon                  // anonymous memory malloc does not own
	RootStack                 // a thread's stack, from its stack pointer up
	RootRegs                  // a thread's registers
)

var rootNames = [...]string{"data", "tls", "anon", "stack", "registers"}

func (k RootKind) String() string { return rootNames[k] }

// static reports whether a chunk reached from a root of this kind is Static.
func (k RootKind) static() bool { return k <= RootAnon }

// Root is one range of memory scanned for references (or, for RootRegs, a
// thread's registers).
type Root struct {
	Kind       RootKind
	Start, End uint64
	Tid        int    // for TLS, stacks and registers
	Path       string // for data: the object's file
	// Missing is how many bytes of the root are not there to read, which
	// a reader counts as unread: a thread's TLS where its thread control
	// block does not point at itself (tcbAt), as a core that holds it as
	// zeros has it. Start is then End: nothing of it is scanned.
	Missing uint64
	regs    []uint64
}

// tcbAbove is how much of the thread control block (struct pthread,
// nptl/descr.h: about 2.3 KiB in glibc 2.36) is scanned above a thread's
// thread pointer. Static TLS lies below it (x86_64 is TLS variant II,
// sysdeps/x86_64/nptl/tls.h), StaticTLS bytes of it. A thread's are at the
// top of its stack mapping, above its stack pointer: scanned first as TLS,
// they make what they reach static, not stack.
const tcbAbove = 4 << 10

// Roots lists the roots of t, whose allocated chunks ix holds. tlsBelow is
// how much static TLS lies below each thread's thread pointer (StaticTLS;
// above it on a machine of TLS variant I).
func Roots(t debuggee.Target, ix *chunks.Index, tlsBelow uint64) []Root {
	var out []Root
	ms := t.Mappings()
	threads := t.Threads()
	heapOwned := ix.Owned()
	for i, m := range ms {
		if !m.Readable() || !m.Writable() {
			continue
		}
		switch m.Class {
		case maps.ClassExecutable, maps.ClassSharedLib, maps.ClassFile:
			out = append(out, Root{Kind: RootData, Start: m.Start, End: m.End, Path: m.Path})
		case maps.ClassAnon, maps.ClassMainHeap, maps.ClassArenaHeap:
			// What malloc owns is told by the walk, not by the mapping's
			// name or place: a core names no [heap], and a buffer pool
			// can sit where a heap could.
			// The bss right after an object's data is anonymous; it is
			// that object's.
			path := ""
			if i > 0 && ms[i-1].End == m.Start && ms[i-1].Path != "" && ms[i-1].Path[0] == '/' {
				path = ms[i-1].Path
			}
			for _, r := range minus(m.Start, m.End, heapOwned) {
				if path != "" {
					out = append(out, Root{Kind: RootData, Start: r[0], End: r[1], Path: path})
				} else {
					out = append(out, Root{Kind: RootAnon, Start: r[0], End: r[1]})
				}
			}
		}
	}
	for _, th := range threads {
		fs, sp := th.TP(), th.SP()
		for _, m := range ms {
			if fs != 0 && m.Contains(fs) && m.Readable() {
				var lo, hi uint64
				var there bool
				if a := t.Arch(); a != nil && a.TLSAbove {
					lo, hi, there = tlsAboveRange(t, m, fs, tlsBelow)
				} else {
					below := max(tlsBelow, dtvBelow(t, m, fs, sp)) // the files' word, or the DTV's where they are not read
					lo, hi, there = max(m.Start, fs-min(fs, below+8)), min(m.End, fs+tcbAbove), tcbAt(t, fs)
				}
				if !there {
					out = append(out, Root{Kind: RootTLS, Tid: th.Tid, Start: lo, End: lo, Missing: hi - lo})
					break
				}
				out = append(out, Root{Kind: RootTLS, Tid: th.Tid, Start: lo, End: hi})
				break
			}
		}
		for _, m := range ms {
			if m.Contains(sp) && m.Readable() {
				out = append(out, Root{Kind: RootStack, Tid: th.Tid, Start: sp &^ 7, End: m.End})
				break
			}
		}
		out = append(out, Root{Kind: RootRegs, Tid: th.Tid, regs: th.Regs[:]})
	}
	return out
}

// minus is [lo, hi) without the sorted ranges cut.
func minus(lo, hi uint64, cut [][2]uint64) [][2]uint64 {
	var out [][2]uint64
	for _, c := range cut {
		if c[1] <= lo || c[0] >= hi {
			continue
		}
		if c[0] > lo {
			out = append(out, [2]uint64{lo, c[0]})
		}
		lo = max(lo, c[1])
	}
	if lo < hi {
		out = append(out, [2]uint64{lo, hi})
	}
	return out
}

// UnreadRoot is a root of which Bytes could not be read.
type UnreadRoot struct {
	Root
	Bytes uint64
}

// Result is a finished scan.
type Result struct {
	ix    *chunks.Index
	marks *chunks.Marks
	cache *blocks
	Roots []Root
	// Per class: how many chunks, how many bytes (chunk sizes).
	Count, Bytes [Leaked + 1]uint64
	// Scanned is how many bytes of roots and of chunks were read.
	RootBytes, ChunkBytes uint64
	// Unread are the roots of which some bytes could not be read.
	Unread []UnreadRoot
	// Sweeps is how many times the scan went over the heap in address
	// order: one per pass (static, stack) while nothing waits past maxWork.
	Sweeps int
}

// Class is what the scan found c (an allocated chunk of the index) to be.
func (r *Result) Class(c chunks.Chunk) Class { return classOf(r.marks.Get(c)) }

// classOf is the class a chunk's mark says once the scan is over.
func classOf(v uint8) Class {
	switch v {
	case markStatic:
		return Static
	case markStack:
		return Stack
	case markInner:
		return LeakedInner
	}
	return Leaked
}

// Read copies the target's memory at addr into b, through the scan's
// blocks (what the scan read last is read again for free); it returns how
// many bytes could be read.
func (r *Result) Read(b []byte, addr uint64) int { return r.cache.read(b, addr) }

// Bits is what the marks cost, in bits.
func (r *Result) Bits() uint64 { return r.marks.Bits() }

// The two bits a chunk keeps in the index's marks. While the static and
// the stack passes run, 3 means reached by the pass but not read yet; only
// the leaked pass, after them, gives it its final meaning.
const (
	markNone    = 0
	markStatic  = 1
	markStack   = 2
	markInner   = 3
	markPending = 3
)

// HeadSize is how many of a chunk's first bytes Scan hands its visitor.
const HeadSize = 32

// Visitor is handed a chunk a scan reads, with whether it is leaked and
// its first bytes (up to HeadSize).
type Visitor func(c chunks.Chunk, leaked bool, head []byte)

// Scan classifies every allocated chunk of ix, reading t. It reads each
// chunk once, and hands visit (when not nil) every chunk as it reads it,
// with whether it is leaked and its first bytes (up to HeadSize): what a
// census needs, without reading the heap again.
//
// The scan ends early, with ctx's error, once ctx is done: a scan of a
// large heap takes seconds, and Ctrl-C must end it.
func Scan(ctx context.Context, t debuggee.Target, ix *chunks.Index, roots []Root, visit Visitor) (*Result, error) {
	s := &scanner{ctx: ctx, t: t, ix: ix, marks: ix.NewMarks(), cache: newBlocks(t), visit: visit, addr: addrMask(t)}
	s.lo, s.hi = ix.Bounds()
	r := &Result{ix: ix, marks: s.marks, cache: s.cache, Roots: roots}
	// Static roots first, so that what they reach is Static even where a
	// stack reaches it too; then stacks and registers.
	for _, pass := range []struct {
		static bool
		mark   uint8
	}{{true, markStatic}, {false, markStack}} {
		for _, root := range roots {
			if root.Kind.static() != pass.static {
				continue
			}
			if root.Kind == RootRegs {
				s.refs(root.regs, pass.mark, 0)
				continue
			}
			n := s.scan(root.Start, root.End, pass.mark, 0)
			r.RootBytes += n
			if span := root.End - root.Start; n < span {
				r.Unread = append(r.Unread, UnreadRoot{Root: root, Bytes: span - n})
			}
		}
		r.ChunkBytes += s.propagate(pass.mark)
		r.Sweeps = s.sweeps
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	// What is left is leaked. Each unreached chunk is read for the chunks
	// it points to: those are reached only from leaked memory.
	ix.ForEach(func(c chunks.Chunk) bool {
		if v := s.marks.Get(c); v == markNone || v == markInner {
			s.told(c, true)
			r.ChunkBytes += s.scan(c.User(), c.UserEnd(), markInner, c.Addr)
		}
		return !s.done()
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ix.ForEach(func(c chunks.Chunk) bool {
		cl := r.Class(c)
		r.Count[cl]++
		r.Bytes[cl] += c.Size
		return true
	})
	return r, nil
}

// scanner reads in address order as far as it can: a chunk's references
// are followed by sweeps over the heap, each reading the chunks reached
// but not read yet as it passes them, so that the target is read in
// blocks, front to back, not a chunk at a time wherever pointers lead. A
// chunk reached behind the sweep is read at once: from its block while that
// is still in the cache (a list built by prepending points backwards, one
// node at a time), else on its own. Leaving it to the next sweep made a
// list linked in no order of address (a shuffled list, a hash chain) cost a
// sweep of the whole heap per node: a million nodes did not finish in ten
// minutes. Only when more than maxWork such chunks wait does the rest wait
// for the next sweep.
type scanner struct {
	addr     uint64 // addrMask's
	ctx      context.Context
	polls    int  // chunks read since ctx was last asked
	stopped  bool // ctx was found done
	t        debuggee.Target
	ix       *chunks.Index
	marks    *chunks.Marks
	cache    *blocks
	lo, hi   uint64
	work     []chunks.Chunk
	pending  int    // chunks marked pending
	cursor   uint64 // where the sweep is; 0 outside a sweep
	mmapped  bool   // the sweep is past the arenas, among the mmapped chunks
	sweeps   int
	visit    func(chunks.Chunk, bool, []byte)
	head     [HeadSize]byte
	own      []byte       // a chunk read on its own
	ws       []uint64     // the words of a batch that may point into the heap
	refBuf   []chunks.Ref // lent to Marks.Refs
	untagged []uint64     // untag's
}

const (
	// maxWork bounds the chunks waiting to be read at once (32 bytes
	// each): past it they wait for the next sweep.
	maxWork = 1 << 16
	// maxOwn is the largest chunk read on its own rather than through
	// its blocks: a small read costs a system call, a block read 64 KiB.
	maxOwn = 4 << 10
)

// behind says whether the sweep has passed c: a sweep goes over the arenas'
// chunks by address, then over the mmapped ones by address.
func (s *scanner) behind(c chunks.Chunk) bool {
	switch {
	case s.cursor == 0:
		return false
	case c.State == glibc.ChunkMmapped:
		return s.mmapped && c.Addr < s.cursor
	}
	return s.mmapped || c.Addr < s.cursor
}

// alone reads c on its own when it lies behind the sweep in no block at
// hand and is small: its bytes, or false to read it through the blocks
// (larger, cached, or not readable in one piece).
func (s *scanner) alone(c chunks.Chunk) ([]byte, bool) {
	start, end := c.User(), c.UserEnd()
	if !s.behind(c) || end-start > maxOwn || s.cache.has(start) || s.cache.has(end-1) {
		return nil, false
	}
	if cap(s.own) < maxOwn {
		s.own = make([]byte, maxOwn)
	}
	b := s.own[:end-start]
	if n, err := s.t.ReadAt(b, start); err != nil || n != len(b) {
		return nil, false
	}
	return b, true
}

// done says whether the scan must stop: ctx is asked every 4096 chunks,
// and once it is done the answer stays.
func (s *scanner) done() bool {
	if s.stopped {
		return true
	}
	if s.polls++; s.polls < 4096 {
		return false
	}
	s.polls = 0
	s.stopped = s.ctx.Err() != nil
	return s.stopped
}

// told hands c to the visitor, with its first bytes.
func (s *scanner) told(c chunks.Chunk, leaked bool) {
	if s.visit == nil {
		return
	}
	h := s.head[:min(HeadSize, c.UserEnd()-c.User())]
	h = h[:s.cache.read(h, c.User())]
	s.visit(c, leaked, h)
}

// addrMask is what of a word can be an address in the target: on aarch64
// a pointer may carry a tag in its top byte, which loads ignore (TBI) and
// memory tagging sets (glibc's malloc returns tagged pointers with
// glibc.mem.tagging, sysdeps/aarch64/libc-mtag.h): a tagged reference to a
// block is still a reference. Everything on x86_64.
func addrMask(t debuggee.Target) uint64 {
	if a := t.Arch(); a != nil {
		return a.AddrMask()
	}
	return ^uint64(0)
}

// refs takes every word of ws for a reference to a chunk, in order. In
// the leaked pass (mark markInner) an unmarked chunk a word points into is
// marked so; in the others it becomes pending (pended). from is the chunk
// being read (0 for a root): a chunk's reference to itself does not count.
func (s *scanner) refs(ws []uint64, mark uint8, from uint64) {
	ws = untag(ws, s.addr, &s.untagged)
	if mark == markInner {
		s.refBuf = s.marks.Refs(s.refBuf, ws, from, markNone, markInner, false, ignore)
		return
	}
	s.refBuf = s.marks.Refs(s.refBuf, ws, from, markNone, markPending, false, s.pended)
}

// untag is ws with each word's tag bits cleared (mask: addrMask's) in buf,
// or ws itself where no word can carry a tag (x86_64): the words are the
// target's, read once, and stay as read for whoever else looks at them.
func untag(ws []uint64, mask uint64, buf *[]uint64) []uint64 {
	if mask == ^uint64(0) {
		return ws
	}
	b := append((*buf)[:0], ws...)
	for i := range b {
		b[i] &= mask
	}
	*buf = b
	return b
}

// ignore is what the leaked pass does with a chunk it marks: nothing (it
// reads every unreached chunk anyway, in address order).
func ignore(chunks.Chunk) {}

// pended counts c, just marked pending, and reads it now (work) if it lies
// behind the sweep in a block at hand.
func (s *scanner) pended(c chunks.Chunk) {
	s.pending++
	if s.behind(c) && (len(s.work) < maxWork || s.cache.has(c.User())) {
		s.work = append(s.work, c)
	}
}

// words appends to ws the words of b, without their tag bits (mask:
// addrMask's), that lie within [lo, hi), the only ones that can point into
// the heap.
func words(ws []uint64, b []byte, lo, hi, mask uint64) []uint64 {
	for off := 0; off+8 <= len(b); off += 8 {
		if v := binary.LittleEndian.Uint64(b[off:]) & mask; v >= lo && v < hi {
			ws = append(ws, v)
		}
	}
	return ws
}

// batch is how many bytes of a block the scan looks up at once: enough
// words for the lookups' memory to be waited for together.
const batch = 512

// propagate reads every pending chunk, and what they reach, giving each
// the pass's mark.
func (s *scanner) propagate(mark uint8) uint64 {
	var n uint64
	visit := func(c chunks.Chunk) {
		if s.marks.Get(c) != markPending {
			return
		}
		s.marks.Set(c, mark)
		s.pending--
		if b, ok := s.alone(c); ok {
			if s.visit != nil {
				s.visit(c, false, b[:min(HeadSize, len(b))])
			}
			for off := 0; off < len(b); off += batch {
				s.ws = words(s.ws[:0], b[off:min(len(b), off+batch)], s.lo, s.hi, s.addr)
				s.refs(s.ws, mark, c.Addr)
			}
			n += uint64(len(b))
			return
		}
		s.told(c, false)
		n += s.scan(c.User(), c.UserEnd(), mark, c.Addr)
	}
	for s.pending > 0 {
		s.sweeps++
		s.ix.ForEach(func(c chunks.Chunk) bool {
			s.cursor, s.mmapped = c.Addr, c.State == glibc.ChunkMmapped
			visit(c)
			for len(s.work) > 0 && !s.done() {
				w := s.work[len(s.work)-1]
				s.work = s.work[:len(s.work)-1]
				visit(w)
			}
			return s.pending > 0 && !s.done()
		})
		if s.ctx.Err() != nil {
			return n
		}
		s.cursor, s.mmapped = 0, false
	}
	return n
}

// scan reads [start, end) for references and returns how many bytes it
// read. Unreadable pages (a guard page, memory a core did not dump) read
// as zeros, which reference nothing, and are not counted.
func (s *scanner) scan(start, end uint64, mark uint8, from uint64) uint64 {
	var n uint64
	for p := (start + 7) &^ 7; p+8 <= end; {
		base := p &^ (blockSize - 1)
		blk := s.cache.get(base)
		off, stop := p-base, min(blockSize, end-base)
		for ; off < stop; off += batch {
			s.ws = words(s.ws[:0], blk.b[off:min(stop, off+batch)], s.lo, s.hi, s.addr)
			s.refs(s.ws, mark, from)
		}
		n += blk.readable(p-base, stop)
		p = base + blockSize
	}
	return n
}

// blocks reads the target in aligned blocks and keeps the most recent, as
// the scan of a chunk and of its neighbours reads the same blocks again.
const (
	blockSize = 64 << 10
	pageSize  = 4 << 10
	maxBlocks = 256 // 16 MiB
)

type blocks struct {
	t     debuggee.Target
	max   int // blocks kept
	m     map[uint64]*block
	order []uint64
	next  int
}

// block is blockSize bytes of the target; a page that could not be read
// is zeros, and its bit in ok is clear.
type block struct {
	b  []byte
	ok uint16
}

// readable is how many bytes of [from, to) (offsets) lie in pages read.
func (b *block) readable(from, to uint64) uint64 {
	var n uint64
	for p := from &^ (pageSize - 1); p < to; p += pageSize {
		if b.ok&(1<<(p/pageSize)) != 0 {
			n += min(to, p+pageSize) - max(from, p)
		}
	}
	return n
}

// read copies memory at addr into b, up to the first page that cannot be
// read; it returns how many bytes it copied.
func (bs *blocks) read(b []byte, addr uint64) int {
	n := 0
	for n < len(b) {
		p := addr + uint64(n)
		base := p &^ (blockSize - 1)
		blk := bs.get(base)
		off := p - base
		if blk.ok&(1<<(off/pageSize)) == 0 {
			break
		}
		n += copy(b[n:], blk.b[off:min(blockSize, off&^(pageSize-1)+pageSize)])
	}
	return n
}

// has reports whether the block holding addr is at hand.
func (bs *blocks) has(addr uint64) bool {
	_, ok := bs.m[addr&^(blockSize-1)]
	return ok
}

// word is the little-endian word at addr (8-aligned).
func (bs *blocks) word(addr uint64) (uint64, bool) {
	base := addr &^ (blockSize - 1)
	b := bs.get(base)
	off := addr - base
	if off+8 > blockSize || b.ok&(1<<(off/pageSize)) == 0 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b.b[off:]), true
}

func newBlocks(t debuggee.Target) *blocks { return newBlocksOf(t, maxBlocks) }

// newBlocksOf keeps n blocks: a parallel scan's workers share Scan's.
func newBlocksOf(t debuggee.Target, n int) *blocks {
	return &blocks{t: t, max: n, m: map[uint64]*block{}}
}

// get is the block at base (aligned). A block that cannot be read in one
// call (it crosses the end of a mapping, or a page a core did not dump) is
// read a page at a time.
func (bs *blocks) get(base uint64) *block {
	if b, ok := bs.m[base]; ok {
		return b
	}
	var blk *block
	if len(bs.order) < bs.max {
		blk = &block{b: make([]byte, blockSize)}
	} else {
		// The block evicted lends its buffer: no allocation, and no
		// clearing, per block read.
		blk = bs.m[bs.order[bs.next]]
		blk.ok = 0
	}
	if n, err := bs.t.ReadAt(blk.b, base); err == nil && n == blockSize {
		blk.ok = ^uint16(0)
	} else {
		for i := 0; i < blockSize/pageSize; i++ {
			pg := blk.b[i*pageSize : (i+1)*pageSize]
			if n, err := bs.t.ReadAt(pg, base+uint64(i*pageSize)); err == nil && n == pageSize {
				blk.ok |= 1 << i
			} else {
				clear(pg)
			}
		}
	}
	if len(bs.order) < bs.max {
		bs.order = append(bs.order, base)
	} else {
		delete(bs.m, bs.order[bs.next])
		bs.order[bs.next] = base
		bs.next = (bs.next + 1) % bs.max
	}
	bs.m[base] = blk
	return blk
}

// Classes lists the classes in the order a report shows them.
var Classes = []Class{Static, Stack, Leaked, LeakedInner}

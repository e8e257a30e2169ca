package memio

import "encoding/binary"

// Cache reads target memory for a walk: from a copy of the arena's heaps
// when it has one (Load), else through aligned blocks it caches. The walker
// touches the same pages many times (bins hop around, chunk walks go forward); one read
// syscall per block instead of one per pointer is what makes a
// multi-gigabyte heap walkable in seconds.
type Cache struct {
	mem    Memory
	blocks regionMap[[]byte] // nil: not read yet; empty: unreadable
	loaded int               // blocks copied since the last recycle
	hits   int               // reads those blocks served, since the last recycle
	direct bool              // caching did not pay in this arena: read words one by one
	size   uint64
	spare  [][]byte // buffers of dropped blocks, for the next ones
	sink   uint64   // what warm read, so that its loads are not optimised away
	win    windows  // the current arena's heaps, copied whole (see Load)
	noWin  bool     // never copy heaps whole (a recorder of reads)
	ahead  *ahead   // copying the next arenas' heaps meanwhile; nil when not
	keep   int      // copied blocks kept from one arena to the next (0: KeepBlocks())
	lines  [nLines]line
}

// A line is 64 bytes read for a word no block holds: a walk that reads
// words one by one (a free list hopping over an arena larger than the
// cache) reads a chunk's size and its links together, one system call
// instead of two or three. After a malloc_trim had consolidated bigheap's
// free chunks into lists in no order of address, the pre-flight of its
// 1 GiB read 1.2 M single words, two per chunk for the trim's ranges.
type line struct {
	addr uint64 // the line's address, |1 when it holds data
	b    [lineSize]byte
}

const (
	lineSize = 64
	nLines   = 16
)

// KeepBlocks is how many copied blocks a walk keeps between two arenas,
// cached or as spare buffers: a quarter of cacheCap (64 MiB at its
// default). A walk spread over workers shares it out among them (SetKeep), so
// that what they keep does not grow with their number.
func KeepBlocks() int { return int(cacheCap / 4 / blockSize) }

const blockSize = 256 << 10

// cacheCap bounds the bytes a walk keeps in copied blocks, so that what a
// walk holds does not grow
// with an arena: the lists of an arena larger than its copy (windowCap)
// hop all over it, and a cache that kept every block they met held the
// whole arena (3.7 GiB of RSS for a 52 GiB heap, issue 28). SetCaps sets it
// from arenactl's memory budget (glibc.SetMemory).
var cacheCap uint64 = 64 << 20

// hitsPerBlock is how many reads a copied block must serve, on average,
// for caching to pay: a block costs a read of size bytes, a word read
// alone one system call. When a full cache served fewer, the walk is
// hopping at random over more memory than the cache holds (a long list in
// a large arena) and would copy a block per word: the rest of the arena
// reads its words alone.
const hitsPerBlock = 64

// unreadable marks a block that could not be read whole.
var unreadable = make([]byte, 0)

// New caches mem in blocks of 256 KiB.
func New(mem Memory) *Cache { return NewSized(mem, blockSize) }

// NewSized caches blocks of size bytes (a power of two, at most a
// region). A walk that reads only chunk headers uses pages: reading the
// memory of a live process faults its pages in (the zero page, for the
// untouched or madvised pages of a free chunk), which a larger block would
// do to the whole chunk.
func NewSized(mem Memory, size uint64) *Cache {
	return &Cache{mem: mem, blocks: newRegionMap[[]byte](RegionSize / size), size: size}
}

// Drop forgets cached blocks once an arena has been walked, so memory use
// stays bounded by what one walk step needs: copied blocks when there are
// more than it keeps (their buffers serve the next ones).
func (c *Cache) Drop() {
	if c.win.lent != nil {
		c.ahead.give(c.win.lent)
		c.win.lent = nil
	}
	c.win.reset()
	c.lines = [nLines]line{}
	c.direct = false
	if c.loaded <= c.kept() {
		return
	}
	c.recycle()
}

func (c *Cache) kept() int {
	if c.keep > 0 {
		return c.keep
	}
	return int(cacheCap / 4 / c.size)
}

// recycle forgets every copied block, keeping their buffers for the next.
func (c *Cache) recycle() {
	for _, r := range c.blocks.m {
		for _, b := range r {
			if len(b) > 0 {
				c.spare = append(c.spare, b)
			}
		}
	}
	c.blocks.reset()
	c.loaded, c.hits = 0, 0
	if k := c.kept(); len(c.spare) > k {
		clear(c.spare[k:]) // to the garbage collector
		c.spare = c.spare[:k]
	}
}

// block returns the block at start, reading it if needed; nil when it
// cannot be read whole (it crosses the end of a mapping): its words are
// then read one by one.
func (c *Cache) block(start uint64) []byte {
	r := c.blocks.get(start, true)
	i := start % RegionSize / c.size
	if b := r[i]; b != nil {
		if len(b) == 0 {
			return nil
		}
		c.hits++
		return b
	}
	if c.direct {
		return nil
	}
	if uint64(c.loaded+1)*c.size > cacheCap {
		c.direct = c.hits < c.loaded*hitsPerBlock
		c.recycle()
		if c.direct {
			c.spare = nil // no more blocks in this arena
			return nil
		}
		r = c.blocks.get(start, true)
	}
	var b []byte
	if n := len(c.spare); n > 0 {
		b, c.spare = c.spare[n-1], c.spare[:n-1]
	} else {
		b = make([]byte, c.size)
	}
	c.loaded++
	if n, err := c.mem.ReadAt(b, start); err != nil || uint64(n) != c.size {
		c.spare = append(c.spare, b)
		r[i] = unreadable
		return nil
	}
	r[i] = b
	return b
}

// Warm brings the block at start into the CPU's cache, reading it if needed,
// before a walk that goes through it chunk by chunk: each chunk's size says
// where the next one is, a chain of loads that waits on memory at every
// link unless the block is in cache, while a plain pass over the block goes
// at the memory's full speed.
func (c *Cache) Warm(start uint64) {
	var b []byte
	if w := c.win.get(start, 1); w != nil {
		b = w.B[start-w.Start:][:min(c.size, w.End-start)] // not past the copy: a chunk walk ends in it
	} else {
		b = c.block(start)
	}
	var x uint64
	for i := 0; i+8 <= len(b); i += 64 {
		x += binary.LittleEndian.Uint64(b[i:])
	}
	c.sink += x
}

// ReadAt implements Memory.
func (c *Cache) ReadAt(p []byte, addr uint64) (int, error) {
	if w := c.win.get(addr, uint64(len(p))); w != nil && !w.HoleIn(addr-w.Start, uint64(len(p))) {
		return copy(p, w.B[addr-w.Start:]), nil
	}
	start := addr &^ (c.size - 1)
	if addr+uint64(len(p)) <= start+c.size {
		if b := c.block(start); b != nil {
			return copy(p, b[addr-start:]), nil
		}
	}
	return c.mem.ReadAt(p, addr)
}

// Word reads one little-endian word; ok is false when it is not readable.
func (c *Cache) Word(addr uint64) (uint64, bool) {
	if w := c.win.get(addr, 8); w != nil && !w.Hole(addr-w.Start) {
		return binary.LittleEndian.Uint64(w.B[addr-w.Start:]), true
	}
	if start := addr &^ (c.size - 1); addr+8 <= start+c.size {
		if b := c.block(start); b != nil {
			return binary.LittleEndian.Uint64(b[addr-start:]), true
		}
	}
	if la := addr &^ (lineSize - 1); addr+8 <= la+lineSize {
		l := &c.lines[la/lineSize%nLines]
		if l.addr != la|1 {
			if n, err := c.mem.ReadAt(l.b[:], la); err == nil && n == lineSize {
				l.addr = la | 1
			} else {
				l.addr = 0
			}
		}
		if l.addr == la|1 {
			return binary.LittleEndian.Uint64(l.b[addr-la:]), true
		}
	}
	var b [8]byte
	if _, err := c.ReadAt(b[:], addr); err != nil {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]), true
}

// regionMap maps each 64 MiB region of the address space that is in use
// to an array of n entries, remembering the region used last. Thread
// arenas' heaps are 64 MiB-aligned, so a walk of one stays in one region:
// where a map of entries costs a hash lookup per access, this costs one per
// change of region.
type regionMap[T any] struct {
	m       map[uint64][]T
	n       uint64
	lastKey uint64
	last    []T
}

// RegionSize is the span of address space a regionMap entry, and an
// AddrSet bitmap (Region), covers.
const RegionSize = 64 << 20

func newRegionMap[T any](n uint64) regionMap[T] {
	return regionMap[T]{m: map[uint64][]T{}, n: n}
}

// get returns the entries of addr's region; nil when it has none and
// create is false.
func (r *regionMap[T]) get(addr uint64, create bool) []T {
	k := addr / RegionSize
	if r.last != nil && r.lastKey == k {
		return r.last
	}
	s := r.m[k]
	if s == nil {
		if !create {
			return nil
		}
		s = make([]T, r.n)
		r.m[k] = s
	}
	r.lastKey, r.last = k, s
	return s
}

func (r *regionMap[T]) reset() {
	r.m, r.last = map[uint64][]T{}, nil
}

// Close stops the loader and unmaps every copy's buffer. The cache may be
// used again: a buffer is mapped again when needed.
func (c *Cache) Close() {
	if c.ahead != nil {
		c.ahead.close()
		c.ahead = nil
	}
	c.win.lent = nil
	c.win.release()
}

// Memory is the memory the cache reads.
func (c *Cache) Memory() Memory { return c.mem }

// BlockSize is the size of the cache's blocks (Warm warms one).
func (c *Cache) BlockSize() uint64 { return c.size }

// NoCopies makes the cache read through its blocks only, never copying
// heaps whole (Load does nothing): a recorder of reads, or a walk that must
// leave the pages it does not read alone.
func (c *Cache) NoCopies() { c.noWin = true }

// Copies reports whether the cache may copy heaps whole (NoCopies).
func (c *Cache) Copies() bool { return !c.noWin }

// SetKeep sets how many copied blocks the cache keeps from one arena to
// the next: a worker's share of KeepBlocks.
func (c *Cache) SetKeep(n int) { c.keep = n }

// Fork is a cache of the same memory, blocks and copying, for another
// worker: nothing cached is shared.
func (c *Cache) Fork() *Cache {
	f := NewSized(c.mem, c.size)
	f.noWin = c.noWin
	return f
}

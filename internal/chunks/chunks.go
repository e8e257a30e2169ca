// Package chunks owns the heap as a set of chunks: every chunk of every
// arena and every mmapped chunk, with its address, size, arena and state,
// as one walk of internal/glibc met them, and the index that finds the
// allocated chunk holding any address. It is what an analysis of the heap's
// contents stands on (internal/reach: which chunks are referenced, from
// where, and of which type); the walker's counters (malloc_info's numbers)
// are another consumer of the same walk (glibc.WalkChunks).
//
// The index keeps one bit per 16 bytes of heap (a chunk starts on a 16-byte
// boundary) for the starts of the allocated chunks, and two thin summaries
// above it, so that finding the chunk before an address costs a few words
// however much free memory lies between; sizes are read from the target
// when needed, never stored. Mmapped chunks, few and large, are a sorted
// list.
package chunks

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sort"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/heap"
)

// Chunk is glibc's view of one chunk (glibc.Chunk).
type Chunk = glibc.Chunk

// Index is the allocated chunks of a heap, found by address.
type Index struct {
	mem     glibc.Memory
	spans   []*span // the arenas' heaps, by address
	mmapped []Chunk // by address
	// Arenas are the walk's arenas, in its order (Chunk.Arena indexes
	// them): for each, its top chunk and its highest allocated chunk.
	Arenas []Arena
	// Count and Bytes are the allocated chunks (in use or mmapped).
	Count, Bytes uint64
	// Free are the chunks that are not the program's: in bins, fastbins,
	// tcaches, and the tops. They are never objects.
	FreeCount, FreeBytes uint64
	Walk                 *glibc.Walk
}

// Arena is what the index keeps of one arena.
type Arena struct {
	Addr        uint64
	Main        bool
	Top         Chunk // Size 0 when unknown
	HighestUsed Chunk // the allocated chunk nearest the top; Size 0 when none
	// Walked is false when its chunks could not all be walked (damage):
	// chunks past the damage are not in the index.
	Walked bool
}

// span is one run of heap memory [lo, hi) with a bit per 16 bytes.
type span struct {
	lo, hi uint64
	starts []uint64 // bit i: an allocated chunk starts at lo+16i
	sum1   []uint64 // bit j: starts[j] != 0
	sum2   []uint64 // bit k: sum1[k] != 0
}

// Build walks h's heap (through h.T: a core, a snapshot, an image or a
// stopped process) and indexes every allocated chunk. visit, when not nil,
// is given every chunk the walk meets, in its order, free ones included.
func Build(h *heap.Heap, visit func(Chunk)) (*Index, error) {
	ix := &Index{mem: h.T}
	var all []Chunk // allocated arena chunks, until the spans are known
	w, _, err := h.WalkChunks(func(c Chunk) {
		if visit != nil {
			visit(c)
		}
		switch {
		case c.State == glibc.ChunkMmapped:
			ix.mmapped = append(ix.mmapped, c)
			ix.Count++
			ix.Bytes += c.Size
		case c.State == glibc.ChunkInUse:
			all = append(all, c)
			ix.Count++
			ix.Bytes += c.Size
		default:
			ix.FreeCount++
			ix.FreeBytes += c.Size
		}
		for len(ix.Arenas) <= c.Arena {
			ix.Arenas = append(ix.Arenas, Arena{})
		}
		if c.State == glibc.ChunkTop {
			ix.Arenas[c.Arena].Top = c
		}
	})
	if err != nil {
		return nil, err
	}
	ix.Walk = w
	for len(ix.Arenas) < len(w.Arenas) {
		ix.Arenas = append(ix.Arenas, Arena{})
	}
	for i, aw := range w.Arenas {
		ix.Arenas[i].Addr, ix.Arenas[i].Main, ix.Arenas[i].Walked = aw.Addr, aw.Main, aw.Walked
	}
	ix.index(all)
	sort.Slice(ix.mmapped, func(i, j int) bool { return ix.mmapped[i].Addr < ix.mmapped[j].Addr })
	for i := range ix.Arenas {
		a := &ix.Arenas[i]
		if a.Top.Size == 0 {
			continue
		}
		// The heap the top chunk is in: the main arena's one run, or the
		// thread arena's newest heap (malloc/arena.c, heap_for_ptr).
		base := uint64(0)
		if !a.Main {
			base = a.Top.Addr &^ (w.Params.HeapMax - 1)
		}
		if c, ok := ix.before(a.Top.Addr); ok && c.Addr >= base {
			c.Arena = i
			a.HighestUsed = c
		}
	}
	return ix, nil
}

// before is the allocated arena chunk that starts highest below addr.
func (ix *Index) before(addr uint64) (Chunk, bool) {
	i := sort.Search(len(ix.spans), func(i int) bool { return ix.spans[i].lo >= addr })
	if i == 0 {
		return Chunk{}, false
	}
	sp := ix.spans[i-1]
	at := min(addr, sp.hi)
	if at == sp.lo {
		return Chunk{}, false
	}
	b, ok := sp.last((at - sp.lo - 1) / 16)
	if !ok {
		return Chunk{}, false
	}
	start := sp.lo + b*16
	size, ok := ix.size(start)
	return Chunk{Addr: start, Size: size, Arena: -2, State: glibc.ChunkInUse}, ok
}

// index lays the spans out over the runs the chunks fill and sets their
// bits. The list of chunks is the walk's only transient cost: 24 bytes a
// chunk, dropped once the bits are set.
func (ix *Index) index(all []Chunk) {
	sort.Slice(all, func(i, j int) bool { return all[i].Addr < all[j].Addr })
	const gap = 1 << 20 // a new span past a gap this large
	for i := 0; i < len(all); {
		lo, hi := all[i].Addr&^15, all[i].Addr+all[i].Size
		j := i + 1
		for ; j < len(all) && all[j].Addr < hi+gap; j++ {
			hi = max(hi, all[j].Addr+all[j].Size)
		}
		sp := newSpan(lo, hi)
		for _, c := range all[i:j] {
			sp.set(c.Addr)
		}
		ix.spans = append(ix.spans, sp)
		i = j
	}
}

func newSpan(lo, hi uint64) *span {
	n := (hi - lo + 15) / 16
	w1 := (n + 63) / 64
	w2 := (w1 + 63) / 64
	return &span{lo: lo, hi: hi, starts: make([]uint64, w1), sum1: make([]uint64, w2), sum2: make([]uint64, (w2+63)/64)}
}

func (s *span) set(addr uint64) {
	i := (addr - s.lo) / 16
	s.starts[i/64] |= 1 << (i % 64)
	j := i / 64
	s.sum1[j/64] |= 1 << (j % 64)
	k := j / 64
	s.sum2[k/64] |= 1 << (k % 64)
}

// prevBit is the index of the highest set bit at or below bit i in the
// word that holds bit i, or -1.
func prevBit(words []uint64, i uint64) int64 {
	w := i / 64
	if m := words[w] & (^uint64(0) >> (63 - i%64)); m != 0 {
		return int64(w*64) + int64(63-bits.LeadingZeros64(m))
	}
	return -1
}

// last finds the highest start at or below bit i: within its word, else
// through the summaries for the nearest earlier word that has one.
func (s *span) last(i uint64) (uint64, bool) {
	if b := prevBit(s.starts, i); b >= 0 {
		return uint64(b), true
	}
	j := i / 64
	if j == 0 {
		return 0, false
	}
	j-- // the words before i's
	w := prevBit(s.sum1, j)
	if w < 0 {
		k := j / 64
		if k == 0 {
			return 0, false
		}
		k2 := prevBit(s.sum2, k-1)
		if k2 < 0 {
			return 0, false
		}
		w = prevBit(s.sum1, uint64(k2)*64+63)
		if w < 0 {
			return 0, false
		}
	}
	b := prevBit(s.starts, uint64(w)*64+63)
	return uint64(b), b >= 0
}

// Find returns the allocated chunk whose user bytes hold addr (from
// malloc's pointer to its usable end: an interior pointer finds its
// chunk). A pointer into a free chunk, a header, or no heap at all finds
// nothing.
func (ix *Index) Find(addr uint64) (Chunk, bool) {
	if c, ok := ix.findMmapped(addr); ok {
		return c, true
	}
	sp := ix.spanOf(addr)
	if sp == nil {
		return Chunk{}, false
	}
	b, ok := sp.last((addr - sp.lo) / 16)
	if !ok {
		return Chunk{}, false
	}
	start := sp.lo + b*16
	size, ok := ix.size(start)
	if !ok {
		return Chunk{}, false
	}
	c := Chunk{Addr: start, Size: size, Arena: -2, State: glibc.ChunkInUse}
	if addr < c.User() || addr >= c.UserEnd() {
		return Chunk{}, false
	}
	return c, true
}

// FindStart is Find for pointers to the start of a chunk's user bytes only
// (malloc's return value), as a strict reference count would want them.
func (ix *Index) FindStart(addr uint64) (Chunk, bool) {
	c, ok := ix.Find(addr)
	if !ok || c.User() != addr {
		return Chunk{}, false
	}
	return c, true
}

func (ix *Index) findMmapped(addr uint64) (Chunk, bool) {
	i := sort.Search(len(ix.mmapped), func(i int) bool { return ix.mmapped[i].Addr+ix.mmapped[i].Size > addr })
	if i < len(ix.mmapped) {
		c := ix.mmapped[i]
		if addr >= c.User() && addr < c.UserEnd() {
			return c, true
		}
	}
	return Chunk{}, false
}

func (ix *Index) spanOf(addr uint64) *span {
	i := sort.Search(len(ix.spans), func(i int) bool { return ix.spans[i].hi > addr })
	if i < len(ix.spans) && ix.spans[i].lo <= addr {
		return ix.spans[i]
	}
	return nil
}

func (ix *Index) size(start uint64) (uint64, bool) {
	var b [8]byte
	if _, err := ix.mem.ReadAt(b[:], start+8); err != nil {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]) &^ 7, true
}

// ForEach calls fn with every allocated chunk, arena chunks by address
// first, then the mmapped ones, until fn returns false. Arena is -2 for
// arena chunks: the index does not keep which arena a chunk is in.
func (ix *Index) ForEach(fn func(Chunk) bool) error {
	for _, sp := range ix.spans {
		for w, word := range sp.starts {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &^= 1 << b
				start := sp.lo + (uint64(w)*64+uint64(b))*16
				size, ok := ix.size(start)
				if !ok {
					return fmt.Errorf("reading the chunk header at %#x", start)
				}
				if !fn(Chunk{Addr: start, Size: size, Arena: -2, State: glibc.ChunkInUse}) {
					return nil
				}
			}
		}
	}
	for _, c := range ix.mmapped {
		if !fn(c) {
			return nil
		}
	}
	return nil
}

// Bits is how many bits the index keeps, for its memory cost.
func (ix *Index) Bits() uint64 {
	var n uint64
	for _, sp := range ix.spans {
		n += uint64(len(sp.starts)+len(sp.sum1)+len(sp.sum2)) * 64
	}
	return n
}

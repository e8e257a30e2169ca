// Package chunks owns the heap as a set of chunks: every chunk of every
// arena and every mmapped chunk, with its address, size, arena and state,
// as one walk of internal/glibc met them, and the index that finds the
// allocated chunk holding any address. It is what an analysis of the heap's
// contents stands on (internal/reach: which chunks are referenced, from
// where, and of which type); the walker's counters (malloc_info's numbers)
// are another consumer of the same walk (glibc.WalkChunks).
//
// The index keeps half a bit per 16 bytes of heap, a bit per 32-byte slot
// (no two chunks start within 32 bytes of each other) for the start of
// every chunk, free ones included, so that a chunk's size is where the next
// one starts and is never read from the target; two bits per chunk for
// where in its slot it starts and whether it is allocated, found by
// counting the starts before it; and two thin summaries above the slots, so
// that finding the chunk before or after an address costs a few words
// however much memory lies between. Mmapped chunks, few and large, are a
// sorted list.
package chunks

import (
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/maps"
)

// Chunk is glibc's view of one chunk (glibc.Chunk).
type Chunk = glibc.Chunk

// Index is the allocated chunks of a heap, found by address.
type Index struct {
	mem     glibc.Memory
	spans   []*span     // the arenas' heaps, by address
	mmapped []Chunk     // by address
	heaps   [][2]uint64 // the arenas' heaps as the walk found them, by address
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
	Addr uint64
	Main bool
	Top  Chunk // Size 0 when unknown
	// HighestUsed is the allocated chunk nearest the top in the top's heap
	// (Size 0 when none): neither sbrk (main arena, malloc/malloc.c
	// systrim) nor heap_trim (a thread arena's newest heap,
	// malloc/arena.c) can shrink a heap past it. FreeBelow is the free
	// memory (bins and fastbins) below it in that heap, which stays in
	// the heap as long as it lives (malloc_trim can still madvise the
	// whole pages inside those chunks).
	HighestUsed Chunk
	FreeBelow   uint64
	// Walked is false when its chunks could not all be walked (damage):
	// chunks past the damage are not in the index.
	Walked bool
}

// span is one heap [lo, hi) and the chunks that start in it. Two chunks
// never start within 32 bytes of each other (MINSIZE, malloc/malloc.c), so
// a heap is cut into 32-byte slots of which each holds at most one start: a
// bit per slot says which do (half a bit per 16 bytes of heap), and each
// start, counted in address order, keeps two bits of its own: whether it is
// 16 bytes into its slot, and whether its chunk is allocated. A chunk's
// number is the count of starts before its slot (rank, from a count kept
// every 256 slots); its size is where the next one starts, never read from
// the target.
type span struct {
	lo, hi uint64
	slots  []uint64 // bit k: a chunk starts in [lo+32k, lo+32k+32)
	sum1   []uint64 // bit j: slots[j] != 0
	sum2   []uint64 // bit k: sum1[k] != 0
	ranks  []uint32 // ranks[b]: the starts in slots[:4b]
	info   []uint64 // two bits per start: 1: at +16 in its slot, 2: allocated
	n      int      // starts
}

const (
	infoOdd   = 1
	infoAlloc = 2
)

// Build walks h's heap (through h.T: a core, a snapshot, an image or a
// stopped process) and indexes every allocated chunk. visit, when not nil,
// is given every chunk the walk meets, in its order, free ones included.
func Build(h *heap.Heap, visit func(Chunk)) (*Index, error) {
	ix := &Index{mem: h.T}
	// What the walk met, per arena (mmapped chunks apart): the arenas are
	// walked at once when the walk has several workers, and each records
	// its own chunks; they are put together in ring order after.
	var (
		mu     sync.Mutex
		arenas []*arenaChunks
		mm     = &arenaChunks{}
	)
	of := func(arena int) *arenaChunks {
		if arena < 0 {
			return mm
		}
		mu.Lock()
		defer mu.Unlock()
		for len(arenas) <= arena {
			arenas = append(arenas, &arenaChunks{})
		}
		return arenas[arena]
	}
	var w *glibc.Walk
	var err error
	if visit != nil {
		w, _, err = h.WalkChunks(func(c Chunk) {
			of(c.Arena).add(c)
			visit(c)
		})
	} else {
		w, _, err = h.WalkChunksOf(func(arena int) func(Chunk) { return of(arena).add })
	}
	if err != nil {
		return nil, err
	}
	all := make([]*starts, 0, len(arenas))
	for i, ac := range append(arenas, mm) {
		all = append(all, &ac.all)
		ix.Count += ac.count
		ix.Bytes += ac.bytes
		ix.FreeCount += ac.freeCount
		ix.FreeBytes += ac.freeBytes
		ix.mmapped = append(ix.mmapped, ac.mmapped...)
		if ac != mm {
			for len(ix.Arenas) <= i {
				ix.Arenas = append(ix.Arenas, Arena{})
			}
			ix.Arenas[i].Top = ac.top
		}
	}
	ix.Walk = w
	for len(ix.Arenas) < len(w.Arenas) {
		ix.Arenas = append(ix.Arenas, Arena{})
	}
	for i, aw := range w.Arenas {
		ix.Arenas[i].Addr, ix.Arenas[i].Main, ix.Arenas[i].Walked = aw.Addr, aw.Main, aw.Walked
	}
	sort.Slice(ix.mmapped, func(i, j int) bool { return ix.mmapped[i].Addr < ix.mmapped[j].Addr })
	for _, aw := range w.Arenas {
		if aw.Main {
			if w.Params.SbrkBase != 0 && aw.Top != 0 {
				ix.heaps = append(ix.heaps, [2]uint64{w.Params.SbrkBase, aw.Top + aw.TopSize})
			}
			continue
		}
		for _, hs := range aw.Heaps {
			ix.heaps = append(ix.heaps, [2]uint64{hs.Addr, hs.Addr + hs.Size})
		}
	}
	ix.heaps = clip(ix.heaps, h.T.Mappings())
	sort.Slice(ix.heaps, func(i, j int) bool { return ix.heaps[i][0] < ix.heaps[j][0] })
	ix.index(sorted(all))
	for i := range ix.Arenas {
		if i < len(arenas) && ix.Arenas[i].Top.Size != 0 {
			r := &arenas[i].run
			ix.Arenas[i].HighestUsed, ix.Arenas[i].FreeBelow = r.highest, r.used
		}
	}
	return ix, nil
}

// arenaChunks is what Build keeps of the chunks of one arena (or of the
// mmapped ones) as the walk meets them.
type arenaChunks struct {
	all starts // arena chunks, |1 when allocated, until the heaps are known
	// The first heap the walk meets in an arena is the top's (the main
	// arena's only run; a thread arena's heaps from the top one back):
	// it ends where a chunk does not follow its predecessor.
	run              run
	mmapped          []Chunk
	top              Chunk
	count, freeCount uint64
	bytes, freeBytes uint64
}

type run struct {
	end        uint64
	done       bool
	free, used uint64
	highest    Chunk
}

func (ac *arenaChunks) add(c Chunk) {
	if c.Arena >= 0 && c.State != glibc.ChunkTop {
		r := &ac.run
		if r.end != 0 && c.Addr != r.end {
			r.done = true
		}
		r.end = c.Addr + c.Size
		switch {
		case r.done:
		case c.State == glibc.ChunkInUse:
			r.highest, r.used = c, r.free
		case c.State == glibc.ChunkFree, c.State == glibc.ChunkFast:
			r.free += c.Size
		}
	}
	switch {
	case c.State == glibc.ChunkMmapped:
		ac.mmapped = append(ac.mmapped, c)
		ac.count++
		ac.bytes += c.Size
	case c.State == glibc.ChunkInUse:
		ac.all.add(c.Addr | 1)
		ac.count++
		ac.bytes += c.Size
	default:
		ac.all.add(c.Addr)
		ac.freeCount++
		ac.freeBytes += c.Size
	}
	if c.State == glibc.ChunkTop {
		ac.top = c
	}
}

// clip bounds each heap by the mapping it starts in: a bit per 16 bytes is
// kept for each, and a damaged or hostile core's top size must not make
// that a bit per 16 bytes of the whole address space. A heap in no
// mapping is dropped.
func clip(heaps [][2]uint64, ms []maps.Mapping) [][2]uint64 {
	out := heaps[:0]
	for _, h := range heaps {
		for _, m := range ms {
			if m.Contains(h[0]) {
				if end := min(h[1], m.End); end > h[0] {
					out = append(out, [2]uint64{h[0], end})
				}
				break
			}
		}
	}
	return out
}

// index lays a span over each heap and sets the bits of the chunks in it.
// The list of starts is the walk's only transient cost (a byte or two a
// chunk), dropped once the bits are set.
func (ix *Index) index(next func() (uint64, bool)) {
	a, ok := next()
	var prevHi uint64
	for _, h := range ix.heaps {
		// Spans never overlap, so that an address has one span and a
		// chunk one set of bits: heaps overlap only where a damaged or
		// hostile core says a heap is larger than it is.
		h[0] = max(h[0], (prevHi+15)&^15)
		if h[0] >= h[1] {
			continue
		}
		for ok && a&^1 < h[0] {
			a, ok = next() // outside every heap: not the walk's, cannot be
		}
		if !ok || a&^1 >= h[1] {
			continue
		}
		sp := newSpan(h[0]&^15, h[1])
		for ok && a&^1 < h[1] {
			sp.add(a&^1, a&1 != 0)
			a, ok = next()
		}
		sp.rank()
		ix.spans = append(ix.spans, sp)
		prevHi = sp.hi
	}
}

func newSpan(lo, hi uint64) *span {
	n := (hi - lo + 31) / 32
	w1 := (n + 63) / 64
	w2 := (w1 + 63) / 64
	return &span{lo: lo, hi: hi, slots: make([]uint64, w1), sum1: make([]uint64, w2), sum2: make([]uint64, (w2+63)/64)}
}

// add records a chunk starting at addr, in address order. A second start
// in one slot (a chunk shorter than MINSIZE, which only a damaged or
// hostile core can describe) is dropped: the chunk before it keeps its
// bytes.
func (s *span) add(addr uint64, allocated bool) {
	k := (addr - s.lo) / 32
	if s.slots[k/64]&(1<<(k%64)) != 0 {
		return
	}
	s.slots[k/64] |= 1 << (k % 64)
	j := k / 64
	s.sum1[j/64] |= 1 << (j % 64)
	l := j / 64
	s.sum2[l/64] |= 1 << (l % 64)
	v := uint64(0)
	if (addr-s.lo)%32 != 0 {
		v |= infoOdd
	}
	if allocated {
		v |= infoAlloc
	}
	if s.n%32 == 0 {
		s.info = append(s.info, 0)
	}
	s.info[s.n/32] |= v << (2 * (s.n % 32))
	s.n++
}

// rank counts the starts before every 256th slot, once they are all set.
func (s *span) rank() {
	s.ranks = make([]uint32, (len(s.slots)+3)/4)
	c := 0
	for w, word := range s.slots {
		if w%4 == 0 {
			s.ranks[w/4] = uint32(c)
		}
		c += bits.OnesCount64(word)
	}
	s.info = slices.Clip(s.info)
}

// number is the number of the start in slot k (a set bit): the count of
// starts before it.
func (s *span) number(k uint64) int {
	w := k / 64
	c := int(s.ranks[w/4])
	for _, word := range s.slots[w&^3 : w] {
		c += bits.OnesCount64(word)
	}
	return c + bits.OnesCount64(s.slots[w]&(1<<(k%64)-1))
}

func (s *span) infoOf(e int) uint64 { return s.info[e/32] >> (2 * (e % 32)) & 3 }

// addrOf is where start e, in slot k, begins.
func (s *span) addrOf(k uint64, e int) uint64 {
	return s.lo + 32*k + 16*(s.infoOf(e)&infoOdd)
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

// last finds the highest slot at or below slot i that holds a start:
// within its word, else through the summaries for the nearest earlier word
// that has one.
func (s *span) last(i uint64) (uint64, bool) {
	if b := prevBit(s.slots, i); b >= 0 {
		return uint64(b), true
	}
	j := i / 64
	if j == 0 {
		return 0, false
	}
	j-- // the words before i's
	w := prevBit(s.sum1, j)
	if w < 0 {
		// No start in the sum1 word that holds j: the nearest earlier
		// sum1 word that has one, through the sum2 words before it
		// (each covers 8 MiB of heap: a chunk that starts further back
		// is found too).
		k := j / 64
		for w < 0 {
			if k == 0 {
				return 0, false
			}
			if k2 := prevBit(s.sum2, k-1); k2 >= 0 {
				w = prevBit(s.sum1, uint64(k2)*64+63)
				if w < 0 {
					return 0, false
				}
				break
			}
			k = (k - 1) &^ 63 // the sum2 word before k-1's
		}
	}
	b := prevBit(s.slots, uint64(w)*64+63)
	return uint64(b), b >= 0
}

// nextBit is the index of the lowest set bit at or above bit i in the word
// that holds bit i, or -1.
func nextBit(words []uint64, i uint64) int64 {
	w := i / 64
	if w >= uint64(len(words)) {
		return -1
	}
	if m := words[w] & (^uint64(0) << (i % 64)); m != 0 {
		return int64(w*64) + int64(bits.TrailingZeros64(m))
	}
	return -1
}

// next finds the lowest slot at or above slot i that holds a start,
// through the summaries.
func (s *span) next(i uint64) (uint64, bool) {
	if b := nextBit(s.slots, i); b >= 0 {
		return uint64(b), true
	}
	j := i/64 + 1 // the words after i's
	w := nextBit(s.sum1, j)
	if w < 0 {
		k := j/64 + 1
		k2 := nextBit(s.sum2, k)
		for k2 < 0 && k < uint64(len(s.sum2))*64 {
			k = (k/64 + 1) * 64
			k2 = nextBit(s.sum2, k)
		}
		if k2 < 0 {
			return 0, false
		}
		w = nextBit(s.sum1, uint64(k2)*64)
		if w < 0 {
			return 0, false
		}
	}
	b := nextBit(s.slots, uint64(w)*64)
	return uint64(b), b >= 0
}

// chunk is start e, in slot k, as an allocated chunk: its size is to the
// next start, or to the end of the heap.
func (s *span) chunk(k uint64, e int) Chunk {
	a := s.addrOf(k, e)
	end := s.hi
	if n, ok := s.next(k + 1); ok {
		end = s.addrOf(n, e+1)
	}
	return Chunk{Addr: a, Size: end - a, Arena: -2, State: glibc.ChunkInUse}
}

// Find returns the allocated chunk whose user bytes hold addr (from
// malloc's pointer to its usable end: an interior pointer finds its
// chunk). A pointer into a free chunk, a header, or no heap at all finds
// nothing.
func (ix *Index) Find(addr uint64) (Chunk, bool) {
	if c, ok := ix.findMmapped(addr); ok {
		return c, true
	}
	si := ix.spanIndex(addr)
	if si < 0 {
		return Chunk{}, false
	}
	sp := ix.spans[si]
	k, e, ok := sp.locate(addr)
	if !ok {
		return Chunk{}, false
	}
	c := sp.chunk(k, e)
	if addr < c.User() || addr >= c.UserEnd() {
		return Chunk{}, false
	}
	return c, true
}

// locate finds the allocated start whose chunk may hold addr (in s): its
// slot and number. The caller checks addr against the chunk's user bytes.
func (s *span) locate(addr uint64) (k uint64, e int, ok bool) {
	k, ok = s.last((addr - s.lo) / 32)
	if !ok {
		return 0, 0, false
	}
	e = s.number(k)
	info := s.infoOf(e)
	if s.lo+32*k+16*(info&infoOdd) > addr {
		// addr is in the first half of a slot whose chunk starts in the
		// second: the chunk before holds it.
		if k == 0 {
			return 0, 0, false
		}
		if k, ok = s.last(k - 1); !ok {
			return 0, 0, false
		}
		e--
		info = s.infoOf(e)
	}
	return k, e, info&infoAlloc != 0
}

// spanIndex is the index of the span that holds addr, or -1.
func (ix *Index) spanIndex(addr uint64) int {
	i := sort.Search(len(ix.spans), func(i int) bool { return ix.spans[i].hi > addr })
	if i < len(ix.spans) && ix.spans[i].lo <= addr {
		return i
	}
	return -1
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

// ForEach calls fn with every allocated chunk, arena chunks by address
// first, then the mmapped ones, until fn returns false. Arena is -2 for
// arena chunks: the index does not keep which arena a chunk is in. It
// reads nothing of the target.
func (ix *Index) ForEach(fn func(Chunk) bool) {
	for _, sp := range ix.spans {
		e := 0
		for w, word := range sp.slots {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &^= 1 << b
				k := uint64(w)*64 + uint64(b)
				if sp.infoOf(e)&infoAlloc != 0 && !fn(sp.chunk(k, e)) {
					return
				}
				e++
			}
		}
	}
	for _, c := range ix.mmapped {
		if !fn(c) {
			return
		}
	}
}

// Bits is how many bits the index keeps, for its memory cost.
func (ix *Index) Bits() uint64 {
	var n uint64
	for _, sp := range ix.spans {
		n += uint64(len(sp.slots)+len(sp.sum1)+len(sp.sum2)+len(sp.info))*64 + uint64(len(sp.ranks))*32
	}
	return n
}

// Marks keep two bits for every chunk start of an index (allocated ones
// are what is marked): what an analysis has found of it (internal/reach:
// reachable from where, leaked). A chunk's bits are found by its number in
// its span.
type Marks struct {
	ix   *Index
	m    [][]uint64 // per span, two bits per start
	mm   []uint32   // per mmapped chunk (a word, for Load and CAS)
	last int        // the span of the last chunk asked of
}

// NewMarks gives every allocated chunk of the index the mark 0, and every
// free one 3.
func (ix *Index) NewMarks() *Marks {
	m := &Marks{ix: ix, mm: make([]uint32, len(ix.mmapped))}
	for _, sp := range ix.spans {
		// A free start's mark is 3, which no analysis asks of (it marks
		// allocated chunks), so that Refs can tell a free chunk by its
		// mark, without reading the start's own bits.
		w := make([]uint64, (sp.n+31)/32)
		for i, info := range sp.info[:len(w)] {
			free := ^(info >> 1) & 0x5555555555555555 // the low bit of every free start's pair
			w[i] = free | free<<1
		}
		if r := sp.n % 32; r != 0 {
			w[len(w)-1] &= 1<<(2*r) - 1
		}
		m.m = append(m.m, w)
	}
	return m
}

// slot finds c's place: a span and its number there, or an mmapped
// chunk's index.
func (m *Marks) slot(c Chunk) (span int, e int, mm int) {
	if c.State == glibc.ChunkMmapped {
		i := sort.Search(len(m.ix.mmapped), func(i int) bool { return m.ix.mmapped[i].Addr >= c.Addr })
		return -1, 0, i
	}
	i := m.last // the scan asks of chunks near the one before
	if sp := m.ix.spans[i]; c.Addr < sp.lo || c.Addr >= sp.hi {
		i = sort.Search(len(m.ix.spans), func(i int) bool { return m.ix.spans[i].hi > c.Addr })
		m.last = i
	}
	sp := m.ix.spans[i]
	return i, sp.number((c.Addr - sp.lo) / 32), -1
}

// Get is c's mark (0 to 3).
func (m *Marks) Get(c Chunk) uint8 {
	s, e, mm := m.slot(c)
	if s < 0 {
		return uint8(m.mm[mm])
	}
	return uint8(m.m[s][e/32] >> (2 * (e % 32)) & 3)
}

// Set gives c the mark v (0 to 3).
func (m *Marks) Set(c Chunk, v uint8) {
	s, e, mm := m.slot(c)
	if s < 0 {
		m.mm[mm] = uint32(v)
		return
	}
	sh := 2 * (e % 32)
	m.m[s][e/32] = m.m[s][e/32]&^(3<<sh) | uint64(v&3)<<sh
}

// Bounds are the lowest and highest addresses (exclusive) any allocated
// chunk covers: a word outside them is no pointer into the heap.
func (ix *Index) Bounds() (lo, hi uint64) {
	lo = ^uint64(0)
	for _, sp := range ix.spans {
		lo, hi = min(lo, sp.lo), max(hi, sp.hi+8)
	}
	for _, c := range ix.mmapped {
		lo, hi = min(lo, c.Addr), max(hi, c.Addr+c.Size)
	}
	return lo, hi
}

// ForEachMmapped calls fn with every mmapped chunk, by address.
func (ix *Index) ForEachMmapped(fn func(Chunk)) {
	for _, c := range ix.mmapped {
		fn(c)
	}
}

// Bits is how many bits the marks keep.
func (m *Marks) Bits() uint64 {
	var n uint64
	for _, s := range m.m {
		n += uint64(len(s)) * 64
	}
	return n + uint64(len(m.mm))*32
}

// slotOf is slot for goroutines that share the marks: it keeps no cache
// of the span asked of last.
func (m *Marks) slotOf(c Chunk) (span int, e int, mm int) {
	if c.State == glibc.ChunkMmapped {
		i := sort.Search(len(m.ix.mmapped), func(i int) bool { return m.ix.mmapped[i].Addr >= c.Addr })
		return -1, 0, i
	}
	i := sort.Search(len(m.ix.spans), func(i int) bool { return m.ix.spans[i].hi > c.Addr })
	sp := m.ix.spans[i]
	return i, sp.number((c.Addr - sp.lo) / 32), -1
}

// Load is Get for marks that goroutines share (a parallel scan): an
// atomic read of the word that holds c's bits.
func (m *Marks) Load(c Chunk) uint8 {
	s, e, mm := m.slotOf(c)
	if s < 0 {
		return uint8(atomic.LoadUint32(&m.mm[mm]))
	}
	return uint8(atomic.LoadUint64(&m.m[s][e/32]) >> (2 * (e % 32)) & 3)
}

// CAS gives c the mark v if its mark is old, atomically, and reports
// whether it did: of goroutines that race to mark a chunk, one wins.
func (m *Marks) CAS(c Chunk, old, v uint8) bool {
	s, e, mm := m.slotOf(c)
	if s < 0 {
		return atomic.CompareAndSwapUint32(&m.mm[mm], uint32(old), uint32(v))
	}
	w := &m.m[s][e/32]
	sh := 2 * (e % 32)
	for {
		cur := atomic.LoadUint64(w)
		if uint8(cur>>sh&3) != old {
			return false
		}
		if atomic.CompareAndSwapUint64(w, cur, cur&^(3<<sh)|uint64(v&3)<<sh) {
			return true
		}
	}
}

// Ref is where a word of a batch points: a start of a span (its slot and
// number), or an mmapped chunk (span -1, e its index). Refs keeps them
// between its two steps; the caller lends it the memory.
type Ref struct {
	span, e int
	k       uint64
	addr    uint64 // the word, until it is located
}

// refNone is a Ref's span for a word that refers to no chunk.
const refNone = -2

// Refs takes every word of ws for a reference to the allocated chunk whose
// user bytes hold it (as Find finds it): each such chunk whose mark is old,
// other than the one that starts at from (a chunk's reference to itself),
// is given the mark v and handed to fn, in the order of ws. old must not
// be 3, the mark a free chunk has from NewMarks on: a word into a free
// chunk or a header changes nothing. shared says that goroutines share the
// marks: each mark is then changed by compare-and-swap, and of goroutines
// that race to mark a chunk, one is handed it. It returns buf, to be lent
// again.
//
// A scan looks up every word of the heap, each at a random place of the
// index, and most point into chunks already marked. The words of a batch
// are located first, all of them, before any mark is read, so that the
// processor waits for the index's memory of several words at once rather
// than one after another. A start's own two bits are read only where the
// word lies in the start's slot (is it in the header, or before a start at
// +16?), and its size only for a chunk whose mark changes: where its mark
// is old, the chunk is allocated (a free one's is 3).
func (m *Marks) Refs(buf []Ref, ws []uint64, from uint64, old, v uint8, shared bool, fn func(Chunk)) []Ref {
	ix := m.ix
	buf = buf[:0]
	last := -1
	// The words' places, a step for all of them at a time: their spans;
	// the slots before them that hold a start (the slots' memory); the
	// starts' numbers (the ranks'), and for a word in its start's own
	// slot that start's bits (the infos'). Each step's reads of one word
	// do not wait for another's, and a step's loop is short enough for
	// the processor to have many of them under way at once.
	for _, addr := range ws {
		if len(ix.mmapped) > 0 {
			if i := sort.Search(len(ix.mmapped), func(i int) bool { return ix.mmapped[i].Addr+ix.mmapped[i].Size > addr }); i < len(ix.mmapped) {
				if c := ix.mmapped[i]; addr >= c.User() && addr < c.UserEnd() {
					buf = append(buf, Ref{span: -1, e: i})
					continue
				}
			}
		}
		if last < 0 || addr < ix.spans[last].lo || addr >= ix.spans[last].hi {
			if last = ix.spanIndex(addr); last < 0 {
				continue
			}
		}
		buf = append(buf, Ref{span: last, addr: addr})
	}
	for i := range buf {
		r := &buf[i]
		if r.span < 0 {
			continue
		}
		sp := ix.spans[r.span]
		k, ok := sp.last((r.addr - sp.lo) / 32)
		if !ok {
			r.span = refNone
		}
		r.k = k
	}
	for i := range buf {
		r := &buf[i]
		if r.span < 0 {
			continue
		}
		sp := ix.spans[r.span]
		r.e = sp.number(r.k)
	}
	for i := range buf {
		r := &buf[i]
		if r.span < 0 {
			continue
		}
		sp := ix.spans[r.span]
		if r.k != (r.addr-sp.lo)/32 {
			continue
		}
		// The start before the word's slot, or in it, is the chunk's. A
		// word past its start's slot lies past the header (a start is at
		// +0 or +16 of its slot) and before the next start (in a later
		// slot): in the chunk's user bytes. In the start's own slot it
		// may lie before a start at +16 (the start before holds it) or
		// in the header (none does).
		a := sp.lo + 32*r.k + 16*(sp.infoOf(r.e)&infoOdd)
		switch {
		case a > r.addr:
			k, ok := uint64(0), false
			if r.k > 0 {
				k, ok = sp.last(r.k - 1)
			}
			if !ok {
				r.span = refNone
				continue
			}
			r.k, r.e = k, r.e-1
		case r.addr < a+16:
			r.span = refNone
		}
	}
	for _, r := range buf {
		if r.span == refNone {
			continue
		}
		if r.span < 0 {
			c := ix.mmapped[r.e]
			w := &m.mm[r.e]
			if c.Addr == from {
				continue
			}
			if shared {
				if !atomic.CompareAndSwapUint32(w, uint32(old), uint32(v)) {
					continue
				}
			} else if uint8(*w) != old {
				continue
			} else {
				*w = uint32(v)
			}
			fn(c)
			continue
		}
		w := &m.m[r.span][r.e/32]
		sh := 2 * (r.e % 32)
		var cur uint64
		if shared {
			cur = atomic.LoadUint64(w)
		} else {
			cur = *w
		}
		if uint8(cur>>sh&3) != old {
			continue
		}
		c := ix.spans[r.span].chunk(r.k, r.e)
		if c.Addr == from {
			continue
		}
		if shared {
			for !atomic.CompareAndSwapUint64(w, cur, cur&^(3<<sh)|uint64(v&3)<<sh) {
				if cur = atomic.LoadUint64(w); uint8(cur>>sh&3) != old {
					break
				}
			}
			if uint8(cur>>sh&3) != old {
				continue
			}
		} else {
			*w = cur&^(3<<sh) | uint64(v&3)<<sh
		}
		fn(c)
	}
	return buf
}

// ForEachIn is ForEach for the allocated chunks that start in [lo, hi):
// arena chunks by address, then mmapped ones, until fn returns false. It
// reads nothing of the target, and only the index: goroutines may call it
// at once, each for its own range.
func (ix *Index) ForEachIn(lo, hi uint64, fn func(Chunk) bool) {
	if !ix.spansIn(lo, hi, fn) {
		return
	}
	// ix.mmapped is in address order (Build): a scan's thousands of
	// segments each look only at their own.
	i := sort.Search(len(ix.mmapped), func(i int) bool { return ix.mmapped[i].Addr >= lo })
	for ; i < len(ix.mmapped) && ix.mmapped[i].Addr < hi; i++ {
		if !fn(ix.mmapped[i]) {
			return
		}
	}
}

// spansIn is ForEachIn for the arena chunks; false when fn said stop.
func (ix *Index) spansIn(lo, hi uint64, fn func(Chunk) bool) bool {
	for _, sp := range ix.spans {
		if sp.hi <= lo || sp.lo >= hi {
			continue
		}
		k0 := uint64(0)
		if lo > sp.lo {
			k0 = (lo - sp.lo) / 32
		}
		e := sp.number(k0) // the starts before slot k0
		for w := k0 / 64; w < uint64(len(sp.slots)); w++ {
			word := sp.slots[w]
			if w == k0/64 {
				word &^= 1<<(k0%64) - 1
			}
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &^= 1 << b
				k := w*64 + uint64(b)
				a := sp.addrOf(k, e)
				if a >= hi {
					return true
				}
				if a >= lo && sp.infoOf(e)&infoAlloc != 0 && !fn(sp.chunk(k, e)) {
					return false
				}
				e++
			}
		}
	}
	return true
}

// Spans are the address ranges of the arenas' heaps the index covers, by
// address: ForEachIn over pieces of them (and over each mmapped chunk)
// goes over every chunk once.
func (ix *Index) Spans() [][2]uint64 {
	out := make([][2]uint64, len(ix.spans))
	for i, sp := range ix.spans {
		out[i] = [2]uint64{sp.lo, sp.hi}
	}
	return out
}

// Owned lists the memory malloc owns, by address: the arenas' heaps (the
// main arena's run from its sbrk base to the end of its top chunk, each
// heap of a thread arena) and the mmapped chunks. The rest of a process's
// writable memory is not the heap.
func (ix *Index) Owned() [][2]uint64 {
	out := append([][2]uint64(nil), ix.heaps...)
	for _, c := range ix.mmapped {
		out = append(out, [2]uint64{c.Addr, c.Addr + c.Size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

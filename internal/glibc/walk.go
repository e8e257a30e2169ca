package glibc

import (
	"encoding/binary"
	"fmt"
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"sort"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/maps"
)

// Walk is the allocator's state read from memory, without running anything
// in the target: malloc_info's numbers reproduced, and what malloc_info does
// not tell.
type Walk struct {
	Layout  layouts.Layout
	Anchors Anchors
	Params  Params
	Malloc  *mallocinfo.Info // exactly what malloc_info would have printed
	Arenas  []ArenaWalk      // same order as Malloc.Arenas
	Mmapped MmappedChunks
	Damage  []Damage
	// Exact is false when glibc's own output cannot be reproduced: 2.17
	// and 2.18 print uninitialised stack for <unsorted>, and a libc known
	// from memory alone may be one of versions that print differently.
	Exact bool
	// TLS is where WalkAll found the tcache and thread_arena variables.
	TLS TLSSlots
	// PageSize is the target's page size (AT_PAGESZ, trimPage), which
	// malloc_trim's prediction rounds to; 0 (a walk of one arena) is
	// read as 4 KiB.
	PageSize uint64
}

// Params are the allocator's global parameters (mp_) in effect.
type Params struct {
	TrimThreshold, TopPad, MmapThreshold uint64
	ArenaTest, ArenaMax                  uint64
	HpPagesize                           uint64
	NMmaps, NMmapsMax, MaxNMmaps         int32
	NoDynThreshold                       bool
	MmappedMem, MaxMmappedMem, SbrkBase  uint64
	TcacheBins, TcacheMaxBytes           uint64
	TcacheCount, TcacheUnsortedLimit     uint64
	HeapMax                              uint64 // alignment and size of a thread arena's heaps
}

// HeapSpan is one heap of a thread arena.
type HeapSpan struct {
	Addr, Size, MprotectSize uint64
}

// ArenaWalk is what the walk found in one arena beyond malloc_info.
type ArenaWalk struct {
	Addr            uint64
	Main            bool
	Mutex           uint32 // 0 unlocked, 1 locked, 2 locked with waiters
	Flags           uint32
	AttachedThreads uint64 // threads attached to it (2.23+)
	Top, TopSize    uint64
	Heaps           []HeapSpan // thread arenas: from the top heap back through prev

	// From the chunk walk of every heap; Walked is false when it could not
	// be done (a non-contiguous main arena, damage).
	Walked                    bool
	InUseChunks, InUseBytes   uint64 // not free in any list, tcache included
	FreeChunks, FreeBytes     uint64 // in bins (sizes masked), top excluded
	FastChunks, FastBytes     uint64
	TcacheChunks, TcacheBytes uint64 // chunks of this arena sitting in some thread's tcache
	LargestFree               uint64 // largest free chunk in a bin
	TrimRanges                []maps.Range
}

// Damage is an inconsistency found in the allocator's state. The walk
// never follows a pointer it found damaged. Abort says glibc's own code
// would kill the process on it when malloc_info or malloc_trim walks there:
// it aborts (malloc_printerr), faults on a wild pointer, or (malloc_trim)
// madvises memory that is not free. Hang says glibc's walk of that list
// would never end, holding the arena's lock. Either refuses injection
// (PreflightDamage).
type Damage struct {
	Arena uint64
	Addr  uint64
	What  string
	Abort bool
	Hang  bool
	// Ring: the damage is in the ring of arenas itself (a next pointer),
	// not in the lists of the arena it names.
	Ring bool
	// List is the list it was found in: bin i (1 to 127), fastbin k as
	// -(k+1); ListTop or ListHeaps for the arena's top chunk or heaps; 0
	// for anything else (chunks, the ring).
	List int
}

// Damage.List of the damage found at an arena's top chunk and in its heaps'
// headers, which WalkArenaLists always reads again.
const (
	ListTop   = 1000
	ListHeaps = 1001
)

func (d Damage) String() string {
	return fmt.Sprintf("arena %#x: %s at %#x", d.Arena, d.What, d.Addr)
}

// ChunkState is where a chunk is, as the walk found it.
type ChunkState uint8

const (
	ChunkInUse   ChunkState = iota // allocated: the program's
	ChunkFree                      // in a bin (unsorted, small or large)
	ChunkFast                      // in a fastbin
	ChunkTcache                    // in a thread's tcache: free to the program, in use to malloc_info
	ChunkTop                       // an arena's top chunk
	ChunkMmapped                   // mmapped by itself, outside every arena; the program's
)

var chunkStateNames = [...]string{"in use", "free", "fastbin", "tcache", "top", "mmapped"}

func (s ChunkState) String() string {
	if int(s) < len(chunkStateNames) {
		return chunkStateNames[s]
	}
	return fmt.Sprintf("state %d", s)
}

// Allocated reports whether the program holds the chunk (in use or
// mmapped): the chunks that are objects.
func (s ChunkState) Allocated() bool { return s == ChunkInUse || s == ChunkMmapped }

// Chunk is one chunk met by a walk: its header's address and its size
// (flags masked), the index of its arena in the walk (-1 for an mmapped
// chunk) and where it is.
type Chunk struct {
	Addr, Size uint64
	Arena      int
	State      ChunkState
}

// User is where the program's bytes begin (malloc's return value).
func (c Chunk) User() uint64 { return c.Addr + 16 }

// UserEnd is where they end: an in-use chunk's last 8 bytes are the next
// chunk's prev_size, which the program may use (malloc/malloc.c,
// "chunk_at_offset ... prev_size field of next chunk"); an mmapped chunk
// has no next chunk.
func (c Chunk) UserEnd() uint64 {
	if c.State == ChunkMmapped {
		return c.Addr + c.Size
	}
	return c.Addr + c.Size + 8
}

// MmappedChunks are the chunks glibc mmapped outside every arena.
type MmappedChunks struct {
	Count, Bytes uint64
	Sizes        map[uint64]uint64 // chunk size -> count
	// Regions are the memory glibc mapped for each chunk, by address
	// within each mapping searched: what the RSS waterfall asks the
	// pagemap about, since the kernel merges a chunk's mapping with its
	// neighbours and smaps cannot tell them apart.
	Regions []maps.Range
}

const (
	prevInuse   = 1
	isMmapped   = 2
	nonMain     = 4
	sizeBits    = 7
	minChunk    = 32
	pageSz      = 4096
	maxListLen  = 1 << 26 // far above any real bin; a longer list is a cycle
	nbins       = 128
	defaultHeap = 64 << 20
)

type walker struct {
	mem       *memio.Cache
	page      uint64 // the target's page size, for what malloc_trim gives back (trimPage)
	lay       layouts.Layout
	ms        []maps.Mapping
	spans     *rwSpans // the readable, writable ones of ms, once needed
	w         *Walk
	cur       uint64 // arena being walked, for damage reports
	free      *memio.AddrSet
	fast      *memio.AddrSet
	badSize   map[uint64]bool // free chunks in bins whose size does not fit their heap
	tcached   *memio.AddrSet
	path      []uint64     // the chunks met so far in the list being walked
	pre       prewalk      // the arena's lists as read ahead from the copy of its heaps
	parts     []maps.Range // the arena's heaps in parts of a copy's size (memio.Parts), when too large to copy whole
	listsOnly bool
	noChunks  bool         // skip the chunk walk only (the mmapped-chunk scan still runs)
	visit     func(Chunk)  // given every chunk met, when set (WalkChunks)
	list      int          // the list being walked, for damage reports (Damage.List)
	only      map[int]bool // walk only these lists, when set (WalkArenaLists)
	jobs      int          // workers the arenas may be walked by (workers.Resolve's)
	segJobs   int          // workers a long heap's chunks may be walked by, in segments (parallel.go)
	index     int          // the arena being walked: its place in the ring
	// inTurn runs the chunk walk of the arena when it is the arena's turn
	// to hand its chunks to visit (in ring order; parallel.go); nil: now.
	inTurn func(walk func())
	// visitOf, when set, gives each arena's chunk walk its own visit
	// (WalkChunksOf): arenas walked at once then need not take turns.
	visitOf func(arena int) func(Chunk)
}

// WalkHeap reads the allocator's state through mem. ms are the target's
// mappings, used to check every pointer before it is followed. tcached holds
// the chunk addresses (not user pointers) sitting in threads' tcaches, when
// the caller could find them (nil otherwise). The arenas are walked by up to
// jobs workers (as workers.Resolve takes it) when mem may be read from
// several at once; the result is the same for any count.
func WalkHeap(mem Memory, lay layouts.Layout, a Anchors, ms []maps.Mapping, tcached map[uint64]bool, jobs int) (*Walk, error) {
	return walkHeap(&walker{mem: memio.New(mem), lay: lay, ms: ms, tcached: memio.SetOf(tcached), jobs: jobs}, a)
}

// WalkLists reads only what glibc's malloc_info and malloc_trim read: the
// arena ring, each arena's fastbins, bins and heaps. It skips the chunk walk
// and the search for mmapped chunks, so its cost does not grow with the
// heap: Walked is false in every arena, and Mmapped is empty. Its Damage,
// Malloc and TrimRanges are those of WalkHeap. It leaves the pages
// malloc_trim gave back alone: it copies only the pages of the heaps that
// hold data, when mem can tell which (memio.DataRuns), else whole pages around
// the headers only. Its arenas are walked by up to jobs workers, as
// WalkHeap's.
func WalkLists(mem Memory, lay layouts.Layout, a Anchors, ms []maps.Mapping, jobs int) (*Walk, error) {
	wk := listsWalker(mem, lay, ms)
	wk.jobs = jobs
	return walkHeap(wk, a)
}

func listsWalker(mem Memory, lay layouts.Layout, ms []maps.Mapping) *walker {
	c := memio.NewSized(mem, pageSz)
	_, runs := mem.(memio.DataRuns)
	if !runs {
		c.NoCopies() // copying whole heaps would map the zero page into the pages trimmed
	}
	return &walker{mem: c, lay: lay, ms: ms, listsOnly: true, jobs: 1}
}

// WalkArenaLists is WalkLists of one arena, the one at addr (index is its
// place in the ring, for the report): its top and heaps, and of its
// fastbins and bins those lists names (as Damage.List numbers them; all
// when nil), with the damage found there. Read while the arena's lock is
// held, it sees the lists as glibc's malloc_info and malloc_trim would:
// both walk an arena's lists only with its lock held (malloc/malloc.c,
// __malloc_info and __malloc_trim). Fastbins are pushed without the lock
// (_int_free), but only at their head: a list read from the head it had is
// the list the call would walk from there. With lists named, the heaps are
// not copied ahead: the lists are read where they lead.
func WalkArenaLists(mem Memory, lay layouts.Layout, a Anchors, ms []maps.Mapping, addr uint64, index int, lists []int) (*Walk, error) {
	wk := listsWalker(mem, lay, ms)
	if lists != nil {
		wk.only = map[int]bool{}
		for _, l := range lists {
			wk.only[l] = true
		}
		wk.mem.NoCopies()
	}
	w, err := wk.begin(a)
	if err != nil {
		return nil, err
	}
	defer wk.mem.Close()
	if _, err := wk.arena(addr, index); err != nil {
		return nil, err
	}
	return w, nil
}

// begin starts a walk: its result, and the allocator's parameters read.
func (wk *walker) begin(a Anchors) (*Walk, error) {
	lay := wk.lay
	wk.w = &Walk{Layout: lay, Anchors: a, Malloc: &mallocinfo.Info{HasFast: lay.FastTotals, HasMmap: lay.MmapLine}, Exact: !lay.GarbageUnsorted, PageSize: wk.page}
	return wk.w, wk.params()
}

func walkHeap(wk *walker, a Anchors) (*Walk, error) {
	lay := wk.lay
	wk.page = trimPage(wk.mem.Memory()) // once: a live target reads its auxv for it
	w, err := wk.begin(a)
	defer wk.mem.Close()
	if err != nil {
		return nil, err
	}
	if wk.parallel() {
		if err := wk.arenasParallel(a); err != nil {
			return nil, err
		}
	} else if err := wk.arenasSerial(a); err != nil {
		return nil, err
	}
	mi := w.Malloc
	mi.MmapCount, mi.MmapBytes = uint64(uint32(w.Params.NMmaps)), w.Params.MmappedMem
	for i := range mi.Arenas {
		x := &mi.Arenas[i]
		mi.FastCount += x.FastCount
		mi.FastBytes += x.FastBytes
		mi.RestCount += x.RestCount
		mi.RestBytes += x.RestBytes
		mi.SystemCurrent += x.SystemCurrent
		mi.SystemMax += x.SystemMax
		mi.AspaceTotal += x.AspaceTotal
		mi.AspaceMprotect += x.AspaceMprotect
	}
	if !wk.listsOnly {
		wk.mmapped()
	}
	mi.Raw = mallocinfo.Render(mi, lay.Format)
	return w, nil
}

// arenasSerial walks the arenas one after the other, in ring order, with
// the next one's heaps copied meanwhile where the memory allows
// (memio.Cache.StartAhead).
func (wk *walker) arenasSerial(a Anchors) error {
	lay := wk.lay
	if wk.mem.RunsAhead() {
		wk.startAhead(a)
	}
	seen := map[uint64]bool{}
	ar := a.MainArena
	for n := 0; ; n++ {
		if n == maxArenas || seen[ar] {
			// A ring that loops without main_arena: glibc's loops over the
			// arenas (malloc_info, malloc_trim) never end.
			wk.w.Damage = append(wk.w.Damage, Damage{Arena: wk.cur, Addr: ar, What: "the arena ring does not return to main_arena", Hang: seen[ar], Ring: true})
			break
		}
		seen[ar] = true
		next, err := wk.arena(ar, n)
		if err != nil {
			return err
		}
		if next == a.MainArena {
			break
		}
		if !wk.rw(next, uint64(lay.StateSize)) {
			wk.damage(ar, fmt.Sprintf("next arena pointer %#x is not in writable memory", next), true)
			wk.w.Damage[len(wk.w.Damage)-1].Ring = true
			break
		}
		ar = next
	}
	return nil
}

func (wk *walker) damage(at uint64, what string, abort bool) {
	wk.w.Damage = append(wk.w.Damage, Damage{Arena: wk.cur, Addr: at, What: what, Abort: abort, List: wk.list})
}

// skip reports whether list (as Damage.List numbers it) is left out.
func (wk *walker) skip(list int) bool { return wk.only != nil && !wk.only[list] }

// rw reports whether [addr, addr+n) lies in one readable, writable mapping:
// the only place allocator data can be.
func (wk *walker) rw(addr, n uint64) bool {
	if wk.spans == nil {
		wk.spans = newRWSpans(wk.ms)
	}
	end, ok := wk.spans.find(addr)
	return ok && n <= end-addr // no overflow with a garbage n
}

// rwSpans are the readable, writable mappings, in address order, with the
// one found last: the walker checks every pointer it follows, and most fall
// in the mapping of the one before.
type rwSpans struct {
	spans []maps.Range
	last  int
}

func newRWSpans(ms []maps.Mapping) *rwSpans {
	s := &rwSpans{}
	for _, m := range ms {
		if m.Readable() && m.Writable() {
			s.spans = append(s.spans, maps.Range{Start: m.Start, End: m.End})
		}
	}
	return s
}

// find returns the end of the readable, writable mapping holding addr.
func (s *rwSpans) find(addr uint64) (uint64, bool) {
	if s.last < len(s.spans) {
		if r := s.spans[s.last]; r.Start <= addr && addr < r.End {
			return r.End, true
		}
	}
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].End > addr })
	if i < len(s.spans) && s.spans[i].Start <= addr {
		s.last = i
		return s.spans[i].End, true
	}
	return 0, false
}

func (wk *walker) params() error {
	lay := wk.lay
	b, err := readBytes(wk.mem, wk.w.Anchors.Mp, uint64(lay.MpSize))
	if err != nil {
		return fmt.Errorf("reading mp_ at %#x: %w", wk.w.Anchors.Mp, err)
	}
	i32 := func(off int64) int32 { return int32(uint32(le(b, off))) }
	opt := func(off int64) uint64 {
		if off < 0 {
			return 0
		}
		return le(b, off)
	}
	p := &wk.w.Params
	p.TrimThreshold, p.TopPad, p.MmapThreshold = le(b, lay.MpTrimThreshold), le(b, lay.MpTopPad), le(b, lay.MpMmapThreshold)
	p.ArenaTest, p.ArenaMax, p.HpPagesize = le(b, lay.MpArenaTest), le(b, lay.MpArenaMax), opt(lay.MpHpPagesize)
	p.NMmaps, p.NMmapsMax, p.MaxNMmaps = i32(lay.MpNMmaps), i32(lay.MpNMmapsMax), i32(lay.MpMaxNMmaps)
	p.NoDynThreshold = i32(lay.MpNoDynThreshold) != 0
	p.MmappedMem, p.MaxMmappedMem, p.SbrkBase = le(b, lay.MpMmappedMem), le(b, lay.MpMaxMmappedMem), le(b, lay.MpSbrkBase)
	p.TcacheBins, p.TcacheMaxBytes = opt(lay.MpTcacheBins), opt(lay.MpTcacheMaxBytes)
	p.TcacheCount, p.TcacheUnsortedLimit = opt(lay.MpTcacheCount), opt(lay.MpTcacheUnsortedLimit)
	p.HeapMax = defaultHeap
	if p.HpPagesize != 0 {
		p.HeapMax = 4 * p.HpPagesize
	}
	return nil
}

// arena mirrors one iteration of __malloc_info's loop, then walks the
// arena's chunks. It returns the next arena in the ring.
func (wk *walker) arena(addr uint64, n int) (uint64, error) {
	lay := wk.lay
	wk.cur = addr
	st, err := readBytes(wk.mem, addr, uint64(lay.StateSize))
	if err != nil {
		return 0, fmt.Errorf("reading arena %d at %#x: %w", n, addr, err)
	}
	wk.index = n
	main := addr == wk.w.Anchors.MainArena
	aw := ArenaWalk{Addr: addr, Main: main, Mutex: uint32(le(st, 0)), Flags: uint32(le(st, lay.StateFlags)), Top: le(st, lay.StateTop)}
	if lay.StateAttached >= 0 {
		aw.AttachedThreads = le(st, lay.StateAttached)
	}
	mi := mallocinfo.Arena{Index: n, HasFast: lay.FastTotals, SystemCurrent: le(st, lay.StateSystemMem), SystemMax: le(st, lay.StateMaxSystemMem)}
	wk.free, wk.fast, wk.badSize = memio.NewAddrSet(), memio.NewAddrSet(), map[uint64]bool{}

	if aw.Top != 0 && wk.rw(aw.Top, 16) {
		if sz, ok := wk.mem.Word(aw.Top + 8); ok {
			aw.TopSize = sz &^ sizeBits
		}
	} else if aw.Top != 0 {
		// malloc_info (2.31+) and malloc_trim (main arena) read its size.
		wk.list = ListTop
		wk.damage(aw.Top, "top chunk pointer is not in writable memory", true)
		wk.list = 0
	}
	if lay.RestIncludesTop {
		mi.RestBytes, mi.RestCount = aw.TopSize, 1
	}
	wk.load(&aw, st)
	wk.prewalkLists(addr, st)

	// Fastbins: buckets of the first chunk's size times the list length.
	var sizes []mallocinfo.SizeClass
	for i := 0; i < lay.NFastbins; i++ {
		p := le(st, lay.StateFastbins+int64(i)*8)
		if p == 0 || wk.skip(-(i + 1)) {
			continue
		}
		wk.list = -(i + 1)
		cnt, sz := wk.fastbin(i, addr+uint64(lay.StateFastbins)+uint64(i)*8, p)
		wk.list = 0
		if cnt == 0 {
			continue
		}
		mi.FastBytes += cnt * sz
		mi.FastCount += cnt
		aw.FastChunks += cnt
		aw.FastBytes += cnt * sz
		sizes = append(sizes, mallocinfo.SizeClass{From: sz - 15, To: sz, Total: cnt * sz, Count: cnt, Fast: true})
	}
	// Bins 1 (unsorted) to 127: raw size fields, flags included.
	for i := 1; i < nbins; i++ {
		if wk.skip(i) {
			continue
		}
		wk.list = i
		sc := wk.bin(addr, st, i, &aw)
		wk.list = 0
		mi.RestCount += sc.Count
		mi.RestBytes += sc.Total
		if sc.Count == 0 {
			continue
		}
		if i == 1 {
			u := sc
			mi.Unsorted = &u
		} else {
			sizes = append(sizes, sc)
		}
	}
	mi.Sizes = sizes

	if main {
		mi.AspaceTotal, mi.AspaceMprotect = mi.SystemCurrent, mi.SystemCurrent
	} else {
		wk.heaps(&aw, &mi)
	}
	if !wk.listsOnly && !wk.noChunks {
		if wk.visitOf != nil {
			wk.visit = wk.visitOf(n)
		}
		if wk.inTurn != nil {
			wk.inTurn(func() { wk.chunks(&aw) })
		} else {
			wk.chunks(&aw)
		}
	}
	wk.trimRanges(&aw, st)
	wk.w.Malloc.Arenas = append(wk.w.Malloc.Arenas, mi)
	wk.w.Arenas = append(wk.w.Arenas, aw)
	wk.mem.Drop()
	return le(st, lay.StateNext), nil
}

// load copies the arena's heaps into the walk's windows before its lists
// are walked (see heapRanges).
func (wk *walker) load(aw *ArenaWalk, st []byte) {
	if !wk.mem.Copies() {
		return
	}
	word := func(addr uint64) (uint64, bool) { return wk.mem.Word(addr) }
	rs := heapRanges(wk.lay, &wk.w.Params, wk.page, aw.Main, st, word, wk.rw)
	wk.mem.Load(aw.Addr, rs)
	wk.parts = nil
	if !wk.mem.Copied() && !memio.Fits(rs) {
		wk.parts, _ = memio.Parts(rs) // too large to copy whole
	}
}

// startAhead has the cache copy the heaps of the arenas of the ring ahead
// of the walk, from its own reads of their states and heaps, and prewalk
// their lists from the copy (prewalk.go): the walker takes both when it
// reaches an arena whose heaps it works out to be the same ranges.
func (wk *walker) startAhead(a Anchors) {
	lay, p, mem, page := wk.lay, wk.w.Params, wk.mem.Memory(), wk.page
	ms := newRWSpans(wk.ms)
	word := func(addr uint64) (uint64, bool) {
		v, err := readWord(mem, addr)
		return v, err == nil
	}
	rw := func(addr, n uint64) bool {
		end, ok := ms.find(addr)
		return ok && n <= end-addr
	}
	var st []byte // the state of the arena last worked out, for its prewalk
	ranges := func(ar uint64) ([]maps.Range, bool) {
		var err error
		if st, err = readBytes(mem, ar, uint64(lay.StateSize)); err != nil {
			return nil, false
		}
		return heapRanges(lay, &p, page, ar == a.MainArena, st, word, rw), true
	}
	prewalkCopy := func(ar uint64, spans []memio.Window, extra *any) {
		pw, _ := (*extra).(*prewalk)
		if pw == nil {
			pw = &prewalk{}
			*extra = pw
		}
		pw.fill(lay, ar, st, spans)
	}
	wk.mem.StartAhead(ArenaRing(mem, lay, a), ranges, prewalkCopy)
}

// heapRanges are the heaps of the arena whose state is st, when they can
// be found without reporting anything: the main arena's one run from
// sbrk_base, a thread arena's heaps from the top one back through prev,
// each up to its top chunk's header, in the target's pages (page: brk and
// a heap's mprotect'ed part grow by whole ones, sysmalloc and grow_heap in
// malloc/malloc.c and arena.c). Anything odd (the walk proper reports it)
// ends the list; the rest is read through the block cache.
func heapRanges(lay layouts.Layout, p *Params, page uint64, main bool, st []byte, word func(uint64) (uint64, bool), rw func(addr, n uint64) bool) []maps.Range {
	if page == 0 {
		page = pageSz
	}
	top, flags := le(st, lay.StateTop), le(st, lay.StateFlags)
	topEnd := (top + 16 + page - 1) &^ (page - 1) // the top chunk's header
	var rs []maps.Range
	if main {
		start := p.SbrkBase &^ (page - 1)
		if flags&2 == 0 && start < top && rw(start, topEnd-start) {
			rs = append(rs, maps.Range{Start: start, End: topEnd})
		}
		return rs
	}
	hmax := p.HeapMax
	h := top &^ (hmax - 1)
	for n := 0; h != 0 && n < 64; n++ {
		size, ok := word(h + 0x10)
		prev, ok2 := word(h + 8)
		if !ok || !ok2 || size > hmax || size < page || !rw(h, size) {
			break
		}
		end := (h + size + page - 1) &^ (page - 1)
		if n == 0 {
			if top < h || top >= h+size {
				break
			}
			end = min(end, topEnd)
		}
		rs = append(rs, maps.Range{Start: h, End: end})
		h = prev
	}
	return rs
}

// lists is the prewalk of the arena being walked: the loader's, or the
// walker's own.
func (wk *walker) lists() *prewalk {
	if p, _ := wk.mem.Prepared().(*prewalk); p != nil {
		return p
	}
	return &wk.pre
}

// fastbin counts the fastbin list whose head, at slot, was p, as
// malloc_info does: the first chunk's size and the list's length.
// Safe-linking is undone with the address of each fd field; a misaligned
// pointer is where glibc 2.32+ aborts (before, it follows it). A bad link
// is reported at the chunk that holds it, once it is known not to be torn.
func (wk *walker) fastbin(k int, slot, p uint64) (count, size uint64) {
	list := chain{head: slot, mangled: wk.lay.SafeLinking}
	l, ok := wk.lists().at(k, 0, p)
	sz := l.size
	if !ok {
		sz, ok = wk.mem.Word(p + 8)
	}
	if !ok || !wk.rw(p, 32) || p%16 != 0 {
		// malloc_info checks the head's alignment (2.32+) or reads its size.
		if wk.genuine(list, slot, p, 0) {
			wk.damage(p, "fastbin head is misaligned or not in writable memory", true)
		}
		return 0, 0
	}
	size = sz &^ sizeBits
	seen := wk.metBefore(wk.fast)
	for prev := slot; p != 0; count++ {
		again := seen(p)
		if p%16 != 0 || again || !wk.rw(p, 32) {
			what := "unaligned fastbin chunk (glibc aborts on this)"
			switch {
			case again:
				what = "fastbin list loops"
			case p%16 == 0:
				what = "fastbin chunk is not in writable memory"
			}
			if again && wk.loops(list, int(count)+1) || !again && wk.genuine(list, prev, p, int(count)) {
				wk.damage(prev, fmt.Sprintf("%s: its fd leads to %#x", what, p), true)
			}
			break
		}
		wk.path = append(wk.path, p)
		wk.fast.Add(p)
		prev, p = p, wk.fastFd(k, int(count), p)
	}
	return count, size
}

// metBefore starts the walk of one list, whose every chunk the walk adds to
// all (and to wk.path) as it goes; the function it returns says whether a
// chunk was met before in this list. A chunk not in all was not: the
// common case costs a bitmap test, and the list's own set is built only
// once some chunk is met again in the arena (a loop, or lists that cross).
func (wk *walker) metBefore(all *memio.AddrSet) func(uint64) bool {
	wk.path = wk.path[:0]
	var here map[uint64]bool
	return func(p uint64) bool {
		if here == nil {
			if !all.Has(p) {
				return false
			}
			here = make(map[uint64]bool, len(wk.path))
		}
		for _, q := range wk.path[len(here):] {
			here[q] = true
		}
		return here[p]
	}
}

// fastFd is the link out of p, link n of fastbin k.
func (wk *walker) fastFd(k, n int, p uint64) uint64 {
	l, pre := wk.lists().at(k, n, p)
	fd := l.fd
	if !pre {
		fd, _ = wk.mem.Word(p + 16)
	}
	if wk.lay.SafeLinking {
		fd ^= (p + 16) >> 12
	}
	return fd
}

// chain is a free list as it is in memory: the address of the word holding
// its first element, the value that ends it, and whether its links are
// mangled (safe-linking of fastbins).
type chain struct {
	head, end uint64
	mangled   bool
}

// genuine decides whether a link found bad is in the list or torn: a walk
// of a running process reads lists that other threads change meanwhile,
// and a chunk allocated and written to after the walk read its address
// yields garbage that was never in any list. It reads the list again from
// memory, not the cache, from its head up to holder (the chunk whose fd
// was followed, or the head's own address) within steps links, and says
// whether holder is still there and still links to bad. A stopped process
// always passes; a running one passes for damage that stays.
func (wk *walker) genuine(l chain, holder, bad uint64, steps int) bool {
	p := l.head
	for n := 0; n <= steps; n++ {
		next, ok := wk.freshLink(l, p)
		if !ok {
			return false
		}
		if p == holder {
			return next == bad
		}
		if next == l.end || next%16 != 0 || !wk.rw(next, 32) {
			return false
		}
		p = next
	}
	return false
}

// loops is genuine for a loop: the list read again from memory meets a
// chunk twice within steps links, where a walk of a running process may
// meet one twice because it moved further down the list meanwhile.
func (wk *walker) loops(l chain, steps int) bool {
	seen := map[uint64]bool{}
	p := l.head
	for n := 0; n <= steps; n++ {
		next, ok := wk.freshLink(l, p)
		if !ok || next == l.end || next%16 != 0 || !wk.rw(next, 32) {
			return false
		}
		if seen[next] {
			return true
		}
		seen[next] = true
		p = next
	}
	return false
}

// freshLink reads the link out of p (the list's head, or a chunk) from
// memory, bypassing the cache.
func (wk *walker) freshLink(l chain, p uint64) (uint64, bool) {
	addr := p + 16
	if p == l.head {
		addr = l.head
	}
	v, err := readWord(wk.mem.Memory(), addr)
	if err == nil && l.mangled && p != l.head {
		v ^= (p + 16) >> 12
	}
	return v, err == nil
}

// bin walks bin i from its header through fd, as malloc_info does. glibc's
// walk has no bound: a list that does not return to its header makes it
// spin forever (Hang), a wild pointer makes it fault (Abort). A size that
// does not fit the chunk's heap is counted as glibc counts it, but is
// Abort too: malloc_trim would madvise that many bytes past the chunk
// (unsorted and large bins), or abort consolidating a neighbour into it.
func (wk *walker) bin(ar uint64, st []byte, i int, aw *ArenaWalk) mallocinfo.SizeClass {
	off := wk.lay.StateBins + int64(i-1)*16
	head := ar + uint64(off) - 16
	list := chain{head: ar + uint64(off), end: head}
	k := wk.listIndex(i)
	r := le(st, off)
	var sc mallocinfo.SizeClass
	if r == 0 {
		return sc
	}
	sc.From = ^uint64(0)
	// A chunk met twice in this list is a loop; one met before in another
	// bin is followed on: if the lists really cross, the walk comes round
	// to it again through that bin's head.
	seen := wk.metBefore(wk.free)
	for n, prev := 0, list.head; r != head; n++ {
		if n == maxListLen || seen(r) {
			if wk.loops(list, n+1) {
				wk.w.Damage = append(wk.w.Damage, Damage{Arena: wk.cur, Addr: r, What: fmt.Sprintf("bin %d loops without returning to its head (glibc's walk never ends)", i), Hang: true, List: wk.list})
			}
			break
		}
		if r%16 != 0 || !wk.rw(r, 32) {
			if wk.genuine(list, prev, r, n) {
				wk.damage(r, fmt.Sprintf("bin %d holds a chunk pointer outside writable memory or misaligned", i), true)
			}
			break
		}
		l, pre := wk.lists().at(k, n, r)
		if !pre {
			l.size, _ = wk.mem.Word(r + 8)
		}
		raw := l.size
		sz := raw &^ sizeBits
		if sz < minChunk || !wk.rw(r, sz) {
			if now, err := readWord(wk.mem.Memory(), r+8); err != nil || now != raw || !wk.genuine(list, prev, r, n) {
				break // read from a page that changed since, or r was never in the list
			}
			wk.badSize[r] = true
			why := "malloc_trim aborts if it consolidates a neighbour into it"
			if i == 1 || i >= largebinIndex(pageSz) {
				why = "malloc_trim would madvise the memory past it"
			}
			wk.damage(r, fmt.Sprintf("bin %d holds a chunk whose size %#x runs outside its heap (%s)", i, raw, why), true)
		} else {
			aw.FreeChunks++
			aw.FreeBytes += sz
			aw.LargestFree = max(aw.LargestFree, sz)
		}
		wk.free.Add(r)
		wk.path = append(wk.path, r)
		sc.Count++
		sc.Total += raw
		sc.From = min(sc.From, raw)
		sc.To = max(sc.To, raw)
		prev = r
		if !pre {
			l.fd, _ = wk.mem.Word(r + 16)
		}
		r = l.fd
	}
	if sc.Count == 0 {
		sc.From = 0
	}
	return sc
}

// heaps follows a thread arena's heaps from the top one back through prev.
// Before 2.27 malloc_info reported the top heap alone.
func (wk *walker) heaps(aw *ArenaWalk, mi *mallocinfo.Arena) {
	wk.list = ListHeaps
	defer func() { wk.list = 0 }()
	h := aw.Top &^ (wk.w.Params.HeapMax - 1)
	seen := map[uint64]bool{}
	for h != 0 {
		if seen[h] || len(seen) == maxArenas*64 || !wk.rw(h, 32) {
			// From 2.27 malloc_info follows the whole chain; before, it
			// reads the top heap only.
			followed := wk.lay.AllSubheaps || len(seen) == 0
			wk.w.Damage = append(wk.w.Damage, Damage{Arena: wk.cur, Addr: h, What: "heap_info chain is broken",
				Hang: followed && seen[h], Abort: followed && !seen[h] && !wk.rw(h, 32), List: ListHeaps})
			break
		}
		seen[h] = true
		b, err := readBytes(wk.mem, h, 32)
		if err != nil {
			wk.damage(h, "heap_info is unreadable", false)
			break
		}
		hs := HeapSpan{Addr: h, Size: le(b, 0x10), MprotectSize: le(b, 0x18)}
		if le(b, 0) != aw.Addr {
			wk.damage(h, fmt.Sprintf("heap_info.ar_ptr is %#x, not its arena", le(b, 0)), false)
		}
		aw.Heaps = append(aw.Heaps, hs)
		if wk.lay.AllSubheaps || len(aw.Heaps) == 1 {
			mi.AspaceTotal += hs.Size
			mi.AspaceMprotect += hs.MprotectSize
		}
		h = le(b, 8)
	}
	if wk.lay.AllSubheaps {
		mi.Subheaps, mi.HasSubheaps = uint64(len(aw.Heaps)), true
	}
}

// chunks walks every chunk of the arena's heaps and sorts them into free
// (in a bin, a fastbin or a tcache) and in use.
func (wk *walker) chunks(aw *ArenaWalk) {
	type span struct{ start, end uint64 }
	var spans []span
	if aw.Main {
		if aw.Flags&2 != 0 {
			return // non-contiguous: the main arena's memory is not one run we can walk
		}
		spans = append(spans, span{(wk.w.Params.SbrkBase + 15) &^ 15, aw.Top})
	} else {
		for i, h := range aw.Heaps {
			start := h.Addr + uint64(wk.lay.HeapInfoSize)
			if i == len(aw.Heaps)-1 { // the first heap also holds the arena struct
				start = h.Addr + uint64(wk.lay.FirstChunk())
			}
			end := h.Addr + h.Size
			if i == 0 {
				end = aw.Top
			}
			spans = append(spans, span{start, end})
		}
	}
spans:
	for _, s := range spans {
		if s.start > s.end || !wk.rw(s.start, 16) {
			wk.damage(s.start, "heap start is not in writable memory", false)
			return
		}
		if wk.segmentable(s.start, s.end) {
			switch wk.chunksInSegments(aw, s.start, s.end) {
			case segBad:
				return
			default:
				continue spans
			}
		}
		warm := ^uint64(0)
		// The headers straight from the copy that holds them (an arena
		// too large to copy whole is copied a part at a time, as the walk
		// reaches it), and the sets' bitmaps of the region at hand: the
		// same answers as word and has, without a lookup per chunk.
		var wb []byte
		var wbase uint64
		var holed *memio.Window // wb's window when some of its pages were not copied
		copied := wk.mem.Copied() || wk.parts != nil
		region := ^uint64(0)
		var freeB, fastB, cachedB []uint64
		for p := s.start; p < s.end; {
			off := p + 8 - wbase
			if copied && (wb == nil || off >= uint64(len(wb)) || off+8 > uint64(len(wb))) {
				wb, holed = nil, nil
				w := wk.mem.Span(p+8, 8)
				if w == nil && wk.parts != nil {
					w = wk.mem.LoadPart(wk.parts, p+8)
				}
				if w != nil {
					wb, wbase = w.B, w.Start
					off = p + 8 - wbase
					if !w.Complete() {
						holed = w
					}
				}
			}
			if b := (p + 8) &^ (wk.mem.BlockSize() - 1); b != warm {
				wk.mem.Warm(b)
				warm = b
			}
			var raw uint64
			ok := true
			// A copy with holes (pages a trim gave back, which the copy
			// skips) still holds every other chunk's header: only a header
			// in a hole is read from memory. Before, such a copy was left
			// for the memory at every chunk, 0.5 M reads of the 1 GiB
			// benchmark heap, trimmed.
			if wb != nil && (holed == nil || !holed.Hole(off)) {
				raw = binary.LittleEndian.Uint64(wb[off:])
			} else {
				raw, ok = wk.mem.Word(p + 8)
			}
			sz := raw &^ sizeBits
			if !ok || sz%16 != 0 || p+sz > s.end {
				if !wk.badSize[p] { // else reported by the bin walk
					wk.damage(p, fmt.Sprintf("chunk size %#x does not fit the heap", raw), false)
				}
				return
			}
			if sz < 32 { // a fencepost closing an old heap
				break
			}
			if r := p / memio.RegionSize; r != region {
				region, freeB, fastB, cachedB = r, wk.free.Region(p), wk.fast.Region(p), wk.tcached.Region(p)
			}
			g := p % memio.RegionSize / 16
			i, bit := g/64, uint64(1)<<(g%64)
			aligned := p%16 == 0 // else only the sets' maps of odd addresses can hold it
			state := ChunkInUse
			switch {
			case aligned && freeB != nil && freeB[i]&bit != 0, !aligned && wk.free.Has(p):
				state = ChunkFree
			case aligned && fastB != nil && fastB[i]&bit != 0, !aligned && wk.fast.Has(p):
				state = ChunkFast
			case aligned && cachedB != nil && cachedB[i]&bit != 0, !aligned && wk.tcached.Has(p):
				state = ChunkTcache
				aw.TcacheChunks++
				aw.TcacheBytes += sz
				aw.InUseChunks++
				aw.InUseBytes += sz
			default:
				aw.InUseChunks++
				aw.InUseBytes += sz
			}
			if wk.visit != nil {
				wk.visit(Chunk{Addr: p, Size: sz, Arena: wk.index, State: state})
			}
			p += sz
		}
	}
	if wk.visit != nil && aw.Top != 0 && aw.TopSize != 0 {
		wk.visit(Chunk{Addr: aw.Top, Size: aw.TopSize, Arena: wk.index, State: ChunkTop})
	}
	aw.Walked = true
}

// trimRanges predicts malloc_trim's madvise calls on this arena (mtrim in
// malloc/malloc.c): whole pages inside the unsorted bin and the bins
// that can hold at least a page, past the 48 bytes of the chunk header and
// links; for the main arena also the top chunk above pad (systrim); in
// pages of the target's size (trimPage). Fastbin
// consolidation, which malloc_trim does first, is not modelled.
func (wk *walker) trimRanges(aw *ArenaWalk, st []byte) {
	const hdr = 48 // sizeof(struct malloc_chunk): header and the links it keeps
	ps := wk.page
	if ps == 0 {
		ps = pageSz
	}
	psindex := largebinIndex(ps)
	for i := 1; i < nbins; i++ {
		if i != 1 && i < psindex {
			continue
		}
		off := wk.lay.StateBins + int64(i-1)*16
		head := aw.Addr + uint64(off) - 16
		r := le(st, off)
		seen := map[uint64]bool{}
		// The list's links as the prewalk recorded them, where it did: a
		// list in no order of address (after a trim) costs a read a link
		// otherwise, 0.5 M reads of the 1 GiB benchmark heap.
		k, pw := wk.listIndex(i), wk.lists()
		for n := 0; r != 0 && r != head && wk.free.Has(r) && !seen[r]; n++ { // else damaged, and reported
			seen[r] = true
			l, pre := pw.at(k, n, r)
			if !pre {
				l.size, _ = wk.mem.Word(r + 8)
				l.fd, _ = wk.mem.Word(r + 16)
			}
			raw := l.size
			size := raw &^ sizeBits
			if size > ps-1+hdr && !wk.badSize[r] {
				paligned := (r + hdr + ps - 1) &^ (ps - 1)
				if rest := size - (paligned - r); paligned-r < size && rest > ps-1 {
					aw.TrimRanges = append(aw.TrimRanges, maps.Range{Start: paligned, End: paligned + rest&^(ps-1)})
				}
			}
			r = l.fd
		}
	}
	if aw.Main && aw.TopSize > minChunk+1 {
		// systrim with pad 0: everything above MINSIZE+1 bytes of top, in pages.
		extra := (aw.TopSize - minChunk - 1) &^ (ps - 1)
		end := aw.Top + aw.TopSize
		if extra > 0 {
			aw.TrimRanges = append(aw.TrimRanges, maps.Range{Start: end - extra, End: end})
		}
	}
	sort.Slice(aw.TrimRanges, func(i, j int) bool { return aw.TrimRanges[i].Start < aw.TrimRanges[j].Start })
}

// trimPage is the target's page size, GLRO(dl_pagesize), which malloc_trim
// rounds to (mtrim and systrim, malloc/malloc.c) and an mmapped chunk's
// region and a heap's size are multiples of: where mem says it (a core's
// or a live process's AT_PAGESZ: 16 or 64 KiB on some aarch64 kernels),
// else 4 KiB.
func trimPage(mem Memory) uint64 {
	if p, ok := mem.(interface{ PageSize() uint64 }); ok {
		switch ps := p.PageSize(); ps {
		case 4096, 16384, 65536:
			return ps
		}
	}
	return pageSz
}

// largebinIndex is glibc's bin_index for x86_64.
func largebinIndex(sz uint64) int {
	switch {
	case sz < 1024:
		return int(sz >> 4)
	case sz>>6 <= 48:
		return 48 + int(sz>>6)
	case sz>>9 <= 20:
		return 91 + int(sz>>9)
	case sz>>12 <= 10:
		return 110 + int(sz>>12)
	case sz>>15 <= 4:
		return 119 + int(sz>>15)
	case sz>>18 <= 2:
		return 124 + int(sz>>18)
	}
	return 126
}

// mmapped finds the chunks glibc mmapped of their own (ScanMmapped), in
// every mapping that may hold one. It reads the target itself, not the
// block cache: 16 bytes a page, where a block would copy all of it.
//
// It stops once it has found as many as malloc counts, of as many bytes
// (mp_.n_mmaps, mp_.mmapped_mem), the smaller mappings first: every page of
// a buffer pool is read only when a chunk is still missing (one merged
// with it). A page costs about 2 µs on a copy-on-write image, half a
// second per GiB, and a walk with every thread stopped must not take that
// for memory that holds no chunk. Both counters must agree, so that a
// header the program forged does not end the search before a real chunk.
func (wk *walker) mmapped() {
	if wk.visitOf != nil {
		wk.visit = wk.visitOf(-1)
	}
	mc := &wk.w.Mmapped
	mc.Sizes = map[uint64]uint64{}
	want, wantBytes := uint64(uint32(wk.w.Params.NMmaps)), wk.w.Params.MmappedMem
	done := func() bool { return mc.Count >= want && mc.Bytes == wantBytes }
	if wk.lay.MmapTail > 0 {
		// 2.43's mremap_chunk adds 16 bytes too many to mp_.mmapped_mem at
		// every call (new_size - size - offset, its size short of the
		// tail), and they stay: its count is all there is to go by.
		done = func() bool { return mc.Count >= want && mc.Bytes <= wantBytes }
	}
	var cand []maps.Mapping
	for _, m := range wk.ms {
		if MayHoldMmapped(m) {
			cand = append(cand, m)
		}
	}
	sort.SliceStable(cand, func(i, j int) bool { return cand[i].Size() < cand[j].Size() })
	for _, m := range cand {
		if done() {
			break
		}
		ScanMmapped(wk.mem.Memory(), wk.lay, m, 0, func(c MmappedChunk) bool {
			mc.Count++
			r := c.Region()
			mc.Bytes += r.End - r.Start // as mp_.mmapped_mem counts it
			mc.Sizes[c.Size]++
			mc.Regions = append(mc.Regions, r)
			if wk.visit != nil {
				wk.visit(c.Chunk)
			}
			return !done()
		})
	}
}

// Trimmable is how many bytes malloc_trim would madvise or give back in
// this arena, resident or not.
func (a *ArenaWalk) Trimmable() uint64 {
	var n uint64
	for _, r := range a.TrimRanges {
		n += r.End - r.Start
	}
	return n
}

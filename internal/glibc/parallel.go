package glibc

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"math/bits"

	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/workers"
)

// Arenas are independent: each has its own lists, its own heaps and its
// own lock (malloc/arena.c: a thread arena's heaps are its alone; the main
// arena's are sbrk's), and the walk of one reads nothing another's walk
// decides. So with more than one worker (internal/workers) each arena is
// walked by a walker of its own, with its own cache and copy of the heaps,
// and the results are put together in ring order: the same Walk, to the
// byte, as one walker going round the ring.
//
// The ring itself is read first, alone, with the checks the serial walk
// makes on it (a next pointer that leaves writable memory, a ring that does
// not come back to main_arena): which arenas there are is what the pieces
// of work are.

// sharedReader is memory whose ReadAt may be called from several
// goroutines at once, but that is not worth copying ahead of a single
// walker (memio.ParallelReader): a core, already in this process's memory, or a
// snapshot's recorder of reads.
type sharedReader interface {
	ReadsShared()
}

// parallel reports whether this walk may spread its arenas (and the long
// heaps' chunks) over workers: more than one asked for, and memory that
// may be read from several threads at once (memio.ParallelReader,
// sharedReader). A visitor is handed the chunks in address order within
// each heap and in ring order across arenas (the chunk index and the
// reachability scan build on that order): the arenas' chunk walks then
// take turns, in ring order, while their copies and lists are made at once.
func (wk *walker) parallel() bool {
	if workers.Resolve(wk.jobs) <= 1 || wk.only != nil {
		return false
	}
	_, par := wk.mem.Memory().(memio.ParallelReader)
	_, shared := wk.mem.Memory().(sharedReader)
	return par || shared
}

// ring reads the arena ring from main_arena as the serial walk goes round
// it: the arenas in order, and the damage that ends it early (nil when it
// returns to main_arena), which the serial walk reports after the last
// arena walked.
func (wk *walker) ring(a Anchors) ([]uint64, *Damage, error) {
	lay := wk.lay
	seen := map[uint64]bool{}
	var ring []uint64
	var last uint64 // the arena walked last: the serial walk's wk.cur
	ar := a.MainArena
	for n := 0; ; n++ {
		if n == maxArenas || seen[ar] {
			return ring, &Damage{Arena: last, Addr: ar, What: "the arena ring does not return to main_arena", Hang: seen[ar], Ring: true}, nil
		}
		seen[ar] = true
		// Straight from memory: the arena's walker reads its state again
		// through its own cache.
		st, err := readBytes(wk.mem.Memory(), ar, uint64(lay.StateSize))
		if err != nil {
			return nil, nil, fmt.Errorf("reading arena %d at %#x: %w", n, ar, err)
		}
		ring = append(ring, ar)
		last = ar
		next := le(st, lay.StateNext)
		if next == a.MainArena {
			return ring, nil, nil
		}
		if !wk.rw(next, uint64(lay.StateSize)) {
			return ring, &Damage{Arena: ar, Addr: ar, What: fmt.Sprintf("next arena pointer %#x is not in writable memory", next), Abort: true, Ring: true}, nil
		}
		ar = next
	}
}

// arenasParallel walks the arenas of the ring on up to wk.jobs workers,
// each arena by one worker's walker, and puts what they found into wk.w in
// ring order.
func (wk *walker) arenasParallel(a Anchors) error {
	ring, end, err := wk.ring(a)
	if err != nil {
		return err
	}
	type result struct {
		aw  ArenaWalk
		mi  mallocinfo.Arena
		dmg []Damage
	}
	out := make([]result, len(ring))
	all := workers.Resolve(wk.jobs)
	jobs := min(all, len(ring))
	// One walker per worker, taken for an arena and given back after it,
	// so that the copies' buffers are mapped once per worker, not once per
	// arena.
	idle := make(chan *walker, jobs)
	for range jobs {
		sub := wk.fork()
		sub.mem.SetKeep(max(memio.KeepBlocks()/jobs, 16))
		// Fewer arenas than workers: the others walk the long heaps in
		// segments.
		sub.segJobs = all / jobs
		idle <- sub
	}
	defer func() {
		close(idle)
		for sub := range idle {
			sub.mem.Close()
		}
	}()
	// turns[i] is closed once arena i may hand its chunks to the visitor:
	// when every arena before it has, or has failed. Arenas are handed to
	// the workers in ring order, so the one whose turn it is always runs.
	turns := make([]chan struct{}, len(ring)+1)
	for i := range turns {
		turns[i] = make(chan struct{})
	}
	close(turns[0])
	err = workers.Run(context.Background(), jobs, len(ring), func(i int) error {
		sub := <-idle
		defer func() { idle <- sub }()
		defer close(turns[i+1])
		if wk.visit != nil && wk.visitOf == nil {
			sub.inTurn = func(walk func()) {
				<-turns[i]
				walk()
			}
		}
		sub.w = &Walk{Layout: wk.lay, Anchors: a, Params: wk.w.Params, Malloc: &mallocinfo.Info{HasFast: wk.w.Malloc.HasFast, HasMmap: wk.w.Malloc.HasMmap}, Exact: wk.w.Exact}
		if _, err := sub.arena(ring[i], i); err != nil {
			return err
		}
		out[i] = result{aw: sub.w.Arenas[0], mi: sub.w.Malloc.Arenas[0], dmg: sub.w.Damage}
		return nil
	})
	if err != nil {
		return err
	}
	w := wk.w
	for _, r := range out {
		w.Damage = append(w.Damage, r.dmg...)
		w.Malloc.Arenas = append(w.Malloc.Arenas, r.mi)
		w.Arenas = append(w.Arenas, r.aw)
	}
	if end != nil {
		w.Damage = append(w.Damage, *end)
	}
	if len(ring) > 0 {
		wk.cur = ring[len(ring)-1]
	}
	return nil
}

// fork is a walker like wk for one worker: the same target, layout and
// kind of walk, with a cache, copies and sets of its own.
func (wk *walker) fork() *walker {
	return &walker{mem: wk.mem.Fork(), page: wk.page, lay: wk.lay, ms: wk.ms, tcached: wk.tcached.Reader(), listsOnly: wk.listsOnly, noChunks: wk.noChunks, visit: wk.visit, visitOf: wk.visitOf, jobs: 1}
}

// A long heap (the main arena's, or a thread arena's heap of up to
// HEAP_MAX_SIZE) is one chain of chunks, each header saying where the
// next one is: walked from its start, it is one worker's work however many
// there are. But the walk of the lists has already met chunk starts all
// over it: every chunk in a bin or a fastbin is one (malloc/malloc.c
// links only chunk headers into them). So a long heap is cut at free
// chunks into segments that workers walk at once, each from its cut to the
// next, and the segments are joined in address order: a segment counts
// only if the one before it arrived exactly at its start (a free-list
// pointer can be damage, not a chunk), and where one did not, the walk
// goes on from where that one stopped to the end of the heap alone, as the
// serial walk would. A size that does not fit, or a fencepost, ends the
// heap's walk where the serial walk would end it.

// segMin is about the shortest segment: a heap is walked in segments when
// it holds two at least (a thread arena's heap of 64 MiB holds four).
// Shorter, a worker's start would cost more than it saves.
var segMin uint64 = 16 << 20 // a variable for tests only

// segBlock is how much of a segment is read at a time.
const segBlock = 1 << 20

// segStop is how a segment's walk ended.
type segStop uint8

const (
	segJoined segStop = iota // at its end, exactly: the next segment's start
	segPast                  // past its end: its end was not a chunk of this chain
	segBad                   // at a chunk whose size does not fit the heap (or that cannot be read)
	segFence                 // at a fencepost, which ends the heap's chunks
)

// segRun is what the walk of one segment found.
type segRun struct {
	inUse, inUseBytes   uint64
	cached, cachedBytes uint64 // of them, in a thread's tcache
	end                 uint64 // where it stopped
	stop                segStop
	raw                 uint64 // the size word at end, when segBad
}

// segmentable reports whether the heap [start, end) is walked in segments.
func (wk *walker) segmentable(start, end uint64) bool {
	return wk.segJobs > 1 && wk.visit == nil && end > start && end-start >= 2*segMin
}

// chunksInSegments walks the chunks of [start, end) in segments, adds what
// it found to aw and reports damage as chunks' serial walk would. It
// returns segBad when the arena's chunk walk ends there (damage), else how
// the heap's walk ended.
func (wk *walker) chunksInSegments(aw *ArenaWalk, start, end uint64) segStop {
	cuts := wk.cuts(start, end, int(min((end-start)/segMin, uint64(4*wk.segJobs))))
	runs := make([]segRun, len(cuts)-1)
	walk := func(from, until uint64) segRun {
		return walkSegment(wk.mem.Memory(), wk.free.Reader(), wk.fast.Reader(), wk.tcached.Reader(), end, from, until)
	}
	_ = workers.Run(context.Background(), wk.segJobs, len(runs), func(i int) error {
		runs[i] = walk(cuts[i], cuts[i+1])
		return nil
	})
	for i := 0; i < len(runs); i++ {
		r := runs[i]
		if r.stop == segPast {
			// The next cut is not where this chain goes: on alone from
			// here to the end of the heap, the later segments unused.
			rest := walk(r.end, end)
			r.inUse += rest.inUse
			r.inUseBytes += rest.inUseBytes
			r.cached += rest.cached
			r.cachedBytes += rest.cachedBytes
			r.end, r.stop, r.raw = rest.end, rest.stop, rest.raw
			i = len(runs)
		}
		aw.InUseChunks += r.inUse
		aw.InUseBytes += r.inUseBytes
		aw.TcacheChunks += r.cached
		aw.TcacheBytes += r.cachedBytes
		switch r.stop {
		case segBad:
			if !wk.badSize[r.end] { // else reported by the bin walk
				wk.damage(r.end, fmt.Sprintf("chunk size %#x does not fit the heap", r.raw), false)
			}
			return segBad
		case segFence:
			return segFence
		}
	}
	return segJoined
}

// cuts returns start, then up to n-1 chunk starts known from the free
// lists (a free or fastbin chunk), about evenly spread over [start, end),
// in increasing order, then end.
func (wk *walker) cuts(start, end uint64, n int) []uint64 {
	out := []uint64{start}
	free, fast := wk.free.Reader(), wk.fast.Reader()
	for k := 1; k < n; k++ {
		at := start + (end-start)/uint64(n)*uint64(k)
		at = max(at&^15, out[len(out)-1]+16)
		if c, ok := nextMember(at, end, free, fast); ok {
			out = append(out, c)
		}
	}
	return append(out, end)
}

// nextMember is the lowest 16-aligned address in [at, end) (at aligned)
// that is in one of the sets.
func nextMember(at, end uint64, sets ...*memio.AddrSet) (uint64, bool) {
	for at < end {
		reg := at / memio.RegionSize
		regEnd := min((reg+1)*memio.RegionSize, end)
		best := regEnd
		for _, s := range sets {
			b := s.Region(at)
			if b == nil {
				continue
			}
			for g := at % memio.RegionSize / 16; g < (regEnd-reg*memio.RegionSize+15)/16; {
				w := b[g/64] >> (g % 64)
				if w == 0 {
					g = (g/64 + 1) * 64
					continue
				}
				g += uint64(bits.TrailingZeros64(w))
				if a := reg*memio.RegionSize + g*16; a < best {
					best = a
				}
				break
			}
		}
		if best < regEnd {
			return best, true
		}
		at = regEnd
	}
	return 0, false
}

// walkSegment walks the chunks from the one at from until one at or past
// until, in the heap that ends at end, reading mem a block at a time into
// a buffer of its own: the same checks and the same classes as chunks'
// serial loop.
func walkSegment(mem Memory, free, fast, cached *memio.AddrSet, end, from, until uint64) segRun {
	var r segRun
	buf := make([]byte, segBlock)
	var bstart, blen uint64
	word := func(a uint64) (uint64, bool) {
		if a >= bstart && a+8 <= bstart+blen {
			return binary.LittleEndian.Uint64(buf[a-bstart:]), true
		}
		bstart = a &^ (pageSz - 1)
		blen = min(segBlock, end-bstart) // a chunk's header lies below the heap's end
		if n, err := mem.ReadAt(buf[:blen], bstart); err == nil && uint64(n) == blen && a+8 <= bstart+blen {
			return binary.LittleEndian.Uint64(buf[a-bstart:]), true
		}
		blen = 0
		v, err := readWord(mem, a)
		return v, err == nil
	}
	region := ^uint64(0)
	var freeB, fastB, cachedB []uint64
	p := from
	for p < until {
		raw, ok := word(p + 8)
		sz := raw &^ sizeBits
		if !ok || sz%16 != 0 || p+sz > end {
			r.end, r.stop, r.raw = p, segBad, raw
			return r
		}
		if sz < 32 {
			r.end, r.stop = p, segFence
			return r
		}
		if reg := p / memio.RegionSize; reg != region {
			region, freeB, fastB, cachedB = reg, free.Region(p), fast.Region(p), cached.Region(p)
		}
		g := p % memio.RegionSize / 16
		i, bit := g/64, uint64(1)<<(g%64)
		aligned := p%16 == 0
		switch {
		case aligned && freeB != nil && freeB[i]&bit != 0, !aligned && free.Has(p):
		case aligned && fastB != nil && fastB[i]&bit != 0, !aligned && fast.Has(p):
		case aligned && cachedB != nil && cachedB[i]&bit != 0, !aligned && cached.Has(p):
			r.cached++
			r.cachedBytes += sz
			r.inUse++
			r.inUseBytes += sz
		default:
			r.inUse++
			r.inUseBytes += sz
		}
		p += sz
	}
	r.end = p
	if p != until {
		r.stop = segPast
	}
	return r
}

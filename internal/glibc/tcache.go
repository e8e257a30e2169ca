package glibc

import (
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"github.com/arenactl/arenactl/internal/maps"

	"fmt"
	"sort"
)

// ThreadCache is one thread's tcache and the arena it allocates from.
type ThreadCache struct {
	Tid    int
	Addr   uint64 // its tcache_perthread_struct; 0 when the thread has none yet
	Arena  uint64 // thread_arena; 0 when the thread never allocated
	Chunks uint64
	Bytes  uint64
	Bins   []TcacheBin // non-empty bins only
}

// TcacheBin is one size class of a tcache.
type TcacheBin struct {
	Size, Count uint64
}

// Tcaches finds every thread's tcache and arena without symbols. The
// candidate thread-pointer offsets of libc's TLS variables come from
// libc.Libc.TLSOffsets; for each, the value every thread holds there is read. The
// offset whose values point just past a chunk of the size of a
// tcache_perthread_struct is tcache; the one whose values are arenas is
// thread_arena (static __thread variables of malloc/malloc.c and
// malloc/arena.c, reached through libc's initial-exec TLS). It returns the
// caches and the set of chunk addresses they hold, for the chunk walk to
// count as cached.
func Tcaches(l *libc.Libc, lay layouts.Layout, mem Memory, threads []debuggee.Thread, arenas []uint64) ([]ThreadCache, map[uint64]bool, []Damage) {
	caches, cached, dmg, _ := tcaches(l, lay, mem, threads, arenas)
	return caches, cached, dmg
}

// TLSSlots are the thread-pointer offsets (two's complement: below it) of
// libc's tcache and thread_arena variables, as the tcache search settled on
// them. A snapshot records them (Record), so that a reader of the snapshot
// needs no libc file to find every thread's tcache.
type TLSSlots struct {
	Tcache, Arena       uint64
	HasTcache, HasArena bool
}

func tcaches(l *libc.Libc, lay layouts.Layout, mem Memory, threads []debuggee.Thread, arenas []uint64) ([]ThreadCache, map[uint64]bool, []Damage, TLSSlots) {
	var slots TLSSlots
	if lay.TcacheBins == 0 || len(threads) == 0 {
		return nil, nil, nil, slots
	}
	c := memio.New(mem)
	isArena := map[uint64]bool{}
	for _, a := range arenas {
		isArena[a] = true
	}
	type slotVals struct {
		off           uint64
		vals          []uint64 // per thread
		tcache, arena int      // how many threads' values look like one
	}
	var best, bestArena *slotVals
	for _, off := range l.TLSOffsets(c.Word) {
		sv := &slotVals{off: off}
		for _, th := range threads {
			v, _ := c.Word(th.TP() + off)
			sv.vals = append(sv.vals, v)
			if isTcache(c, lay, v) {
				sv.tcache++
			}
			if isArena[v] {
				sv.arena++
			}
		}
		if sv.tcache > 0 && (best == nil || sv.tcache > best.tcache) {
			best = sv
		}
		if sv.arena > 0 && (bestArena == nil || sv.arena > bestArena.arena) {
			bestArena = sv
		}
	}
	if best == nil {
		return nil, nil, nil, slots
	}
	slots.Tcache, slots.HasTcache = best.off, true
	if bestArena != nil {
		slots.Arena, slots.HasArena = bestArena.off, true
	}
	var out []ThreadCache
	var dmg []Damage
	var bins []binSlots
	cached := map[uint64]bool{}
	for i, th := range threads {
		tc := ThreadCache{Tid: th.Tid}
		// A thread that never allocated has no tcache: NULL up to 2.42, a
		// pointer to a static all-zero dummy in libc from 2.43.
		if v := best.vals[i]; isTcache(c, lay, v) {
			tc.Addr = v
		}
		if bestArena != nil && isArena[bestArena.vals[i]] {
			tc.Arena = bestArena.vals[i]
		}
		if tc.Addr != 0 {
			s, d := readTcache(c, lay, &tc, cached)
			bins, dmg = append(bins, s...), append(dmg, d...)
		}
		out = append(out, tc)
	}
	dmg = append(dmg, checkSlots(bins)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Tid < out[j].Tid })
	return out, cached, dmg, slots
}

// isTcache reports whether v can be a thread's tcache_perthread_struct: a
// 16-aligned user pointer whose chunk has that struct's size.
func isTcache(c *memio.Cache, lay layouts.Layout, v uint64) bool {
	if v == 0 || v%16 != 0 {
		return false
	}
	sz, ok := c.Word(v - 8)
	return ok && sz&^sizeBits == lay.TcacheChunkSize
}

// binSlots is one bin of a tcache whose counts go down (2.42+): its free
// slots and its list's length, which add up to the capacity every bin
// started with.
type binSlots struct {
	tid, bin    int
	tcache      uint64
	slots, list uint64
}

// checkSlots checks that every bin's free slots and entries add up to the
// same capacity. tcache_init sets each num_slots to mp_.tcache_count and
// every put and get moves one between the two, so that capacity is the one
// most bins agree on; a bin that disagrees was damaged.
func checkSlots(bins []binSlots) []Damage {
	votes := map[uint64]int{}
	for _, b := range bins {
		votes[b.slots+b.list]++
	}
	var capacity uint64
	for c, n := range votes {
		if n > votes[capacity] || (n == votes[capacity] && c > capacity) {
			capacity = c
		}
	}
	var dmg []Damage
	for _, b := range bins {
		if b.slots+b.list != capacity {
			dmg = append(dmg, Damage{Addr: b.tcache, What: fmt.Sprintf("thread %d's tcache: bin %d has %d free slots and %d entries, where every other bin holds %d in all",
				b.tid, b.bin, b.slots, b.list, capacity)})
		}
	}
	return dmg
}

// readTcache walks the entries of one tcache. Entries are user pointers; the
// chunk starts 16 bytes before. Their next links are mangled from 2.32 on.
// Up to 2.41 counts[i] is a bin's length and is checked here; from 2.42
// num_slots[i] is the room left in the bin, returned for checkSlots.
func readTcache(c *memio.Cache, lay layouts.Layout, tc *ThreadCache, cached map[uint64]bool) ([]binSlots, []Damage) {
	var slots []binSlots
	var dmg []Damage
	bad := func(at uint64, what string) {
		dmg = append(dmg, Damage{Addr: at, What: fmt.Sprintf("thread %d's tcache: %s", tc.Tid, what)})
	}
	counts, err := readBytes(c, tc.Addr, uint64(lay.TcacheBins*lay.TcacheCountBytes))
	if err != nil {
		bad(tc.Addr, "unreadable")
		return nil, dmg
	}
	for i := 0; i < lay.TcacheBins; i++ {
		e, ok := c.Word(tc.Addr + uint64(lay.TcacheEntries) + uint64(i)*8)
		if !ok {
			bad(tc.Addr, "unreadable")
			return slots, dmg
		}
		var n uint64
		seen := map[uint64]bool{}
		for e != 0 {
			if e%16 != 0 || seen[e] || len(seen) > 1<<20 {
				bad(e, fmt.Sprintf("bin %d is misaligned or loops", i))
				break
			}
			seen[e] = true
			raw, ok := c.Word(e - 8)
			if !ok {
				bad(e, fmt.Sprintf("bin %d points to unreadable memory", i))
				break
			}
			// A small bin holds one size; from 2.42 a large bin holds a
			// range of sizes, sorted, so sizes are counted chunk by chunk.
			size := raw &^ sizeBits
			if k := len(tc.Bins) - 1; n > 0 && tc.Bins[k].Size == size {
				tc.Bins[k].Count++
			} else {
				tc.Bins = append(tc.Bins, TcacheBin{Size: size, Count: 1})
			}
			tc.Chunks++
			tc.Bytes += size
			cached[e-16] = true
			n++
			next, _ := c.Word(e)
			if lay.SafeLinking {
				next ^= e >> 12
			}
			e = next
		}
		cnt := uint64(counts[i*lay.TcacheCountBytes])
		if lay.TcacheCountBytes == 2 {
			cnt |= uint64(counts[i*2+1]) << 8
		}
		switch {
		case lay.TcacheCountsDown:
			slots = append(slots, binSlots{tid: tc.Tid, bin: i, tcache: tc.Addr, slots: cnt, list: n})
		case cnt != n:
			bad(tc.Addr, fmt.Sprintf("bin %d counts %d entries but its list has %d", i, cnt, n))
		}
	}
	return slots, dmg
}

// WalkAll is the whole read-only walk once the anchors are known: every
// thread's tcache (when its thread pointer is known: threads is empty for
// a process read without stopping it), then the heaps, with the chunks the
// tcaches hold counted as cached. The live, core and snapshot paths all
// read a target through this one function. Its arenas are walked by up to
// jobs workers, as WalkHeap's.
func WalkAll(mem Memory, l *libc.Libc, lay layouts.Layout, a Anchors, ms []maps.Mapping, threads []debuggee.Thread, jobs int) (*Walk, []ThreadCache, error) {
	return walkAll(mem, l, lay, a, ms, threads, walker{jobs: jobs})
}

// WalkChunks is WalkAll that also hands visit every chunk it meets, in
// address order within each heap: every chunk of every arena's heaps (in
// use, in a bin, in a fastbin, in a tcache), each arena's top chunk, and
// the mmapped chunks. An arena whose chunks cannot be walked to the end
// (damage, a non-contiguous main arena) gives those met before, and its
// Walked is false. Visit is called from one goroutine at a time, in that
// order, at any number of workers (as WalkHeap's).
func WalkChunks(mem Memory, l *libc.Libc, lay layouts.Layout, a Anchors, ms []maps.Mapping, threads []debuggee.Thread, visit func(Chunk), jobs int) (*Walk, []ThreadCache, error) {
	return walkAll(mem, l, lay, a, ms, threads, walker{visit: visit, jobs: jobs})
}

// WalkChunksOf is WalkChunks with a visitor per arena: visitOf(i) is
// asked for arena i's (its place in the ring) on the goroutine that walks
// it, just before its chunk walk, and visitOf(-1) for the mmapped chunks'
// after every arena. Each visitor is handed its chunks as WalkChunks hands
// them, from one goroutine at a time; the visitors of different arenas are
// called at once when the walk has several workers, so that no arena
// waits for its turn to hand on its chunks.
func WalkChunksOf(mem Memory, l *libc.Libc, lay layouts.Layout, a Anchors, ms []maps.Mapping, threads []debuggee.Thread, visitOf func(arena int) func(Chunk), jobs int) (*Walk, []ThreadCache, error) {
	return walkAll(mem, l, lay, a, ms, threads, walker{visitOf: visitOf, jobs: jobs})
}

// WalkWithoutChunks is WalkAll without the walk of every chunk: tcaches,
// free lists, heaps and the mmapped-chunk scan. It is what a snapshot must
// see to record the layout, the anchors, the TLS slots and the pages a later
// reader needs beyond the heaps, which the snapshot dumps whole anyway; on a
// large heap the chunk walk is most of a walk's time, and the process is
// frozen for it. Its arenas are walked by up to jobs workers, as WalkHeap's.
func WalkWithoutChunks(mem Memory, l *libc.Libc, lay layouts.Layout, a Anchors, ms []maps.Mapping, threads []debuggee.Thread, jobs int) (*Walk, []ThreadCache, error) {
	return walkAll(mem, l, lay, a, ms, threads, walker{noChunks: true, jobs: jobs})
}

// walkAll walks with a walker of wk's kind (noChunks, visit, visitOf,
// jobs).
func walkAll(mem Memory, l *libc.Libc, lay layouts.Layout, a Anchors, ms []maps.Mapping, threads []debuggee.Thread, wk walker) (*Walk, []ThreadCache, error) {
	caches, cached, dmg, slots := tcaches(l, lay, mem, threads, ArenaRing(mem, lay, a))
	c := memio.New(mem)
	// Without the chunk walk the heaps are still copied whole where the
	// memory says which pages hold data (so that none that holds nothing
	// is read): the free lists hop all over an arena, and read a word at a
	// time through a cache smaller than the arena they took a system call
	// each (3.4 M of them, 5 s of a 1 GiB heap's snapshot).
	if _, runs := mem.(memio.DataRuns); wk.noChunks && !runs {
		c.NoCopies()
	}
	wk.mem, wk.lay, wk.ms, wk.tcached = c, lay, ms, memio.SetOf(cached)
	w, err := walkHeap(&wk, a)
	if err != nil {
		return nil, nil, err
	}
	w.Damage = append(w.Damage, dmg...)
	w.TLS = slots
	return w, caches, nil
}

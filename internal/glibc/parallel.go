package glibc

import (
	"context"
	"fmt"

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

// parallel reports whether this walk may spread its arenas over workers:
// more than one asked for, memory that may be read from several threads at
// once (parallelReader), and no visitor, which is handed the chunks in
// address order within each heap and in ring order across arenas (the
// chunk index and the reachability scan build on that order).
func (wk *walker) parallel() bool {
	if workers.Resolve(wk.jobs) <= 1 || wk.visit != nil || wk.only != nil {
		return false
	}
	_, ok := wk.mem.mem.(parallelReader)
	return ok
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
		st, err := readBytes(wk.mem.mem, ar, uint64(lay.StateSize))
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
		mi  Arena
		dmg []Damage
	}
	out := make([]result, len(ring))
	jobs := min(workers.Resolve(wk.jobs), len(ring))
	// One walker per worker, taken for an arena and given back after it,
	// so that the copies' buffers are mapped once per worker, not once per
	// arena.
	idle := make(chan *walker, jobs)
	for range jobs {
		sub := wk.fork()
		sub.mem.keep = max(keepBlocks/jobs, 16)
		idle <- sub
	}
	defer func() {
		close(idle)
		for sub := range idle {
			sub.mem.releaseWindows()
		}
	}()
	err = workers.Run(context.Background(), jobs, len(ring), func(i int) error {
		sub := <-idle
		defer func() { idle <- sub }()
		sub.w = &Walk{Layout: wk.lay, Anchors: a, Params: wk.w.Params, Malloc: &MallocInfo{HasFast: wk.w.Malloc.HasFast, HasMmap: wk.w.Malloc.HasMmap}, Exact: wk.w.Exact}
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
	c := newBlockMemSized(wk.mem.mem, wk.mem.size)
	c.noWin = wk.mem.noWin
	return &walker{mem: c, lay: wk.lay, ms: wk.ms, tcached: wk.tcached.reader(), listsOnly: wk.listsOnly, noChunks: wk.noChunks, jobs: 1}
}

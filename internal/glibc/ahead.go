package glibc

import (
	"slices"
	"sync"

	"github.com/arenactl/arenactl/internal/maps"
)

// ahead copies the heaps of the next arena of the ring while the walker
// walks the current one: copying is most of a walk's time on a large heap
// (the kernel's process_vm_readv runs at 4 to 6 GiB/s here), and the walk
// itself needs the copy of one arena only, so the two overlap on two CPUs.
// It works out the ranges as the walker does (heapRanges), from its own
// reads; the walker takes a copy only when its own ranges are the same, and
// otherwise stops it and copies alone (a ring or heaps that changed, or
// damage). It also prewalks the lists of what it copied (prewalk.go), the
// other part of a walk that waits on memory. Two slots take turns: the one
// being walked and the one being filled.
type ahead struct {
	out   chan loaded
	free  chan *slot // slots the walker is done with
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	slots [2]slot
}

// slot is a buffer for one arena's copy (mapped on first use) and the
// prewalk of its lists.
type slot struct {
	buf []byte
	pre prewalk
}

// parallelReader is memory whose ReadAt may be called from two goroutines
// at once (a live process read with process_vm_readv). Only then does a
// loader run ahead.
type parallelReader interface {
	ReadsInParallel()
}

// loaded is one arena's heaps, copied.
type loaded struct {
	arena uint64
	rs    []maps.Range
	spans []window
	slot  *slot
}

// startAhead starts copying the heaps of the arenas of ring, in order.
func startAhead(mem Memory, lay Layout, a Anchors, p Params, ring []uint64, ms *rwSpans) *ahead {
	ah := &ahead{out: make(chan loaded), free: make(chan *slot, 2), stop: make(chan struct{})}
	ah.free <- &ah.slots[0]
	ah.free <- &ah.slots[1]
	ah.wg.Add(1)
	go func() {
		defer ah.wg.Done()
		defer close(ah.out)
		word := func(addr uint64) (uint64, bool) {
			v, err := readWord(mem, addr)
			return v, err == nil
		}
		rw := func(addr, n uint64) bool {
			end, ok := ms.find(addr)
			return ok && n <= end-addr
		}
		page := trimPage(mem)
		for _, ar := range ring {
			st, err := readBytes(mem, ar, uint64(lay.StateSize))
			if err != nil {
				return
			}
			rs := heapRanges(lay, &p, page, ar == a.MainArena, st, word, rw)
			if !fits(rs) {
				continue // the walker reads this arena through its block cache
			}
			var sl *slot
			select {
			case sl = <-ah.free:
			case <-ah.stop:
				return
			}
			if sl.buf == nil {
				if sl.buf = mapBuffer(); sl.buf == nil {
					return
				}
			}
			l := loaded{arena: ar, rs: rs, spans: copyRanges(mem, rs, sl.buf, nil), slot: sl}
			sl.pre.fill(lay, ar, st, l.spans)
			select {
			case ah.out <- l:
			case <-ah.stop:
				return
			}
		}
	}()
	return ah
}

// take returns the copy of arena ar's ranges rs, when the next one the
// loader made is that.
func (ah *ahead) take(ar uint64, rs []maps.Range) (loaded, bool) {
	l, ok := <-ah.out
	if !ok {
		return l, false
	}
	if l.arena != ar || !slices.Equal(l.rs, rs) {
		ah.give(l.slot)
		return l, false
	}
	return l, true
}

// give hands a slot back to the loader.
func (ah *ahead) give(sl *slot) {
	if sl != nil {
		ah.free <- sl
	}
}

// close stops the loader, waits for it and unmaps its buffers.
func (ah *ahead) close() {
	ah.once.Do(func() {
		close(ah.stop)
		for range ah.out { // a copy it was handing over
		}
		ah.wg.Wait()
		for i := range ah.slots {
			if b := ah.slots[i].buf; b != nil {
				unmap(b)
			}
		}
	})
}

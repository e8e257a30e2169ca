package memio

import (
	"slices"
	"sync"

	"github.com/arenactl/arenactl/internal/maps"
)

// ahead copies the heaps of the next arena of the ring while the walker
// walks the current one: copying is most of a walk's time on a large heap
// (the kernel's process_vm_readv runs at 4 to 6 GiB/s here), and the walk
// itself needs the copy of one arena only, so the two overlap on two CPUs.
// It works out the ranges as the walker does (the walker's ranges
// function, from the loader's own reads); the walker takes a copy only when
// its own ranges are the same, and otherwise stops it and copies alone (a
// ring or heaps that changed, or damage). It also prepares what the walker
// asks of the copy (glibc's prewalk of the lists), the other part of a
// walk that waits on memory. Two slots take turns: the one being walked
// and the one being filled.
type ahead struct {
	out   chan loaded
	free  chan *slot // slots the walker is done with
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	slots [2]slot
}

// slot is a buffer for one arena's copy (mapped on first use) and what
// was prepared from it (kept, so that it can be reused for the next).
type slot struct {
	buf   []byte
	extra any
}

// ParallelReader is memory whose ReadAt may be called from two goroutines
// at once (a live process read with process_vm_readv). Only then does a
// loader run ahead.
type ParallelReader interface {
	ReadsInParallel()
}

// loaded is one arena's heaps, copied.
type loaded struct {
	arena uint64
	rs    []maps.Range
	spans []Window
	slot  *slot
}

// RunsAhead reports whether a loader may copy the next arenas' heaps while
// the current one is walked (StartAhead): only for memory that may be read
// from two goroutines at once, not already in this process, when the cache
// copies heaps at all.
func (c *Cache) RunsAhead() bool {
	_, par := c.mem.(ParallelReader)
	return par && !c.noWin
}

// StartAhead starts copying the heaps of the arenas of ring, in order, for
// Load to take. ranges says which ranges hold an arena's heaps, as the
// walker will work them out (false: stop there); prepare is then called
// with the copy and the slot's extra (nil at first, kept for the slot's
// next arena), to leave there what Prepared returns once Load takes the
// copy. Both run on the loader's goroutine, one arena after the other.
// Close stops it.
func (c *Cache) StartAhead(ring []uint64, ranges func(ar uint64) ([]maps.Range, bool), prepare func(ar uint64, spans []Window, extra *any)) {
	mem := c.mem
	ah := &ahead{out: make(chan loaded), free: make(chan *slot, 2), stop: make(chan struct{})}
	ah.free <- &ah.slots[0]
	ah.free <- &ah.slots[1]
	ah.wg.Add(1)
	c.ahead = ah
	go func() {
		defer ah.wg.Done()
		defer close(ah.out)
		for _, ar := range ring {
			rs, ok := ranges(ar)
			if !ok {
				return
			}
			if !Fits(rs) {
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
			prepare(ar, l.spans, &sl.extra)
			select {
			case ah.out <- l:
			case <-ah.stop:
				return
			}
		}
	}()
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

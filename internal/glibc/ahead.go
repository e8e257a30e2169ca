package glibc

import (
	"slices"
	"sync"
)

// ahead copies the heaps of the next arena of the ring while the walker
// walks the current one: copying is most of a walk's time on a large heap
// (the kernel's process_vm_readv runs at 4 to 6 GiB/s here), and the walk
// itself needs the copy of one arena only, so the two overlap on two CPUs.
// It works out the ranges as the walker does (heapRanges), from its own
// reads; the walker takes a copy only when its own ranges are the same, and
// otherwise stops it and copies alone (a ring or heaps that changed, or
// damage). Two buffers take turns: the one being walked and the one being
// filled.
type ahead struct {
	out  chan loaded
	free chan []byte // buffers the walker is done with (nil: not mapped yet)
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	bufs [][]byte // every buffer mapped, unmapped by close
	mu   sync.Mutex
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
	rs    []Range
	spans []window
	buf   []byte
}

// startAhead starts copying the heaps of the arenas of ring, in order.
func startAhead(mem Memory, lay Layout, a Anchors, p Params, ring []uint64, ms *rwSpans) *ahead {
	ah := &ahead{out: make(chan loaded), free: make(chan []byte, 2), stop: make(chan struct{})}
	ah.free <- nil
	ah.free <- nil
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
		for _, ar := range ring {
			st, err := readBytes(mem, ar, uint64(lay.StateSize))
			if err != nil {
				return
			}
			rs := heapRanges(lay, &p, ar == a.MainArena, st, word, rw)
			if !fits(rs) {
				continue // the walker reads this arena through its block cache
			}
			var buf []byte
			select {
			case buf = <-ah.free:
			case <-ah.stop:
				return
			}
			if buf == nil {
				if buf = mapBuffer(); buf == nil {
					return
				}
				ah.mu.Lock()
				ah.bufs = append(ah.bufs, buf)
				ah.mu.Unlock()
			}
			l := loaded{arena: ar, rs: rs, spans: copyRanges(mem, rs, buf, nil), buf: buf}
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
func (ah *ahead) take(ar uint64, rs []Range) (loaded, bool) {
	l, ok := <-ah.out
	if !ok {
		return l, false
	}
	if l.arena != ar || !slices.Equal(l.rs, rs) {
		ah.give(l.buf)
		return l, false
	}
	return l, true
}

// give hands a buffer back to the loader.
func (ah *ahead) give(buf []byte) {
	if buf != nil {
		ah.free <- buf
	}
}

// close stops the loader, waits for it and unmaps its buffers.
func (ah *ahead) close() {
	ah.once.Do(func() {
		close(ah.stop)
		for range ah.out { // a copy it was handing over
		}
		ah.wg.Wait()
		for _, b := range ah.bufs {
			unmap(b)
		}
	})
}

package glibc

import (
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/maps"
)

// windows hold an arena's heaps, copied whole before the arena is walked.
// Every free list of an arena hops all over its heaps and the chunk walk
// goes through all of them: copying them with one read per heap (a
// process_vm_readv of megabytes, which the kernel does at memory speed)
// replaces a read syscall per 256 KiB block, or per page for the list walk,
// issued one at a time as the walk first meets each. The copy lives in one
// buffer outside the Go heap, mapped once per walk and reused for every
// arena, on transparent huge pages where the kernel allows: the list walks
// are a chain of dependent loads at random places of the copy, and with 4
// KiB pages each one also missed the TLB.
//
// A buffer is windowCap bytes of address space, of which only what the
// largest arena used becomes resident; an arena whose heaps do not fit in
// it is copied a part at a time (prewalkParts, loadPart). With the loader
// running ahead (ahead.go) there are two: a walk holds at most 2 x
// windowCap of copies.
type windows struct {
	buf   []byte   // mapped on first use, windowCap bytes; nil when mapping failed
	spans []window // the current arena's heaps, in buf or lent
	last  int      // the span hit last
	lent  *slot    // the loader's buffer the spans are in (see ahead), to give back
	pre   *prewalk // the loader's prewalk of the arena; nil when the walker makes its own
}

// window is one range of target memory copied into the buffer. holes has a
// bit set for each page that was not copied (unreadable, or holding no
// data: see dataRuns); nil when every page was.
type window struct {
	start, end uint64
	b          []byte
	holes      []uint64
}

// windowCap bounds what one arena's copy may take, so that what a walk
// holds does not grow with the heap. 96 MiB holds a thread arena's full
// 64 MiB heap and the start of its next one, and a main arena that size.
var windowCap uint64 = 96 << 20 // a variable for tests only

// dataRuns is memory that can tell which of its pages hold data: present or
// swapped, as opposed to never touched or given back (which read as zeros).
// A live process does, from /proc/PID/pagemap. Reading a page that holds
// no data of a live process maps the zero page into it, so the list walk
// (which must leave the pages malloc_trim gave back alone) copies only the
// pages that hold data, and reads the others one by one if it needs them.
type dataRuns interface {
	DataRuns(start, end uint64, fn func(start, end uint64, data bool)) error
}

// get returns the span holding [addr, addr+n), or nil.
func (ws *windows) get(addr, n uint64) *window {
	if ws.last < len(ws.spans) {
		if w := &ws.spans[ws.last]; addr >= w.start && addr+n <= w.end && addr+n > addr {
			return w
		}
	}
	for i := range ws.spans {
		if w := &ws.spans[i]; addr >= w.start && addr+n <= w.end && addr+n > addr {
			ws.last = i
			return w
		}
	}
	return nil
}

// hole reports whether the page holding off (from w.start) was not copied.
func (w *window) hole(off uint64) bool {
	if w.holes == nil {
		return false
	}
	pg := off / pageSz
	return w.holes[pg/64]&(1<<(pg%64)) != 0
}

// reset forgets the spans; the buffer stays for the next arena.
func (ws *windows) reset() {
	ws.spans, ws.last, ws.pre = nil, 0, nil
}

// release unmaps the buffer.
func (ws *windows) release() {
	if ws.buf != nil {
		unmap(ws.buf)
		ws.buf = nil
	}
	ws.reset()
}

// alloc maps the buffer, asking for huge pages.
func (ws *windows) alloc() bool {
	if ws.buf == nil {
		ws.buf = mapBuffer()
	}
	return ws.buf != nil
}

// mapBuffer maps windowCap bytes for copies, asking for huge pages; nil
// when it cannot.
func mapBuffer() []byte {
	b, err := unix.Mmap(-1, 0, int(windowCap), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // an optimisation only: without it, 4 KiB pages
	return b
}

// holeIn reports whether any page of [off, off+n) was not copied.
func (w *window) holeIn(off, n uint64) bool {
	if w.holes == nil {
		return false
	}
	for pg := off &^ (pageSz - 1); pg < off+n; pg += pageSz {
		if w.hole(pg) {
			return true
		}
	}
	return false
}

// markHoles marks the pages of [off, off+n) (from w.start) as not copied.
func (w *window) markHoles(off, n uint64) {
	if w.holes == nil {
		w.holes = make([]uint64, (uint64(len(w.b))/pageSz+63)/64)
	}
	for pg := off / pageSz; pg < (off+n+pageSz-1)/pageSz; pg++ {
		w.holes[pg/64] |= 1 << (pg % 64)
	}
}

// loadChunk is how much of a range that failed to read whole is read at a
// time, to find which part is readable.
const loadChunk = 1 << 20

// load copies rs (page-aligned, in no particular order) into the windows,
// replacing the last arena's: all of them, or none when together they
// exceed windowCap or the memory is already in this process (a core).
// Whatever could not be read is a hole, which reads go around. When a
// loader runs ahead, the copy it made of the same ranges is taken instead.
func (c *blockMem) load(ar uint64, rs []maps.Range) {
	c.win.reset()
	if c.slicer != nil || c.noWin || !fits(rs) {
		return
	}
	if c.ahead != nil {
		if l, ok := c.ahead.take(ar, rs); ok {
			c.win.spans, c.win.lent, c.win.pre = l.spans, l.slot, &l.slot.pre
			return
		}
		c.ahead.close() // out of step with the walk: it goes on alone
		c.ahead = nil
	}
	if !c.win.alloc() {
		return
	}
	c.win.spans = copyRanges(c.mem, rs, c.win.buf, c.win.spans)
}

// fits reports whether rs can be copied: page-aligned, non-empty, and
// windowCap bytes at most together.
func fits(rs []maps.Range) bool {
	var total uint64
	for _, r := range rs {
		if r.End <= r.Start || r.Start%pageSz != 0 || r.End%pageSz != 0 {
			return false
		}
		total += r.End - r.Start
		if total > windowCap {
			return false
		}
	}
	return total > 0
}

// copyRanges copies rs, which fit, into buf, one read per run of pages
// that hold data (every page, when mem cannot tell), and returns their
// windows, appended to spans.
func copyRanges(mem Memory, rs []maps.Range, buf []byte, spans []window) []window {
	dr, _ := mem.(dataRuns)
	var used uint64
	for _, r := range rs {
		w := window{start: r.Start, end: r.End, b: buf[used:][:r.End-r.Start]}
		used += r.End - r.Start
		copyRun := func(start, end uint64) {
			off := start - w.start
			if n, err := mem.ReadAt(w.b[off:end-w.start], start); err == nil && uint64(n) == end-start {
				return
			}
			for s := start; s < end; s += loadChunk {
				e := min(s+loadChunk, end)
				if n, err := mem.ReadAt(w.b[s-w.start:e-w.start], s); err != nil || uint64(n) != e-s {
					w.markHoles(s-w.start, e-s)
				}
			}
		}
		if dr == nil {
			copyRun(r.Start, r.End)
		} else if err := dr.DataRuns(r.Start, r.End, func(start, end uint64, data bool) {
			if data {
				copyRun(start, end)
			} else {
				w.markHoles(start-w.start, end-start)
			}
		}); err != nil {
			w.markHoles(0, r.End-r.Start)
		}
		spans = append(spans, w)
	}
	return spans
}

func unmap(b []byte) { _ = unix.Munmap(b) }

// loadPart copies the part of parts holding addr into the buffer, in place
// of what the windows held, and returns its window; nil when no part holds
// it or there is no buffer.
func (c *blockMem) loadPart(parts []maps.Range, addr uint64) *window {
	for _, r := range parts {
		if addr >= r.Start && addr < r.End {
			if !c.win.alloc() {
				return nil
			}
			c.win.spans = copyRanges(c.mem, []maps.Range{r}, c.win.buf, c.win.spans[:0])
			c.win.last = 0
			return c.win.get(addr, 1)
		}
	}
	return nil
}

package memio

import (
	"cmp"
	"slices"

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
// it is copied a part at a time (Parts, CopyAside, LoadPart). With the loader
// running ahead (ahead.go) there are two: a walk holds at most 2 x
// windowCap of copies.
type windows struct {
	buf   []byte   // mapped on first use, windowCap bytes; nil when mapping failed
	spans []Window // the current arena's heaps, in buf or lent
	last  int      // the span hit last
	lent  *slot    // the loader's buffer the spans are in (see ahead), to give back
	pre   any      // what the loader prepared from its copy (see StartAhead); nil when none
}

// Window is one range of target memory copied into the buffer. holes has a
// bit set for each page that was not copied (unreadable, or holding no
// data: see DataRuns); nil when every page was.
type Window struct {
	Start, End uint64
	B          []byte
	holes      []uint64
}

// windowCap bounds what one arena's copy may take, so that what a walk
// holds does not grow with the heap. 96 MiB holds a thread arena's full
// 64 MiB heap and the start of its next one, and a main arena that size.
var windowCap uint64 = 96 << 20 // SetCaps sets it

// get returns the span holding [addr, addr+n), or nil.
func (ws *windows) get(addr, n uint64) *Window { return find(ws.spans, &ws.last, addr, n) }

// find returns the one of spans holding [addr, addr+n), or nil, trying
// spans[*last] first and setting it to the one found.
func find(spans []Window, last *int, addr, n uint64) *Window {
	if *last < len(spans) {
		if w := &spans[*last]; addr >= w.Start && addr+n <= w.End && addr+n > addr {
			return w
		}
	}
	for i := range spans {
		if w := &spans[i]; addr >= w.Start && addr+n <= w.End && addr+n > addr {
			*last = i
			return w
		}
	}
	return nil
}

// Lookup finds which of a set of windows holds a range, remembering the
// one found last: the windows of a loader's copy, or of one part of an
// arena, outside a Cache.
type Lookup struct {
	spans []Window
	last  int
}

// NewLookup looks in spans.
func NewLookup(spans []Window) *Lookup { return &Lookup{spans: spans} }

// Get returns the window holding [addr, addr+n), or nil.
func (l *Lookup) Get(addr, n uint64) *Window { return find(l.spans, &l.last, addr, n) }

// Complete reports whether every page of w was copied.
func (w *Window) Complete() bool { return w.holes == nil }

// Hole reports whether the page holding off (from w.Start) was not copied.
func (w *Window) Hole(off uint64) bool {
	if w.holes == nil {
		return false
	}
	pg := off / pageSize
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

// HoleIn reports whether any page of [off, off+n) was not copied.
func (w *Window) HoleIn(off, n uint64) bool {
	if w.holes == nil {
		return false
	}
	for pg := off &^ (pageSize - 1); pg < off+n; pg += pageSize {
		if w.Hole(pg) {
			return true
		}
	}
	return false
}

// markHoles marks the pages of [off, off+n) (from w.Start) as not copied.
func (w *Window) markHoles(off, n uint64) {
	if w.holes == nil {
		w.holes = make([]uint64, (uint64(len(w.B))/pageSize+63)/64)
	}
	for pg := off / pageSize; pg < (off+n+pageSize-1)/pageSize; pg++ {
		w.holes[pg/64] |= 1 << (pg % 64)
	}
}

// loadChunk is how much of a range that failed to read whole is read at a
// time, to find which part is readable.
const loadChunk = 1 << 20

// Load copies rs (page-aligned, in no particular order) into the windows,
// replacing the last arena's: all of them, or none when together they
// exceed windowCap. Whatever could not be read is a hole, which reads go
// around. When a loader runs ahead, the copy it made of the same ranges is
// taken instead.
func (c *Cache) Load(ar uint64, rs []maps.Range) {
	c.win.reset()
	if c.noWin || !Fits(rs) {
		return
	}
	if c.ahead != nil {
		if l, ok := c.ahead.take(ar, rs); ok {
			c.win.spans, c.win.lent, c.win.pre = l.spans, l.slot, l.slot.extra
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

// Fits reports whether rs can be copied: page-aligned, non-empty, and
// windowCap bytes at most together.
func Fits(rs []maps.Range) bool {
	var total uint64
	for _, r := range rs {
		if r.End <= r.Start || r.Start%pageSize != 0 || r.End%pageSize != 0 {
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
func copyRanges(mem Memory, rs []maps.Range, buf []byte, spans []Window) []Window {
	dr, _ := mem.(DataRuns)
	var used uint64
	for _, r := range rs {
		w := Window{Start: r.Start, End: r.End, B: buf[used:][:r.End-r.Start]}
		used += r.End - r.Start
		copyRun := func(start, end uint64) {
			off := start - w.Start
			if n, err := mem.ReadAt(w.B[off:end-w.Start], start); err == nil && uint64(n) == end-start {
				return
			}
			for s := start; s < end; s += loadChunk {
				e := min(s+loadChunk, end)
				if n, err := mem.ReadAt(w.B[s-w.Start:e-w.Start], s); err != nil || uint64(n) != e-s {
					w.markHoles(s-w.Start, e-s)
				}
			}
		}
		if dr == nil {
			copyRun(r.Start, r.End)
		} else if err := dr.DataRuns(r.Start, r.End, func(start, end uint64, data bool) {
			if data {
				copyRun(start, end)
			} else {
				w.markHoles(start-w.Start, end-start)
			}
		}); err != nil {
			w.markHoles(0, r.End-r.Start)
		}
		spans = append(spans, w)
	}
	return spans
}

func unmap(b []byte) { _ = unix.Munmap(b) }

// LoadPart copies the part of parts holding addr into the buffer, in place
// of what the windows held, and returns its Window; nil when no part holds
// it or there is no buffer.
func (c *Cache) LoadPart(parts []maps.Range, addr uint64) *Window {
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

// Parts splits rs into page-aligned parts of windowCap bytes at most, in
// address order, for an arena too large to copy whole; false when rs
// cannot be copied at all.
func Parts(rs []maps.Range) ([]maps.Range, bool) {
	var parts []maps.Range
	for _, r := range rs {
		if r.End <= r.Start || r.Start%pageSize != 0 || r.End%pageSize != 0 {
			return nil, false
		}
		for s := r.Start; s < r.End; s += windowCap {
			parts = append(parts, maps.Range{Start: s, End: min(s+windowCap, r.End)})
		}
	}
	slices.SortFunc(parts, func(a, b maps.Range) int { return cmp.Compare(a.Start, b.Start) })
	return parts, len(parts) > 0
}

// Buffer maps the buffer copies go to, if it is not yet; false when it
// cannot be.
func (c *Cache) Buffer() bool { return c.win.alloc() }

// CopyAside copies r (one of Parts, or less) into the buffer and returns its
// windows, without making them the ones reads go through: what the buffer
// held before is overwritten. The buffer must be mapped (Buffer).
func (c *Cache) CopyAside(r maps.Range) []Window {
	return copyRanges(c.mem, []maps.Range{r}, c.win.buf, nil)
}

// Spans are the windows of the current copy (Load).
func (c *Cache) Spans() []Window { return c.win.spans }

// Copied reports whether the current arena's heaps are copied (Load).
func (c *Cache) Copied() bool { return len(c.win.spans) > 0 }

// Span returns the window of the current copy holding [addr, addr+n), or
// nil.
func (c *Cache) Span(addr, n uint64) *Window { return c.win.get(addr, n) }

// Prepared is what the loader running ahead prepared from the current copy
// (StartAhead's prepare); nil when the copy is the walker's own.
func (c *Cache) Prepared() any { return c.win.pre }

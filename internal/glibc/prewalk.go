package glibc

import (
	"encoding/binary"
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"slices"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
)

// prewalk reads every free list of an arena out of the copy of its heaps
// before the walk proper, all lists at once: one link of each in turn.
// A list is a chain of dependent loads at random places of the heap, each
// of which waits on memory (about 160 ns on the machine measured, a VM)
// when the list is walked alone; stepping a hundred chains together keeps
// many loads in flight, so the whole arena's lists cost about as much as a
// few of them did. The walk proper, which must go one list after the other
// (the order decides what it reports), then takes each chunk's size and
// link from here instead of from memory.
//
// It decides nothing and reports nothing: a link is recorded only as the
// copy holds it, which is what the walk would read there, and the walk
// uses one only when it stands at that very chunk. A chain stops at the
// first link that leaves the copy, at a loop (Brent's cycle detection:
// a copy of a running process's heap, taken while its threads free and
// allocate, often has lists that close on themselves, and each of those
// spent the whole budget, 512 K links, on every arena), and when the
// arena's budget is spent (more free chunks than it holds): the walk reads
// the rest itself.
type prewalk struct {
	lists  [][]link // by list: the fastbins, then bins 1 to 127
	links  int      // recorded in all
	budget int      // links that may still be recorded
	// table: the places of an arena copied in parts that look like a
	// free chunk of a bin, by address (prewalkParts), and how many more
	// it may take.
	table     []link
	tableRoom int
}

// link is one chunk of a free list as the copy holds it: its address and
// the raw words at +8 (size) and +16 (fd, still mangled in a fastbin).
type link struct{ p, size, fd uint64 }

// prewalkBudget bounds the links recorded per arena (24 bytes each, 12 MiB
// in all): five times the free chunks an arena of a copy's size (96 MiB) holds
// when laid out as bench/walk's bigheap lays them out (about 100 K).
// SetMemory lowers it to what arenactl's memory budget allows.
var prewalkBudget = 1 << 19

// at returns link n of list k when it is the chunk at p.
func (pw *prewalk) at(k, n int, p uint64) (link, bool) {
	if k < len(pw.lists) {
		if l := pw.lists[k]; n < len(l) && l[n].p == p {
			return l[n], true
		}
	}
	return link{}, false
}

func (pw *prewalk) reset() {
	for k := range pw.lists {
		pw.lists[k] = pw.lists[k][:0]
	}
	pw.links, pw.budget = 0, 0
	pw.table, pw.tableRoom = pw.table[:0], 0
}

// listIndex is the number prewalk gives bin i (1 to 127).
func (wk *walker) listIndex(i int) int { return wk.lay.NFastbins + i - 1 }

// prewalkLists fills wk.pre for the arena at ar, whose state is st, unless
// the loader that copied its heaps did (with its own read of st: the walk
// uses a link only at the chunk it names, so one from another read of the
// lists is as good).
func (wk *walker) prewalkLists(ar uint64, st []byte) {
	if wk.mem.Prepared() != nil {
		return
	}
	if wk.parts != nil {
		wk.prewalkParts(ar, st)
		return
	}
	wk.pre.fill(wk.lay, ar, st, wk.mem.Spans())
}

// fill records the lists of the arena at ar, whose state is st, as spans
// (the copy of its heaps) hold them.
func (pw *prewalk) fill(lay layouts.Layout, ar uint64, st []byte, spans []memio.Window) {
	pw.reset()
	if len(spans) == 0 {
		return
	}
	pw.budget = prewalkBudget
	pw.advance(lay, pw.cursors(lay, ar, st), spans, nil)
}

// cursor is where prewalk stands in one list.
type cursor struct {
	k      int
	p, end uint64
	fast   bool
	w      *memio.Window // the one that holds p
	b      []byte        // the 24 bytes at p in w, once p is known good
	// Brent's cycle detection: mark is the chunk seen `power` links
	// ago at most; steps counts the links since it was set.
	mark         uint64
	power, steps int
}

// step moves c past l, the link it stood at, to where l leads (safe:
// fastbin links are mangled), and reports whether the list has come round
// to a chunk met before (Brent's cycle detection).
func (c *cursor) step(l link, safe bool) (looped bool) {
	c.p = l.fd
	if c.fast && safe {
		c.p ^= (l.p + 16) >> 12
	}
	looped = c.p == c.mark
	if c.steps++; c.steps == c.power {
		c.mark, c.power, c.steps = c.p, 2*c.power, 0
	}
	return looped
}

// cursors starts every list of the arena at ar, whose state is st.
func (pw *prewalk) cursors(lay layouts.Layout, ar uint64, st []byte) []cursor {
	nl := lay.NFastbins + nbins - 1
	for len(pw.lists) < nl {
		pw.lists = append(pw.lists, nil)
	}
	cs := make([]cursor, 0, nl)
	for k := 0; k < nl; k++ {
		c := cursor{k: k, power: 1}
		if k < lay.NFastbins {
			c.p, c.fast = le(st, lay.StateFastbins+int64(k)*8), true
		} else {
			off := lay.StateBins + int64(k-lay.NFastbins)*16
			c.p, c.end = le(st, off), ar+uint64(off)-16
		}
		cs = append(cs, c)
	}
	return cs
}

// advance steps the cursors cs through spans until each one stops. It
// returns those that stopped at a chunk in later, not in spans: another
// part of the arena, copied later (see prewalkParts).
func (pw *prewalk) advance(lay layouts.Layout, cs []cursor, spans []memio.Window, later []maps.Range) (waiting []cursor) {
	ws := memio.NewLookup(spans)
	// next checks c.p, where its list leads, and readies c.b; false when
	// the chain stops there (or waits).
	next := func(c *cursor) bool {
		p, w := c.p, c.w
		if p%16 != 0 || p == c.end {
			return false
		}
		if w == nil || p < w.Start || p+24 > w.End || p+24 < p {
			if w = ws.Get(p, 24); w == nil {
				if in(later, p, 24) {
					c.w = nil
					waiting = append(waiting, *c)
				}
				return false
			}
			c.w = w
		}
		if w.Hole(p+8-w.Start) || w.Hole(p+16-w.Start) {
			return false
		}
		c.b = w.B[p-w.Start:][:24]
		return true
	}
	ready := cs[:0:0]
	for i := range cs {
		if next(&cs[i]) {
			ready = append(ready, cs[i])
		}
	}
	cs = ready
	safe := lay.SafeLinking
	vals := make([][2]uint64, len(cs))
	for len(cs) > 0 && pw.budget >= len(cs) {
		// First only the loads, one per chain, none waiting on another:
		// they are all in flight together. Then what depends on them.
		for j := range cs {
			b := cs[j].b
			vals[j] = [2]uint64{binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])}
		}
		pw.budget -= len(cs)
		for j := 0; j < len(cs); {
			c := &cs[j]
			l := link{p: c.p, size: vals[j][0], fd: vals[j][1]}
			pw.lists[c.k] = append(pw.lists[c.k], l)
			pw.links++
			looped := c.step(l, safe)
			if looped || !next(c) {
				last := len(cs) - 1
				cs[j], vals[j] = cs[last], vals[last]
				cs = cs[:last]
				continue
			}
			j++
		}
	}
	return waiting
}

// in reports whether [p, p+n) lies in one of rs.
func in(rs []maps.Range, p, n uint64) bool {
	for _, r := range rs {
		if p >= r.Start && p+n <= r.End && p+n > p {
			return true
		}
	}
	return false
}

// Arenas too large to copy whole (more than memio's window cap) are copied
// a part at a time: prewalkParts for the lists, the chunk walk as it goes.
const (
	// maxPasses bounds the copies prewalkParts makes, as copies of every
	// part: lists that hop back and forth between parts more than that are
	// left to the walk itself.
	maxPasses = 4
)

// prewalkBudgetParts bounds the links recorded for such an arena (48 MiB):
// the free chunks of about 1 GiB of the benchmark's heap. SetMemory sets it
// from arenactl's memory budget. The table of places that look free takes
// at most half as many entries again.
var prewalkBudgetParts = 2 << 20

// prewalkParts is the prewalk of an arena copied in parts (wk.parts): it
// copies the part most lists wait in, lets every list there go as far as
// it can, and again. Lists tend to go through an arena's heaps together
// (in the order their chunks were freed), so most arenas take one copy of
// each part. Not after a malloc_trim, or on a server that has run a while:
// consolidation leaves the bins in no order of address, and a list then
// hops to another part at nearly every link (the 1 GiB benchmark heap,
// trimmed: 1.2 M links the walk read one by one, 2.3 s of its
// pre-flight). So once as many copies as there are parts leave lists
// unfinished, one more pass over the parts records every place that looks
// like a free chunk (record), and the lists go on through that table,
// with no copy at all. What is left (a chunk the table missed or had no
// room for) waits for copies as before, until every list has ended or
// maxPasses times as many copies as there are parts were made; the walk
// reads the rest itself.
func (wk *walker) prewalkParts(ar uint64, st []byte) {
	pw := &wk.pre
	pw.reset()
	if !wk.mem.Buffer() {
		return
	}
	pw.budget = prewalkBudgetParts
	cs := pw.advance(wk.lay, pw.cursors(wk.lay, ar, st), nil, wk.parts)
	waiting := make([]int, len(wk.parts))
	tabled := false
	for copies := 0; len(cs) > 0 && copies < maxPasses*len(wk.parts); copies++ {
		if copies == tableAfter*len(wk.parts) && !tabled {
			tabled = true
			cs = wk.tablePass(ar, cs)
			copies += len(wk.parts)
			if len(cs) == 0 {
				break
			}
		}
		clear(waiting)
		best := 0
		for _, c := range cs {
			i, _ := partOf(wk.parts, c.p)
			if i < len(waiting) {
				if waiting[i]++; waiting[i] > waiting[best] {
					best = i
				}
			}
		}
		part := wk.parts[best]
		here, rest := splitAt(cs, part)
		if len(here) == 0 {
			break
		}
		spans := wk.mem.CopyAside(part)
		cs = append(rest, pw.advance(wk.lay, here, spans, wk.parts)...)
	}
}

// tableAfter is how many copies of every part prewalkParts makes before
// it turns to the table: one pass (a test sets 0, to take every list
// through it).
var tableAfter = 1

// partOf returns the index of the part of parts (sorted, apart) that holds
// p, and whether one does; if none, where p would go.
func partOf(parts []maps.Range, p uint64) (int, bool) {
	return slices.BinarySearchFunc(parts, p, func(r maps.Range, p uint64) int {
		if r.End <= p {
			return -1
		}
		if r.Start > p {
			return 1
		}
		return 0
	})
}

// splitAt parts the cursors cs into those at a chunk in part and the rest.
func splitAt(cs []cursor, part maps.Range) (here, rest []cursor) {
	for _, c := range cs {
		if in([]maps.Range{part}, c.p, 24) {
			here = append(here, c)
		} else {
			rest = append(rest, c)
		}
	}
	return here, rest
}

// tablePass copies every part once, in address order, letting the lists
// of cs that wait in it go on and recording the places that look free;
// then the lists go on through that table. It returns the cursors still
// waiting, and leaves the table empty.
func (wk *walker) tablePass(ar uint64, cs []cursor) []cursor {
	pw := &wk.pre
	pw.table, pw.tableRoom = pw.table[:0], prewalkBudgetParts/2
	heapBytes := uint64(0)
	for _, part := range wk.parts {
		heapBytes += part.End - part.Start
	}
	looks := freeLooks{parts: wk.parts, ar: ar, state: uint64(wk.lay.StateSize), maxSize: heapBytes, safe: wk.lay.SafeLinking}
	for _, part := range wk.parts {
		here, rest := splitAt(cs, part)
		spans := wk.mem.CopyAside(part)
		pw.record(spans, &looks)
		cs = append(rest, pw.advance(wk.lay, here, spans, wk.parts)...)
	}
	cs = pw.follow(wk.lay, cs, wk.parts)
	pw.table = pw.table[:0]
	return cs
}

// freeLooks is what record asks of a place for it to look like a free
// chunk of one of the arena's bins: a size that is a multiple of 16, at
// least 32, not mmapped and no larger than the arena's heaps; links (fd
// and bk) that are 16-aligned and lead into the heaps or to the arena's
// bins; and, where the copy holds it, the next chunk's header saying this
// one is free with its size (set_foot and PREV_INUSE: malloc.c,
// _int_free_merge_chunk and _int_malloc, 2.39). A fastbin chunk passes
// none of that (it looks in use); a real bin chunk of a damaged heap may
// fail it too. Neither matters: a list goes through the table only over
// places it finds there, whose words are the copy's, what the walk would
// read at that very chunk.
type freeLooks struct {
	parts          []maps.Range // the arena's heaps, by address
	ar, state      uint64       // the arena's state and its size
	maxSize        uint64
	safe           bool   // fastbin links are mangled (safe-linking, 2.32+)
	lastLo, lastHi uint64 // the part a link last led into
}

// link reports whether a link may be one of a bin chunk's.
func (fl *freeLooks) link(x uint64) bool {
	if x%16 != 0 {
		return false
	}
	if x >= fl.lastLo && x < fl.lastHi {
		return true
	}
	if x+16 >= fl.ar && x < fl.ar+fl.state { // a bin's header: the state less 16
		return true
	}
	i, ok := partOf(fl.parts, x)
	if ok {
		fl.lastLo, fl.lastHi = fl.parts[i].Start, fl.parts[i].End
	}
	return ok
}

// fast reports whether the chunk at p, of size sz, whose fd is fd, looks
// like a fastbin's: a fastbin size and, unmangled, a link to a chunk of the
// heaps or none. Only where links are mangled: a plain one is any in-use
// chunk whose first word points into the heap or is zero, and there are
// many.
func (fl *freeLooks) fast(p, sz, fd uint64) bool {
	if !fl.safe || sz > maxFastChunk {
		return false
	}
	d := fd ^ (p+16)>>12
	return d == 0 || fl.link(d)
}

// maxFastChunk is the largest chunk a fastbin may hold: MAX_FAST_SIZE (80
// * SIZE_SZ / 4) as request2size makes it a chunk (malloc.c, 2.39).
const maxFastChunk = 0xb0

// footed reports whether the next chunk's header, where the copy holds
// it, says the chunk at off of w, of size sz, is free: its prev_size is
// sz and its PREV_INUSE bit clear.
func (fl *freeLooks) footed(w *memio.Window, b []byte, off, sz uint64) bool {
	foot := off + sz
	if foot+16 > uint64(len(b)) || foot+16 < foot {
		return true // not in this copy: the links decide
	}
	return !w.Hole(foot) && !w.Hole(foot+8) && binary.LittleEndian.Uint64(b[foot:]) == sz && binary.LittleEndian.Uint64(b[foot+8:])&1 == 0
}

// record adds to the table every place in spans (one part's copy) that
// looks like a free chunk of a bin (freeLooks), in address order, while
// it has room.
func (pw *prewalk) record(spans []memio.Window, fl *freeLooks) {
	le64 := binary.LittleEndian
	for wi := range spans {
		w := &spans[wi]
		b := w.B
		n := uint64(len(b))
		span := fl.maxSize - 32 // sizes from 32 to maxSize, in one comparison
		for off := (16 - w.Start%16) % 16; off+32 <= n; off += 16 {
			// This loop looks at every 16 bytes of the heap: one bounds
			// check a place, and a size that is a multiple of 16 and not
			// mmapped (bits 3 and 1 clear) tested at once.
			q := b[off : off+32]
			raw := le64.Uint64(q[8:16])
			if raw&0xa != 0 || (raw&^sizeBits)-32 > span {
				continue
			}
			sz := raw &^ sizeBits
			if w.Hole(off+8) || w.Hole(off+16) || w.Hole(off+24) {
				continue
			}
			fd, bk := le64.Uint64(q[16:24]), le64.Uint64(q[24:32])
			if !fl.fast(w.Start+off, sz, fd) && (!fl.footed(w, b, off, sz) || !fl.link(fd) || !fl.link(bk)) {
				continue
			}
			if pw.tableRoom == 0 {
				return
			}
			pw.tableRoom--
			pw.table = append(pw.table, link{p: w.Start + off, size: raw, fd: fd})
		}
	}
}

// find returns the index of the table's entry at p, or -1. The table is in
// address order: record goes through the parts (memio.Parts sorts them)
// and each part's windows in order.
func (pw *prewalk) find(p uint64) int {
	t := pw.table
	lo, hi := 0, len(t)
	for lo < hi { // a search by hand: through slices' generic one, with its comparison a call, it was a sixth of a trimmed heap's pre-flight
		m := int(uint(lo+hi) >> 1)
		if t[m].p < p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(t) && t[lo].p == p {
		return lo
	}
	return -1
}

// follow lets each cursor of cs go on through the table while it finds
// its chunk there, as advance does through a copy. It returns those that
// stopped at a chunk not in the table but in later, to be copied.
func (pw *prewalk) follow(lay layouts.Layout, cs []cursor, later []maps.Range) (waiting []cursor) {
	if len(pw.table) == 0 {
		return cs
	}
	safe := lay.SafeLinking
	for i := range cs {
		c := &cs[i]
		for {
			p := c.p
			if p%16 != 0 || p == c.end {
				break
			}
			j := pw.find(p)
			if j < 0 || pw.budget == 0 {
				if in(later, p, 24) {
					c.w = nil
					waiting = append(waiting, *c)
				}
				break
			}
			l := pw.table[j]
			pw.lists[c.k] = append(pw.lists[c.k], l)
			pw.links++
			pw.budget--
			looped := c.step(l, safe)
			if looped {
				break
			}
		}
	}
	return waiting
}

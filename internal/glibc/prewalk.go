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
			c.p = l.fd
			if c.fast && safe {
				c.p ^= (l.p + 16) >> 12
			}
			looped := c.p == c.mark
			if c.steps++; c.steps == c.power {
				c.mark, c.power, c.steps = c.p, 2*c.power, 0
			}
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
// from arenactl's memory budget.
var prewalkBudgetParts = 2 << 20

// prewalkParts is the prewalk of an arena copied in parts (wk.parts): it
// copies the part most lists wait in, lets every list there go as far as
// it can, and again, until every list has ended or maxPasses times as many
// copies as there are parts were made; the walk reads the rest itself.
// Lists tend to go through an arena's heaps together (in the order their
// chunks were freed), so most arenas take one copy of each part.
func (wk *walker) prewalkParts(ar uint64, st []byte) {
	pw := &wk.pre
	pw.reset()
	if !wk.mem.Buffer() {
		return
	}
	pw.budget = prewalkBudgetParts
	cs := pw.advance(wk.lay, pw.cursors(wk.lay, ar, st), nil, wk.parts)
	waiting := make([]int, len(wk.parts))
	for copies := 0; len(cs) > 0 && copies < maxPasses*len(wk.parts); copies++ {
		clear(waiting)
		best := 0
		for _, c := range cs {
			i, _ := slices.BinarySearchFunc(wk.parts, c.p, func(r maps.Range, p uint64) int {
				if r.End <= p {
					return -1
				}
				if r.Start > p {
					return 1
				}
				return 0
			})
			if i < len(waiting) {
				if waiting[i]++; waiting[i] > waiting[best] {
					best = i
				}
			}
		}
		part := wk.parts[best]
		var here, rest []cursor
		for _, c := range cs {
			if in([]maps.Range{part}, c.p, 24) {
				here = append(here, c)
			} else {
				rest = append(rest, c)
			}
		}
		if len(here) == 0 {
			break
		}
		spans := wk.mem.CopyAside(part)
		cs = append(rest, pw.advance(wk.lay, here, spans, wk.parts)...)
	}
}

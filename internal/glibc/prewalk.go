package glibc

import "encoding/binary"

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
// first link that leaves the copy, and when the arena's budget is spent
// (a loop, or more free chunks than it holds): the walk reads the rest
// itself.
type prewalk struct {
	lists [][]link // by list: the fastbins, then bins 1 to 127
}

// link is one chunk of a free list as the copy holds it: its address and
// the raw words at +8 (size) and +16 (fd, still mangled in a fastbin).
type link struct{ p, size, fd uint64 }

// prewalkBudget bounds the links recorded per arena (24 bytes each, 12 MiB
// in all): five times the free chunks an arena of windowCap bytes holds
// when laid out as bench/walk's bigheap lays them out (about 100 K).
const prewalkBudget = 1 << 19

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
}

// listIndex is the number prewalk gives bin i (1 to 127).
func (wk *walker) listIndex(i int) int { return wk.lay.NFastbins + i - 1 }

// prewalkLists fills wk.pre for the arena at ar, whose state is st, unless
// the loader that copied its heaps did (with its own read of st: the walk
// uses a link only at the chunk it names, so one from another read of the
// lists is as good).
func (wk *walker) prewalkLists(ar uint64, st []byte) {
	if wk.mem.win.pre != nil {
		return
	}
	wk.pre.fill(wk.lay, ar, st, wk.mem.win.spans)
}

// fill records the lists of the arena at ar, whose state is st, as spans
// (the copy of its heaps) hold them.
func (pw *prewalk) fill(lay Layout, ar uint64, st []byte, spans []window) {
	pw.reset()
	ws := &windows{spans: spans}
	if len(ws.spans) == 0 {
		return
	}
	nl := lay.NFastbins + nbins - 1
	for len(pw.lists) < nl {
		pw.lists = append(pw.lists, nil)
	}
	type cursor struct {
		k      int
		p, end uint64
		fast   bool
		w      *window // the one that holds p
		b      []byte  // the 24 bytes at p in w, once p is known good
	}
	// next checks c.p, where its list leads, and readies c.b; false when
	// the chain stops there.
	next := func(c *cursor) bool {
		p, w := c.p, c.w
		if p%16 != 0 || p == c.end {
			return false
		}
		if w == nil || p < w.start || p+24 > w.end || p+24 < p {
			if w = ws.get(p, 24); w == nil {
				return false
			}
			c.w = w
		}
		if w.holes != nil && (w.hole(p+8-w.start) || w.hole(p+16-w.start)) {
			return false
		}
		c.b = w.b[p-w.start:][:24]
		return true
	}
	cs := make([]cursor, 0, nl)
	for k := 0; k < nl; k++ {
		c := cursor{k: k}
		if k < lay.NFastbins {
			c.p, c.fast = le(st, lay.StateFastbins+int64(k)*8), true
		} else {
			off := lay.StateBins + int64(k-lay.NFastbins)*16
			c.p, c.end = le(st, off), ar+uint64(off)-16
		}
		if next(&c) {
			cs = append(cs, c)
		}
	}
	safe := lay.SafeLinking
	budget := prewalkBudget
	vals := make([][2]uint64, len(cs))
	for len(cs) > 0 && budget >= len(cs) {
		// First only the loads, one per chain, none waiting on another:
		// they are all in flight together. Then what depends on them.
		for j := range cs {
			b := cs[j].b
			vals[j] = [2]uint64{binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])}
		}
		budget -= len(cs)
		for j := 0; j < len(cs); {
			c := &cs[j]
			l := link{p: c.p, size: vals[j][0], fd: vals[j][1]}
			pw.lists[c.k] = append(pw.lists[c.k], l)
			c.p = l.fd
			if c.fast && safe {
				c.p ^= (l.p + 16) >> 12
			}
			if !next(c) {
				last := len(cs) - 1
				cs[j], vals[j] = cs[last], vals[last]
				cs = cs[:last]
				continue
			}
			j++
		}
	}
}

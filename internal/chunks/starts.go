package chunks

import (
	"container/heap"
	"encoding/binary"
)

// starts holds the walk's chunk starts until the heaps they lie in are
// known (the walk says where its heaps end only once it is done), in the
// walk's order: runs of rising addresses, each step a varint of the
// distance in 16-byte units, shifted, with the allocated bit. A heap is
// walked front to back and most chunks are under 2 KiB, so a step takes a
// byte or two: a list of 8-byte addresses cost more, for a moment, than
// the whole index (134 MB for the 16.8 M chunks of a 4 GiB heap).
type starts struct {
	runs []startRun
	buf  []byte
	last uint64
	n    int
}

type startRun struct {
	first    uint64 // address, |1 when allocated
	from, to int    // its steps in buf
}

// add records a start, |1 when allocated.
func (s *starts) add(a uint64) {
	addr := a &^ 1
	if r := len(s.runs); r > 0 && addr > s.last && (addr-s.last)%16 == 0 {
		s.buf = binary.AppendUvarint(s.buf, (addr-s.last)/16<<1|a&1)
		s.runs[r-1].to = len(s.buf)
	} else {
		s.runs = append(s.runs, startRun{first: a, from: len(s.buf), to: len(s.buf)})
	}
	s.last = addr
	s.n++
}

// runIter reads one run.
type runIter struct {
	s   *starts
	cur uint64 // address, |1 when allocated
	off int
	end int
	seq int // the run's place among all: the first of two equal starts is the earlier run's
}

func (it *runIter) next() bool {
	if it.off >= it.end {
		return false
	}
	v, n := binary.Uvarint(it.s.buf[it.off:it.end])
	if n <= 0 {
		it.off = it.end
		return false
	}
	it.off += n
	it.cur = (it.cur&^1 + v>>1*16) | v&1
	return true
}

// iters is a heap of runs by their current address.
type iters []*runIter

func (h iters) Len() int { return len(h) }
func (h iters) Less(i, j int) bool {
	if a, b := h[i].cur&^1, h[j].cur&^1; a != b {
		return a < b
	}
	return h[i].seq < h[j].seq
}
func (h iters) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *iters) Push(x any)   { *h = append(*h, x.(*runIter)) }
func (h *iters) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// sorted returns the starts of ss in address order, one at a time: a
// merge of their runs (a thread arena's heaps are walked from the newest
// back, and arenas one after another, so runs overlap in address). Where
// two runs hold the same address (a damaged or hostile core) the earlier
// run's comes first, so the order does not depend on how a walk cut its
// chunks into runs or arenas.
func sorted(ss []*starts) func() (uint64, bool) {
	var h iters
	for _, s := range ss {
		for _, r := range s.runs {
			h = append(h, &runIter{s: s, cur: r.first, off: r.from, end: r.to, seq: len(h)})
		}
	}
	heap.Init(&h)
	return func() (uint64, bool) {
		if len(h) == 0 {
			return 0, false
		}
		it := h[0]
		v := it.cur
		if it.next() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
		return v, true
	}
}

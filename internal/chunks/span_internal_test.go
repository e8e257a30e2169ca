package chunks

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// The index's slots against a plain list: chunks of 32 bytes and up at
// both halves of their slots, allocated or not, across rank blocks and
// summary words; every address asks Find, and the answer is the list's.
func TestSpanAgreesWithAList(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, seed))
		lo := uint64(0x55550000_0010) // 16 bytes into a 32-byte slot
		type chunk struct {
			addr, size uint64
			alloc      bool
		}
		var list []chunk
		a := lo
		for len(list) < 3000 {
			size := uint64(32 + 16*r.IntN(8))
			if r.IntN(50) == 0 {
				size = uint64(16 * (2 + r.IntN(4000))) // a long free run: empty words and blocks
			}
			list = append(list, chunk{a, size, r.IntN(2) == 0})
			a += size
		}
		hi := a
		ix := &Index{heaps: [][2]uint64{{lo, hi}}}
		var all []uint64
		for _, c := range list {
			v := c.addr
			if c.alloc {
				v |= 1
			}
			all = append(all, v)
		}
		ix.index(sorted([]*starts{startsOf(all)}))
		find := func(addr uint64) (Chunk, bool) {
			for _, c := range list {
				if c.alloc && addr >= c.addr+16 && addr < c.addr+c.size {
					ch := Chunk{Addr: c.addr, Size: c.size}
					if addr < ch.User() || addr >= ch.UserEnd() {
						return Chunk{}, false
					}
					return ch, true
				}
			}
			return Chunk{}, false
		}
		for _, c := range list {
			for _, addr := range []uint64{c.addr, c.addr + 8, c.addr + 16, c.addr + 24, c.addr + c.size/2, c.addr + c.size - 8, c.addr + c.size - 1} {
				got, ok := ix.Find(addr)
				want, wok := find(addr)
				if ok != wok || got.Addr != want.Addr || got.Size != want.Size {
					t.Fatalf("seed %d: Find(%#x) = %#x+%#x %v, want %#x+%#x %v", seed, addr, got.Addr, got.Size, ok, want.Addr, want.Size, wok)
				}
			}
		}
		// Refs, a batch at a time, marks what Find finds, each chunk
		// once, in the order of the words, free chunks never, and not
		// the chunk from; shared or not.
		var ws []uint64
		for _, c := range list {
			ws = append(ws, c.addr, c.addr+8, c.addr+16, c.addr+24, c.addr+c.size/2, c.addr+c.size-8, c.addr+c.size-1, c.addr+c.size+8)
		}
		r.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
		from := list[len(list)/2].addr
		var want []Chunk
		seen := map[uint64]bool{}
		for _, w := range ws {
			// find's answer, from the one chunk of the list that holds w
			i := sort.Search(len(list), func(i int) bool { return list[i].addr > w }) - 1
			if i < 0 || w >= list[i].addr+list[i].size || !list[i].alloc || w < list[i].addr+16 {
				continue
			}
			if c := (Chunk{Addr: list[i].addr, Size: list[i].size}); !seen[c.Addr] && c.Addr != from {
				seen[c.Addr] = true
				want = append(want, c)
			}
		}
		for _, shared := range []bool{false, true} {
			m := ix.NewMarks()
			var got []Chunk
			var buf []Ref
			for i := 0; i < len(ws); i += 61 {
				buf = m.Refs(buf, ws[i:min(len(ws), i+61)], from, 0, 2, shared, func(c Chunk) { got = append(got, Chunk{Addr: c.Addr, Size: c.Size}) })
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d: Refs (shared %v) marked %d chunks, Find finds %d, or in another order", seed, shared, len(got), len(want))
			}
			for _, c := range want {
				if m.Get(c) != 2 {
					t.Fatalf("seed %d: %#x not marked", seed, c.Addr)
				}
			}
		}
		n := 0
		ix.ForEach(func(c Chunk) bool {
			for n < len(list) && !list[n].alloc {
				n++
			}
			if c.Addr != list[n].addr || c.Size != list[n].size {
				t.Fatalf("seed %d: ForEach gave %#x+%#x, want %#x+%#x", seed, c.Addr, c.Size, list[n].addr, list[n].size)
			}
			n++
			return true
		})
		m := ix.NewMarks()
		for i, c := range list {
			if c.alloc {
				m.Set(Chunk{Addr: c.addr, Size: c.size}, uint8(i%4))
			}
		}
		for i, c := range list {
			if c.alloc {
				if v := m.Get(Chunk{Addr: c.addr, Size: c.size}); v != uint8(i%4) {
					t.Fatalf("seed %d: mark of %#x is %d, set %d", seed, c.addr, v, i%4)
				}
			}
		}
	}
}

// A start within 32 bytes of the one before (only a hostile core can
// describe one) is dropped, not given the slot's bits of its neighbour.
func TestSpanDropsAShortChunk(t *testing.T) {
	lo := uint64(0x10000)
	ix := &Index{heaps: [][2]uint64{{lo, lo + 0x100}}}
	ix.index(sorted([]*starts{startsOf([]uint64{lo | 1, (lo + 16) | 1, (lo + 64) | 1})}))
	c, ok := ix.Find(lo + 40)
	if !ok || c.Addr != lo || c.Size != 64 {
		t.Fatalf("Find = %#x+%#x %v, want the first chunk, 64 bytes", c.Addr, c.Size, ok)
	}
}

// startsOf is the list of starts of a slice, in address order.
func startsOf(all []uint64) *starts {
	s := &starts{}
	for _, a := range slices.Sorted(slices.Values(all)) {
		s.add(a)
	}
	return s
}

// The walk's starts come in runs that overlap in address (arenas one after
// another, a thread arena's heaps from the newest back) and with steps of
// any size: they come out in address order, allocated bits kept.
func TestStartsMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	s := &starts{}
	var want []uint64
	for run := 0; run < 50; run++ {
		a := uint64(0x10000+r.IntN(1<<20)) * 16
		for i := 0; i < r.IntN(200); i++ {
			v := a | uint64(r.IntN(2))
			if !slices.ContainsFunc(want, func(w uint64) bool { return w&^1 == a }) {
				s.add(v)
				want = append(want, v)
			}
			a += 16 * uint64(2+r.IntN(1<<r.IntN(20)))
		}
	}
	slices.SortFunc(want, func(a, b uint64) int { return int(int64(a&^1) - int64(b&^1)) })
	next := sorted([]*starts{s})
	for i, w := range want {
		got, ok := next()
		if !ok || got != w {
			t.Fatalf("start %d: %#x %v, want %#x", i, got, ok, w)
		}
	}
	if _, ok := next(); ok {
		t.Fatal("more starts than added")
	}
	if s.n != len(want) || len(s.buf) > 4*len(want) {
		t.Errorf("%d starts in %d bytes of steps", s.n, len(s.buf))
	}
}

// A pointer far into a large chunk finds it however many summary words lie
// between: arena chunks of tens of MiB are normal (the mmap threshold
// grows to 32 MiB), and each word of the second summary covers 8 MiB.
// Heaps that overlap (a hostile heap size) get disjoint spans, so that a
// chunk's marks are one chunk's.
func TestSpanFindsAChunkMegabytesBack(t *testing.T) {
	lo := uint64(0x7f0000000000)
	big := uint64(20 << 20)
	ix := &Index{heaps: [][2]uint64{{lo, lo + big + 4096}, {lo + big, lo + big + 8192}}}
	ix.index(sorted([]*starts{startsOf([]uint64{lo | 1, (lo + big) | 1, lo + big + 4096})}))
	for _, off := range []uint64{16, 1 << 20, 7 << 20, 9 << 20, 17 << 20, big - 16} {
		c, ok := ix.Find(lo + off)
		if !ok || c.Addr != lo || c.Size != big {
			t.Errorf("Find(+%#x) = %#x+%#x %v, want the %d-byte chunk at %#x", off, c.Addr, c.Size, ok, big, lo)
		}
	}
	if c, ok := ix.Find(lo + big + 100); !ok || c.Addr != lo+big || c.Size != 4096 {
		t.Errorf("the chunk after: %#x+%#x %v", c.Addr, c.Size, ok)
	}
	for i := 1; i < len(ix.spans); i++ {
		if ix.spans[i].lo < ix.spans[i-1].hi {
			t.Errorf("spans %d and %d overlap: [%#x, %#x) and [%#x, %#x)", i-1, i, ix.spans[i-1].lo, ix.spans[i-1].hi, ix.spans[i].lo, ix.spans[i].hi)
		}
	}
	m := ix.NewMarks()
	a, b := Chunk{Addr: lo, Size: big}, Chunk{Addr: lo + big, Size: 4096}
	m.Set(b, 2)
	m.Set(a, 1)
	if m.Get(a) != 1 || m.Get(b) != 2 {
		t.Errorf("marks %d and %d, set 1 and 2", m.Get(a), m.Get(b))
	}
}

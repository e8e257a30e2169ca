package predict

import (
	"testing"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
)

// halfResident reports every page resident except those in [hole, hole+n).
type halfResident struct{ hole, n uint64 }

func (h halfResident) Resident(start, end uint64) (uint64, error) {
	lo, hi := max(start, h.hole), min(end, h.hole+h.n)
	if lo < hi {
		return (end - start) - (hi - lo), nil
	}
	return end - start, nil
}

func TestPredictTrim(t *testing.T) {
	const top = 0x55550010_0000
	main := glibc.ArenaWalk{Addr: 0x7f00000a0c60, Main: true, Top: top, TopSize: 0x21000,
		TrimRanges: []maps.Range{{Start: 0x55550000_1000, End: 0x55550000_9000}, // a free chunk's pages
			{Start: top + 0x1000, End: top + 0x21000}}} // the walk's systrim range, pad 0
	thread := glibc.ArenaWalk{Addr: 0x7f0000000030, Top: 0x7f0000200000, TopSize: 0x100000,
		TrimRanges: []maps.Range{{Start: 0x7f0000010000, End: 0x7f0000030000}}}
	w := &glibc.Walk{Arenas: []glibc.ArenaWalk{main, thread}}
	res := halfResident{hole: 0x7f0000020000, n: 0x8000} // 8 pages of the thread arena's range are not resident

	for _, tc := range []struct {
		pad, top uint64
	}{
		{0, 0x20000},            // (0x21000 - 32 - 1) rounded down to pages
		{0x1000, 0x1f000},       // pad comes off before rounding
		{0x1fff, 0x1e000},       // ... and the rest is rounded down
		{0x20000, 0},            // 0x21000 - 33 - 0x20000 < a page
		{0x21000 - 33, 0},       // top_area <= pad: nothing
		{0x21000 - 33 + 100, 0}, // pad above top
	} {
		p, err := MallocTrim(w, tc.pad, res)
		if err != nil {
			t.Fatal(err)
		}
		m, th := p.Arenas[0], p.Arenas[1]
		if m.Top != tc.top || m.Chunks != 1 || m.Bytes != 0x8000+tc.top || m.Resident != m.Bytes {
			t.Errorf("pad %#x: main arena %+v, want top %#x", tc.pad, m, tc.top)
		}
		if th.Top != 0 || th.Chunks != 1 || th.Bytes != 0x20000 || th.Resident != 0x18000 {
			t.Errorf("pad %#x: thread arena %+v", tc.pad, th)
		}
		if p.Bytes != m.Bytes+th.Bytes || p.Resident != m.Resident+th.Resident || p.Pad != tc.pad {
			t.Errorf("pad %#x: totals %+v", tc.pad, p)
		}
	}

	// In a target of 16 KiB pages (aarch64), systrim rounds to those.
	w.PageSize = 16384
	if p, _ := MallocTrim(w, 0x1000, res); p.Arenas[0].Top != 0x1c000 {
		t.Errorf("pad 0x1000 at 16 KiB pages: main arena's top gives %#x back, want 0x1c000", p.Arenas[0].Top)
	}
	w.PageSize = 0

	// A non-contiguous main arena is never shrunk by sbrk.
	w.Arenas[0].Flags = 2
	p, _ := MallocTrim(w, 0, res)
	if p.Arenas[0].Top != 0 || p.Arenas[0].Bytes != 0x8000 {
		t.Errorf("non-contiguous main arena: %+v", p.Arenas[0])
	}
}

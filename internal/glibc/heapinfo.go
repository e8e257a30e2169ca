package glibc

import (
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/memio"
)

// HeapMax is the size of a thread arena's heaps, and so their alignment:
// heap_max_size() in malloc/arena.c (glibc 2.35 on), HEAP_MAX_SIZE (64 MiB
// on 64-bit) unless the glibc.malloc.hugetlb tunable set mp_.hp_pagesize,
// then four of those pages. ok is false when mp_ cannot be read.
func HeapMax(mem Memory, lay layouts.Layout, a Anchors) (uint64, bool) {
	if lay.MpHpPagesize < 0 {
		return defaultHeap, true
	}
	hp, err := readWord(mem, a.Mp+uint64(lay.MpHpPagesize))
	if err != nil {
		return 0, false
	}
	if hp != 0 {
		return 4 * hp, true
	}
	return defaultHeap, true
}

// HeapArena is the arena a thread arena's heap at hb (HeapMax-aligned)
// belongs to: its heap_info's first word, ar_ptr (malloc/arena.c,
// heap_info). It is read only where hb's page holds data, when mem can
// tell (DataRuns): a page never touched holds no heap_info, and reading it
// would map the zero page into a live process. ok is false when there is
// none: unreadable, no data, or not a pointer malloc aligns.
func HeapArena(mem Memory, hb uint64) (uint64, bool) {
	if dr, ok := mem.(memio.DataRuns); ok {
		page := hb &^ (pageSz - 1)
		data := false
		if err := dr.DataRuns(page, page+pageSz, func(_, _ uint64, d bool) { data = d }); err != nil || !data {
			return 0, false
		}
	}
	ar, err := readWord(mem, hb)
	if err != nil || ar == 0 || ar%16 != 0 {
		return 0, false
	}
	return ar, true
}

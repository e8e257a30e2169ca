package report

import "github.com/arenactl/arenactl/internal/maps"

// TrimRow is one line of a trim's before and after: a heap class, or the
// whole process.
type TrimRow struct {
	Name                string // the class, or "process"
	RssBefore, RssAfter uint64
	PdBefore, PdAfter   uint64 // Private_Dirty
}

// Rows pairs the heap classes before and after the trim (main heap, then
// the arenas' heaps, those present), then the process.
func (t *TrimReport) Rows() []TrimRow {
	idx := map[maps.Class]*TrimRow{}
	get := func(c maps.Class) *TrimRow {
		if row, ok := idx[c]; ok {
			return row
		}
		row := &TrimRow{Name: c.String()}
		idx[c] = row
		return row
	}
	for _, c := range t.Before.Classes {
		row := get(c.Class)
		row.RssBefore, row.PdBefore = c.Rss, c.PrivateDirty
	}
	for _, c := range t.After.Classes {
		row := get(c.Class)
		row.RssAfter, row.PdAfter = c.Rss, c.PrivateDirty
	}
	var out []TrimRow
	for _, c := range []maps.Class{maps.ClassMainHeap, maps.ClassArenaHeap} {
		if row, ok := idx[c]; ok {
			out = append(out, *row)
		}
	}
	return append(out, TrimRow{Name: "process", RssBefore: t.Before.Rollup.Rss, RssAfter: t.After.Rollup.Rss,
		PdBefore: t.Before.Rollup.PrivateDirty, PdAfter: t.After.Rollup.PrivateDirty})
}

// HeapShrunk is the address space the main heap gave back across the trim:
// malloc_trim returns its top above the pad with sbrk (glibc malloc/malloc.c,
// systrim), and returns 1 for it even when none of those pages was
// resident, which leaves RSS as it was.
func (t *TrimReport) HeapShrunk() uint64 {
	size := func(s MapsSummary) uint64 {
		for _, c := range s.Classes {
			if c.Class == maps.ClassMainHeap {
				return c.Size
			}
		}
		return 0
	}
	b, a := size(t.Before), size(t.After)
	if a >= b {
		return 0
	}
	return b - a
}

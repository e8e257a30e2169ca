package predict

import (
	"fmt"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
)

// Residency says how much of a range of the target's memory is in RAM now
// (the live target reads /proc/PID/pagemap; glibc itself reads no /proc).
type Residency interface {
	Resident(start, end uint64) (uint64, error)
}

// Trim is what malloc_trim(Pad) would give back, computed from a
// walk of the free lists (mtrim and systrim in malloc/malloc.c) and the
// pages resident now.
type Trim struct {
	Pad      uint64
	Arenas   []ArenaTrim // in ring order, as in the walk
	Bytes    uint64      // madvised or returned with sbrk, resident or not
	Resident uint64      // of Bytes, resident now: the RSS the trim would release
}

// ArenaTrim is the prediction for one arena.
type ArenaTrim struct {
	Index    int
	Addr     uint64
	Main     bool
	Ranges   []maps.Range // mtrim's madvise ranges, then systrim's top range (main arena)
	Chunks   int          // free chunks that have at least one whole page to give
	Bytes    uint64
	Top      uint64 // part of Bytes: the main arena's top given back by systrim
	Resident uint64
}

// MallocTrim predicts malloc_trim(pad) from a walk (glibc.WalkHeap or
// glibc.WalkLists), counting only the pages that res reports resident: madvise
// of a page that is not in RAM releases nothing. The walk's TrimRanges
// model systrim with pad 0; here the main arena's top follows pad:
// ALIGN_DOWN(chunksize(top) - MINSIZE - 1 - pad, pagesize) bytes from the
// top's end when positive, and only for a contiguous main arena. Not
// modelled: fastbin consolidation before the trim (chunks merged from
// fastbins may add pages) and systrim's alignment to transparent huge pages
// (2.35+ with glibc.malloc.hugetlb=1).
func MallocTrim(w *glibc.Walk, pad uint64, res Residency) (*Trim, error) {
	p := &Trim{Pad: pad}
	for i := range w.Arenas {
		a := &w.Arenas[i]
		at := ArenaTrim{Index: i, Addr: a.Addr, Main: a.Main}
		for _, r := range a.TrimRanges {
			if a.Main && r.Start >= a.Top && r.End <= a.Top+a.TopSize {
				continue // the walk's systrim range, pad 0: redone below
			}
			at.Ranges = append(at.Ranges, r)
			at.Chunks++
		}
		if top := systrimRange(a, pad, w.PageSize); top.End > top.Start {
			at.Ranges = append(at.Ranges, top)
			at.Top = top.End - top.Start
		}
		for _, r := range at.Ranges {
			n, err := res.Resident(r.Start, r.End)
			if err != nil {
				return nil, fmt.Errorf("arena %d: residency of %#x-%#x: %w", i, r.Start, r.End, err)
			}
			at.Bytes += r.End - r.Start
			at.Resident += n
		}
		p.Bytes += at.Bytes
		p.Resident += at.Resident
		p.Arenas = append(p.Arenas, at)
	}
	return p, nil
}

// systrimRange is what systrim(pad) would sbrk back from the main arena's
// top (malloc.c@2.36 systrim): nothing for another arena, a non-contiguous
// main arena, or a top no larger than MINSIZE + 1 + pad.
func systrimRange(a *glibc.ArenaWalk, pad, page uint64) maps.Range {
	const (
		noncontiguous = 2  // NONCONTIGUOUS_BIT, malloc/malloc.c
		minChunk      = 32 // MINSIZE on 64-bit, malloc/malloc.c
	)
	if page == 0 {
		page = 4096 // a walk that did not say (x86_64's pages)
	}
	if !a.Main || a.Flags&noncontiguous != 0 || a.TopSize <= minChunk+1 {
		return maps.Range{}
	}
	area := a.TopSize - minChunk - 1
	if area <= pad {
		return maps.Range{}
	}
	extra := (area - pad) &^ (page - 1) // the target's pages: GLRO(dl_pagesize)
	end := a.Top + a.TopSize
	return maps.Range{Start: end - extra, End: end}
}

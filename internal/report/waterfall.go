package report

import (
	"fmt"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/predict"
	"github.com/arenactl/arenactl/internal/maps"
)

// Residency is what the pagemap said, just after the walk, about the
// allocator's free memory and its mmapped chunks: the part of the RSS
// waterfall smaps cannot give, since a heap's mapping holds held and free
// chunks alike and the kernel merges an mmapped chunk's mapping with its
// neighbours.
type Residency struct {
	// Measured: the pages were asked about. A core has no pagemap: every
	// whole free page is then taken to be resident, and a snapshot's RSS
	// may say otherwise (the difference shows as unexplained).
	Measured bool
	// FreeWhole is the whole pages inside free chunks, the arenas' tops
	// included; FreeWholeResident those of them in RAM.
	FreeWhole, FreeWholeResident uint64
	// Trimmable is the resident part of what malloc_trim(0) would give
	// back: mtrim's madvise of whole free pages in every arena's bins and
	// systrim's shrinking of the main arena's top (malloc/malloc.c@2.36
	// mtrim, systrim).
	Trimmable uint64
	// ThreadTops is the resident whole pages of the thread arenas' top
	// chunks, which malloc_trim leaves (mtrim calls systrim for
	// main_arena only); only free() shrinks them, in heap_trim
	// (malloc/arena.c), once a top is above trim_threshold.
	ThreadTops uint64
	// Mmapped is the bytes of the chunks glibc mmapped one by one that
	// the walk found, MmappedResident those of them in RAM;
	// MmappedFound is false when the walk did not look for them (a
	// pre-flight walk of the lists only): malloc_info's total stands in.
	Mmapped, MmappedResident uint64
	MmappedCount             uint64
	MmappedFound             bool
	// TopsOutsideFree is the arenas' top chunks when malloc_info does not
	// count them free (before 2.31, Layout.RestIncludesTop): they are
	// moved from its in use to the free lines.
	TopsOutsideFree uint64
}

// MeasureResidency asks res (nil for a core) which of the walk's free
// pages and mmapped chunks are resident. Every range is first cut to the
// writable mappings of ms (when given) that hold its start (maps.ClipWritable): a top
// chunk's size read from a running process can be a pointer, and asking
// the pagemap about hundreds of GiB of holes took seconds and counted
// other mappings' pages as free heap.
func MeasureResidency(w *glibc.Walk, res predict.Residency, ms []maps.Mapping) (*Residency, error) {
	r := &Residency{Measured: res != nil, MmappedFound: w.Mmapped.Count >= uint64(uint32(w.Params.NMmaps))}
	measure := func(rg maps.Range) (uint64, error) {
		if res == nil {
			return rg.End - rg.Start, nil
		}
		return res.Resident(rg.Start, rg.End)
	}
	// resident is how many bytes of rg are resident, and how big rg is
	// once clipped.
	resident := func(rg maps.Range) (n, size uint64, err error) {
		if ms != nil {
			if rg = maps.ClipWritable(ms, rg); rg.End <= rg.Start {
				return 0, 0, nil
			}
		}
		n, err = measure(rg)
		return n, rg.End - rg.Start, err
	}
	for i := range w.Arenas {
		a := &w.Arenas[i]
		if !w.Layout.RestIncludesTop {
			r.TopsOutsideFree += a.TopSize
		}
		for _, rg := range a.TrimRanges {
			n, size, err := resident(rg)
			if err != nil {
				return nil, err
			}
			r.FreeWhole += size
			r.FreeWholeResident += n
			r.Trimmable += n
		}
		if a.Main || a.TopSize == 0 {
			continue // the main top's whole pages are the last TrimRange
		}
		top := maps.Range{Start: pageUp(a.Top + 2*8), End: pageDown(a.Top + a.TopSize)}
		if top.End <= top.Start {
			continue
		}
		n, size, err := resident(top)
		if err != nil {
			return nil, err
		}
		r.FreeWhole += size
		r.FreeWholeResident += n
		r.ThreadTops += n
	}
	for _, rg := range w.Mmapped.Regions {
		n, size, err := resident(rg)
		if err != nil {
			return nil, err
		}
		r.Mmapped += size
		r.MmappedResident += n
		r.MmappedCount++
	}
	return r, nil
}

const pageSize = 4096

func pageUp(a uint64) uint64   { return (a + pageSize - 1) &^ (pageSize - 1) }
func pageDown(a uint64) uint64 { return a &^ (pageSize - 1) }

// ServerMemory is a database server's own accounting of its memory
// (performance_schema's memory instruments), placed beside the waterfall.
type ServerMemory struct {
	Source string // the socket or address read
	// Total is what every instrument counts now; Instruments how many
	// count anything; Events the largest, largest first.
	Total       uint64
	Instruments int
	Events      []ServerMemoryEvent
}

// ServerMemoryEvent is one memory instrument's current bytes.
type ServerMemoryEvent struct {
	Name  string
	Bytes uint64
}

// Waterfall is the process's resident memory split into lines that add up
// to its RSS (smaps_rollup): what malloc holds for the program, what it
// keeps free but resident, its tcaches and mmapped chunks, then the memory
// malloc does not own. Unexplained is what no line accounts for, signed:
// never folded into another line.
type Waterfall struct {
	Rss     uint64 // the process's RSS, from smaps_rollup
	HeapRss uint64 // of it, the heaps' mappings (main heap and arena heaps), from smaps
	Lines   []WaterfallLine
	// Unexplained is Rss less every line: heap metadata, pages of held
	// chunks never touched (negative), and what changed between the
	// reads of a process that was not held still.
	Unexplained int64
	// Notes say which lines are estimates and why.
	Notes []string
	// Server is the server's own accounting, when it was read (--mysql);
	// ServerErr why it could not be. Unaccounted is the program's
	// anonymous memory (held, tcaches, mmapped chunks, other anonymous)
	// less what the server counts: what it does not account for.
	Server      *ServerMemory
	ServerErr   string
	Unaccounted int64
}

// Waterfall line IDs, stable (JSON).
const (
	LineHeld      = "held"
	LineTrimmable = "free-trimmable"
	LinePinned    = "free-pinned"
	LineTcache    = "tcache"
	LineMmapped   = "mmapped"
	LineAnon      = "other-anon"
	LineStacks    = "stacks"
	LineFiles     = "files"
)

// WaterfallLine is one step of the waterfall.
type WaterfallLine struct {
	ID    string
	Title string
	Bytes uint64
	// Heap: the line lies inside the heaps' mappings.
	Heap bool
	// Detail breaks the line down (what pins free memory, the stacks'
	// sizes); Action is what would lower it.
	Detail []string
	Action string
}

// Sum is the lines' total.
func (w *Waterfall) Sum() uint64 {
	var n uint64
	for _, l := range w.Lines {
		n += l.Bytes
	}
	return n
}

// Line returns the line of id, and false when there is none.
func (w *Waterfall) Line(id string) (WaterfallLine, bool) {
	for _, l := range w.Lines {
		if l.ID == id {
			return l, true
		}
	}
	return WaterfallLine{}, false
}

// Waterfall splits the report's RSS into the waterfall's lines; nil when
// the source records no RSS (a kernel core) or malloc's figures are
// missing.
func (r *Report) Waterfall() *Waterfall {
	if r.Maps.Unmeasured || r.Maps.Rollup.Rss == 0 || r.Malloc == nil {
		return nil
	}
	mi := r.Malloc
	byClass := map[maps.Class]maps.ClassSummary{}
	for _, c := range r.Maps.Classes {
		byClass[c.Class] = c
	}
	w := &Waterfall{Rss: r.Maps.Rollup.Rss, HeapRss: r.Maps.HeapRss()}
	res := r.Residency

	var tcache uint64
	tcacheRead := r.ReadOnly != nil && r.ReadOnly.TcachesSkipped == ""
	if tcacheRead {
		_, tcache = r.ReadOnly.Tcached()
	}
	inUse, free := mi.InUse(), mi.FreeBytes()
	if res != nil {
		tops := min(inUse, res.TopsOutsideFree)
		inUse, free = inUse-tops, free+tops
	}
	var trimmable, tops, freeRes uint64
	switch {
	case res != nil:
		nonRes := res.FreeWhole - min(res.FreeWhole, res.FreeWholeResident)
		freeRes = free - min(free, nonRes)
		trimmable, tops = min(res.Trimmable, freeRes), min(res.ThreadTops, freeRes)
		if !res.Measured {
			w.Notes = append(w.Notes, "no pagemap (a core): every whole free page is counted as resident")
		}
	default:
		freeRes = free
		w.Notes = append(w.Notes, "no walk of the free lists: free memory is counted as resident and none of it as trimmable")
	}
	// Held chunks are counted resident, but for what the heaps' RSS
	// cannot hold beside the free pages and the tcaches: chunks allocated
	// and never touched (a large buffer that fills as it is used). That
	// much is not RSS; what the heaps hold beyond the lines (their
	// metadata, change between reads) stays unexplained.
	hl := WaterfallLine{ID: LineHeld, Title: "held by the program in malloc's heaps", Bytes: inUse - min(inUse, tcache), Heap: true,
		Action: "the program's own: `arenactl leaks PID` says which stacks allocated it"}
	if res != nil && res.Measured {
		if room := w.HeapRss - min(w.HeapRss, freeRes+tcache); hl.Bytes > room {
			hl.Detail = append(hl.Detail, fmt.Sprintf("%s more is held but not resident (allocated and not touched yet)", human(hl.Bytes-room)))
			hl.Bytes = room
		}
	}
	w.add(hl)
	pinned := freeRes - min(freeRes, trimmable)
	w.add(WaterfallLine{ID: LineTrimmable, Title: "free in the heaps, resident, trimmable now", Bytes: trimmable, Heap: true,
		Action: fmt.Sprintf("`arenactl trim PID` (malloc_trim(0)) would return %s now", human(trimmable))})
	pl := WaterfallLine{ID: LinePinned, Title: "free in the heaps, resident, pinned", Bytes: pinned, Heap: true,
		Action: "MALLOC_TRIM_THRESHOLD_=131072 lets free() give tops back sooner; MALLOC_ARENA_MAX=2 makes fewer heaps to fragment"}
	if tops > 0 {
		pl.Detail = append(pl.Detail, fmt.Sprintf("%s at the top of thread arenas: malloc_trim leaves them, only free() shrinks them above trim_threshold", human(tops)))
	}
	if rest := pinned - min(pinned, tops); rest > 0 {
		pl.Detail = append(pl.Detail, fmt.Sprintf("%s in pieces of pages shared with held chunks, fastbins and chunk headers: held chunks pin them", human(rest)))
	}
	w.add(pl)

	tl := WaterfallLine{ID: LineTcache, Title: "cached in threads' tcaches", Bytes: tcache, Heap: true,
		Action: "GLIBC_TUNABLES=glibc.malloc.tcache_count=N (or tcache_max) lowers it; a thread's cache goes when it exits"}
	if !tcacheRead {
		tl.Detail = append(tl.Detail, "not read: counted in the held line, as malloc_info counts it (--read-only reads them)")
	}
	w.add(tl)

	anon := byClass[maps.ClassAnon]
	ml := WaterfallLine{ID: LineMmapped, Title: "chunks mmapped one by one (above the mmap threshold)",
		Action: "given back at free(); MALLOC_MMAP_THRESHOLD_ sets which sizes are mmapped"}
	// The chunks found are asked about page by page (a core has no
	// pagemap: all their pages count); those malloc counts and the walk
	// did not find stand in with their size. Neither can exceed the
	// anonymous memory they lie in.
	var found, resident uint64
	if res != nil {
		found, resident = res.Mmapped, res.MmappedResident
		if res.MmappedCount > 0 {
			ml.Detail = append(ml.Detail, fmt.Sprintf("%d chunks found, %s mapped", res.MmappedCount, human(res.Mmapped)))
		}
	}
	if missing := mi.MmapBytes - min(mi.MmapBytes, found); missing > 0 && (res == nil || !res.MmappedFound) {
		resident += missing
		w.Notes = append(w.Notes, fmt.Sprintf("%s of mmapped chunks malloc counts were not found in the map: their size stands for their resident memory", human(missing)))
	}
	ml.Bytes = min(resident, anon.Rss)
	w.add(ml)
	w.add(WaterfallLine{ID: LineAnon, Title: "other anonymous memory (not malloc's)", Bytes: anon.Rss - min(anon.Rss, ml.Bytes),
		Detail: []string{fmt.Sprintf("%d mappings", anon.Count)},
		Action: "mapped by the program or a library itself: `arenactl maps --all PID` lists them"})

	main, th := byClass[maps.ClassMainStack], byClass[maps.ClassThreadStack]
	sl := WaterfallLine{ID: LineStacks, Title: "stacks", Bytes: main.Rss + th.Rss,
		Action: "fewer threads, or smaller stacks (pthread_attr_setstacksize, ulimit -s before start)"}
	if th.Count > 0 {
		sl.Detail = append(sl.Detail, fmt.Sprintf("thread stacks: %s reserved in %d mappings (guard pages included), %s resident", human(th.Size), th.Count, human(th.Rss)))
	}
	if r.Threads > 0 {
		sl.Detail = append(sl.Detail, fmt.Sprintf("%d threads", r.Threads))
	}
	w.add(sl)

	var files uint64
	for _, c := range []maps.Class{maps.ClassExecutable, maps.ClassSharedLib, maps.ClassFile, maps.ClassSpecial} {
		files += byClass[c].Rss
	}
	w.add(WaterfallLine{ID: LineFiles, Title: "files: the executable, libraries, mapped files", Bytes: files,
		Action: "page cache: clean pages are reclaimed by the kernel under pressure"})

	w.Unexplained = int64(w.Rss) - int64(w.Sum())
	w.ServerErr = r.ServerErr
	if sm := r.Server; sm != nil {
		w.Server = sm
		var anon uint64
		for _, id := range []string{LineHeld, LineTcache, LineMmapped, LineAnon} {
			l, _ := w.Line(id)
			anon += l.Bytes
		}
		w.Unaccounted = int64(anon) - int64(sm.Total)
	}
	return w
}

func (w *Waterfall) add(l WaterfallLine) { w.Lines = append(w.Lines, l) }

// human prints a byte count with a binary unit.
func human(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

package report

import (
	"github.com/arenactl/arenactl/internal/glibc"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/maps"
)

func waterfallReport() *Report {
	return &Report{
		Malloc: &mallocinfo.Info{SystemCurrent: 100 << 20, RestBytes: 40 << 20, MmapBytes: 8 << 20, HasMmap: true, MmapCount: 2},
		Maps: MapsSummary{Rollup: maps.Rollup{Rss: 150 << 20}, Classes: []maps.ClassSummary{
			{Class: maps.ClassAnon, Count: 3, Rss: 10 << 20},
			{Class: maps.ClassMainHeap, Count: 1, Rss: 100 << 20},
			{Class: maps.ClassThreadStack, Count: 2, Size: 16 << 20, Rss: 1 << 20},
			{Class: maps.ClassSharedLib, Count: 4, Rss: 30 << 20},
		}},
		Threads: 3,
	}
}

// The lines and the unexplained rest add up to RSS whatever is known; a
// line never takes more than the memory it lies in.
func TestWaterfallAddsUpAlways(t *testing.T) {
	for _, c := range []struct {
		name string
		res  *Residency
	}{
		{"no walk", nil},
		{"measured", &Residency{Measured: true, FreeWhole: 30 << 20, FreeWholeResident: 20 << 20, Trimmable: 15 << 20, ThreadTops: 5 << 20,
			Mmapped: 8 << 20, MmappedResident: 3 << 20, MmappedCount: 2, MmappedFound: true}},
		{"chunks larger than the anonymous memory", &Residency{Measured: true, Mmapped: 64 << 20, MmappedResident: 64 << 20, MmappedCount: 2, MmappedFound: true}},
		{"tops outside malloc_info's free", &Residency{Measured: true, TopsOutsideFree: 4 << 20, MmappedFound: true}},
	} {
		r := waterfallReport()
		r.Residency = c.res
		w := r.Waterfall()
		if int64(w.Sum())+w.Unexplained != int64(w.Rss) {
			t.Errorf("%s: %d + %d != %d", c.name, w.Sum(), w.Unexplained, w.Rss)
		}
		mm, _ := w.Line(LineMmapped)
		anon, _ := w.Line(LineAnon)
		if mm.Bytes+anon.Bytes != 10<<20 {
			t.Errorf("%s: mmapped %d + other anonymous %d, the class holds %d", c.name, mm.Bytes, anon.Bytes, 10<<20)
		}
		held, _ := w.Line(LineHeld)
		tr, _ := w.Line(LineTrimmable)
		pin, _ := w.Line(LinePinned)
		switch c.name {
		case "no walk":
			if held.Bytes != 60<<20 || tr.Bytes != 0 || pin.Bytes != 40<<20 || len(w.Notes) == 0 {
				t.Errorf("%s: held %d, trimmable %d, pinned %d, notes %q", c.name, held.Bytes, tr.Bytes, pin.Bytes, w.Notes)
			}
		case "measured":
			// 10 MiB of the free whole pages are not resident.
			if held.Bytes != 60<<20 || tr.Bytes != 15<<20 || pin.Bytes != 15<<20 || mm.Bytes != 3<<20 {
				t.Errorf("%s: held %d, trimmable %d, pinned %d, mmapped %d", c.name, held.Bytes, tr.Bytes, pin.Bytes, mm.Bytes)
			}
		case "tops outside malloc_info's free":
			if held.Bytes != 56<<20 || pin.Bytes != 44<<20 {
				t.Errorf("%s: held %d, pinned %d", c.name, held.Bytes, pin.Bytes)
			}
		}
	}
	// A heap of 100 MiB holding 60 MiB in use, of which only 50 MiB
	// resident beside 40 MiB of resident free memory: 10 MiB held and
	// never touched is not RSS.
	r := waterfallReport()
	r.Maps.Classes[1].Rss = 90 << 20
	r.Maps.Rollup.Rss = 131 << 20 // the classes' sum
	r.Residency = &Residency{Measured: true, MmappedFound: true}
	w := r.Waterfall()
	if held, _ := w.Line(LineHeld); held.Bytes != 50<<20 || len(held.Detail) != 1 || w.Unexplained != 0 {
		t.Errorf("untouched held chunks: held %d (%q), unexplained %d", held.Bytes, held.Detail, w.Unexplained)
	}
	r = waterfallReport()
	r.Maps.Unmeasured = true
	if r.Waterfall() != nil {
		t.Error("a waterfall without RSS")
	}
}

// pageCount is a Residency that says every page asked about is resident
// and remembers the bytes it was asked about.
type pageCount struct{ asked uint64 }

func (p *pageCount) Resident(start, end uint64) (uint64, error) {
	p.asked += end - start
	return end - start, nil
}

// A thread arena's top read from a running process can hold a pointer
// where its size belongs: only the writable mappings holding a range are
// asked about and counted, never the hundreds of GiB after them.
func TestResidencyStaysInWritableMappings(t *testing.T) {
	const heap = 0x7f0000000000
	ms := []maps.Mapping{
		{Start: heap, End: heap + 1<<20, Perms: "rw-p"},
		{Start: heap + 1<<20, End: heap + 64<<20, Perms: "---p"},
		{Start: heap + 64<<20, End: heap + 65<<20, Perms: "rw-p"},
	}
	w := &glibc.Walk{Arenas: []glibc.ArenaWalk{{Top: heap + 0x10000, TopSize: heap + 0x1234560}}}
	pc := &pageCount{}
	r, err := MeasureResidency(w, pc, ms)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(1<<20 - 0x11000); r.FreeWhole != want || r.ThreadTops != want || pc.asked != want {
		t.Errorf("free whole %#x, thread tops %#x, asked %#x; want %#x (to the end of the heap's writable mapping)", r.FreeWhole, r.ThreadTops, pc.asked, want)
	}
	// Adjoining writable mappings are one stretch; a start in none counts nothing.
	if got := maps.ClipWritable(ms[:1], maps.Range{Start: heap + 4096, End: heap + 8192}); got.End != heap+8192 {
		t.Errorf("inside: %+v", got)
	}
	two := []maps.Mapping{{Start: heap, End: heap + 4096, Perms: "rw-p"}, {Start: heap + 4096, End: heap + 8192, Perms: "rw-p"}}
	if got := maps.ClipWritable(two, maps.Range{Start: heap, End: heap + 1<<30}); got.End != heap+8192 {
		t.Errorf("adjoining: %+v", got)
	}
	if got := maps.ClipWritable(ms, maps.Range{Start: heap + 2<<20, End: heap + 3<<20}); got.End > got.Start {
		t.Errorf("in a PROT_NONE mapping: %+v", got)
	}
}

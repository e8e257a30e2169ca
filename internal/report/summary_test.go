package report_test

import (
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/testutil"
)

// A summary of the malloc_info each committed core's process printed
// itself (testdata/cores, glibc 2.31 to 2.43) keeps every arena's numbers,
// and its sums over the arenas are glibc's own trailer: system, free, fast
// (absent on 2.43, which prints no fastbins) and mmap.
func TestSummarizeAgreesWithMallocInfo(t *testing.T) {
	for _, fx := range testutil.CoreFixtures(t) {
		t.Run(fx.Name, func(t *testing.T) {
			mi, err := mallocinfo.Parse(fx.XML)
			if err != nil {
				t.Fatal(err)
			}
			s := report.Summarize(&report.Report{Pid: 1, Malloc: mi}, nil)
			if len(s.Arenas) != len(mi.Arenas) || len(s.Arenas) == 0 {
				t.Fatalf("%d arenas summarized, malloc_info has %d", len(s.Arenas), len(mi.Arenas))
			}
			for i, a := range s.Arenas {
				m := &mi.Arenas[i]
				if a.Main != (i == 0) || a.SystemCurrent != m.SystemCurrent || a.InUse != m.InUse() || a.Free != m.FreeBytes() || a.Rest != m.RestBytes {
					t.Errorf("arena %d: %+v; malloc_info: system %d, free %d, rest %d", i, a, m.SystemCurrent, m.FreeBytes(), m.RestBytes)
				}
				if a.Addr != 0 || a.Tcache != nil {
					t.Errorf("arena %d: address %#x, tcache %v from an injected report (no walk)", i, a.Addr, a.Tcache)
				}
			}
			tot := s.Total()
			if tot.SystemCurrent != mi.SystemCurrent || s.SystemCurrent != mi.SystemCurrent || tot.Free != mi.FreeBytes() {
				t.Errorf("total system %d (summary's %d), free %d; glibc's trailer: system %d, free %d",
					tot.SystemCurrent, s.SystemCurrent, tot.Free, mi.SystemCurrent, mi.FreeBytes())
			}
			switch {
			case mi.HasFast && (tot.Fast == nil || *tot.Fast != mi.FastBytes):
				t.Errorf("total fast %v, glibc's %d", tot.Fast, mi.FastBytes)
			case !mi.HasFast && tot.Fast != nil:
				t.Errorf("total fast %d where glibc printed no fastbins", *tot.Fast)
			}
			if mi.HasMmap != (s.MmapBytes != nil) || s.MmapBytes != nil && *s.MmapBytes != mi.MmapBytes {
				t.Errorf("mmap %v, glibc's %d (printed %v)", s.MmapBytes, mi.MmapBytes, mi.HasMmap)
			}
			if pct, ok := s.FreePercent(); !ok || pct != 100*float64(mi.FreeBytes())/float64(mi.SystemCurrent) {
				t.Errorf("free %.2f%% (%v)", pct, ok)
			}
		})
	}
}

// Fast and tcache totals exist only when every arena has them: a sum over
// some arenas would pass for the whole.
func TestTotalOnlyWhatEveryArenaHas(t *testing.T) {
	n := func(v uint64) *uint64 { return &v }
	s := &report.Summary{Arenas: []report.ArenaMeasures{
		{Index: 0, Main: true, SystemCurrent: 100, InUse: 60, Free: 40, Rest: 30, Fast: n(10), Tcache: n(5)},
		{Index: 1, SystemCurrent: 50, InUse: 50, Fast: n(0)},
	}}
	tot := s.Total()
	if tot.SystemCurrent != 150 || tot.InUse != 110 || tot.Free != 40 || tot.Rest != 30 || tot.Fast == nil || *tot.Fast != 10 || tot.Tcache != nil {
		t.Errorf("total %+v (fast %v, tcache %v)", tot, tot.Fast, tot.Tcache)
	}
	if tot := (&report.Summary{}).Total(); tot.Fast != nil || tot.Tcache != nil {
		t.Errorf("no arenas: fast %v, tcache %v", tot.Fast, tot.Tcache)
	}
	if _, ok := (&report.Summary{}).FreePercent(); ok {
		t.Error("a free percentage of nothing held")
	}
}

// An identical summary is no change; one counter moved is, with its delta.
func TestCompareSameAndMoved(t *testing.T) {
	mk := func(rss uint64) *report.Summary {
		return &report.Summary{Pid: 7, Glibc: "2.36", SystemCurrent: 100, Rollup: maps.Rollup{Rss: rss},
			Arenas:  []report.ArenaMeasures{{Index: 0, Main: true, SystemCurrent: 100, InUse: 100}},
			Classes: []report.ClassMeasures{{Class: "main-heap", Count: 1, Size: 4096, Rss: rss}}}
	}
	if d := report.Compare(mk(4096), mk(4096)); d.Changed {
		t.Errorf("a summary compared with itself changed: %+v", d)
	}
	d := report.Compare(mk(4096), mk(8192))
	if !d.Changed || d.Process.Rss.Delta != 4096 || d.Process.Rss.Before != 4096 || d.Process.Rss.After != 8192 {
		t.Errorf("RSS 4096 -> 8192: changed %v, %+v", d.Changed, d.Process.Rss)
	}
}

// trim's rows: the main heap, then the arenas' heaps, those present on
// either side (a class present after only starts at 0), then the process.
func TestTrimRows(t *testing.T) {
	tr := &report.TrimReport{
		Before: report.MapsSummary{Rollup: maps.Rollup{Rss: 900, PrivateDirty: 800}, Classes: []maps.ClassSummary{
			{Class: maps.ClassAnon, Rss: 1}, {Class: maps.ClassMainHeap, Size: 1 << 20, Rss: 500, PrivateDirty: 400}}},
		After: report.MapsSummary{Rollup: maps.Rollup{Rss: 600, PrivateDirty: 500}, Classes: []maps.ClassSummary{
			{Class: maps.ClassArenaHeap, Rss: 50, PrivateDirty: 40}, {Class: maps.ClassMainHeap, Size: 1 << 19, Rss: 200, PrivateDirty: 100}}},
	}
	want := []report.TrimRow{
		{Name: maps.ClassMainHeap.String(), RssBefore: 500, RssAfter: 200, PdBefore: 400, PdAfter: 100},
		{Name: maps.ClassArenaHeap.String(), RssAfter: 50, PdAfter: 40},
		{Name: "process", RssBefore: 900, RssAfter: 600, PdBefore: 800, PdAfter: 500},
	}
	got := tr.Rows()
	if len(got) != len(want) {
		t.Fatalf("rows %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if tr.Released() != 300 {
		t.Errorf("released %d, want 300", tr.Released())
	}
	if tr.HeapShrunk() != 1<<19 {
		t.Errorf("heap shrunk by %d, want %d", tr.HeapShrunk(), 1<<19)
	}
	// A main heap that grew (or is absent after) gave nothing back.
	tr.Before, tr.After = tr.After, tr.Before
	if tr.HeapShrunk() != 0 || tr.Released() != -300 {
		t.Errorf("reversed: heap shrunk %d, released %d", tr.HeapShrunk(), tr.Released())
	}
}

// How long the target was stopped: the borrowed thread's hold, a read-only
// walk's freeze; nothing for a torn walk or a core.
func TestStopped(t *testing.T) {
	for _, c := range []struct {
		name string
		r    report.Report
		d    time.Duration
		ok   bool
	}{
		{"injected", report.Report{Injection: &report.Injection{Stopped: 3 * time.Millisecond}}, 3 * time.Millisecond, true},
		{"frozen", report.Report{ReadOnly: &report.ReadOnly{Frozen: 5 * time.Millisecond}}, 5 * time.Millisecond, true},
		{"torn", report.Report{ReadOnly: &report.ReadOnly{Torn: true, Frozen: 5 * time.Millisecond}}, 0, false},
		{"core", report.Report{ReadOnly: &report.ReadOnly{Frozen: 5 * time.Millisecond}, Core: &report.CoreInfo{}}, 0, false},
	} {
		if d, ok := c.r.Stopped(); d != c.d || ok != c.ok {
			t.Errorf("%s: stopped %v %v, want %v %v", c.name, d, ok, c.d, c.ok)
		}
	}
}

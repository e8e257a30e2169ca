package report

import "testing"

// Without addresses (injected malloc_info), a thread arena created between
// the two summaries is recognised: glibc links each new arena right after
// main_arena, so the older ones are matched from the end of the list.
func TestCompareMatchesArenasByPosition(t *testing.T) {
	arena := func(i int, system uint64) ArenaMeasures {
		return ArenaMeasures{Index: i, Main: i == 0, SystemCurrent: system, InUse: system}
	}
	a := &Summary{Arenas: []ArenaMeasures{arena(0, 100), arena(1, 200)}}
	b := &Summary{Arenas: []ArenaMeasures{arena(0, 100), arena(1, 50), arena(2, 200)}}
	d := Compare(a, b)
	if d.ByAddress || len(d.Arenas) != 3 {
		t.Fatalf("%d arenas, by address %v", len(d.Arenas), d.ByAddress)
	}
	for _, ad := range d.Arenas {
		switch {
		case *ad.Index == 1 && ad.Status != New:
			t.Errorf("the new arena is %s", ad.Status)
		case *ad.Index != 1 && (ad.Status != Unchanged || ad.IndexBefore == nil):
			t.Errorf("arena %d: %s", *ad.Index, ad.Status)
		}
	}
	if d.ArenasChanged() != 1 || d.Totals.Arenas.Delta != 1 || d.Totals.SystemCurrent.Delta != 50 {
		t.Errorf("%d arenas changed, totals %+v", d.ArenasChanged(), d.Totals)
	}
}

// With an address for every arena, arenas are matched by it whatever
// their index; one present on one side only is new or gone, and the
// comparison sorts the largest growth first.
func TestCompareMatchesArenasByAddress(t *testing.T) {
	tc := func(n uint64) *uint64 { return &n }
	a := &Summary{Arenas: []ArenaMeasures{
		{Index: 0, Main: true, Addr: 0x1000, SystemCurrent: 100, Tcache: tc(1)},
		{Index: 1, Addr: 0x2000, SystemCurrent: 100, Tcache: tc(1)},
	}}
	b := &Summary{Arenas: []ArenaMeasures{
		{Index: 0, Main: true, Addr: 0x1000, SystemCurrent: 100, Tcache: tc(1)},
		{Index: 1, Addr: 0x3000, SystemCurrent: 300, InUse: 300, Tcache: tc(5)},
		{Index: 2, Addr: 0x2000, SystemCurrent: 150, InUse: 50, Tcache: tc(1)},
	}}
	d := Compare(a, b)
	if !d.ByAddress || d.MatchedBy() != "address" || len(d.Arenas) != 3 {
		t.Fatalf("matched by %s, %d arenas", d.MatchedBy(), len(d.Arenas))
	}
	want := []struct {
		addr   uint64
		status Status
		growth int64
	}{{0x3000, New, 300}, {0x2000, Changed, 50}, {0x1000, Unchanged, 0}}
	for i, w := range want {
		ad := d.Arenas[i]
		if ad.Addr != w.addr || ad.Status != w.status || ad.Growth != w.growth {
			t.Errorf("arena %d of the diff: %#x %s growth %d, want %#x %s %d", i, ad.Addr, ad.Status, ad.Growth, w.addr, w.status, w.growth)
		}
	}
	if d.Totals.Tcache == nil || d.Totals.Tcache.Delta != 5 {
		t.Errorf("tcache totals: %+v", d.Totals.Tcache)
	}
}

// Findings are told apart by ID; two summaries of different processes are
// compared after a warning naming both files.
func TestCompareFindingsAndWarnings(t *testing.T) {
	a := &Summary{Source: "a.json", Pid: 1, Exe: "x", Glibc: "2.36", Findings: []Finding{{ID: "arena-bloat"}, {ID: "fragmentation"}}}
	b := &Summary{Source: "b.json", Pid: 2, Exe: "x", Glibc: "2.36", Findings: []Finding{{ID: "fragmentation"}, {ID: "raised-threshold"}}}
	d := Compare(a, b)
	if len(d.Appeared) != 1 || d.Appeared[0].ID != "raised-threshold" || len(d.Cleared) != 1 || d.Cleared[0].ID != "arena-bloat" || !d.Changed {
		t.Errorf("appeared %v, cleared %v, changed %v", d.Appeared, d.Cleared, d.Changed)
	}
	if len(d.Warnings) != 1 || d.Warnings[0] != "a.json is process 1 (x), b.json process 2 (x): comparing them all the same" {
		t.Errorf("warnings %q", d.Warnings)
	}
	if same := Compare(a, a); same.Changed || len(same.Warnings) != 0 {
		t.Errorf("a summary compared with itself: changed %v, warnings %q", same.Changed, same.Warnings)
	}
}

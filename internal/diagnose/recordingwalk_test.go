package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

// A recording's walks place fragmentation, trimmable free memory and
// arena bloat on the time axis at the first walk that shows them, and
// not at intervals without a walk.
func TestOverTimeWalkFindings(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	rec := &report.Recording{Meta: report.RecordingMeta{Start: t0, Interval: time.Second}}
	const mib = 1 << 20
	for i := range 10 {
		iv := report.RecordedInterval{Start: t0.Add(time.Duration(i) * time.Second), Duration: time.Second, Rss: 300 * mib,
			Classes: []report.ClassRss{{Class: "main-heap", Rss: 100 * mib}, {Class: "arena-heaps", Rss: 100 * mib}}}
		if i%2 == 1 {
			m := &report.MallocLevel{At: iv.End(), Held: 150 * mib, Pinned: mib, Arenas: []report.ArenaMalloc{{Index: 0}}}
			if i >= 3 {
				m.Pinned, m.PinnedTops = 70*mib, 30*mib // 35% of the heaps
			}
			if i >= 5 {
				m.Trimmable = 20 * mib
			}
			if i >= 7 {
				for k := 1; k < 9; k++ {
					m.Arenas = append(m.Arenas, report.ArenaMalloc{Index: k, Free: 4 * mib})
				}
			}
			iv.Malloc = m
		}
		rec.Intervals = append(rec.Intervals, iv)
	}
	first := map[string]time.Time{}
	last := map[string]time.Time{}
	for _, f := range OverTime(rec) {
		first[f.ID], last[f.ID] = f.First, f.Last
		if f.ID == "fragmentation" && (len(f.Evidence) < 2 || !strings.Contains(f.Evidence[1], "40.0 MiB in pieces of pages") || !strings.Contains(f.Evidence[1], "30.0 MiB at the top of thread arenas")) {
			t.Errorf("fragmentation does not say what pins the free memory: %q", f.Evidence)
		}
	}
	for id, i := range map[string]int{"fragmentation": 3, "trimmable-free": 5, "arena-bloat": 7} {
		if want := rec.Intervals[i].End(); !first[id].Equal(want) || !last[id].Equal(rec.Intervals[9].End()) {
			t.Errorf("%s: from %s to %s, want from %s (the first walk showing it) to the last walk", id, first[id], last[id], want)
		}
	}
}

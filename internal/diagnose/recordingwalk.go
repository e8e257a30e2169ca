package diagnose

import (
	"fmt"

	"github.com/arenactl/arenactl/internal/report"
)

// walkFindings judges an interval by its walk (nil: none), with Diagnose's thresholds: free memory pinned between
// held chunks (fragmentation), free memory malloc_trim would give back
// now, and many arenas keeping free memory of their own (arena bloat).
// The heaps' RSS is the interval's; the walk's figures are of its own
// time, which the evidence says.
func walkFindings(iv *report.RecordedInterval, m *report.MallocLevel) []Finding {
	if m == nil || iv.Rss == 0 {
		return nil
	}
	var fs []Finding
	heap := classRss(iv, "main-heap") + classRss(iv, "arena-heaps")
	at := m.At.Format("15:04:05")
	if m.Pinned >= minSavings && float64(m.Pinned) >= fragPercent/100.0*float64(heap) {
		fs = append(fs, Finding{ID: "fragmentation", Severity: Warning,
			Title: "the heaps keep free memory resident between chunks still in use",
			Evidence: []string{fmt.Sprintf("at the walk of %s: %s free and resident that malloc_trim cannot give back, of %s of heaps resident now", at, mb(m.Pinned), mb(heap)),
				fmt.Sprintf("what pins it: %s in pieces of pages shared with held chunks, fastbins and chunk headers; %s at the top of thread arenas (malloc_trim leaves them, only free() shrinks them above trim_threshold)",
					mb(m.Pinned-min(m.Pinned, m.PinnedTops)), mb(m.PinnedTops))},
			Fix:     "MALLOC_ARENA_MAX=2 makes fewer heaps to fragment; MALLOC_TRIM_THRESHOLD_=131072 lets free() give thread arenas' tops back",
			Savings: m.Pinned})
	}
	if m.Trimmable >= minSavings {
		fs = append(fs, Finding{ID: "trimmable-free", Severity: Warning,
			Title:    "free memory in the heaps that malloc_trim would give back now",
			Evidence: []string{fmt.Sprintf("at the walk of %s: %s free, resident and trimmable (whole free pages, and the main heap's top)", at, mb(m.Trimmable))},
			Fix:      "run `arenactl trim PID`; MALLOC_TRIM_THRESHOLD_=131072 lets free() give the top back by itself",
			Savings:  m.Trimmable})
	}
	if len(m.Arenas) >= 8 {
		var free uint64
		for _, a := range m.Arenas {
			if a.Index != 0 {
				free += a.Free
			}
		}
		if free >= minSavings {
			fs = append(fs, Finding{ID: "arena-bloat", Severity: Warning,
				Title:    "many malloc arenas each keep their own free memory",
				Evidence: []string{fmt.Sprintf("at the walk of %s: %d arenas; the thread arenas keep %s free", at, len(m.Arenas), mb(free))},
				Fix:      "MALLOC_ARENA_MAX=2 at the next start: threads then share two arenas and reuse each other's free memory",
				Savings:  free})
		}
	}
	return fs
}

package diagnose

import (
	"fmt"
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

// TimedFinding is a finding of a recording, with when it first and last
// held: what the page places on the time axis.
type TimedFinding struct {
	Finding
	First, Last time.Time
}

// OverTime judges every interval of a recording by the figures it keeps
// (RSS by class, the arenas' system and top bytes, held bytes by stack),
// with the thresholds of Diagnose, and returns each finding once, with the
// evidence of the interval where it held at its largest, ordered by when
// it first held. Fragmentation, what malloc_trim would give back and the
// arenas' free memory are judged at the intervals that carry a walk
// (record --walk-every) only: between walks they are not known.
func OverTime(rec *report.Recording) []TimedFinding {
	var out []TimedFinding
	at := map[string]int{}
	for i := range rec.Intervals {
		iv := &rec.Intervals[i]
		for _, f := range append(intervalFindings(rec, iv), walkFindings(iv, iv.Malloc)...) {
			j, ok := at[f.ID]
			if !ok {
				at[f.ID] = len(out)
				out = append(out, TimedFinding{Finding: f, First: iv.End(), Last: iv.End()})
				continue
			}
			out[j].Last = iv.End()
			if f.Savings > out[j].Savings || f.Severity > out[j].Severity {
				out[j].Finding = f
			}
		}
	}
	return out
}

func classRss(iv *report.RecordedInterval, class string) uint64 {
	for _, c := range iv.Classes {
		if c.Class == class {
			return c.Rss
		}
	}
	return 0
}

func intervalFindings(rec *report.Recording, iv *report.RecordedInterval) []Finding {
	var fs []Finding
	rss := iv.Rss
	if rss == 0 {
		return nil
	}
	heap := classRss(iv, "main-heap") + classRss(iv, "arena-heaps")
	var mainTop, threadTops uint64
	for _, a := range iv.Arenas {
		if a.Index == 0 {
			mainTop = a.TopBytes
		} else {
			threadTops += a.TopBytes
		}
	}
	// The tops' sizes are not their resident pages: no more than the
	// heaps' RSS can be given back.
	mainTop, threadTops = min(mainTop, heap), min(threadTops, heap)
	if mainTop >= minSavings {
		fs = append(fs, Finding{ID: "trimmable-top", Severity: Warning,
			Title:    "free memory at the top of the main heap",
			Evidence: []string{fmt.Sprintf("main_arena's top chunk is %s; the heaps are %s resident", mb(mainTop), mb(heap))},
			Fix:      "run `arenactl trim PID`; MALLOC_TRIM_THRESHOLD_=131072 lets free() give it back by itself",
			Savings:  mainTop})
	}
	if threadTops >= minSavings {
		fs = append(fs, Finding{ID: "untrimmable-thread-heaps", Severity: Warning,
			Title:    "free memory at the top of thread arenas that malloc_trim cannot return",
			Evidence: []string{fmt.Sprintf("the top chunks of %d thread arenas hold %s", len(iv.Arenas)-1, mb(threadTops))},
			Fix:      "set MALLOC_TRIM_THRESHOLD_=131072, or MALLOC_ARENA_MAX=2 so fewer heaps exist",
			Savings:  threadTops})
	}
	if n := len(iv.Arenas); n >= 8 {
		var system uint64
		for _, a := range iv.Arenas[1:] {
			system += a.SystemBytes
		}
		fs = append(fs, Finding{ID: "many-arenas", Severity: Info,
			Title:    "many malloc arenas, each keeping its own free memory",
			Evidence: []string{fmt.Sprintf("%d arenas; the thread arenas hold %s from the system", n, mb(system))},
			Fix:      "MALLOC_ARENA_MAX=2 at the next start; `arenactl info PID` says how much of it is free"})
	}
	if stacks := classRss(iv, "stacks"); stacks >= minSavings && float64(stacks) >= stackShare*float64(rss) {
		fs = append(fs, Finding{ID: "thread-stacks", Severity: Warning,
			Title:    "thread stacks, not malloc, hold much of the resident memory",
			Evidence: []string{fmt.Sprintf("stacks are %s of %s resident", mb(stacks), mb(rss))},
			Fix:      "fewer threads, or smaller stacks (pthread_attr_setstacksize, or ulimit -s before start)"})
	}
	if anon := classRss(iv, "other-anon"); anon >= minSavings && float64(anon) >= 0.25*float64(rss) {
		fs = append(fs, Finding{ID: "anonymous-outside-malloc", Severity: Info,
			Title:    "anonymous memory outside the malloc heaps",
			Evidence: []string{fmt.Sprintf("%s resident in anonymous memory that is neither a heap nor a chunk of malloc's", mb(anon))},
			Fix:      "`arenactl maps --all PID` lists them"})
	}
	if len(rec.Intervals) > 0 {
		first := rec.Intervals[0].Rss
		if grown := rss - min(rss, first); grown >= 4*minSavings && float64(grown) >= 0.5*float64(first) {
			f := Finding{ID: "rss-growth", Severity: Warning,
				Title:    "the resident memory grew by half or more since the recording began",
				Evidence: []string{fmt.Sprintf("RSS %s, %s at the start", mb(rss), mb(first))},
				Fix:      "select the range on the page: its flame graph shows which stacks hold what was allocated in it"}
			if len(iv.Held) > 0 {
				f.Evidence = append(f.Evidence, fmt.Sprintf("the sampler estimates %s allocated since the start still held", mb(uint64(iv.HeldBytes()))))
			}
			fs = append(fs, f)
		}
	}
	return fs
}

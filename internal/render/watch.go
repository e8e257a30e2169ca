package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

const sampleFormat = "%-*s %10s %10s %6s %10s %10s %10s %6s %10s %10s\n"

// WatchClock is how watch prints a sample's time: to the millisecond when
// samples are less than a second apart.
func WatchClock(interval time.Duration) string {
	if interval < time.Second {
		return "15:04:05.000"
	}
	return "15:04:05"
}

// WatchHeader prints what is watched and how, then the columns of the
// samples' lines.
func WatchHeader(w io.Writer, s *report.Summary, how, clock string) {
	fmt.Fprintf(w, "watching process %d (%s), glibc %s: %s\n", s.Pid, Text(s.Exe), s.Glibc, how)
	fmt.Fprintf(w, sampleFormat, len(clock), "time", "rss", "heap rss", "arenas", "system", "in use", "free", "free%", "tcache'd", "stopped")
}

// WatchSample prints the line of one sample: r, summarized as s, taken at
// at.
func WatchSample(w io.Writer, at time.Time, clock string, r *report.Report, s *report.Summary) {
	tot := s.Total()
	freePct, tcache, stopped := "-", "-", "-"
	if pct, ok := s.FreePercent(); ok {
		freePct = fmt.Sprintf("%.1f", pct)
	}
	if ro := r.ReadOnly; ro != nil {
		_, b := ro.Tcached()
		tcache = Human(b)
	}
	if d, ok := r.Stopped(); ok {
		stopped = Duration(d)
	}
	fmt.Fprintf(w, sampleFormat, len(clock), at.Format(clock), Human(s.Rollup.Rss), Human(r.Maps.HeapRss()), fmt.Sprint(len(s.Arenas)),
		Human(s.SystemCurrent), Human(tot.InUse), Human(tot.Free), freePct, tcache, stopped)
}

// ArenaChanges prints, under a sample, the arenas that appeared or went
// since the previous one, and those of which a measure changed by
// minChange bytes or more.
func ArenaChanges(w io.Writer, d *report.Diff, minChange uint64) {
	for _, a := range d.Arenas {
		var parts []string
		switch a.Status {
		case report.Unchanged:
			continue
		case report.New:
			parts = append(parts, "new, system "+Human(a.SystemCurrent.After))
		case report.Gone:
			parts = append(parts, "gone")
		default:
			for _, n := range mallocDeltas(a.MallocDiff) {
				if n.d != nil && uint64(abs(n.d.Delta)) >= minChange {
					parts = append(parts, fmt.Sprintf("%s %s → %s", n.name, deltaHuman(n.d.Delta), Human(n.d.After)))
				}
			}
		}
		if parts != nil {
			fmt.Fprintf(w, "  arena %s: %s\n", arenaLabel(a), strings.Join(parts, ", "))
		}
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// WatchSummary prints what changed from the first sample to the last of
// n, after a trend of every sample's RSS.
func WatchSummary(w io.Writer, n int, first, last *report.Summary, rss []uint64, clock string) {
	t0, t1 := first.Sample.Time, last.Sample.Time
	fmt.Fprintf(w, "\nsummary of %s, %s to %s (%s)\n", Plural(n, "1 sample", "%d samples"),
		t0.Format(clock), t1.Format(clock), t1.Sub(t0).Round(time.Millisecond))
	if n == 1 {
		fmt.Fprintln(w, "one sample: nothing to compare")
		return
	}
	lo, hi := minMax(rss)
	fmt.Fprintf(w, "RSS trend %s (lowest %s, highest %s)\n", Sparkline(rss, 60), Human(lo), Human(hi))
	d := report.Compare(first, last)
	if !d.Changed {
		fmt.Fprintln(w, "no change from the first sample to the last: the same arenas, memory map, RSS and findings")
		return
	}
	fmt.Fprintln(w, "from the first sample to the last:")
	DiffBody(w, d)
}

func minMax(xs []uint64) (lo, hi uint64) {
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// Sparkline draws xs in at most width block characters, lowest to highest;
// when there are more values than cells, a cell shows the highest of its
// share.
func Sparkline(xs []uint64, width int) string {
	const blocks = "▁▂▃▄▅▆▇█"
	levels := []rune(blocks)
	cells := xs
	if len(xs) > width {
		cells = make([]uint64, width)
		for i := range cells {
			_, cells[i] = minMax(xs[i*len(xs)/width : (i+1)*len(xs)/width])
		}
	}
	lo, hi := minMax(cells)
	var b strings.Builder
	for _, x := range cells {
		l := 0
		if hi > lo {
			l = int((x - lo) * uint64(len(levels)-1) / (hi - lo))
		}
		b.WriteRune(levels[l])
	}
	return b.String()
}

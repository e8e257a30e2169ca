package render

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/arenactl/arenactl/internal/stackprof"
)

// DefaultLeaksTop is how many sites leaks prints.
const DefaultLeaksTop = 10

// Leaks prints the profile for people: what the window was, the top sites
// by bytes allocated in it and still held at its end (estimated count and
// bytes, growth rate, samples, the allocating frame's file:line and its
// callers), and how much of the measured growth it explains (explains
// nil: none was measured).
func Leaks(w io.Writer, p *stackprof.Profile, explains *stackprof.Explanation) error {
	return LeaksTop(w, p, explains, DefaultLeaksTop)
}

// callersShown is how many callers of the allocating frame a site's second
// line names.
const callersShown = 4

// LeaksTop is Leaks with the n largest sites (all for n <= 0).
func LeaksTop(w io.Writer, p *stackprof.Profile, explains *stackprof.Explanation, n int) error {
	win := p.Window
	sampling := "every allocation recorded"
	if win.Rate > 0 {
		sampling = "one sample per " + Human(win.Rate) + " allocated on average"
	}
	fmt.Fprintf(w, "heap profile over %s, %s: %s\n", Duration(win.Duration), sampling, Plural(p.Samples, "1 sample", "%d samples"))
	counts, tot := p.Total()
	fmt.Fprintf(w, "allocated in the window and still held: %s in %s objects (%s), of %s allocated\n",
		Human(whole(tot.InUseBytes)), objects(tot.InUseObjects), rate(p.TotalGrowth()), Human(whole(tot.AllocBytes)))
	if explains != nil {
		fmt.Fprintln(w, explains.String())
	}
	if p.Classified {
		fmt.Fprintf(w, "of what is held, %s in %s objects is leaked: nothing the program can reach points to it (a scan of the heap at the window's end; the rest is held, reachable)\n",
			Human(whole(tot.LeakedBytes)), objects(tot.LeakedObjects))
	}
	if win.Shortened > 0 {
		// Sizes and addresses are exact; only where the stacks came
		// from is estimated.
		fmt.Fprintf(w, "note: arenactl read the ring slower than it filled: %d of %d samples kept only the top of their stack (%d of those stacks were whole all the same); %d were completed from the whole stacks that begin with the same calls, shared out by how often each was seen",
			win.Shortened, p.Samples, max(int(win.Shortened)-p.Completed-p.ShortLeft, 0), p.Completed)
		if p.ShortLeft > 0 {
			fmt.Fprintf(w, "; %d matched no whole stack and stay cut short", p.ShortLeft)
		}
		fmt.Fprintln(w)
	}
	if win.MaxShift > 0 {
		fmt.Fprintf(w, "note: arenactl read the samples slower than they came: for part of the window the sampler took one per %s on average (up to %d times --rate), each sample weighted by the rate it was taken at\n",
			Human(win.Rate<<win.MaxShift), 1<<win.MaxShift)
	}
	if win.Dropped > 0 {
		fmt.Fprintf(w, "warning: %d samples (%.0f%%) found both rings full and were dropped: the ones kept in the same drains stand for them, which holds if what the process allocates is alike over a few milliseconds\n",
			win.Dropped, 100*float64(win.Dropped)/float64(uint64(p.Samples)+win.Dropped))
	}
	if p.Incomplete > 0 {
		how := ""
		if p.Truncated > 0 {
			how = fmt.Sprintf(", %d cut short by the stack copy", p.Truncated)
		}
		fmt.Fprintf(w, "note: %d of %d stacks end before the thread's first frame%s\n", p.Incomplete, p.Samples, how)
	}
	top := p.Top(n)
	fmt.Fprintln(w)
	if len(top) == 0 {
		if counts.Alloc == 0 {
			_, err := fmt.Fprintln(w, "no allocation was sampled in the window")
			return err
		}
		msg := "nothing sampled in the window is still held"
		if win.Rate > 0 {
			// No sample among G bytes held has chance exp(-G/rate):
			// 5 % at 3 rates' worth.
			msg += fmt.Sprintf(": at one sample per %s, that says only that less than about %s allocated in the window is held",
				Human(win.Rate), Human(3*win.Rate))
			if explains != nil && explains.Measured > 0 {
				if how := stackprof.Suggest(win.Rate, 0, float64(explains.Measured), explains.AllocPerSecond); how != "" {
					msg += fmt.Sprintf("; the walk saw %s grow: %s would take about 100 samples of that", Human(uint64(explains.Measured)), how)
				}
			}
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	if held := len(p.Top(0)); held > len(top) {
		fmt.Fprintf(w, "top %d of %d sites still holding memory:\n", len(top), held)
	} else {
		fmt.Fprintf(w, "%s still holding memory:\n", Plural(len(top), "1 site", "%d sites"))
	}
	const row = "%10s %9s %12s %10s %9s  %s\n"
	const rowLeaked = "%10s %10s %9s %12s %10s %9s  %s\n"
	if p.Classified {
		fmt.Fprintf(w, rowLeaked, "held", "leaked", "objects", "growth", "allocated", "samples", "allocated at")
	} else {
		fmt.Fprintf(w, row, "held", "objects", "growth", "allocated", "samples", "allocated at")
	}
	for i := range top {
		s := &top[i]
		leaf := s.Leaf()
		where := leaf.Name()
		if pos := shortPosition(leaf); pos != "" {
			where += "  " + pos
		}
		indent := 10 + 1 + 9 + 1 + 12 + 1 + 10 + 1 + 9
		if p.Classified {
			fmt.Fprintf(w, rowLeaked, Human(whole(s.Est.InUseBytes)), Human(whole(s.Est.LeakedBytes)), objects(s.Est.InUseObjects), rate(p.Growth(s)),
				Human(whole(s.Est.AllocBytes)), fmt.Sprintf("%d/%d", s.Sampled.InUse, s.Sampled.Alloc), Line(where))
			indent += 11
		} else {
			fmt.Fprintf(w, row, Human(whole(s.Est.InUseBytes)), objects(s.Est.InUseObjects), rate(p.Growth(s)),
				Human(whole(s.Est.AllocBytes)), fmt.Sprintf("%d/%d", s.Sampled.InUse, s.Sampled.Alloc), Line(where))
		}
		if callers := callersOf(s, leaf); callers != "" {
			fmt.Fprintf(w, "%*s  %s\n", indent, "", Line(callers))
		}
	}
	return nil
}

// callersOf names the frames above the allocating one, innermost first:
// "< grow_buffer < parser::parse < buffer_main ...".
func callersOf(s *stackprof.Site, leaf stackprof.Frame) string {
	i := len(s.Frames) - 1
	for ; i >= 0; i-- {
		if s.Frames[i] == leaf {
			break
		}
	}
	var names []string
	for k := i - 1; k >= 0 && len(names) < callersShown; k-- {
		names = append(names, s.Frames[k].Name())
	}
	if len(names) == 0 {
		return ""
	}
	out := "< " + strings.Join(names, " < ")
	if i-1-len(names) >= 0 {
		out += " < ..."
	}
	return out
}

// shortPosition is file:line with the file's last two path elements:
// enough to find it in a tree (the JSON has the whole path).
func shortPosition(f stackprof.Frame) string {
	if f.File == "" {
		return ""
	}
	parts := strings.Split(f.File, "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return fmt.Sprintf("%s:%d", strings.Join(parts, "/"), f.Line)
}

func whole(v float64) uint64 { return uint64(math.Max(0, math.Round(v))) }

// objects is an estimated count, rounded to what sampling can tell.
func objects(v float64) string {
	switch n := whole(v); {
	case n >= 10_000_000:
		return fmt.Sprintf("%.0fM", v/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", v/1e3)
	default:
		return fmt.Sprint(n)
	}
}

func rate(bytesPerSecond float64) string { return Human(whole(bytesPerSecond)) + "/s" }

package render

import (
	"fmt"
	"io"
	"math"

	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// DefaultGrowthTop is how many sites growth prints.
const DefaultGrowthTop = 10

// Growth prints a growth run for people: the window, the RSS growth and
// how much of it the faults and calls explain, the totals per memory
// class and the top n sites (all for n <= 0) by bytes touched, then
// mapped, then returned.
func Growth(w io.Writer, g *report.Growth, n int) error {
	fmt.Fprintf(w, "process %d (%s): perf events on %s (and the threads they created) for %s\n",
		g.Pid, Text(g.Exe), Plural(g.Threads, "1 thread", "%d threads"), Duration(g.Duration))
	touched := g.Total(report.GrowthTouched)
	fmt.Fprintf(w, "page faults: one sample per %d: %s, %s first touched; memory syscalls: %d\n",
		g.Period, Plural(g.FaultSamples, "1 sample", "%d samples"), Human(whole(touched)), g.Calls)
	net := g.Total(report.GrowthNet)
	sigma := g.TouchedSigma(g.Total(report.GrowthSamples))
	if g.Measured {
		fmt.Fprintf(w, "RSS grew %s (smaps_rollup, %s to %s); the window's faults and calls explain %s ± %s of it (touched − given back − unmapped)\n",
			signedHuman(g.RSSGrowth()), Human(g.RSSBefore), Human(g.RSSAfter), signedHuman(int64(math.Round(net))), Human(whole(3*sigma)))
	}
	if !g.Measured {
		fmt.Fprintln(w, "RSS after the window could not be read (the process exited?): nothing to explain")
	}
	if g.Lost > 0 {
		fmt.Fprintf(w, "warning: %d records were lost (the rings were full, or arenactl fell behind unwinding): the figures are low (a larger --period helps)\n", g.Lost)
	}
	if g.Throttled > 0 {
		fmt.Fprintf(w, "warning: the kernel throttled sampling %d times (perf_event_max_sample_rate): the figures are low; use a larger --period\n", g.Throttled)
	}
	if g.Incomplete > 0 {
		fmt.Fprintf(w, "note: %d stacks end before the thread's first frame (%d cut short by the stack copy)\n", g.Incomplete, g.Truncated)
	}
	if g.NoArenas != "" {
		fmt.Fprintf(w, "note: heaps are not told apart by arena: %s\n", Line(g.NoArenas))
	}
	if g.ShortCalls > 0 {
		fmt.Fprintf(w, "note: %d memory syscalls had a short stack copy that ended their unwinding: %d shared out among the whole stacks that begin as theirs do, %d left cut short\n",
			g.ShortCalls, g.Completed, g.ShortLeft)
	}
	if g.NoRSSStat != "" {
		fmt.Fprintf(w, "note: a fault in a file's pages is counted as one page, though the kernel maps up to a whole folio of the page cache at once: file memory is low (kmem:rss_stat, which counts them, could not be used: %s)\n", Line(g.NoRSSStat))
	}
	if g.NoBPF != "" {
		fmt.Fprintf(w, "note: memory syscalls were recorded by perf's tracepoints, a whole stack copy each, as eBPF was refused: %s\n", Line(g.NoBPF))
	}
	fmt.Fprintln(w)
	classes := g.Classes()
	if len(classes) == 0 {
		_, err := fmt.Fprintln(w, "no page fault was sampled and no memory syscall made in the window")
		return err
	}
	const crow = "%-16s %10s %10s %10s %10s %10s %7s\n"
	fmt.Fprintf(w, crow, "class", "touched", "mapped", "unmapped", "given back", "net", "calls")
	for _, c := range classes {
		v := c.Values
		fmt.Fprintf(w, crow, c.Class, Human(whole(v[report.GrowthTouched])), Human(whole(v[report.GrowthMapped])),
			Human(whole(v[report.GrowthUnmapped])), Human(whole(v[report.GrowthGivenBack])),
			signedHuman(int64(math.Round(v[report.GrowthNet]))), fmt.Sprint(whole(v[report.GrowthCalls])))
	}
	sites := g.Profile.Sites
	if n > 0 && len(sites) > n {
		fmt.Fprintf(w, "\ntop %d of %d sites (stack and class):\n", n, len(sites))
		sites = sites[:n]
	} else {
		fmt.Fprintf(w, "\n%s (stack and class):\n", Plural(len(sites), "1 site", "%d sites"))
	}
	const row = "%10s %10s %10s %10s %10s  %-16s %s\n"
	fmt.Fprintf(w, row, "touched", "mapped", "unmapped", "given back", "net", "class", "at")
	for i := range sites {
		s := &sites[i]
		v := s.Values
		class := s.Labels[report.LabelClass]
		if a, ok := s.Labels[report.LabelArena]; ok && class == "arena-heap" {
			class += " " + a
		}
		hs := stackprof.Site{Frames: s.Frames}
		leaf := stackprof.Frame{}
		if len(s.Frames) > 0 {
			leaf = s.Frames[len(s.Frames)-1]
		}
		where := leaf.Name()
		if pos := shortPosition(leaf); pos != "" {
			where += "  " + pos
		}
		fmt.Fprintf(w, row, Human(whole(v[report.GrowthTouched])), Human(whole(v[report.GrowthMapped])),
			Human(whole(v[report.GrowthUnmapped])), Human(whole(v[report.GrowthGivenBack])),
			signedHuman(int64(math.Round(v[report.GrowthNet]))), class, Line(where))
		if callers := callersOf(&hs, leaf); callers != "" {
			fmt.Fprintf(w, "%*s  %s\n", 5*11+18, "", Line(callers))
		}
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/report"
)

type watchFlags struct {
	interval  time.Duration
	count     int
	noFreeze  bool
	inject    bool
	minChange uint64
}

func newWatchCmd() *cobra.Command {
	var f injectFlags
	var wf watchFlags
	c := &cobra.Command{
		Use:   "watch PID",
		Short: "Sample a process's malloc state every --interval, read-only, and show what changes",
		Long: `watch takes the report of 'info --read-only' every --interval (every
thread is stopped while the allocator's lists are walked, from milliseconds
for a small heap to a few hundred for a large fragmented one; --no-freeze
stops nothing; nothing is held between samples) and prints one line per
sample: RSS, the RSS of the heaps, the arenas' totals, the bytes in
threads' tcaches and how long the process was stopped; under it, the arenas that changed by --min-change or more since the
previous sample, and the findings that appeared or cleared. At the end (after
--count samples, or on Ctrl-C) it prints what changed from the first sample
to the last, per arena and per memory-map class, with a trend of RSS.

With --json each sample is one line: the document of 'info --json' plus
"time" and "sample"; 'arenactl diff' compares two of them. If the process
exits, watch says so and exits 10.`,
		Args: pidArg,
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case wf.interval <= 0:
				return &usageError{msg: "--interval must be positive"}
			case wf.count < 0:
				return &usageError{msg: "--count must be 0 (until interrupted) or more"}
			case wf.noFreeze && wf.inject:
				return &usageError{msg: "--no-freeze does not go with --inject: nothing is frozen when malloc_info runs in the target"}
			case f.tid != 0 && !wf.inject:
				return &usageError{msg: "--thread goes with --inject: a read-only sample borrows no thread"}
			}
			pid := parsePid(args)
			collect := func(ctx context.Context) (*report.Report, error) {
				if wf.inject {
					return inspect.Info(ctx, pid, f.options())
				}
				return inspect.ReadOnly(pid, f.options(), !wf.noFreeze)
			}
			w := &watcher{out: os.Stdout, pid: pid, json: f.json, flags: wf}
			return w.run(c.Context(), collect)
		},
	}
	// Ctrl-C is how a watch without --count ends: the summary is out and
	// nothing is held, so main treats the interruption as success.
	c.Annotations = map[string]string{endsByInterrupt: "true"}
	f.register(c)
	c.Flags().DurationVar(&wf.interval, "interval", 5*time.Second, "time between the starts of two samples")
	c.Flags().IntVar(&wf.count, "count", 0, "stop after this many samples; 0: until interrupted (Ctrl-C)")
	c.Flags().BoolVar(&wf.noFreeze, "no-freeze", false, "stop nothing at all; the numbers may be torn by threads that allocate meanwhile")
	c.Flags().BoolVar(&wf.inject, "inject", false, "run glibc's malloc_info in one borrowed thread for each sample, as info does, instead of reading memory")
	c.Flags().Uint64Var(&wf.minChange, "min-change", 1<<20, "show an arena under a sample when a measure of it changed by this many bytes or more")
	return c
}

// watcher takes and prints the samples of one watch.
type watcher struct {
	out   io.Writer
	pid   int
	json  bool
	flags watchFlags

	first, prev *jsonWatchSample
	n           int      // samples taken
	rss         []uint64 // every sample's RSS, for the trend
}

// maxFailures is how many samples in a row may fail (other than by the
// process's exit) before watch gives up.
const maxFailures = 3

// run samples until --count, an interruption (nil error, the context
// cancelled), the process's exit or maxFailures failures in a row. The
// summary is printed in every case once a sample was taken.
func (w *watcher) run(ctx context.Context, collect func(context.Context) (*report.Report, error)) error {
	born, _ := processStart(w.pid)
	var failed int
	next := time.Now()
	for w.flags.count == 0 || w.n < w.flags.count {
		if !sleepUntil(ctx, next) {
			break
		}
		at := time.Now()
		next = at.Add(w.flags.interval)
		if w.n > 0 && processGone(w.pid, born) {
			return w.gone()
		}
		rep, err := collect(ctx)
		if ctx.Err() != nil && err != nil {
			break // interrupted during the sample, which restored everything
		}
		if err != nil {
			if w.n == 0 {
				return err
			}
			if processGone(w.pid, born) {
				return w.gone()
			}
			if failed++; failed == maxFailures {
				w.summary()
				return fmt.Errorf("%d samples in a row failed, the last with: %w", failed, err)
			}
			fmt.Fprintf(os.Stderr, "arenactl: sample at %s failed: %v (watching on)\n", at.Format("15:04:05"), err)
			continue
		}
		failed = 0
		if born == 0 { // it had not started, or exited and came back
			born, _ = processStart(w.pid)
		}
		if err := w.add(at, rep); err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	w.summary()
	return nil
}

// sleepUntil waits for t; false if the context was cancelled first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	if d := time.Until(t); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}

// processStart reads when pid started (clock ticks after boot), to tell the
// process from a later one that reuses its pid.
func processStart(pid int) (uint64, bool) {
	st, err := procfs.ReadStat(pid)
	if err != nil || st.Exited() {
		return 0, false
	}
	return st.StartTime, true
}

// processGone: pid exited (a zombie counts), or is another process now.
func processGone(pid int, born uint64) bool {
	now, ok := processStart(pid)
	return !ok || now != born
}

func (w *watcher) gone() error {
	w.summary()
	return fmt.Errorf("process %d exited after %s: %w", w.pid, threads(w.n, "1 sample", "%d samples"), ptrace.ErrGone)
}

// add records and prints one sample.
func (w *watcher) add(at time.Time, rep *report.Report) error {
	s := &jsonWatchSample{Time: at.Format(time.RFC3339Nano), Sample: w.n,
		jsonInfo: infoJSON(rep, diagnose.Diagnose(rep, diagnoseEnv(strconv.Itoa(w.pid))))}
	w.n++
	w.rss = append(w.rss, s.Maps.Process.Rss)
	prev := w.prev
	if w.first == nil {
		w.first = s
	}
	w.prev = s
	if w.json {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = w.out.Write(append(b, '\n'))
		return err
	}
	if prev == nil {
		fmt.Fprintf(w.out, "watching process %d (%s), glibc %s: %s, %s\n", s.Pid, s.Exe, s.Libc.Version, w.how(), w.howLong())
		fmt.Fprintf(w.out, sampleFormat, len(w.clock()), "time", "rss", "heap rss", "arenas", "system", "in use", "free", "free%", "tcache'd", "stopped")
	}
	st := sampleStats(&s.jsonInfo)
	fmt.Fprintf(w.out, sampleFormat, len(w.clock()), at.Format(w.clock()), human(st.rss), human(st.heapRss), strconv.Itoa(len(s.Arenas)),
		human(st.system), human(st.inUse), human(st.free), st.freePct, st.tcache, st.stopped)
	if prev != nil {
		d := diffInfo(prev, s)
		w.arenaChanges(d)
		renderFindingChanges(w.out, d, "  ")
	}
	return nil
}

const sampleFormat = "%-*s %10s %10s %6s %10s %10s %10s %6s %10s %10s\n"

// clock is how a sample's time is printed: to the millisecond when samples
// are less than a second apart.
func (w *watcher) clock() string {
	if w.flags.interval < time.Second {
		return "15:04:05.000"
	}
	return "15:04:05"
}

func (w *watcher) how() string {
	switch {
	case w.flags.inject:
		return "malloc_info run in one borrowed thread for each sample"
	case w.flags.noFreeze:
		return "read from memory with nothing stopped (numbers may be torn)"
	}
	return "read from memory, every thread stopped for each sample"
}

func (w *watcher) howLong() string {
	if w.flags.count == 0 {
		return fmt.Sprintf("every %s until interrupted (Ctrl-C)", w.flags.interval)
	}
	return fmt.Sprintf("every %s, %s", w.flags.interval, threads(w.flags.count, "1 sample", "%d samples"))
}

type stats struct {
	rss, heapRss, system, inUse, free uint64
	freePct, tcache, stopped          string
}

// sampleStats is what a sample's line shows.
func sampleStats(j *jsonInfo) stats {
	st := stats{rss: j.Maps.Process.Rss, system: j.Totals.SystemCurrent, tcache: "-", stopped: "-"}
	for _, c := range j.Maps.Classes {
		if c.Class == "main-heap" || c.Class == "arena-heap" {
			st.heapRss += c.Rss
		}
	}
	for _, a := range j.Arenas {
		st.inUse += a.InUseBytes
		st.free += a.FreeBytes
	}
	st.freePct = "-"
	if st.system > 0 {
		st.freePct = fmt.Sprintf("%.1f", 100*float64(st.free)/float64(st.system))
	}
	if ro := j.ReadOnly; ro != nil {
		var tc uint64
		for _, th := range ro.Threads {
			tc += th.TcacheBytes
		}
		st.tcache = human(tc)
		if !ro.Torn {
			st.stopped = fmtDur(time.Duration(ro.FrozenUs) * time.Microsecond)
		}
	}
	if in := j.Injection; in != nil {
		st.stopped = fmtDur(time.Duration(in.StoppedUs) * time.Microsecond)
	}
	return st
}

// arenaChanges prints, under a sample, the arenas that appeared or went
// since the previous one, and those of which a measure changed by
// --min-change or more.
func (w *watcher) arenaChanges(d jsonDiff) {
	for _, a := range d.Arenas {
		var parts []string
		switch a.Status {
		case "unchanged":
			continue
		case "new":
			parts = append(parts, "new, system "+human(a.SystemCurrent.After))
		case "gone":
			parts = append(parts, "gone")
		default:
			for _, n := range mallocDeltas(a.jsonMallocDiff) {
				if n.d != nil && uint64(abs(n.d.Delta)) >= w.flags.minChange {
					parts = append(parts, fmt.Sprintf("%s %s → %s", n.name, deltaHuman(n.d.Delta), human(n.d.After)))
				}
			}
		}
		if parts != nil {
			fmt.Fprintf(w.out, "  arena %s: %s\n", arenaLabel(a), strings.Join(parts, ", "))
		}
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// summary prints what changed from the first sample to the last, after a
// trend of RSS. Nothing with --json: its lines are the whole output.
func (w *watcher) summary() {
	if w.json || w.n == 0 {
		return
	}
	first, last := w.first, w.prev
	t0, _ := time.Parse(time.RFC3339Nano, first.Time)
	t1, _ := time.Parse(time.RFC3339Nano, last.Time)
	fmt.Fprintf(w.out, "\nsummary of %s, %s to %s (%s)\n", threads(w.n, "1 sample", "%d samples"),
		t0.Format(w.clock()), t1.Format(w.clock()), t1.Sub(t0).Round(time.Millisecond))
	if w.n == 1 {
		fmt.Fprintln(w.out, "one sample: nothing to compare")
		return
	}
	lo, hi := minMax(w.rss)
	fmt.Fprintf(w.out, "RSS trend %s (lowest %s, highest %s)\n", sparkline(w.rss, 60), human(lo), human(hi))
	d := diffInfo(first, last)
	if !d.Changed {
		fmt.Fprintln(w.out, "no change from the first sample to the last: the same arenas, memory map, RSS and findings")
		return
	}
	fmt.Fprintln(w.out, "from the first sample to the last:")
	renderDiffBody(w.out, d)
}

func minMax(xs []uint64) (lo, hi uint64) {
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// sparkline draws xs in at most width block characters, lowest to highest;
// when there are more values than cells, a cell shows the highest of its
// share.
func sparkline(xs []uint64, width int) string {
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

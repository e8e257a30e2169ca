package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/schema"
)

type watchFlags struct {
	interval  time.Duration
	count     int
	noFreeze  bool
	hold      holdFlag
	inject    bool
	minChange uint64
}

func newWatchCmd() *cobra.Command {
	var f injectFlags
	var wf watchFlags
	c := &cobra.Command{
		Use:   "watch PID",
		Short: "Sample a process's malloc state every --interval, read-only, and show what changes",
		Long: `watch takes the report of 'info --read-only' every --interval (by
default every thread is stopped only while a copy-on-write image is made,
milliseconds, and the image is walked while the process runs; --freeze walk
stops every thread for the whole walk instead, from milliseconds for a small
heap to seconds for a large fragmented one; --no-freeze stops nothing;
nothing is held between samples) and prints one line per
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
			case wf.inject && c.Flags().Changed("freeze"):
				return &usageError{msg: "--freeze does not go with --inject: nothing is read from memory"}
			case f.tid != 0 && !wf.inject:
				return &usageError{msg: "--thread goes with --inject: a read-only sample borrows no thread"}
			}
			pid := parsePid(args)
			o := inspect.WatchOptions{Options: f.options(), Interval: wf.interval, Count: wf.count, Inject: wf.inject, Hold: wf.hold.h,
				Failed: func(at time.Time, err error) {
					fmt.Fprintf(os.Stderr, "arenactl: sample at %s failed: %v (watching on)\n", at.Format("15:04:05"), err)
				}}
			if wf.noFreeze {
				o.Hold = inspect.HoldNone
			}
			w := &watcher{out: os.Stdout, json: f.json, flags: wf}
			seen, err := inspect.Watch(c.Context(), pid, o, w.add)
			w.summary(seen)
			return err
		},
	}
	// Ctrl-C is how a watch without --count ends: the summary is out and
	// nothing is held, so main treats the interruption as success.
	c.Annotations = map[string]string{endsByInterrupt: "true"}
	f.register(c)
	c.Flags().DurationVar(&wf.interval, "interval", 5*time.Second, "time between the starts of two samples")
	c.Flags().IntVar(&wf.count, "count", 0, "stop after this many samples; 0: until interrupted (Ctrl-C)")
	c.Flags().BoolVar(&wf.noFreeze, "no-freeze", false, "stop nothing at all; the numbers may be torn by threads that allocate meanwhile")
	registerFreeze(c.Flags(), &wf.hold, true)
	c.Flags().BoolVar(&wf.inject, "inject", false, "run glibc's malloc_info in one borrowed thread for each sample, as info does, instead of reading memory")
	wf.minChange = 1 << 20
	c.Flags().Var((*byteCount)(&wf.minChange), "min-change", "show an arena under a sample when a measure of it changed by this many bytes or more (suffixes K, M, G)")
	return c
}

// watcher prints the samples of one watch.
type watcher struct {
	out   io.Writer
	json  bool
	flags watchFlags
}

// add prints one sample: with --json, its line; else its line with the
// arenas and findings that changed since the one before, under a header
// before the first.
func (w *watcher) add(s *inspect.WatchSample) error {
	if w.json {
		b, err := json.Marshal(schema.NewWatchSample(s.Summary.Sample.Index, s.At, s.Report, s.Findings))
		if err != nil {
			return err
		}
		_, err = w.out.Write(append(b, '\n'))
		return err
	}
	clock := render.WatchClock(w.flags.interval)
	if s.Changes == nil {
		render.WatchHeader(w.out, s.Summary, w.how()+", "+w.howLong(), clock)
	}
	render.WatchSample(w.out, s.At, clock, s.Report, s.Summary)
	if d := s.Changes; d != nil {
		render.ArenaChanges(w.out, d, w.flags.minChange)
		render.FindingChanges(w.out, d, "  ")
	}
	return nil
}

func (w *watcher) how() string {
	switch {
	case w.flags.inject:
		return "malloc_info run in one borrowed thread for each sample"
	case w.flags.noFreeze || w.flags.hold.h == inspect.HoldNone:
		return "read from memory with nothing stopped (numbers may be torn)"
	case w.flags.hold.h == inspect.HoldWalk:
		return "read from memory, every thread stopped for each sample's walk"
	}
	return "read from a copy-on-write image for each sample, every thread stopped while it is made"
}

func (w *watcher) howLong() string {
	if w.flags.count == 0 {
		return fmt.Sprintf("every %s until interrupted (Ctrl-C)", w.flags.interval)
	}
	return fmt.Sprintf("every %s, %s", w.flags.interval, render.Plural(w.flags.count, "1 sample", "%d samples"))
}

// summary prints what changed from the first sample to the last, after a
// trend of RSS, once a sample was taken, however the watch ended. Nothing
// with --json: its lines are the whole output.
func (w *watcher) summary(seen *inspect.Watched) {
	if w.json || seen.Samples == 0 {
		return
	}
	render.WatchSummary(w.out, seen.Samples, seen.First, seen.Last, seen.Rss, render.WatchClock(w.flags.interval))
}

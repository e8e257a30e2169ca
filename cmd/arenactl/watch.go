package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
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
			collect := func(ctx context.Context) (*report.Report, error) {
				if wf.inject {
					return inspect.Info(ctx, pid, f.options())
				}
				mode := wf.hold.h
				if wf.noFreeze {
					mode = inspect.HoldNone
				}
				return inspect.ReadOnly(ctx, pid, f.options(), mode)
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
	registerFreeze(c.Flags(), &wf.hold, true)
	c.Flags().BoolVar(&wf.inject, "inject", false, "run glibc's malloc_info in one borrowed thread for each sample, as info does, instead of reading memory")
	wf.minChange = 1 << 20
	c.Flags().Var((*byteCount)(&wf.minChange), "min-change", "show an arena under a sample when a measure of it changed by this many bytes or more (suffixes K, M, G)")
	return c
}

// watcher takes and prints the samples of one watch.
type watcher struct {
	out   io.Writer
	pid   int
	json  bool
	flags watchFlags

	first, prev *report.Summary
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
	born, _ := procfs.IdentityOf(w.pid)
	var failed int
	next := time.Now()
	for w.flags.count == 0 || w.n < w.flags.count {
		if !sleepUntil(ctx, next) {
			break
		}
		at := time.Now()
		next = at.Add(w.flags.interval)
		if w.n > 0 && !born.Alive() {
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
			if !born.Alive() {
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
		if born.Start == 0 { // it had not started, or exited and came back
			born, _ = procfs.IdentityOf(w.pid)
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

func (w *watcher) gone() error {
	w.summary()
	return fmt.Errorf("process %d exited after %s: %w", w.pid, render.Plural(w.n, "1 sample", "%d samples"), ptrace.ErrGone)
}

// add records and prints one sample.
func (w *watcher) add(at time.Time, rep *report.Report) error {
	findings := diagnose.Diagnose(rep, diagnoseEnv(strconv.Itoa(w.pid)))
	s := report.Summarize(rep, diagnose.Summaries(findings))
	// Without the monotonic reading: the summary's span is the one the
	// printed times show.
	// Numbered from 1, as people count them ("1 sample", the summary's
	// "of 3 samples"): --json numbered them from 0.
	w.n++
	s.Sample = &report.Sample{Index: w.n, Time: at.Round(0)}
	w.rss = append(w.rss, s.Rollup.Rss)
	prev := w.prev
	if w.first == nil {
		w.first = s
	}
	w.prev = s
	if w.json {
		b, err := json.Marshal(schema.NewWatchSample(s.Sample.Index, at, rep, findings))
		if err != nil {
			return err
		}
		_, err = w.out.Write(append(b, '\n'))
		return err
	}
	clock := render.WatchClock(w.flags.interval)
	if prev == nil {
		render.WatchHeader(w.out, s, w.how()+", "+w.howLong(), clock)
	}
	render.WatchSample(w.out, at, clock, rep, s)
	if prev != nil {
		d := report.Compare(prev, s)
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
// trend of RSS. Nothing with --json: its lines are the whole output.
func (w *watcher) summary() {
	if w.json || w.n == 0 {
		return
	}
	render.WatchSummary(w.out, w.n, w.first, w.prev, w.rss, render.WatchClock(w.flags.interval))
}

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/live"
)

func newTrimCmd() *cobra.Command {
	var f injectFlags
	var pad uint64
	var dryRun bool
	c := &cobra.Command{
		Use:   "trim PID",
		Short: "Run glibc's malloc_trim(pad) in the process and measure what it gave back",
		Long: `trim borrows one safe thread (as info does) to run malloc_trim(pad), which
returns whole free pages inside every arena to the kernel (madvise) and
shrinks the main heap's top. It reports RSS and Private_Dirty before and
after, per heap class and for the process, and the bytes released, next to
what the free lists predicted just before the call.

With --dry-run nothing runs in the target: every thread is stopped for a
walk of the free lists, and arenactl predicts, per arena, what
malloc_trim(pad) would release now (the free pages that are resident).`,
		Args: pidArg,
		RunE: func(c *cobra.Command, args []string) error {
			if dryRun && f.tid != 0 {
				return &usageError{msg: "--thread does not go with --dry-run: nothing is borrowed"}
			}
			run := runTrim
			if dryRun {
				run = func(_ context.Context, pid int, f injectFlags, pad uint64) (*glibc.TrimReport, error) {
					return dryRunTrim(pid, f, pad)
				}
			}
			rep, err := run(c.Context(), parsePid(args), f, pad)
			if err != nil {
				return err
			}
			if f.json {
				return writeJSON(os.Stdout, trimJSON(rep))
			}
			return renderTrim(os.Stdout, rep)
		},
	}
	f.register(c)
	c.Flags().Uint64Var(&pad, "pad", 0, "bytes malloc_trim leaves untrimmed at the top of the main heap")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "run nothing: stop every thread for a walk of the free lists and predict what malloc_trim would release")
	return c
}

func runTrim(ctx context.Context, pid int, f injectFlags, pad uint64) (*glibc.TrimReport, error) {
	t, err := live.Open(pid)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	pf, err := runPreflight(t, f)
	if err != nil {
		return nil, err
	}
	// The prediction reuses the pre-flight walk, made with no thread
	// stopped, rather than a walk of its own with the process frozen:
	// freezing every thread is what trim exists to avoid, the walk is a few
	// milliseconds old when the call starts, and the free lists of a busy
	// process change during the call anyway. A prediction that cannot be
	// made leaves Prediction nil; it never stops the trim.
	var pred *glibc.TrimPrediction
	if pf.walk != nil {
		pred, _ = predictTrim(t.Pid, pf.walk, pad)
	}
	before, err := readMaps(t)
	if err != nil {
		return nil, err
	}
	var result int
	in, err := injectCall(ctx, t, pf, f, func(c glibc.Caller) (err error) {
		result, err = glibc.RunMallocTrim(ctx, c, t.Libc, pad)
		return err
	})
	if err != nil {
		return nil, err
	}
	after, err := readMaps(t)
	if err != nil {
		return nil, err
	}
	rep := &glibc.TrimReport{
		Pid: pid, Libc: t.Libc.Info(), Pad: pad, Result: result,
		Injection: in,
		Before:    before, After: after, Prediction: pred,
	}
	return rep, nil
}

// dryRunTrim predicts malloc_trim(pad) without running anything in the
// target. Every thread is stopped for the walk alone: main_arena is found
// before, and which pages are resident is read after, so that the freeze
// lasts as long as reading the free lists takes. The pages of free chunks
// stay as they are unless the process allocates them meanwhile, which would
// change the lists as much.
func dryRunTrim(pid int, f injectFlags, pad uint64) (*glibc.TrimReport, error) {
	t, err := live.Open(pid)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	lay, anchors, err := listsAnchors(t, f)
	if err != nil {
		return nil, err
	}
	var walk *glibc.Walk
	held, err := whileFrozen(t, f.timeout, func() (err error) {
		walk, err = glibc.WalkLists(t, lay, anchors, t.Mappings)
		return err
	})
	if err != nil {
		return nil, err
	}
	pred, err := predictTrim(pid, walk, pad)
	if err != nil {
		return nil, err
	}
	before, err := readMaps(t)
	if err != nil {
		return nil, err
	}
	return &glibc.TrimReport{Pid: pid, Libc: t.Libc.Info(), Pad: pad, Before: before,
		Prediction: pred, DryRun: true, Frozen: held, Damage: walk.Damage}, nil
}

func predictTrim(pid int, w *glibc.Walk, pad uint64) (*glibc.TrimPrediction, error) {
	pm, err := live.OpenPagemap(pid)
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	pred, err := glibc.PredictTrim(w, pad, pm)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	return pred, nil
}

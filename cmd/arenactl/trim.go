package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/schema"
)

func newTrimCmd() *cobra.Command {
	var f injectFlags
	var pad uint64
	var dryRun bool
	var hold holdFlag
	c := &cobra.Command{
		Use:   "trim PID",
		Short: "Run glibc's malloc_trim(pad) in the process and measure what it gave back",
		Long: `trim borrows one safe thread (as info does) to run malloc_trim(pad), which
returns whole free pages inside every arena to the kernel (madvise) and
shrinks the main heap's top. It reports RSS and Private_Dirty before and
after, per heap class and for the process, and the bytes released, next to
what the free lists predicted just before the call.

With --dry-run nothing of the target's runs: its free lists are walked
from a copy-on-write image (every thread stopped only while the image is
made; --freeze walk stops them for the whole walk instead), and arenactl
predicts, per arena, what malloc_trim(pad) would release now (the free
pages that are resident).`,
		Args: pidArg,
		RunE: func(c *cobra.Command, args []string) error {
			if dryRun && f.tid != 0 {
				return &usageError{msg: "--thread does not go with --dry-run: nothing is borrowed"}
			}
			if c.Flags().Changed("freeze") && !dryRun {
				return &usageError{msg: "--freeze goes with --dry-run: a real trim stops nothing"}
			}
			if hold.h == inspect.HoldNone {
				return &usageError{msg: "a dry-run trim is never torn: --freeze is auto, image or walk"}
			}
			var rep *report.TrimReport
			var err error
			if dryRun {
				rep, err = inspect.DryRunTrim(c.Context(), parsePid(args), pad, f.options(), hold.h)
			} else {
				rep, err = inspect.Trim(c.Context(), parsePid(args), pad, f.options())
			}
			if err != nil {
				return err
			}
			if f.json {
				return writeJSON(os.Stdout, schema.NewTrim(rep))
			}
			return render.Trim(os.Stdout, rep)
		},
	}
	f.register(c)
	c.Flags().Var((*byteCount)(&pad), "pad", "bytes malloc_trim leaves untrimmed at the top of the main heap (suffixes K, M, G)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "run nothing of the process's: walk its free lists (from a copy-on-write image by default) and predict what malloc_trim would release")
	registerFreeze(c.Flags(), &hold, false)
	return c
}

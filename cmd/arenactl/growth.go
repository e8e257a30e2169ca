package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/growth"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/stackprof"
)

type growthFlags struct {
	duration time.Duration
	period   uint64
	out      string
	folded   bool
	http     string
	top      int
	stack    sizeValue
	sysStack sizeValue
	tps      bool
}

func newGrowthCmd() *cobra.Command {
	var f injectFlags
	gf := growthFlags{period: growth.DefaultFaultPeriod, stack: growth.DefaultFaultStack, sysStack: growth.DefaultSyscallStack}
	c := &cobra.Command{
		Use:   "growth PID",
		Short: "Which code makes RSS grow: page faults and mmap/munmap/brk/madvise by call stack and memory class, from perf events",
		Long: `growth opens the kernel's perf events on every thread of the process (and the
threads they create) for --duration (or until Ctrl-C): its page faults,
one sampled in --period, each with the user registers and a copy of the
stack top, which arenactl unwinds with the program's CFI and symbolizes.
Every mmap, munmap, mremap, brk, madvise and mprotect is recorded by an
eBPF program at the syscall's exit, with its arguments and result: the
stack is copied whole for rare calls and large ones, and, as the calls
come faster, for fewer of the rest, chosen at random; the others' short
copies are completed from the whole stacks that begin as theirs do.
Where eBPF is refused (or with --tracepoints), perf's syscall
tracepoints record every call with a whole copy, at a higher cost to a
process that maps in a loop. Nothing is placed in or written to the
process. It prints, per memory class (main heap, each
arena's heaps, mmapped chunks, other anonymous memory, stacks, files) and
per call stack, the bytes first touched, mapped, unmapped and given back,
and how much of the RSS growth smaps_rollup saw over the window they
explain. -o writes a pprof profile, --folded FlameGraph's folded stacks of
the bytes touched, --http serves pprof's web UI (flame graph). Needs root or CAP_PERFMON (exit 16 when perf events are
refused).`,
		Args: pidArg,
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case gf.duration < 0:
				return &usageError{msg: "--duration must be positive (0: until interrupted)"}
			case gf.period == 0:
				return &usageError{msg: "--period must be at least 1 fault"}
			case gf.folded && f.json:
				return &usageError{msg: "--folded and --json are mutually exclusive"}
			}
			po, err := openProfileOutputs(c.Name(), gf.out, gf.http)
			if err != nil {
				return err
			}
			defer po.close()
			o := inspect.GrowthOptions{Options: f.options(), Window: growth.Options{Duration: gf.duration, Period: gf.period,
				StackSize: uint32(gf.stack), SyscallStackSize: uint32(gf.sysStack), Tracepoints: gf.tps}}
			o.Note = func(s string) { fmt.Fprintln(os.Stderr, "arenactl: "+s) }
			g, err := inspect.Growth(c.Context(), parsePid(args), o)
			if err != nil {
				return err
			}
			if err := writeGrowth(g, &f, &gf, po); err != nil {
				return err
			}
			return po.serve(func(ctx context.Context, web *stackprof.Web) error { return web.ServeValued(ctx, g.Profile) })
		},
		Annotations: map[string]string{endsByInterrupt: "true"},
	}
	fl := c.Flags()
	fl.BoolVar(&f.json, "json", false, "print JSON (the schema: docs/json.md)")
	fl.StringArrayVar(&f.debugDirs, "debug-dir", nil, "a directory of detached debug files (DIR/.build-id/xx/rest.debug) for file:line; repeat for several (/usr/lib/debug is always searched)")
	fl.DurationVar(&gf.duration, "duration", 10*time.Second, "how long to watch; 0: until interrupted (Ctrl-C)")
	fl.Uint64Var(&gf.period, "period", growth.DefaultFaultPeriod, "one page-fault sample every N faults (1: every fault)")
	fl.StringVarP(&gf.out, "output", "o", "", "also write the profile to FILE as gzipped pprof (go tool pprof -sample_index=touched_space FILE)")
	fl.BoolVar(&gf.folded, "folded", false, "print FlameGraph's folded stacks of the bytes first touched (the memory class as the last frame) instead of the table")
	fl.StringVar(&gf.http, "http", "", "after the window, serve pprof's web UI with the profile's flame graph on ADDR (e.g. localhost:8080; :8080 is loopback) at a secret URL it prints, until interrupted")
	fl.Var(&gf.stack, "stack", "bytes of stack copied with each fault sample, for the unwinding (8 to 65528, the kernel's most; a deep stack cut short shows its innermost frames)")
	fl.Var(&gf.sysStack, "syscall-stack", "with --tracepoints, bytes of stack copied with each memory syscall (every one is recorded: the copy is most of what a process that maps in a loop pays)")
	fl.BoolVar(&gf.tps, "tracepoints", false, "record the memory syscalls with perf's tracepoints, a whole stack copy each, instead of eBPF (the way taken where eBPF is refused)")
	fl.IntVar(&gf.top, "top", render.DefaultGrowthTop, "how many sites the table shows (0: all)")
	return c
}

// writeGrowth prints the run as the flags ask, and writes the profile to
// -o's file.
func writeGrowth(g *report.Growth, f *injectFlags, gf *growthFlags, po *profileOutputs) error {
	save := func(w io.Writer) error { return stackprof.WriteValuedPprof(w, g.Profile) }
	return po.print(save, func(w io.Writer) error {
		switch {
		case f.json:
			return writeJSON(w, schema.NewGrowth(g))
		case gf.folded:
			return stackprof.WriteValuedFolded(w, g.Profile, report.GrowthTouched, report.LabelClass)
		}
		return render.Growth(w, g, gf.top)
	}, !f.json && !gf.folded)
}

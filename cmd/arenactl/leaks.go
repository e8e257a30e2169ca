package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/sampler"
	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/stackprof"
)

type leaksFlags struct {
	duration time.Duration
	rate     sizeValue
	minAge   time.Duration
	noScan   bool
	out      string
	folded   bool
	http     string
	top      int
}

func newLeaksCmd() *cobra.Command {
	var f injectFlags
	lf := leaksFlags{rate: sizeValue(sampler.DefaultRate)}
	c := &cobra.Command{
		Use:   "leaks PID",
		Short: "Which code holds the memory: a sampled heap profile by allocation stack, at a few ns per malloc",
		Long: `leaks points the process's GOT entries for the malloc family at a small
sampler arenactl maps into it (every thread stopped for a few milliseconds),
samples one allocation in about --rate bytes with its stack for --duration
(or until Ctrl-C), puts every GOT entry back and removes the sampler. It
prints the call stacks that allocated what is still held at the end, with
estimated bytes and growth, and how much of the in-use growth a read-only
walk saw over the window they explain. -o writes a pprof profile, --folded
FlameGraph's folded stacks, --http serves pprof's web UI (flame graph).`,
		Args: func(c *cobra.Command, args []string) error {
			// Only a file that is there is taken for a core: "" or "self"
			// is a mistyped process id, not a core.
			if len(args) == 1 && isCoreArg(args[0]) {
				if fi, err := os.Stat(args[0]); err == nil && !fi.IsDir() {
					return &usageError{msg: "a core has no history: leaks samples a running process's allocations over time ('arenactl info CORE' shows what a core holds)"}
				}
			}
			return pidArg(c, args)
		},
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case lf.duration < 0:
				return &usageError{msg: "--duration must be positive (0: until interrupted)"}
			case lf.rate == 0:
				return &usageError{msg: "--rate must be at least 1 byte"}
			case lf.folded && f.json:
				return &usageError{msg: "--folded and --json are mutually exclusive"}
			}
			// -o is created (under its partial name) before anything is
			// placed in the process.
			po, err := openProfileOutputs(c.Name(), lf.out, lf.http)
			if err != nil {
				return err
			}
			defer po.close()
			o := inspect.LeaksOptions{Options: f.options(), Duration: lf.duration, Rate: uint64(lf.rate), MinAge: lf.minAge, NoScan: lf.noScan}
			rep, err := inspect.Leaks(c.Context(), parsePid(args), o)
			if err != nil {
				return err
			}
			if rep.Left.Addr != 0 {
				fmt.Fprintf(os.Stderr, "arenactl: the sampler's %d bytes at %#x stay in the process, inert: %s\n", rep.Left.Size, rep.Left.Addr, rep.Left.Why)
			}
			if n := len(rep.Left.Unloaded); n > 0 {
				fmt.Fprintf(os.Stderr, "arenactl: %d GOT entries were in objects unloaded during the window (dlclose): nothing to put back there\n", n)
			}
			if err := writeLeaks(rep, &f, &lf, po); err != nil {
				return err
			}
			return po.serve(func(ctx context.Context, web *stackprof.Web) error { return web.Serve(ctx, rep.Profile) })
		},
		Annotations: map[string]string{endsByInterrupt: "true"},
	}
	f.registerProfile(c)
	fl := c.Flags()
	fl.DurationVar(&lf.duration, "duration", 30*time.Second, "how long to sample; 0: until interrupted (Ctrl-C)")
	fl.Var(&lf.rate, "rate", "the mean number of bytes allocated between two samples (a Poisson process over bytes; suffixes K, M, G)")
	fl.DurationVar(&lf.minAge, "min-age", 0, "do not count as held a block allocated less than this before the window's end")
	fl.BoolVar(&lf.noScan, "no-scan", false, "do not scan the heap at the window's end for which held blocks are leaked (nothing reachable points to them); saves the scan's time on a large heap")
	fl.StringVarP(&lf.out, "output", "o", "", "also write the profile to FILE as gzipped pprof (go tool pprof FILE)")
	fl.BoolVar(&lf.folded, "folded", false, "print FlameGraph's folded stacks (root first, ';'-joined, then the bytes still held) instead of the table")
	fl.StringVar(&lf.http, "http", "", "after the window, serve pprof's web UI with the profile's flame graph on ADDR (e.g. localhost:8080; :8080 is loopback) at a secret URL it prints, until interrupted")
	fl.IntVar(&lf.top, "top", render.DefaultLeaksTop, "how many sites the table shows (0: all)")
	return c
}

// registerProfile adds the flags of injectFlags that leaks uses.
func (f *injectFlags) registerProfile(c *cobra.Command) {
	c.Flags().DurationVar(&f.timeout, "timeout", 3*time.Second, "how long to wait for every thread to stop, when the sampler is placed and removed")
	c.Flags().BoolVar(&f.json, "json", false, "print JSON (the schema: docs/json.md)")
	c.Flags().StringArrayVar(&f.debugDirs, "debug-dir", nil, "a directory of detached debug files (DIR/.build-id/xx/rest.debug) for file:line; repeat for several (/usr/lib/debug is always searched)")
}

// profileOutputErr says why -o cannot be written, naming the command and
// the path given (not the partial file's): exit 2 for a path that can never be written
// (no such directory, not a directory, not a regular file), 4 for
// permission (isFilePermission).
func profileOutputErr(cmd, path string, err error) error {
	switch {
	case hostfs.IsNotRegular(err):
		return &usageError{msg: fmt.Sprintf("-o %v: %s writes its profile to a new file or replaces a regular one, nothing else", err, cmd)}
	case errors.Is(err, fs.ErrNotExist):
		return &usageError{msg: fmt.Sprintf("-o %s: there is no directory %s", path, filepath.Dir(path))}
	case errors.Is(err, syscall.ENOTDIR):
		return &usageError{msg: fmt.Sprintf("-o %s: %s is not a directory", path, filepath.Dir(path))}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: "-o", Path: path, Err: pe.Err}
	}
	return err
}

// writeLeaks prints the profile as the flags ask, and writes it to -o's
// file.
func writeLeaks(rep *report.Leaks, f *injectFlags, lf *leaksFlags, po *profileOutputs) error {
	save := func(w io.Writer) error { return stackprof.WritePprof(w, rep.Profile) }
	return po.print(save, func(w io.Writer) error {
		switch {
		case f.json:
			return writeJSON(w, schema.NewLeaksReport(rep))
		case lf.folded:
			return stackprof.WriteFolded(w, rep.Profile)
		}
		fmt.Fprintf(w, "process %d (%s), glibc %s: %d GOT entries pointed at the sampler, every thread stopped %s in all\n",
			rep.Pid, render.Text(rep.Exe), rep.Libc.Version, rep.Patched, render.Duration(rep.Stopped))
		var x *stackprof.Explanation
		if rep.Measured {
			e := rep.Profile.Explains(rep.Growth())
			x = &e
		}
		if err := render.LeaksTop(w, rep.Profile, x, lf.top); err != nil {
			return err
		}
		if rep.Untracked > 0 {
			fmt.Fprintf(w, "note: %d sampled blocks could not be watched for their free and count as held\n", rep.Untracked)
		}
		return nil
	}, !f.json && !lf.folded)
}

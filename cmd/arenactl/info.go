package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/ptrace"
)

func newInfoCmd() *cobra.Command {
	var f injectFlags
	var xml, readOnly, noFreeze bool
	var cf coreFlags
	c := &cobra.Command{
		Use:   "info PID",
		Short: "Per-arena malloc statistics from glibc's own malloc_info(), plus a memory-map summary",
		Long: `info borrows one thread of the process that is parked in a safe syscall
(or running outside libc with no allocator frame on its stack), makes it run
glibc's malloc_info() into a buffer arenactl maps in the target, reads the
XML, removes everything it created and lets the thread go. No other thread
stops, and nothing is written to the target's own output.`,
		Args: pidOrCoreArg,
		RunE: func(c *cobra.Command, args []string) error {
			if xml && f.json {
				return &usageError{msg: "--xml and --json are mutually exclusive"}
			}
			if noFreeze && !readOnly {
				return &usageError{msg: "--no-freeze goes with --read-only"}
			}
			collect := collectInfo
			if isCoreArg(args[0]) {
				cf.debugDirs = f.debugDirs
				collect = func(context.Context, int, injectFlags) (*glibc.Report, error) { return collectCore(args[0], cf) }
			} else if readOnly {
				collect = func(ctx context.Context, pid int, f injectFlags) (*glibc.Report, error) {
					return collectReadOnly(pid, f, !noFreeze)
				}
			}
			rep, err := collect(c.Context(), parsePid(args), f)
			if err != nil {
				return err
			}
			findings := diagnose.Diagnose(rep, diagnoseEnv(args[0]))
			switch {
			case xml:
				_, err = os.Stdout.Write(rep.Malloc.Raw)
			case f.json:
				err = writeJSON(os.Stdout, infoJSON(rep, findings))
			default:
				if err = renderInfo(os.Stdout, rep); err == nil {
					err = renderFindings(os.Stdout, findings)
				}
			}
			return err
		},
	}
	f.register(c)
	c.Flags().BoolVar(&xml, "xml", false, "print glibc's malloc_info XML verbatim (with --read-only: as glibc would print it)")
	c.Flags().BoolVar(&readOnly, "read-only", false, "run nothing in the target: read the allocator's state from memory, with every thread stopped for the walk")
	c.Flags().BoolVar(&noFreeze, "no-freeze", false, "with --read-only: stop nothing at all; the numbers may be torn by threads that allocate meanwhile")
	cf.register(c)
	return c
}

// collectInfo runs malloc_info in the target and builds the report. The maps
// are read after the thread is released, so that reading them adds nothing
// to the time the thread is held.
func collectInfo(ctx context.Context, pid int, f injectFlags) (*glibc.Report, error) {
	t, err := live.Open(pid)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	pf, err := runPreflight(t, f)
	if err != nil {
		return nil, err
	}
	var raw []byte
	in, err := injectCall(ctx, t, pf, f, func(c glibc.Caller) (err error) {
		raw, err = glibc.RunMallocInfo(ctx, c, t.Libc)
		return err
	})
	if err != nil {
		return nil, err
	}
	mi, err := glibc.ParseMallocInfo(raw)
	if err != nil {
		return nil, fmt.Errorf("glibc's malloc_info output could not be parsed: %w", err)
	}
	rep := &glibc.Report{
		Pid:       pid,
		Exe:       t.Exe,
		Libc:      t.Libc.Info(),
		Malloc:    mi,
		Injection: &in,
	}
	if tids, err := ptrace.Tasks(pid); err == nil {
		rep.Threads = len(tids)
	}
	rep.Maps, err = readMaps(t)
	return rep, err
}

// injectCall borrows a thread that is safe to borrow, checks the arena
// locks again now that it is known which thread that is, runs call in it and
// gives it back. It reports the borrowed thread, the time it was held and
// the pre-flight walk that preceded it.
func injectCall(ctx context.Context, t *live.Target, pf *preflight, f injectFlags, call func(glibc.Caller) error) (glibc.Injection, error) {
	sess, err := t.Hijack(ctx, live.HijackOptions{Timeout: f.timeout, Tid: f.tid})
	if err != nil {
		return glibc.Injection{}, err
	}
	if err := pf.checkLocks(t, sess.Tid); err != nil {
		sess.Release()
		return glibc.Injection{}, err
	}
	start := time.Now()
	callErr := call(sess)
	dur := time.Since(start)
	held, relErr := sess.Release()
	if err := firstErr(ctx, callErr, relErr); err != nil {
		return glibc.Injection{}, err
	}
	in := glibc.Injection{Tid: sess.Tid, Blocked: blockedName(sess.Syscall), Refusals: sess.Refusals, Stopped: held, Call: dur}
	pf.record(&in)
	return in, nil
}

// firstErr decides what a finished injection reports: the call's own error,
// then a failure to release, then a signal that arrived meanwhile (the
// target is restored in every case by then).
func firstErr(ctx context.Context, callErr, relErr error) error {
	switch {
	case callErr != nil && errors.Is(callErr, context.Canceled):
		return errInterrupted
	case callErr != nil:
		return callErr
	case relErr != nil:
		return relErr
	case ctx.Err() != nil:
		return errInterrupted
	}
	return nil
}

func blockedName(nr int64) string {
	if nr < 0 {
		return "running"
	}
	return glibc.SyscallName(nr)
}

func readMaps(t *live.Target) (glibc.MapsSummary, error) {
	if err := t.Refresh(); err != nil {
		return glibc.MapsSummary{}, err
	}
	roll, err := maps.ReadRollup(t.Pid)
	if err != nil {
		return glibc.MapsSummary{}, err
	}
	return glibc.MapsSummary{Classes: maps.Summarize(t.Mappings), Rollup: roll}, nil
}

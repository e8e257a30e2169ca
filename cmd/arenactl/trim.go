package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"arenactl/internal/glibc"
	"arenactl/internal/live"
)

func newTrimCmd() *cobra.Command {
	var f injectFlags
	var pad uint64
	c := &cobra.Command{
		Use:   "trim PID",
		Short: "Run glibc's malloc_trim(pad) in the process and measure what it gave back",
		Long: `trim borrows one safe thread (as info does) to run malloc_trim(pad), which
returns whole free pages inside every arena to the kernel (madvise) and
shrinks the main heap's top. It reports RSS and Private_Dirty before and
after, per heap class and for the process, and the bytes released.`,
		Args: pidArg,
		RunE: func(c *cobra.Command, args []string) error {
			rep, err := runTrim(c, parsePid(args), f, pad)
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
	return c
}

func runTrim(c *cobra.Command, pid int, f injectFlags, pad uint64) (*glibc.TrimReport, error) {
	ctx := c.Context()
	t, err := live.Open(pid)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	before, err := readMaps(t)
	if err != nil {
		return nil, err
	}
	sess, err := t.Hijack(ctx, live.HijackOptions{Timeout: f.timeout, Tid: f.tid})
	if err != nil {
		return nil, err
	}
	callStart := time.Now()
	result, callErr := glibc.RunMallocTrim(ctx, sess, t.Libc, pad)
	call := time.Since(callStart)
	held, relErr := sess.Release()
	if err := firstErr(ctx, callErr, relErr); err != nil {
		return nil, err
	}
	after, err := readMaps(t)
	if err != nil {
		return nil, err
	}
	return &glibc.TrimReport{
		Pid: pid, Libc: t.Libc.Info(), Pad: pad, Result: result,
		Injection: glibc.Injection{Tid: sess.Tid, Blocked: blockedName(sess.Syscall), Refusals: sess.Refusals, Stopped: held, Call: call},
		Before:    before, After: after,
	}, nil
}

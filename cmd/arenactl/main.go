// Command arenactl inspects and trims the glibc malloc state of a running
// process without gdb: see README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/catch"
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/render"
)

// endsByInterrupt marks a command for which Ctrl-C is the normal way to
// finish (watch without --count, leaks and growth without --duration,
// --http's serving, the exporter): interrupted with no error, its report
// printed, it exits 0 (README's table of exit codes).
const endsByInterrupt = "ends-by-interrupt"

func main() {
	// The signals a user or a supervisor sends to stop us. They must not
	// kill arenactl while it holds a target thread: the kernel would let
	// the thread run on with injected registers. Catching them turns them
	// into a cancelled context; every command then restores and detaches
	// before exiting. Later copies of the same signal are caught too.
	// So are the others Go's runtime would exit on (its sigtable: throw
	// with a stack dump): SIGQUIT (a terminal's Ctrl-\), SIGABRT (a
	// watchdog's), and the fault signals when kill(2) sends them (the
	// kernel's own still crash, as they must). SIGPIPE: see watchOutput.
	// Package catch caught them from the process's first moments; main
	// takes over here, and a run one came before ends at once.
	sigCtx, stop := signal.NotifyContext(context.Background(), interrupts...)
	defer stop()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()
	if catch.Take() {
		cancel()
	}
	ctx, pipeBroken := watchOutput(ctx)
	cmd, err := newRoot().ExecuteContextC(ctx)
	if pipeBroken() || errors.Is(err, syscall.EPIPE) || outputBroken() {
		// Whoever read the output is gone: nothing more can be said, and
		// the target was given back when ctx ended. Polled here too: the
		// signal reaches watchOutput's goroutine after the write failed,
		// maybe after the command returned.
		os.Exit(exitBrokenPipe)
	}
	if err == nil && ctx.Err() != nil && cmd.Annotations[endsByInterrupt] == "true" {
		os.Exit(exitOK)
	}
	// Whatever was under way when the signal came has given its thread back
	// by now; say so rather than a bare "context canceled" (a core's
	// unpack, with no thread, says what it stopped).
	var unpack *core.StoppedError
	if (err == nil || errors.Is(err, context.Canceled) && !errors.As(err, &unpack)) && ctx.Err() != nil {
		err = errInterrupted
	}
	if err != nil {
		// One line whatever a target or a core put in the paths it quotes.
		fmt.Fprintf(os.Stderr, "arenactl: %s%s\n", render.Line(err.Error()), hint(err))
		os.Exit(exitCode(err))
	}
}

// interrupts are the signals that end a run as Ctrl-C does.
var interrupts = catch.Signals

// exitBrokenPipe is the exit code when stdout or stderr lost its reader
// (128 + SIGPIPE, what a shell reports of a writer killed by it); README's
// table of exit codes documents it.
const exitBrokenPipe = 128 + int(syscall.SIGPIPE)

// watchOutput ends ctx when stdout or stderr turns out to be a pipe (or
// socket) whose reader went away, and reports whether that happened.
//
// Go's runtime kills the process at once on SIGPIPE from a write to fd 1
// or 2, unless signal.Notify asks for SIGPIPE (os/signal's documentation,
// "SIGPIPE"): `arenactl leaks PID 2>&1 | true` died at its first note with
// the sampler's hooks in the target. Asked for, the write fails with EPIPE
// and the signal comes here, where it ends ctx as an interrupt does: the
// window ends and the target is given back. A SIGPIPE from another file
// (a client of leaks --http that went away) leaves fd 1 and 2 writable and
// is ignored, as Go's runtime ignores it.
func watchOutput(parent context.Context) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(parent)
	var broken atomic.Bool
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGPIPE)
	go func() {
		for range sigs {
			if outputBroken() {
				broken.Store(true)
				cancel()
			}
		}
	}()
	return ctx, broken.Load
}

// outputBroken says whether fd 1 or 2 has lost its reader: poll(2) reports
// POLLERR on the write end of a pipe with no reader left (pipe_poll in
// Linux's fs/pipe.c), POLLHUP or POLLERR on a socket shut down.
func outputBroken() bool {
	fds := []unix.PollFd{{Fd: 1}, {Fd: 2}}
	if n, err := unix.Poll(fds, 0); err != nil || n == 0 {
		return false
	}
	for _, f := range fds {
		if f.Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			return true
		}
	}
	return false
}

// writeJSON prints a document of package schema, indented.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

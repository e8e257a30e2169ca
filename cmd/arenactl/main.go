// Command arenactl inspects and trims the glibc malloc state of a running
// process without gdb: see README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// The signals a user or a supervisor sends to stop us. They must not
	// kill arenactl while it holds a target thread: the kernel would let
	// the thread run on with injected registers. Catching them turns them
	// into a cancelled context; every command then restores and detaches
	// before exiting. Later copies of the same signal are caught too.
	// SIGPIPE is not among them: it only comes from writing our output,
	// which happens after every thread has been given back.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err := newRoot().ExecuteContext(ctx)
	if err == nil && ctx.Err() != nil {
		err = errInterrupted
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "arenactl: %v\n", err)
		os.Exit(exitCode(err))
	}
}

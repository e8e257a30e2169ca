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
	"syscall"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/render"
)

// endsByInterrupt marks a command for which Ctrl-C is the normal way to
// finish (watch without --count): interrupted with no error, it exits 0.
const endsByInterrupt = "ends-by-interrupt"

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
	cmd, err := newRoot().ExecuteContextC(ctx)
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

// writeJSON prints a document of package schema, indented.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/testutil"
)

// heap's own bad arguments are usage errors, refused before the process
// is touched.
func TestHeapRefusesBadArguments(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "idle.c"))
	pid := fmt.Sprint(tg.Pid)
	expectRefusal(t, run(t, "heap", "--top", "0", pid), exitUsage, "--top 0")
	expectRefusal(t, run(t, "heap", "--addr", "zz", pid), exitUsage, `--addr "zz"`, "hex")
	expectRefusal(t, run(t, "heap", "--freeze", "none", pid), exitUsage, "--freeze is image, walk or auto")
	if s := processState(tg.Pid); s == 'T' || s == 't' {
		t.Errorf("the target is stopped (state %c)", s)
	}
}

// An arena whose lists could not be walked again within the time its lock
// may be held: the injection is refused as a call that could not be made
// (exit 9), naming the arena, with what to do instead.
func TestArenaCheckErrorExit(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &inspect.ArenaCheckError{Pid: 42, Index: 3, Arena: 0x7f0000000890, Held: time.Second})
	if c := exitCode(err); c != exitCallFailed {
		t.Errorf("exit code %d, want %d", c, exitCallFailed)
	}
	msg := err.Error() + hint(err)
	for _, w := range []string{"process 42", "arena 3 (0x7f0000000890)", "within 1s", "nothing was injected", "--read-only", "--no-heap-check"} {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q lacks %q", msg, w)
		}
	}
}

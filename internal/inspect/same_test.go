package inspect

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/testutil"
)

// A use case given the process its pid must still name (Options.Same, as
// watch gives it) reads that process, and refuses as gone any other that
// has the pid: one whose start time is not the one recorded stands here
// for a later process given a reused pid, which is then never read in its
// place, read-only or by injection.
func TestSameRefusesAnotherProcess(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "idle.c"))
	id, err := procfs.IdentityOf(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := Options{Timeout: 10 * time.Second, Same: id}
	if _, err := ReadOnly(ctx, tg.Pid, o, HoldWalk); err != nil {
		t.Fatalf("the process itself: %v", err)
	}
	o.Same.Start++
	if rep, err := ReadOnly(ctx, tg.Pid, o, HoldWalk); !errors.Is(err, ptrace.ErrGone) {
		t.Errorf("read-only, another process's start time: %v, %v; want the process gone", rep, err)
	}
	if rep, err := Info(ctx, tg.Pid, o); !errors.Is(err, ptrace.ErrGone) {
		t.Errorf("info, another process's start time: %v, %v; want the process gone", rep, err)
	}
}

package inspect

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/glibc/inject"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/testutil"
)

// An arenactl started below the normal level (nice 19, SCHED_IDLE) runs
// every thread at the normal level while a thread of the target is held,
// with no garbage collection allowed to start, and is back at its own level
// once the thread is released. The levels are read from /proc, as any
// observer would, not inferred from timing.
func TestHoldRunsAtNormalPriority(t *testing.T) {
	if !mayLowerAndRaise() {
		t.Skip("this process may not raise a thread's priority again (no CAP_SYS_NICE, RLIMIT_NICE too low)")
	}
	bin := testutil.BuildC(t, "many_threads.c")
	t.Cleanup(func() { setOwnLevel(t, unix.SchedAttr{Policy: unix.SCHED_NORMAL}) })
	for _, low := range []unix.SchedAttr{
		{Policy: unix.SCHED_NORMAL, Nice: 19},
		{Policy: unix.SCHED_IDLE},
		{Policy: unix.SCHED_BATCH, Nice: 5},
	} {
		name := fmt.Sprintf("policy %d nice %d", low.Policy, low.Nice)
		tg := testutil.StartCmd(t, exec.Command(bin, "4"))
		tgt, err := live.Open(tg.Pid)
		if err != nil {
			t.Fatal(err)
		}
		setOwnLevel(t, low)
		ctx := context.Background()
		o := Options{Timeout: 10 * time.Second}
		pf, err := runPreflight(ctx, tgt, o)
		if err != nil {
			t.Fatal(err)
		}
		var during map[int][2]int
		gcPercent := 0
		if _, err := injectCall(ctx, tgt, pf, o, func(c inject.Caller) error {
			during = ownLevels(t)
			gcPercent = debug.SetGCPercent(-1)
			debug.SetGCPercent(gcPercent)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		after := ownLevels(t)
		tgt.Close()
		for tid, l := range during {
			if l[0] != unix.SCHED_NORMAL || l[1] > 0 {
				t.Errorf("%s: while a thread was held, arenactl's thread %d ran at policy %d nice %d, want SCHED_OTHER at nice <= 0", name, tid, l[0], l[1])
			}
		}
		if gcPercent != -1 {
			t.Errorf("%s: GC percent %d while a thread was held, want -1 (no collection)", name, gcPercent)
		}
		for tid, l := range after {
			if l[0] != int(low.Policy) || l[1] != int(low.Nice) {
				_, was := during[tid]
				t.Errorf("%s: after the release, thread %d (there while held: %v) is at policy %d nice %d, want its own level back", name, tid, was, l[0], l[1])
			}
		}
		if line, code := tg.Quit(); line != "clean" || code != 0 {
			t.Fatalf("target: %q %d", line, code)
		}
	}
}

// A freeze (a read-only walk with --freeze walk) is a stopped window too.
func TestFreezeRunsAtNormalPriority(t *testing.T) {
	if !mayLowerAndRaise() {
		t.Skip("this process may not raise a thread's priority again (no CAP_SYS_NICE, RLIMIT_NICE too low)")
	}
	bin := testutil.BuildC(t, "many_threads.c")
	t.Cleanup(func() { setOwnLevel(t, unix.SchedAttr{Policy: unix.SCHED_NORMAL}) })
	tg := testutil.StartCmd(t, exec.Command(bin, "4"))
	tgt, err := live.Open(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	setOwnLevel(t, unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: 19})
	var during map[int][2]int
	hd, err := hold(context.Background(), tgt, HoldWalk, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	during = ownLevels(t)
	if err := hd.release(&report.ReadOnly{}); err != nil {
		t.Fatal(err)
	}
	for tid, l := range during {
		if l[0] != unix.SCHED_NORMAL || l[1] > 0 {
			t.Errorf("while frozen, arenactl's thread %d ran at policy %d nice %d, want SCHED_OTHER at nice <= 0", tid, l[0], l[1])
		}
	}
	for tid, l := range ownLevels(t) {
		if l[1] != 19 {
			t.Errorf("after the thaw, thread %d is at nice %d, want 19 back", tid, l[1])
		}
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

// A process already at the normal level is left alone.
func TestRaiseAtNormalDoesNothing(t *testing.T) {
	setOwnLevel(t, unix.SchedAttr{Policy: unix.SCHED_NORMAL})
	if b := raisePriority(); b != nil {
		b.restore()
		t.Fatal("raisePriority raised a process that was at the normal level")
	}
}

// mayLowerAndRaise tries it on a thread of its own, which then exits.
func mayLowerAndRaise() bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		tid := unix.Gettid()
		low := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: 19}
		normal := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
		ok <- unix.SchedSetAttr(tid, &low, 0) == nil && unix.SchedSetAttr(tid, &normal, 0) == nil
	}()
	return <-ok
}

// setOwnLevel puts every thread of the test process at a.
func setOwnLevel(t *testing.T, a unix.SchedAttr) {
	t.Helper()
	b := &boost{}
	if !b.apply(func(int, *unix.SchedAttr) (unix.SchedAttr, bool) { return a, true }) {
		t.Fatalf("could not set this process's threads to policy %d nice %d", a.Policy, a.Nice)
	}
}

// ownLevels reads each thread's policy and nice value from
// /proc/self/task/TID/stat (fields 41 and 19).
func ownLevels(t *testing.T) map[int][2]int {
	t.Helper()
	tids, err := procfs.Tasks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	levels := map[int][2]int{}
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
		if err != nil {
			continue // exited
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 39 {
			t.Fatalf("thread %d: short stat %q", tid, s)
		}
		nice, err1 := strconv.Atoi(f[19-3])
		policy, err2 := strconv.Atoi(f[41-3])
		if err1 != nil || err2 != nil {
			t.Fatalf("thread %d: stat %q", tid, s)
		}
		levels[tid] = [2]int{policy, nice}
	}
	return levels
}

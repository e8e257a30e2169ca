// The calls these tests make are injected on x86_64 only (call_arm64.go).

//go:build amd64

package ptrace

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/testutil"
)

// locker starts the fixture's locker thread and returns the addresses of
// its mutex and of the count it keeps under it.
func (fx *fixture) locker(t *testing.T) (lock, count uint64) {
	t.Helper()
	f := strings.Fields(fx.tg.Send("locker"))
	if len(f) != 2 {
		t.Fatalf("locker: %q", f)
	}
	var err1, err2 error
	lock, err1 = strconv.ParseUint(f[0], 16, 64)
	count, err2 = strconv.ParseUint(f[1], 16, 64)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	return lock, count
}

// advances reports whether the word at addr changes within a few seconds.
func (fx *fixture) advances(t *testing.T, addr uint64) bool {
	t.Helper()
	first, err := fx.proc.ReadUint64(addr)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if v, err := fx.proc.ReadUint64(addr); err == nil && v != first {
			return true
		}
	}
	return false
}

// While the borrowed thread holds the lock, the thread that takes it all
// the time waits: its count stands still for as long as the reads take. Let
// go, the lock is taken again at once, and the borrowed thread comes back
// with its own registers, ready for another call.
func TestHoldLockHoldsAndLetsGo(t *testing.T) {
	fx := start(t)
	lock, count := fx.locker(t)
	if !fx.advances(t, count) {
		t.Fatal("the locker does not count")
	}
	maskBefore := sigBlk(t, fx.tg.Pid)
	th := fx.stopped(t, fx.tg.Pid)
	for round := 0; round < 3; round++ {
		var first, last, word uint64
		err := th.HoldLock(generous, lock, 10*time.Second, func() error {
			var err error
			if first, err = fx.proc.ReadUint64(count); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
			if word, err = fx.proc.ReadUint64(lock); err != nil {
				return err
			}
			last, err = fx.proc.ReadUint64(count)
			return err
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if first != last {
			t.Errorf("round %d: the count moved from %d to %d while the lock was held", round, first, last)
		}
		if w := uint32(word); w != 1 && w != 2 {
			t.Errorf("round %d: lock word %d while held", round, w)
		}
		if !fx.advances(t, count) {
			t.Fatalf("round %d: the locker is stuck after the lock was let go", round)
		}
	}
	if got, err := th.Call(generous, fx.add3, 1, 2, 3); err != nil || got != 6 {
		t.Fatalf("add3 after HoldLock = %d, %v", got, err)
	}
	if err := th.Detach(); err != nil {
		t.Fatal(err)
	}
	// The routine blocks every signal while it holds the lock; the
	// thread's own mask is back.
	if got := sigBlk(t, fx.tg.Pid); got != maskBefore {
		t.Errorf("blocked signals %s after, %s before", got, maskBefore)
	}
	if got := fx.alive(t); got != "0" {
		t.Fatalf("count = %q", got)
	}
	if line, code := fx.tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

// sigBlk is the main thread's blocked-signal mask as /proc shows it.
func sigBlk(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SigBlk:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no SigBlk line")
	return ""
}

// Reads that take longer than the hold allows are void: the thread lets the
// lock go by itself, and says so.
func TestHoldLockLapses(t *testing.T) {
	fx := start(t)
	lock, count := fx.locker(t)
	th := fx.stopped(t, fx.tg.Pid)
	defer th.Detach()
	moved := false
	err := th.HoldLock(generous, lock, 5*time.Millisecond, func() error {
		moved = fx.advances(t, count)
		return nil
	})
	if !errors.Is(err, ErrLockLapsed) {
		t.Fatalf("HoldLock = %v, want ErrLockLapsed", err)
	}
	if !moved {
		t.Error("the lock was not let go while the reads went on")
	}
	if got, err := th.Call(generous, fx.add3, 1, 2, 3); err != nil || got != 6 {
		t.Fatalf("add3 after a lapsed hold = %d, %v", got, err)
	}
}

// A lock its holder keeps is waited for no longer than the soft limit; the
// thread is given back, holding nothing, and the holder goes on.
func TestHoldLockWaitIsAbandoned(t *testing.T) {
	fx := start(t)
	lock, count := fx.locker(t)
	if a := fx.tg.Send("hog"); a != "ok" {
		t.Fatalf("hog: %q", a)
	}
	th := fx.stopped(t, fx.tg.Pid)
	ran := false
	err := th.HoldLock(CallLimits{Soft: 200 * time.Millisecond, Hard: 5 * time.Second}, lock, time.Second, func() error {
		ran = true
		return nil
	})
	var te *TimeoutError
	if !errors.As(err, &te) || !te.Blocked || te.Syscall != int64(arch.AMD64.MustSys("futex")) {
		t.Fatalf("HoldLock on a kept lock = %v, want a timeout blocked in futex", err)
	}
	if ran {
		t.Error("the reads ran without the lock")
	}
	if err := th.Detach(); err != nil {
		t.Fatal(err)
	}
	if a := fx.tg.Send("unhog"); a != "ok" {
		t.Fatalf("unhog: %q", a)
	}
	if !fx.advances(t, count) {
		t.Fatal("the locker is stuck after the abandoned wait")
	}
	if got := fx.alive(t); got != "0" {
		t.Fatalf("count = %q", got)
	}
	if line, code := fx.tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

// An arenactl killed while its thread holds a lock: the thread lets the
// lock go within its hold, returns through the gate and puts itself back.
// The tracer is a child (this test binary again, in holdLockHelper), killed
// with SIGKILL while its reads are under way.
func TestHoldLockKilledTracer(t *testing.T) {
	fx := start(t)
	lock, count := fx.locker(t)
	cmd := testutil.StartHelper(t, "TestHoldLockHelper", fmt.Sprintf("ARENACTL_HOLD_LOCK=%d:%x:%x", fx.tg.Pid, lock, count), "holding")
	if v, err := fx.proc.ReadUint64(lock); err != nil || uint32(v) == 0 {
		t.Fatalf("lock word %d, %v while the helper holds it", uint32(v), err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !fx.advances(t, count) {
		t.Fatal("the lock was never let go after the tracer died")
	}
	testutil.WaitUntil(t, "the thread to put itself back", func() bool {
		sites, _ := fx.proc.FindSites()
		return len(sites) == 1 && sites[0].Restored
	})
	if got := fx.alive(t); got != "0" {
		t.Fatalf("count = %q", got)
	}
	if line, code := fx.tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

// TestHoldLockHelper is TestHoldLockKilledTracer's tracer: it holds the
// lock for at most 300 ms and, under it, waits to be killed.
func TestHoldLockHelper(t *testing.T) {
	env := os.Getenv("ARENACTL_HOLD_LOCK")
	if env == "" {
		t.Skip("run by TestHoldLockKilledTracer")
	}
	var pid int
	var lock, count uint64
	if _, err := fmt.Sscanf(env, "%d:%x:%x", &pid, &lock, &count); err != nil {
		t.Fatal(err)
	}
	p, err := Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	th, err := p.Seize(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	th.HoldLock(generous, lock, 300*time.Millisecond, func() error {
		fmt.Println("holding")
		os.Stdout.Sync()
		time.Sleep(time.Hour)
		return nil
	})
}

package live_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/testutil"
)

// An image asked for right after an arenactl was killed mid-call in the
// only thread: the thread still runs that call, then waits at the killed
// run's gate and puts itself back. Image lets it go meanwhile and stops it
// again, and gets its image once the thread is its own; before, it failed
// at once (no thread could take a call site). The killed tracer is this
// test binary again (TestImageAfterKilledCallHelper), its call a poll of
// 1.5 s.
func TestImageAfterKilledCall(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "idle.c"))
	killMidPoll(t, tg.Pid, 1500)
	tgt := openLive(t, tg.Pid)
	im, err := tgt.Image(context.Background(), 3*time.Second)
	if err != nil {
		t.Fatalf("image after a killed run's call: %v", err)
	}
	im.Close()
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// A thread held longer than Image waits (a killed run's poll of 8 s, past
// its three waits of a gate's second): Image gives up with the call site
// named, a thread that cannot be borrowed (errkind.ErrNoSafeThread, exit
// 8 in cmd), and leaves the process running: once the call is over it
// answers and exits as it would.
func TestImageGivesUpOnAThreadHeldTooLong(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "idle.c"))
	killMidPoll(t, tg.Pid, 8000)
	tgt := openLive(t, tg.Pid)
	_, err := tgt.Image(context.Background(), 3*time.Second)
	var at *ptrace.AtCallSiteError
	if !errors.As(err, &at) || !errors.Is(err, errkind.ErrNoSafeThread) || !strings.Contains(err.Error(), "left by arenactl") {
		t.Fatalf("image with the only thread in a killed run's call: %v, want the call site named as holding it", err)
	}
	if testutil.Traced(tg.Pid) {
		t.Error("the target is still traced after Image gave up")
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// killMidPoll has a tracer (this test binary again) start a poll of ms
// milliseconds in process pid's main thread, and kills it mid-call.
func killMidPoll(t *testing.T, pid, ms int) {
	t.Helper()
	if _, ok := arch.Host().Sys("poll"); !ok {
		t.Skip("no poll syscall on this machine (a timed call with no pointer)")
	}
	cmd := testutil.StartHelper(t, "TestImageAfterKilledCallHelper", fmt.Sprintf("ARENACTL_SITE_HELPER=%d:%d", pid, ms), "calling")
	time.Sleep(200 * time.Millisecond) // the call under way
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	testutil.WaitUntil(t, "the target to be untraced", func() bool { return !testutil.Traced(pid) })
}

// TestImageAfterKilledCallHelper is killMidPoll's tracer: it starts a poll
// in the target's thread and waits, in it, to be killed.
func TestImageAfterKilledCallHelper(t *testing.T) {
	env := os.Getenv("ARENACTL_SITE_HELPER")
	if env == "" {
		t.Skip("run by TestImageAfterKilledCall")
	}
	var pid, ms int
	if _, err := fmt.Sscanf(env, "%d:%d", &pid, &ms); err != nil {
		t.Fatal(err)
	}
	p, err := ptrace.Open(pid)
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
	fmt.Println("calling")
	_, err = th.RawSyscall(ptrace.CallLimits{Soft: 10 * time.Second, Hard: 20 * time.Second}, uint64(arch.Host().MustSys("poll")), 0, 0, uint64(ms))
	t.Fatalf("the call returned before the kill: %v", err)
}

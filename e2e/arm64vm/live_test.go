package arm64vm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// The guest's checks that a live aarch64 target comes to no harm (the
// project's first hard rule), as e2e/inject's do on x86_64, with
// testdata/selfcheck.c built for aarch64: every thread holds known values
// in callee-saved, vector and flag registers across what it does, its
// parked threads issue their blocking syscalls raw (read on a pipe,
// nanosleep, a timed futex, a futex, ppoll with a mask of its own) and
// count any that returned a wrong value, one runs a register loop in user
// code, one allocates and checks its blocks.

// ownGroup runs the guest's checks again in a process group of their own.
// In the VM the group of the test, its targets and arenactl counts as
// orphaned (the run's timeout(1) leads it, and its parent is init, which
// does not count: kernel/exit.c will_become_orphaned_pgrp),
// so when arenactl exits while a target is stopped (snapshot's, which
// stops itself), the kernel sends the group SIGHUP and SIGCONT
// (kill_orphaned_pgrp): the test dies of it. With this process as the
// parent of a group of its own, in the same session, the group is not
// orphaned, as under a shell. It reports whether it ran them (and how they
// ended, through t).
func ownGroup(t *testing.T) bool {
	if os.Getenv("ARENACTL_ARM64_GROUP") != "" {
		return false
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), "ARENACTL_ARM64_GROUP=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		t.Fatalf("the checks in a process group of their own: %v", err)
	}
	return true
}

// selfcheck borrows every thread of the target once with info (the reader
// blocked in read(2) on a pipe among them): each must find its registers,
// its syscall's result and its mask as they were, and the process its
// heap intact.
func (g *guest) selfcheck(t *testing.T) {
	tg := g.start(t, "selfcheck")
	pid := strconv.Itoa(tg.Pid)
	for _, tid := range tg.Threads() {
		r := g.run(t, "info", "--timeout", "5s", "--thread", strconv.Itoa(tid), pid)
		t.Logf("info --thread %d: exit %d %s", tid, r.code, firstLines(r.stderr, 3))
		if a := tg.Send("check"); a != "ok" {
			t.Fatalf("after info of thread %d the target says %q", tid, a)
		}
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %q", a)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// killRounds is how many runs selfcheckKill kills; ARENACTL_ARM64_KILL_ROUNDS
// sets it (each is a second or two under emulation).
func killRounds() int { return testutil.Rounds("ARENACTL_ARM64_KILL_ROUNDS", 12) }

// selfcheckKill kills arenactl (SIGKILL) at random moments of info and
// trim runs: at attach, while the call site is made, mid-call, at
// release. After each the target must be untraced, every thread whole and
// making progress; a later complete run removes what the killed ones left.
func (g *guest) selfcheckKill(t *testing.T) {
	tg := g.start(t, "selfcheck")
	pid := strconv.Itoa(tg.Pid)
	start := time.Now()
	g.mustRun(t, "info", pid)
	span := time.Since(start) * 5 / 4
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d, a run takes %v", seed, span*4/5)
	tids := tg.Threads()
	completed := 0
	for i := range killRounds() {
		verb := []string{"info", "trim"}[i%2]
		tid := tids[rng.Intn(len(tids))]
		cmd := exec.Command(g.arenactl, verb, "--timeout", "5s", "--thread", strconv.Itoa(tid), pid)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(rng.Int63n(int64(span)))
		time.Sleep(delay)
		cmd.Process.Kill()
		if err := cmd.Wait(); err == nil {
			completed++
		}
		testutil.WaitUntil(t, "the target to be untraced", func() bool { return !testutil.Traced(tg.Pid) })
		if a := tg.Send("check"); a != "ok" {
			t.Fatalf("round %d (%s of thread %d, killed after %v): target says %q", i, verb, tid, delay, a)
		}
	}
	t.Logf("%d rounds, %d runs finished before the kill", killRounds(), completed)
	// The gate's wait (a second) lets every thread a killed run left in
	// its site leave it; the next run then removes the sites.
	time.Sleep(1500 * time.Millisecond)
	g.mustRun(t, "info", pid)
	if left := callSites(t, tg.Pid); len(left) != 0 {
		t.Errorf("call sites left in the target after a complete run: %v", left)
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %q", a)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// callSites lists the call sites in a process: one-page anonymous r-x
// mappings whose page below starts with the site's mark.
func callSites(t *testing.T, pid int) []string {
	t.Helper()
	ms, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var out []string
	for _, line := range strings.Split(string(ms), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 || f[1] != "r-xp" {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || b-a != 4096 || a < 4096 {
			continue
		}
		mark := make([]byte, 8)
		if _, err := mem.ReadAt(mark, int64(a-4096)); err == nil && bytes.Equal(mark, []byte("ARENACTL")) {
			out = append(out, f[0])
		}
	}
	return out
}

// sve: a thread with live SVE state (testdata/sve.c, spinning in user code
// with z8 and p1 held over the whole vector length) is passed over, with
// its reason, since the call's frame has no SVE record; info borrows the
// main thread instead, and the SVE thread finds its state whole.
func (g *guest) sve(t *testing.T) { g.passedOver(t, "sve", "SVE") }

// passedOver: the target's second thread, holding state of the CPU's
// feature what (its /proc/cpuinfo name is the target's), is refused by
// info --thread with a reason naming what; info borrows the main thread,
// and the target's check finds the second thread's state whole.
func (g *guest) passedOver(t *testing.T, target, what string) {
	if !strings.Contains(readFile(t, "/proc/cpuinfo"), " "+target) {
		t.Skip("the CPU has no " + what)
	}
	tg := g.start(t, target)
	pid := strconv.Itoa(tg.Pid)
	var other int
	for _, tid := range tg.Threads() {
		if tid != tg.Pid {
			other = tid
		}
	}
	r := g.run(t, "info", "--timeout", "2s", "--thread", strconv.Itoa(other), pid)
	if r.code == 0 || !strings.Contains(r.stderr, what) {
		t.Errorf("info of the %s thread: exit %d, %q; want it refused for its %s state", what, r.code, r.stderr, what)
	}
	g.mustRun(t, "info", pid)
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %q", a)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

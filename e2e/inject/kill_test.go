package inject

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// killRounds is how many runs TestSIGKILLAtRandomMoments kills; set
// ARENACTL_KILL_ROUNDS (e.g. 200 or 1000) for the long form.
func killRounds() int { return testutil.Rounds("ARENACTL_KILL_ROUNDS", 50) }

// SIGKILL of arenactl at random moments of info and trim runs: at attach,
// while the call site is made, mid-call, at release. The target checks
// itself after every kill: every thread alive and making progress, the
// registers each held across its syscall or user-code loop unchanged, every
// syscall restarted (none returned EINTR or a wrong value), the signal mask
// of the thread in ppoll its own, its heap blocks intact; and no thread is
// left stopped or traced.
func TestSIGKILLAtRandomMoments(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "selfcheck.c"))
	rounds := killRounds()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	// Kill moments spread over the length of a whole run.
	start := time.Now()
	mustRun(t, "info", fmt.Sprint(tg.Pid))
	span := time.Since(start) * 5 / 4
	t.Logf("seed %d, a run takes %v", seed, span*4/5)
	completed := 0
	// Every kind of thread gets borrowed: each round names one (parked in
	// read, nanosleep, a timed futex, a futex, ppoll with its own mask; or
	// running its register loop or its allocations).
	tids := tg.Threads()
	for i := 0; i < rounds; i++ {
		verb := []string{"info", "trim"}[i%2]
		tid := tids[rng.Intn(len(tids))]
		cmd := exec.Command(arenactl, verb, "--timeout", "2s", "--thread", fmt.Sprint(tid), fmt.Sprint(tg.Pid))
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
		if st := stoppedThreads(tg.Pid); st != "" {
			t.Fatalf("round %d (%s of thread %d, killed after %v): threads left stopped: %s", i, verb, tid, delay, st)
		}
		if a := tg.Send("check"); a != "ok" {
			t.Fatalf("round %d (%s of thread %d, killed after %v): target says %q", i, verb, tid, delay, a)
		}
	}
	t.Logf("%d rounds, %d runs finished before the kill", rounds, completed)
	// What the killed runs left is removed by the next run that completes.
	r := mustRun(t, "info", fmt.Sprint(tg.Pid))
	if left := unexplainedSites(t, tg.Pid, r.Stderr); len(left) != 0 {
		t.Errorf("call sites still in the target after a complete run, not named as kept: %v; it said: %s", left, r.Stderr)
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %q", a)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// A run killed while its call waits (on an arena lock another thread holds)
// leaves its call site, buffer and FILE behind; the call then completes by
// itself and the routine gives the thread back. The next run finds all
// three, checks that nothing runs in them, removes them and says so.
func TestLeftoversOfAKilledRunAreRemoved(t *testing.T) {
	tg, drain := killedInBlockedCall(t)
	if left := markedMappings(t, tg.Pid); len(left) != 1 {
		t.Fatalf("marked mappings after the kill: %v", left)
	}
	drain() // the lock is released: the abandoned call completes and restores the thread
	testutil.WaitUntil(t, "the killed run's call to finish", func() bool { return syscallOf(tg.Pid) != 202 })
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target after the killed run: %s", a)
	}
	r := mustRun(t, "info", "--thread", fmt.Sprint(tg.Pid), fmt.Sprint(tg.Pid))
	for _, w := range []string{"removed what an earlier arenactl", "a FILE at", "buffer at", "call site at"} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("the next run did not say %q: %s", w, r.Stderr)
		}
	}
	if left := markedMappings(t, tg.Pid); len(left) != 0 {
		t.Errorf("marked mappings after the next run: %v", left)
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %s", a)
	}
	mustQuit(t, tg)
}

// A call a killed run left running in the main thread does not keep the
// next run that needs a thread for its own calls from starting: record's
// sampler is placed through another thread, and the left call, once the
// lock is free, still completes and gives the main thread back.
func TestRecordBesideAKilledRunsCall(t *testing.T) {
	tg, drain := killedInBlockedCall(t)
	out := filepath.Join(t.TempDir(), "rec")
	r := run(t, "record", fmt.Sprint(tg.Pid), "-o", out, "--duration", "1s", "--interval", "250ms")
	if r.Code != 0 {
		t.Errorf("record beside a killed run's call: exit %d: %s", r.Code, r.Stderr)
	}
	drain()
	testutil.WaitUntil(t, "the killed run's call to finish", func() bool { return syscallOf(tg.Pid) != 202 })
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %s", a)
	}
	mustQuit(t, tg)
}

// killedInBlockedCall starts the stall target and an info whose call in
// its main thread waits for the lock the stall thread holds, kills info
// there, and returns once the target is untraced, the call still waiting.
func killedInBlockedCall(t *testing.T) (tg *testutil.Target, drain func()) {
	t.Helper()
	tg, drain = stallTarget(t)
	mainThreadReads(t, tg.Pid)
	cmd, _, exited := startBlockedCall(t, tg)
	cmd.Process.Kill()
	<-exited
	testutil.WaitUntil(t, "the target to be untraced", func() bool { return !testutil.Traced(tg.Pid) })
	return tg, drain
}

// startBlockedCall starts info borrowing the stall target's main thread and
// returns once its malloc_info waits (a futex) for the arena lock the stall
// thread holds, inside the call site it made. exited closes when arenactl
// ends.
func startBlockedCall(t *testing.T, tg *testutil.Target) (cmd *exec.Cmd, stderr *strings.Builder, exited chan struct{}) {
	t.Helper()
	cmd = exec.Command(arenactl, "info", "--timeout", "60s", "--thread", fmt.Sprint(tg.Pid), fmt.Sprint(tg.Pid))
	stderr = &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	// Before the target's own clean-up (clean-ups run last first): a
	// test that fails while arenactl is stopped would otherwise wait
	// forever for a target whose tracer never runs again.
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	for len(markedMappings(t, tg.Pid)) == 0 || syscallOf(tg.Pid) != 202 {
		select {
		case <-exited:
			t.Fatalf("arenactl ended before its call blocked: %s", stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return cmd, stderr, exited
}

// allStopped reports whether every thread of pid is stopped by a signal.
func allStopped(pid int) bool {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(ents) == 0 {
		return false
	}
	for _, e := range ents {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i < 0 || i+2 >= len(s) || s[i+2] != 'T' {
			return false
		}
	}
	return true
}

// threadState is what /proc says of a thread, for a failure's message.
func threadState(pid, tid int) string {
	dir := fmt.Sprintf("/proc/%d/task/%d/", pid, tid)
	var b strings.Builder
	for _, f := range []string{"syscall", "wchan", "stat"} {
		v, _ := os.ReadFile(dir + f)
		fmt.Fprintf(&b, "%s: %s; ", f, strings.TrimSpace(string(v)))
	}
	st, _ := os.ReadFile(dir + "status")
	for _, l := range strings.Split(string(st), "\n") {
		if strings.HasPrefix(l, "State") || strings.HasPrefix(l, "TracerPid") || strings.HasPrefix(l, "SigPnd") || strings.HasPrefix(l, "ShdPnd") || strings.HasPrefix(l, "SigBlk") {
			b.WriteString(l + "; ")
		}
	}
	return b.String()
}

// syscallOf is the syscall thread tid (= pid: the main thread) is blocked in, -1 if none.
func syscallOf(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, pid))
	n, err := strconv.Atoi(strings.Fields(string(b) + " x")[0])
	if err != nil {
		return -1
	}
	return n
}

// arenactl stopped (SIGSTOP) while its call waits, for longer than the call
// site's gate: the call completes, the thread restores itself and goes on.
// Continued, arenactl finds the thread gone from its call, fails that run
// (leaving its objects, marked) and the next run removes them.
func TestSIGSTOPOfArenactlPastTheGate(t *testing.T) {
	tg, drain := stallTarget(t)
	mainThreadReads(t, tg.Pid)
	cmd, stderr, exited := startBlockedCall(t, tg)
	cmd.Process.Signal(syscall.SIGSTOP)
	// A SIGSTOP wakes one thread of arenactl, which then stops the others:
	// under load they run on for a while. One that saw the call end in that
	// time would take the thread back (an interrupt, a ptrace-stop the
	// thread cannot leave while arenactl is stopped) instead of leaving it
	// to its gate, which is what this test is about.
	testutil.WaitUntil(t, "every thread of arenactl to stop", func() bool { return allStopped(cmd.Process.Pid) })
	drain()
	// Past the gate (1 s): the thread is back in its read. Waited for, not
	// slept: on a loaded machine the call itself can take most of a
	// fixed sleep, and the thread was still at the gate when arenactl went
	// on (CI rehearsal: arenactl exited 0).
	deadline := time.Now().Add(testutil.Patience)
	for syscallOf(tg.Pid) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the thread did not restore itself: %s", threadState(tg.Pid, tg.Pid))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	<-exited
	if !strings.Contains(stderr.String(), "restored itself") || cmd.ProcessState.ExitCode() != exitCallFailed {
		t.Errorf("arenactl exited %d: %s", cmd.ProcessState.ExitCode(), stderr.String())
	}
	if testutil.Traced(tg.Pid) {
		t.Fatal("the target is still traced")
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %s", a)
	}
	r := mustRun(t, "info", "--thread", fmt.Sprint(tg.Pid), fmt.Sprint(tg.Pid))
	if !strings.Contains(r.Stderr, "removed what an earlier arenactl") {
		t.Errorf("the next run did not remove the leftovers: %s", r.Stderr)
	}
	if left := markedMappings(t, tg.Pid); len(left) != 0 {
		t.Errorf("call sites after the next run: %v", left)
	}
	mustQuit(t, tg)
}

// mainThreadReads waits for the stall target's main thread to sit in read
// on its stdin. If its first read allocated its buffer after the stall
// thread took main_arena's lock, it waits for that lock instead, for as
// long as the stall lasts, and is (rightly) never borrowed: the test cannot
// run then.
func mainThreadReads(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for syscallOf(pid) != 0 {
		if time.Now().After(deadline) {
			t.Skipf("the target's main thread is in syscall %d, not reading its stdin: it waits for the lock its stall thread holds", syscallOf(pid))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

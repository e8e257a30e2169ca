package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// The kinds of damage corrupt.c does, and what glibc would do on each if
// malloc_info or malloc_trim ran: abort (or, for a size, madvise memory in
// use: malloc_trim killed the target with SIGSEGV when tried) or spin
// forever with the arena's lock held.
var damageKinds = []struct {
	kind        string
	abort, hang bool
}{
	{"size", true, false},   // unsorted chunk's size is 0x4141414141414141
	{"cycle", false, true},  // two small-bin chunks point at each other
	{"ucycle", false, true}, // the unsorted chunk points at itself
	{"wildfd", true, false}, // a fastbin fd decodes to a misaligned pointer
}

// damagedTarget starts corrupt.c, sends it the commands first (each
// answered "ok"), damages its heap and returns the damaged chunks'
// addresses.
func damagedTarget(t *testing.T, kind string, first ...string) (*testutil.Target, []uint64) {
	t.Helper()
	tg := testutil.Start(t, testutil.BuildC(t, "corrupt.c"))
	for _, c := range first {
		if a := tg.Send(c); a != "ok" {
			t.Fatalf("target answered %q to %s", a, c)
		}
	}
	answer := tg.Send(kind)
	f := strings.Fields(answer)
	if len(f) < 2 || f[0] != "ok" {
		t.Fatalf("target answered %q to %s", answer, kind)
	}
	var addrs []uint64
	for _, s := range f[1:] {
		a, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("target answered %q: %v", answer, err)
		}
		addrs = append(addrs, a)
	}
	return tg, addrs
}

// runWithin is run with a deadline: a walk that follows a damaged list
// forever fails the test instead of hanging it.
func runWithin(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, arenactl, args...)
	// Before a run past d is killed, what its threads were doing: state,
	// wait channel and system call of each (a hang is told from a crawl).
	var where string
	cmd.Cancel = func() error {
		where = threadsOf(cmd.Process.Pid)
		return cmd.Process.Kill()
	}
	r := runCmd(t, cmd)
	if ctx.Err() != nil {
		t.Fatalf("arenactl %s did not finish within %s; its threads then:\n%s", strings.Join(args, " "), d, where)
	}
	return r
}

// threadsOf lists each thread of pid with its state, wait channel and
// /proc syscall line, and the process's CPU time so far.
func threadsOf(pid int) string {
	var b strings.Builder
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if f := strings.Fields(string(st)); len(f) > 14 {
			fmt.Fprintf(&b, "utime %s stime %s (ticks)\n", f[13], f[14])
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		st, _ := os.ReadFile(task + "/stat")
		wchan, _ := os.ReadFile(task + "/wchan")
		sc, _ := os.ReadFile(task + "/syscall")
		state := "?"
		if i := strings.LastIndexByte(string(st), ')'); i >= 0 && i+2 < len(st) {
			state = string(st[i+2])
		}
		fmt.Fprintf(&b, "%s %s %s %s\n", filepath.Base(task), state, wchan, strings.Fields(string(sc) + " ?")[0])
	}
	return b.String()
}

// untouched checks that the target was left as it was: running, untraced,
// alive, its heap as the test damaged it.
func untouched(t *testing.T, tg *testutil.Target) {
	t.Helper()
	if testutil.Traced(tg.Pid) {
		t.Error("the target is still traced")
	}
	if s := processState(tg.Pid); s == 'T' || s == 't' {
		t.Errorf("the target is stopped (state %c)", s)
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target after arenactl: %q", a)
	}
}

// eventually reports whether cond holds within a few seconds: for states
// the kernel settles into just after a detach. The bound is a hang guard,
// not a measurement.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func mentionsOne(s string, addrs []uint64) bool {
	for _, a := range addrs {
		if strings.Contains(s, fmt.Sprintf("%#x", a)) {
			return true
		}
	}
	return false
}

// A read-only walk of a damaged heap terminates, succeeds and names the
// damaged chunk, frozen or not, in JSON and in the table.
func TestDamageReadOnly(t *testing.T) {
	for _, dk := range damageKinds {
		t.Run(dk.kind, func(t *testing.T) {
			tg, addrs := damagedTarget(t, dk.kind)
			pid := fmt.Sprint(tg.Pid)
			for _, mode := range [][]string{{"--read-only"}, {"--read-only", "--no-freeze"}} {
				r := runWithin(t, 10*time.Second, append(append([]string{"info", "--json"}, mode...), pid)...)
				if r.code != 0 {
					t.Fatalf("%v: exit %d: %s", mode, r.code, r.stderr)
				}
				var got jsonInfo
				if err := decodeDoc([]byte(r.stdout), &got); err != nil {
					t.Fatalf("%v: %v\n%s", mode, err, r.stdout)
				}
				found := false
				for _, d := range got.ReadOnly.Damage {
					if slices.Contains(addrs, d.Addr) {
						found = true
						if d.Abort != dk.abort || d.Hang != dk.hang {
							t.Errorf("%v: %+v: want abort %v, hang %v", mode, d, dk.abort, dk.hang)
						}
					}
				}
				if !found {
					t.Errorf("%v: no damage at %#x in %+v", mode, addrs, got.ReadOnly.Damage)
				}
			}
			r := runWithin(t, 10*time.Second, "info", "--read-only", pid)
			var lines []string
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(l, "DAMAGE: ") {
					lines = append(lines, l)
				}
			}
			if r.code != 0 || len(lines) == 0 || !mentionsOne(strings.Join(lines, "\n"), addrs) {
				t.Errorf("table: exit %d, DAMAGE lines %q, want one naming %#x", r.code, lines, addrs)
			}
			untouched(t, tg)
			mustQuit(t, tg)
		})
	}
}

// info and trim refuse to run glibc's code on a heap glibc would abort or
// hang on, and leave the target as it was; the dry run says so too.
func TestDamageRefusesInjection(t *testing.T) {
	for _, dk := range damageKinds {
		t.Run(dk.kind, func(t *testing.T) {
			tg, addrs := damagedTarget(t, dk.kind)
			pid := fmt.Sprint(tg.Pid)
			word := "makes glibc abort"
			if dk.hang {
				word = "makes glibc loop forever"
			}
			for _, cmd := range []string{"info", "trim"} {
				r := runWithin(t, 30*time.Second, cmd, pid)
				expectRefusal(t, r, exitDamaged, "the heap is damaged", word, "use --read-only")
				if !mentionsOne(r.stderr, addrs) {
					t.Errorf("%s: the refusal names none of %#x: %s", cmd, addrs, r.stderr)
				}
				untouched(t, tg)
			}
			r := runWithin(t, 30*time.Second, "trim", "--dry-run", pid)
			if r.code != 0 || !strings.Contains(r.stdout, "DAMAGE: ") || !strings.Contains(r.stdout, "a real trim would be refused") {
				t.Errorf("trim --dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			untouched(t, tg)
			mustQuit(t, tg)
		})
	}
}

// A lock held by a thread of a stopped process is never released: arenactl
// refuses instead of waiting for it. arenas.c's "stall" thread holds
// main_arena's lock (blocked in write inside malloc_stats); SIGSTOP then
// stops it, and every other thread, where they are.
func TestRefuseLockHeldWhileStopped(t *testing.T) {
	tg, drain := stallTarget(t)
	sigstop(t, tg)
	for _, cmd := range []string{"info", "trim"} {
		r := runWithin(t, 30*time.Second, cmd, fmt.Sprint(tg.Pid))
		expectRefusal(t, r, exitLockedStop, "arena 0", "is locked", "threads of the process are stopped", "kill -CONT")
	}
	// Just after a detach the kernel may still show the tracing stop ('t')
	// for a moment before the group stop ('T') it returns to.
	if !eventually(func() bool { return processState(tg.Pid) == 'T' && !testutil.Traced(tg.Pid) }) {
		t.Fatalf("the target is no longer stopped (state %c), or still traced, after the refusals", processState(tg.Pid))
	}
	sigcont(t, tg)
	drain()
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target after the refusals: %s", a)
	}
	mustQuit(t, tg)
}

// A stopped process whose arena locks are all free is injected as a running
// one: the borrowed thread runs the call, and the process is stopped again
// afterwards.
func TestInjectIntoStoppedProcess(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "3")
	sigstop(t, tg)
	for _, cmd := range []string{"info", "trim"} {
		r := runWithin(t, 30*time.Second, cmd, "--json", fmt.Sprint(tg.Pid))
		if r.code != 0 {
			t.Fatalf("%s on a stopped process: exit %d: %s", cmd, r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, `"preflight_walks": 1`) {
			t.Errorf("%s: no pre-flight walk in %s", cmd, r.stdout)
		}
		if processState(tg.Pid) != 'T' {
			t.Fatalf("after %s the process is no longer stopped", cmd)
		}
	}
	sigcont(t, tg)
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target after the injections: %s", a)
	}
	mustQuit(t, tg)
}

func sigstop(t *testing.T, tg *testutil.Target) {
	t.Helper()
	if err := syscall.Kill(tg.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the target to stop", func() bool { return processState(tg.Pid) == 'T' })
}

func sigcont(t *testing.T, tg *testutil.Target) {
	t.Helper()
	if err := syscall.Kill(tg.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// --no-heap-check skips the pre-flight walk: the report says so, and on a
// healthy heap the injection goes ahead as before.
func TestNoHeapCheckSkipsPreflight(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "2")
	r := mustRun(t, "info", "--json", "--no-heap-check", fmt.Sprint(tg.Pid))
	var rep jsonInfo
	if err := decodeDoc([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Injection == nil || rep.Injection.PreflightSkipped != "--no-heap-check" || rep.Injection.PreflightWalks != 0 {
		t.Fatalf("injection %+v", rep.Injection)
	}
	mustQuit(t, tg)
}

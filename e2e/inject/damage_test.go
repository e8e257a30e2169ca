package inject

import (
	"fmt"
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
				if r.Code != 0 {
					t.Fatalf("%v: exit %d: %s", mode, r.Code, r.Stderr)
				}
				var got jsonInfo
				if err := decodeDoc([]byte(r.Stdout), &got); err != nil {
					t.Fatalf("%v: %v\n%s", mode, err, r.Stdout)
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
			for _, l := range strings.Split(r.Stdout, "\n") {
				if strings.HasPrefix(l, "DAMAGE: ") {
					lines = append(lines, l)
				}
			}
			if r.Code != 0 || len(lines) == 0 || !mentionsOne(strings.Join(lines, "\n"), addrs) {
				t.Errorf("table: exit %d, DAMAGE lines %q, want one naming %#x", r.Code, lines, addrs)
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
				if !mentionsOne(r.Stderr, addrs) {
					t.Errorf("%s: the refusal names none of %#x: %s", cmd, addrs, r.Stderr)
				}
				untouched(t, tg)
			}
			r := runWithin(t, 30*time.Second, "trim", "--dry-run", pid)
			if r.Code != 0 || !strings.Contains(r.Stdout, "DAMAGE: ") || !strings.Contains(r.Stdout, "a real trim would be refused") {
				t.Errorf("trim --dry-run: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
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
		if r.Code != 0 {
			t.Fatalf("%s on a stopped process: exit %d: %s", cmd, r.Code, r.Stderr)
		}
		if !strings.Contains(r.Stdout, `"preflight_walks": 1`) {
			t.Errorf("%s: no pre-flight walk in %s", cmd, r.Stdout)
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
	if err := decodeDoc([]byte(r.Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Injection == nil || rep.Injection.PreflightSkipped != "--no-heap-check" || rep.Injection.PreflightWalks != 0 {
		t.Fatalf("injection %+v", rep.Injection)
	}
	mustQuit(t, tg)
}

package live_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/testutil"
)

// rounds is how many times the race tests go at their target; the default
// keeps them short, -rounds=1000 makes them a soak.
var rounds = flag.Int("rounds", 30, "rounds of the exec and exit race tests")

// guard fails the test if step does not return within testutil.Patience: a
// hang is what these tests look for, and it must end as a failure, not as
// a test binary killed by go test's timeout. It is no timing assertion.
func guard(t *testing.T, what string, step func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); step() }()
	select {
	case <-done:
	case <-time.After(testutil.Patience):
		t.Fatalf("%s did not return within %s", what, testutil.Patience)
	}
}

// procState is a thread's state letter and tracer.
func procState(pid, tid int) (byte, int) {
	st, err := ptrace.ReadStatus(pid, tid)
	if err != nil {
		return 0, 0
	}
	return st.State, st.TracerPid
}

// generation is the generation exec_churn runs now (its argv[2]).
func generation(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	f := strings.Split(string(b), "\x00")
	if len(f) < 3 {
		return -1
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return n
}

// allowedRaceErr: what a run against a process that execs or exits under it
// may end with. Anything else (a permission error as root, EOF, "no glibc")
// is a wrong diagnosis.
func allowedRaceErr(err error) bool {
	var state *ptrace.StateError
	// A process that exited before Open looked is a zombie: refused as one,
	// honestly.
	return err == nil || errors.Is(err, ptrace.ErrGone) || errors.Is(err, ptrace.ErrNoProcess) ||
		errors.As(err, &state) && strings.Contains(state.What, "zombie")
}

// A thread execs while the others run, over and over. Freezing (what info
// --read-only and snapshot do) and borrowing a thread must each end, with
// success or "gone", and leave the process running its new programs: never
// stopped, never traced, never stuck in an exec waiting for us.
func TestExecRace(t *testing.T) {
	bin := testutil.BuildC(t, "exec_churn.c")
	tg := testutil.Start(t, bin, "exec", "0")
	pid := tg.Pid
	rng := rand.New(rand.NewSource(int64(pid)))
	counts := map[string]int{}
	for i := 0; i < *rounds; i++ {
		var err error
		inject := i%2 == 1
		guard(t, fmt.Sprintf("round %d", i), func() {
			var tg *live.Target
			if inject {
				tg, err = live.Open(pid)
			} else {
				tg, err = live.OpenReadOnly(pid)
			}
			if err != nil {
				return
			}
			defer tg.Close()
			time.Sleep(time.Duration(rng.Intn(5000)) * time.Microsecond)
			ctx := context.Background()
			if inject {
				var s *live.Session
				if s, err = tg.Hijack(ctx, live.HijackOptions{Timeout: time.Second}); err == nil {
					_, err = s.Release()
				}
			} else {
				var f *live.Frozen
				if f, err = tg.Freeze(ctx, 3*time.Second); err == nil {
					_, err = f.Thaw()
				}
			}
			err = tg.Explain(err)
		})
		var nse *live.NoSafeThreadError
		switch {
		case errors.As(err, &nse): // every thread was inside malloc: fine
			counts["no safe thread"]++
		case !allowedRaceErr(err):
			t.Fatalf("round %d: %v", i, err)
		case err == nil:
			counts["ok"]++
		case errors.Is(err, ptrace.ErrExec):
			counts["exec"]++
		default:
			counts["gone"]++
		}
	}
	t.Logf("%d rounds: %v", *rounds, counts)
	// The program must go on replacing itself: nothing of it waits on us.
	g := generation(pid)
	testutil.WaitUntil(t, "the target to exec again", func() bool { return generation(pid) > g+2 })
	for _, tid := range tg.Threads() {
		if st, tracer := procState(pid, tid); st == 't' || st == 'T' || tracer != 0 {
			t.Errorf("thread %d is left in state %c, traced by %d", tid, st, tracer)
		}
	}
}

// Processes that exit at a random moment while they are frozen or a thread
// is borrowed: each run ends with success, ErrGone or ErrNoProcess.
func TestExitRace(t *testing.T) {
	bin := testutil.BuildC(t, "exec_churn.c")
	counts := map[string]int{}
	for i := 0; i < *rounds; i++ {
		// Through a shell, which reaps it: the test must not be the
		// parent of what it traces, as arenactl never is.
		tg := testutil.Start(t, "sh", "-c", bin+" exit 0 & wait")
		pid, err := strconv.Atoi(strings.Fields(tg.Ready())[1])
		if err != nil {
			t.Fatal(tg.Ready())
		}
		inject := i%2 == 1
		guard(t, fmt.Sprintf("round %d", i), func() {
			var tgt *live.Target
			if inject {
				tgt, err = live.Open(pid)
			} else {
				tgt, err = live.OpenReadOnly(pid)
			}
			if err != nil {
				return
			}
			defer tgt.Close()
			ctx := context.Background()
			if inject {
				var s *live.Session
				if s, err = tgt.Hijack(ctx, live.HijackOptions{Timeout: time.Second}); err == nil {
					_, err = s.Release()
				}
			} else {
				var f *live.Frozen
				if f, err = tgt.Freeze(ctx, 3*time.Second); err == nil {
					_, err = f.Thaw()
				}
			}
			err = tgt.Explain(err)
		})
		var nse *live.NoSafeThreadError
		switch {
		case errors.As(err, &nse):
			counts["no safe thread"]++
		case !allowedRaceErr(err):
			t.Fatalf("round %d: %v", i, err)
		case err == nil:
			counts["ok"]++
		default:
			counts["gone"]++
		}
		tg.Wait()
	}
	t.Logf("%d rounds: %v", *rounds, counts)
}

// startLeaderExited runs testdata/leader_exit.c and waits for its main
// thread to have ended.
func startLeaderExited(t *testing.T) *testutil.Target {
	tg := testutil.Start(t, testutil.BuildC(t, "leader_exit.c"))
	testutil.WaitUntil(t, "the main thread to exit", func() bool {
		st, _ := procState(tg.Pid, tg.Pid)
		return st == 'Z'
	})
	return tg
}

// A process whose main thread called pthread_exit is alive: it is opened,
// read, frozen and borrowed from through its other threads, and a thread
// id given for it means the process.
func TestMainThreadExited(t *testing.T) {
	tg := startLeaderExited(t)
	tids := tg.Threads()
	for _, id := range []int{tg.Pid, tids[len(tids)-1]} {
		tgt, err := live.OpenReadOnly(id)
		if err != nil {
			t.Fatalf("OpenReadOnly(%d): %v", id, err)
		}
		if tgt.Pid != tg.Pid || tgt.Libc == nil {
			t.Fatalf("OpenReadOnly(%d): pid %d, libc %v", id, tgt.Pid, tgt.Libc)
		}
		f, err := tgt.Freeze(context.Background(), 5*time.Second)
		if err != nil {
			t.Fatalf("Freeze: %v", err)
		}
		if n := len(f.Threads()); n != len(tids)-1 {
			t.Errorf("froze %d threads, want the %d live ones", n, len(tids)-1)
		}
		if _, err := f.Thaw(); err != nil {
			t.Fatal(err)
		}
		tgt.Close()
	}
	tgt, err := live.Open(tg.Pid)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s, err := tgt.Hijack(context.Background(), live.HijackOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("Hijack: %v", err)
	}
	if s.Tid == tg.Pid {
		t.Error("borrowed the exited main thread")
	}
	if _, err := s.Release(); err != nil {
		t.Fatal(err)
	}
	tgt.Close()
	ms, err := maps.Read(tg.Pid, true)
	if err != nil || len(ms) == 0 {
		t.Fatalf("maps.Read: %d mappings, %v", len(ms), err)
	}
	if _, err := maps.ReadRollup(tg.Pid); err != nil {
		t.Fatalf("maps.ReadRollup: %v", err)
	}
	if _, err := procfs.OpenPagemap(tg.Pid); err != nil {
		t.Fatalf("OpenPagemap: %v", err)
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target says %q", a)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

// What is read under /proc while a thread is held must not grow with the
// number of threads: the state of every thread is read before, and with
// 2000 threads reading it took hundreds of milliseconds of the hold.
func TestHoldReadsNoPerThreadFiles(t *testing.T) {
	bin := testutil.BuildC(t, "many_threads.c")
	for _, n := range []int{12, 2000} {
		tg := testutil.StartCmd(t, exec.Command(bin, strconv.Itoa(n)))
		tgt, err := live.Open(tg.Pid)
		if err != nil {
			t.Fatal(err)
		}
		s, err := tgt.Hijack(context.Background(), live.HijackOptions{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(); err != nil {
			t.Fatal(err)
		}
		tgt.Close()
		if got := s.ProcReadsHeld(); got != 0 {
			t.Errorf("%d threads: %d /proc reads while the thread was held, want none", n+1, got)
		}
		if line, code := tg.Quit(); line != "clean" || code != 0 {
			t.Fatalf("target: %q %d", line, code)
		}
	}
}

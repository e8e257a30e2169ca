package inject

import (
	"github.com/arenactl/arenactl/internal/testutil"

	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stallTarget starts arenas.c in "stall" mode: one of its threads sits in
// malloc_stats, blocked writing to a pipe, holding main_arena's lock. It
// returns the target and a function that drains the pipe, which lets
// malloc_stats finish.
func stallTarget(t *testing.T) (*testutil.Target, func()) {
	cmd := exec.Command(testutil.BuildC(t, "arenas.c"), "stall", "2")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	tg := testutil.StartCmd(t, cmd)
	pw.Close()
	testutil.WaitUntil(t, "a thread blocked in write", func() bool { return testutil.InSyscall(tg.Pid, 1) })
	return tg, func() { go io.Copy(io.Discard, pr) }
}

// An injected malloc_info that waits on a lock held by another thread is
// abandoned at --timeout: registers restored, thread released, the user told
// what was left behind. The target then runs on unharmed.
func TestCallTimeoutRestoresTarget(t *testing.T) {
	tg, drain := stallTarget(t)
	r := run(t, "info", "--timeout", "1s", "--thread", fmt.Sprint(tg.Pid), fmt.Sprint(tg.Pid))
	expectRefusal(t, r, exitCallFailed, "did not return in time", "abandoned", "registers restored", "left in the target")
	drain()
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target after an abandoned call: %s", a)
	}
	// The lock is free now: the next injection completes.
	mustRun(t, "info", "--thread", fmt.Sprint(tg.Pid), fmt.Sprint(tg.Pid))
	mustQuit(t, tg)
}

// A signal to arenactl while its call waits: it gives the thread back at
// once and exits 130, for each of the signals people use to stop a tool.
func TestSignalDuringBlockedCall(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			tg, drain := stallTarget(t)
			cmd := exec.Command(arenactl, "info", "--timeout", "60s", "--thread", fmt.Sprint(tg.Pid), fmt.Sprint(tg.Pid))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			testutil.WaitUntil(t, "arenactl to take the thread", func() bool { return testutil.Traced(tg.Pid) })
			time.Sleep(100 * time.Millisecond) // into the call, which blocks on the lock
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
				t.Fatalf("arenactl: %v, stderr %s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "interrupted") || !strings.Contains(stderr.String(), "restored") {
				t.Errorf("message: %s", stderr.String())
			}
			if testutil.Traced(tg.Pid) {
				t.Error("the target is still traced")
			}
			drain()
			if a := tg.Send("check"); a != "ok" {
				t.Fatalf("target: %s", a)
			}
			mustQuit(t, tg)
		})
	}
}

// SIGINT at random moments of 50 runs: at attach, mid-call, at release. Each
// run either completes or is interrupted, and the target survives them all.
func TestSIGINTAtRandomMoments(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "4")
	rng := rand.New(rand.NewSource(1))
	outcomes := map[int]int{}
	for i := 0; i < 50; i++ {
		verb := []string{"info", "trim"}[i%2]
		cmd := exec.Command(arenactl, verb, fmt.Sprint(tg.Pid))
		var stderr bytes.Buffer
		cmd.Stderr, cmd.Stdout = &stderr, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Intn(30000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		outcomes[code]++
		if code != 0 && code != exitInterrupted && !(code == -1 && stderr.Len() == 0) {
			t.Errorf("run %d: exit %d: %s", i, code, stderr.String())
		}
		if testutil.Traced(tg.Pid) {
			t.Fatalf("run %d left the target traced", i)
		}
	}
	t.Logf("exit codes over 50 runs: %v", outcomes)
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %s", a)
	}
	mustQuit(t, tg)
}

// TestSignalAtStart: a signal that ends a run, sent while arenactl's
// packages are still being initialized, ends it as Ctrl-C does: one line
// and exit 130 (or 0 when it came after the work was done), never Go's
// dump of its goroutines and exit 2, the bad-command-line code, as when
// main asked for the signals after every package's initialization. The
// moment: GODEBUG=inittrace=1 makes Go print a line as each package's
// initialization ends; the signal is sent at the line that follows
// os/signal's, with every heavier package still to come.
func TestSignalAtStart(t *testing.T) {
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGBUS}
	interrupted := 0
	for round := 0; round < 3; round++ {
		for _, sig := range sigs {
			cmd := exec.Command(arenactl, "version")
			cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stderr)
			var said []string
			afterSignalPkg, sent := false, false
			for lines.Scan() {
				l := lines.Text()
				if strings.HasPrefix(l, "init ") {
					if !sent && afterSignalPkg {
						cmd.Process.Signal(sig)
						sent = true
					}
					afterSignalPkg = afterSignalPkg || strings.HasPrefix(l, "init os/signal ")
					continue
				}
				said = append(said, l)
			}
			err = cmd.Wait()
			if !sent {
				t.Fatalf("no package's initialization was seen after os/signal's")
			}
			code := cmd.ProcessState.ExitCode()
			switch {
			case code == exitInterrupted && len(said) == 1 && strings.Contains(said[0], "interrupted"):
				interrupted++
			case code == exitOK && len(said) == 0 && strings.Contains(stdout.String(), "module:"):
			default:
				t.Errorf("%v at start: %v (exit %d), stderr %d lines:\n%s", sig, err, code, len(said), strings.Join(said[:min(len(said), 8)], "\n"))
			}
		}
	}
	t.Logf("%d of %d runs interrupted", interrupted, 3*len(sigs))
	if interrupted == 0 {
		t.Error("no signal came before the work was done: the test sent them too late to mean anything")
	}
}

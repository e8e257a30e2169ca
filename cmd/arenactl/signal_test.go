package main

import (
	"github.com/arenactl/arenactl/internal/testutil"

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

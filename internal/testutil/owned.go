package testutil

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// starts are run by one goroutine locked to its OS thread for the life of
// the test process (see StartOwned).
var (
	startsOnce sync.Once
	starts     = make(chan func())
)

// StartOwned starts cmd so that the kernel kills it (SIGKILL) when the test
// process dies, however it dies: a test that hits go test's -timeout ends
// in a panic that runs no Cleanup, and left its targets and arenactl runs
// behind, still running. That is PR_SET_PDEATHSIG (Pdeathsig), which the
// kernel ties to the thread that forked the child, not to the process: a
// goroutine locked to its thread (a ptrace test) that returns takes its
// thread with it. So every child is forked by one goroutine that locks its
// thread and never returns. A command that asks to be traced by its parent
// (SysProcAttr.Ptrace) must be forked by its tracer's thread: it is
// started as it is.
func StartOwned(cmd *exec.Cmd) error {
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Ptrace {
		return cmd.Start()
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	startsOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for start := range starts {
				start()
			}
		}()
	})
	done := make(chan error)
	starts <- func() { done <- cmd.Start() }
	return <-done
}

// StartHelper runs this test binary again, for the test named test alone
// (a tracer a test kills, say), with env added to its environment, and
// returns once the helper prints the line ready. It is started owned
// (StartOwned) and killed at the test's end, if still running.
func StartHelper(t testing.TB, test, env, ready string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := StartOwned(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if sc.Text() == ready {
			return cmd
		}
	}
	t.Fatalf("the helper %s never printed %q", test, ready)
	return nil
}

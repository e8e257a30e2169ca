package testutil

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
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

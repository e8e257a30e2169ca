package exporter

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// A watched process that exits while its PID is given to a new process
// (issue 30, part 3): the exporter holds each process's /proc directory
// from discovery on, so that the target is seen gone and the newcomer is
// never read in its place, neither by its liveness check nor by a
// collection (which, walking by PID, used to read the newcomer's heap and
// serve it under the old target's labels; the start time compared
// after does not tell a newcomer of the same clock tick). The PID is reused on purpose
// through ns_last_pid (root; other processes forking meanwhile may take
// it, so a few tries).
func TestReusedPidIsNotTheTarget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reusing a pid on purpose writes /proc/sys/kernel/ns_last_pid (root)")
	}
	bin, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	for try := 0; try < 20; try++ {
		a := exec.Command(bin, "60")
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		pid := a.Process.Pid
		waitExe(t, pid, bin)
		p, ok := (&Selector{Pids: []int{pid}}).look(pid, os.Getpid(), true)
		if !ok {
			a.Process.Kill()
			a.Wait()
			t.Fatalf("process %d not selected", pid)
		}
		e := New(Config{Selector: Selector{Pids: []int{pid}}})
		tg := &target{proc: p, removed: make(chan struct{}), errors: map[string]uint64{}}
		if !tg.alive() {
			t.Fatalf("process %d, running, is not alive", pid)
		}
		a.Process.Kill()
		a.Wait()
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			tg.closeProc()
			t.Skipf("cannot choose the next pid: %v", err)
		}
		b := exec.Command(bin, "60")
		if err := b.Start(); err != nil {
			tg.closeProc()
			t.Fatal(err)
		}
		// The newcomer may even start in the same clock tick as the
		// process gone: a start time cannot tell them apart then, the
		// held directory can.
		reused := b.Process.Pid == pid
		if reused {
			waitExe(t, pid, bin)
		}
		if reused {
			if tg.alive() {
				t.Error("the newcomer given the pid was taken for the watched process")
			}
			if ptrace.IsImageOf(p.proc) {
				t.Error("the held directory of a process gone said it was an image")
			}
			_, err := e.collect(context.Background(), tg)
			if !errors.Is(err, ptrace.ErrGone) && !errors.Is(err, procfs.ErrNoProcess) {
				t.Errorf("collecting the watched process after its pid was reused: %v; want it gone", err)
			}
			if tg.last != nil {
				t.Errorf("the newcomer's heap (%d bytes from the system) was served as the watched process's", tg.last.rep.Malloc.SystemCurrent)
			}
		}
		b.Process.Kill()
		b.Wait()
		tg.closeProc()
		if reused {
			if tg.alive() {
				t.Error("a target whose directory is closed is alive")
			}
			return
		}
	}
	t.Skip("another process took the pid each time")
}

func waitExe(t *testing.T, pid int, bin string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if e, _ := procfs.Exe(pid); e == bin {
			return
		}
	}
	t.Fatalf("process %d did not exec %s", pid, bin)
}

// closeAll lets go of the directories discovery held for ps.
func closeAll(ps []*process) {
	for _, p := range ps {
		p.close()
	}
}

// The directories discovery holds are let go: those of processes already
// watched, of processes over MaxTargets, and a target's when it stops
// being watched; a long-running exporter with a matcher over every
// process must not gather descriptors cycle after cycle.
func TestDiscoveryKeepsNoDirectory(t *testing.T) {
	name, pids := startSleeps(t, 3)
	count := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	e := New(Config{Selector: Selector{Comm: []*regexp.Regexp{mustCompile(t, "comm", name)}},
		MaxTargets: 2, MinInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	before := count()
	for i := 0; i < 5; i++ {
		e.discover(ctx)
	}
	e.mu.Lock()
	n := len(e.targets)
	e.mu.Unlock()
	// A process that exits is dropped, and its directory with it.
	syscall.Kill(pids[0], syscall.SIGKILL) // os.FindProcess would hold a pidfd
	cancel()
	e.wg.Wait()
	if n != 2 {
		t.Errorf("%d watched; want 2", n)
	}
	if after := count(); after > before {
		t.Errorf("%d descriptors open after the exporter stopped, %d before", after, before)
	}
}

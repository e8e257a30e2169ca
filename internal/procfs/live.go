package procfs

import (
	"errors"
	"fmt"

	"github.com/arenactl/arenactl/internal/errkind"
)

// LiveDir is the directory that shows process pid's memory: /proc/PID/, or,
// when the main thread has exited (pthread_exit) while other threads run
// on, /proc/PID/task/TID/ of one of those. The main thread's own files then
// show no memory at all: an empty maps, no exe, no pagemap.
func LiveDir(pid int) (string, error) { return ByPid(pid).LiveDir() }

// LiveDir is procfs.LiveDir of the process p holds, named under it.
func (p *Proc) LiveDir() (string, error) {
	pid := p.Pid
	tid, _, err := p.LiveThread()
	var se *StateError
	if errors.As(err, &se) && se.Zombie() {
		return "", fmt.Errorf("process %d has exited: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return "", err
	}
	if tid == pid {
		return p.base, nil
	}
	return p.Path(fmt.Sprintf("task/%d", tid)), nil
}

// LiveThread finds a thread of process pid that has not exited, and what
// its status file says: the main thread if it still runs, else the first
// other one. A process with none is a zombie (a StateError); one that does
// not exist is ErrNoProcess.
func LiveThread(pid int) (int, TaskStatus, error) { return ByPid(pid).LiveThread() }

// LiveThread is procfs.LiveThread of the process p holds.
func (p *Proc) LiveThread() (int, TaskStatus, error) {
	pid := p.Pid
	st, err := p.ReadTaskStatus(pid)
	if err != nil {
		return 0, st, err
	}
	if !st.Dead() {
		return pid, st, nil
	}
	tids, err := p.Tasks()
	if err != nil {
		return 0, st, err
	}
	for _, tid := range tids {
		if tid == pid {
			continue
		}
		if tst, err := p.ReadTaskStatus(tid); err == nil && !tst.Dead() {
			return tid, tst, nil
		}
	}
	return 0, st, &StateError{Pid: pid, What: "is a zombie (it has exited and waits for its parent)", zombie: true}
}

// kthreadd is the kernel thread every other kernel thread is a child of.
const kthreadd = 2

// Kernel reports a kernel thread: no memory (no VmSize line), and kthreadd
// or its child.
func (st TaskStatus) Kernel() bool {
	return !st.HasMemory && (st.Tid == kthreadd || st.PPid == kthreadd)
}

// Dead reports a thread that has exited: a zombie, or one on its way out
// (its memory dropped, its zombie state not set yet).
func (st TaskStatus) Dead() bool {
	return st.State == 'Z' || st.State == 'X' || (!st.HasMemory && !st.Kernel())
}

// StateError: the process is in a state where it cannot be examined.
type StateError struct {
	Pid    int
	What   string
	zombie bool
}

func (e *StateError) Error() string { return fmt.Sprintf("process %d %s", e.Pid, e.What) }

func (e *StateError) Is(target error) bool { return target == errkind.ErrState }

// Zombie reports a process that has exited and waits for its parent.
func (e *StateError) Zombie() bool { return e.zombie }

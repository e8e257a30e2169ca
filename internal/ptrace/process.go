package ptrace

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Process is a live target. Opening it stops nothing; threads are seized one
// at a time with Seize, and Close gives every one of them back.
type Process struct {
	Pid int

	t       *tracer
	mem     *os.File
	mu      sync.Mutex
	threads map[int]*Thread
}

// Open prepares to trace pid. It checks that the process exists, is not a
// zombie or a kernel thread, and is not already traced by someone else.
func Open(pid int) (*Process, error) {
	st, err := ReadStatus(pid, pid)
	if err != nil {
		return nil, err
	}
	if st.State == 'Z' || st.State == 'X' {
		return nil, &StateError{Pid: pid, What: "is a zombie (it has exited and waits for its parent)"}
	}
	if st.Kernel {
		return nil, &StateError{Pid: pid, What: "is a kernel thread (it has no user memory)"}
	}
	if st.TracerPid != 0 {
		return nil, tracedError(pid, st.TracerPid)
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
	if err != nil {
		return nil, procErr(pid, err)
	}
	return &Process{Pid: pid, t: newTracer(), mem: mem, threads: map[int]*Thread{}}, nil
}

// StateError: the process is in a state where it cannot be examined.
type StateError struct {
	Pid  int
	What string
}

func (e *StateError) Error() string { return fmt.Sprintf("process %d %s", e.Pid, e.What) }

func tracedError(pid, tracer int) error {
	name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", tracer))
	return &TracedError{Pid: pid, TracerPid: tracer, TracerName: strings.TrimSpace(string(name))}
}

func procErr(pid int, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, unix.ESRCH):
		return fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	case errors.Is(err, os.ErrPermission), errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("process %d: %w (run arenactl as the same user as the process, or as root; with Yama, kernel.yama.ptrace_scope must allow attaching)", pid, ErrPermission)
	}
	return fmt.Errorf("process %d: %w", pid, err)
}

// Close restores and detaches every seized thread, then releases the tracer
// thread. It is safe to call more than once. The first error is returned, but
// every thread is given back regardless.
func (p *Process) Close() error {
	p.mu.Lock()
	ths := make([]*Thread, 0, len(p.threads))
	for _, th := range p.threads {
		ths = append(ths, th)
	}
	p.mu.Unlock()
	var first error
	for _, th := range ths {
		if err := th.Detach(); err != nil && first == nil {
			first = err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.t != nil {
		p.t.close()
		p.t = nil
		p.mem.Close()
	}
	return first
}

// Status is what /proc/PID/task/TID/status says about a thread.
type Status struct {
	Name      string
	State     byte
	TracerPid int
	Kernel    bool // kernel threads have no VmSize line and PF_KTHREAD; we use the missing mm
}

// ReadStatus reads a thread's status file.
func ReadStatus(pid, tid int) (Status, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return Status{}, procErr(pid, err)
	}
	st := Status{Kernel: true}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Name":
			st.Name = v
		case "State":
			if v != "" {
				st.State = v[0]
			}
		case "TracerPid":
			st.TracerPid, _ = strconv.Atoi(v)
		case "VmSize":
			st.Kernel = false
		}
	}
	if st.State == 'Z' || st.State == 'X' {
		st.Kernel = false // a zombie has dropped its mm; it is no kernel thread
	}
	return st, nil
}

// Tasks lists the thread ids of pid, main thread first.
func Tasks(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, procErr(pid, err)
	}
	tids := []int{pid}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err == nil && tid != pid {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// SyscallState is /proc/PID/task/TID/syscall: what a thread is doing without
// stopping it. Running threads have Running set and nothing else.
type SyscallState struct {
	Running   bool
	InSyscall bool // false with Running false: blocked outside a syscall (e.g. a page fault)
	Nr        int64
	Args      [6]uint64
	SP, PC    uint64
}

// ReadSyscall reads a thread's syscall file.
func ReadSyscall(pid, tid int) (SyscallState, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
	if err != nil {
		return SyscallState{}, procErr(pid, err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 || f[0] == "running" {
		return SyscallState{Running: true}, nil
	}
	var s SyscallState
	s.Nr, _ = strconv.ParseInt(f[0], 10, 64)
	hex := func(x string) uint64 { v, _ := strconv.ParseUint(strings.TrimPrefix(x, "0x"), 16, 64); return v }
	switch {
	case s.Nr == -1 && len(f) >= 3:
		s.SP, s.PC = hex(f[1]), hex(f[2])
	case len(f) >= 9:
		s.InSyscall = true
		for i := range s.Args {
			s.Args[i] = hex(f[1+i])
		}
		s.SP, s.PC = hex(f[7]), hex(f[8])
	}
	return s, nil
}

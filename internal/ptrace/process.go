package ptrace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
	"golang.org/x/sys/unix"
)

// Process is a live target. Opening it stops nothing; threads are seized one
// at a time with Seize, and Close gives every one of them back.
type Process struct {
	Pid int // the thread-group id, even when Open was given another thread's id

	t   *tracer
	mem *os.File
	// proc holds the process's /proc directory: every file of it is read
	// there, never a later process's given its pid.
	proc *procfs.Proc
	// memTid is the live thread whose /proc/PID/task/TID/ files were
	// opened. The main thread may have ended (pthread_exit) while the
	// others run on: the process's files under /proc/PID/ then show no
	// memory at all.
	memTid  int
	mu      sync.Mutex
	threads map[int]*Thread
	execed  bool // an exec was seen: no register of the old program is put back anywhere
}

// Open prepares to trace pid. It checks that the process exists, is not a
// zombie or a kernel thread, and is not already traced by someone else.
// pid may be the id of any of the process's threads; Process.Pid is the
// process's own id. A process whose main thread has exited while others run
// is worked on through one of those.
func Open(pid int) (*Process, error) { return openAs(pid, false) }

// Observe is Open for a process that will only be read and watched (perf
// events, /proc), never attached to: another tracer (a debugger) holding
// it does not matter then. Nothing that attaches may be asked of it.
func Observe(pid int) (*Process, error) { return openAs(pid, true) }

func openAs(pid int, observe bool) (*Process, error) {
	// A process between two programs hides its main thread for a moment
	// (a zombie, then missing) while the exec'ing thread takes over its id:
	// that is retried for a moment, as long as the process is there.
	deadline := time.Now().Add(explainPatience)
	for {
		p, err := open(pid, observe)
		if err == nil || time.Now().After(deadline) {
			return p, err
		}
		var se *StateError
		if !vanishing(err) && !(errors.As(err, &se) && se.Zombie()) {
			return nil, err
		}
		if _, serr := os.Stat(fmt.Sprintf("/proc/%d", pid)); serr != nil {
			return nil, err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func open(pid int, observe bool) (*Process, error) {
	// The directory is held before anything of it is read, so that what
	// is read and what is traced are one process, not the pid's before
	// and a later one's after.
	proc, err := procfs.OpenProc(pid)
	if err != nil {
		return nil, err
	}
	procReads.Add(1)
	ts, err := proc.ReadTaskStatus(pid)
	if err != nil {
		proc.Close()
		return nil, err
	}
	if ts.Tgid != 0 && ts.Tgid != pid {
		// pid is another thread's id: the process's own directory is
		// held instead, and the thread must be found in it, which it is
		// only when that directory is its process's.
		tgid := ts.Tgid
		proc.Close()
		if proc, err = procfs.OpenProc(tgid); err != nil {
			return nil, err
		}
		procReads.Add(1)
		if ts, err = proc.ReadTaskStatus(pid); err == nil && ts.Tgid != tgid {
			err = fmt.Errorf("process %d: %w", tgid, ErrNoProcess)
		}
		if err != nil {
			proc.Close()
			return nil, err
		}
		pid = tgid
	}
	procReads.Add(1)
	tid, ts, err := proc.LiveThread()
	st := statusOf(ts)
	if err == nil && st.Kernel {
		err = KernelThreadError(pid)
	}
	if err == nil && st.TracerPid != 0 && !observe {
		err = tracedError(pid, st.TracerPid)
	}
	if err != nil {
		proc.Close()
		return nil, err
	}
	mem, err := os.OpenFile(proc.Path(fmt.Sprintf("task/%d/mem", tid)), os.O_RDWR, 0)
	if err != nil {
		proc.Close()
		return nil, procErr(pid, err)
	}
	return &Process{Pid: pid, memTid: tid, t: newTracer(), mem: mem, proc: proc, threads: map[int]*Thread{}}, nil
}

// KernelThreadError: pid is a kernel thread, which has no user memory to
// examine.
func KernelThreadError(pid int) *StateError {
	return &StateError{Pid: pid, What: "is a kernel thread (it has no user memory)"}
}

// LiveThread finds a thread of process pid that has not exited: the main
// thread if it still runs, else the first other one. A process with none
// is a zombie (StateError); one that does not exist is ErrNoProcess.
func LiveThread(pid int) (int, Status, error) {
	procReads.Add(1)
	tid, ts, err := procfs.LiveThread(pid)
	return tid, statusOf(ts), err
}

// mappings reads the process's maps, through a live thread: a main thread
// that has exited shows none. (Not counted in ProcReads: one file however
// many threads the process has.)
func (p *Process) mappings() ([]maps.Mapping, error) {
	f, err := os.Open(p.Dir() + "/maps")
	if err != nil {
		return nil, procErr(p.Pid, err)
	}
	defer f.Close()
	ms, err := maps.ParseMaps(f)
	if err != nil {
		return nil, procErr(p.Pid, err)
	}
	return ms, nil
}

// Dir is the /proc directory that shows the process's memory, maps and files:
// /proc/PID/task/TID/ of the live thread Open chose.
func (p *Process) Dir() string { return p.proc.Path(fmt.Sprintf("task/%d", p.memTid)) }

// Proc is the process's /proc directory, held since Open.
func (p *Process) Proc() *procfs.Proc { return p.proc }

// Check tells whether the process still runs the program Open found it
// running: ErrExec if it has replaced it since, ErrGone if it has exited or
// is exiting, nil if the memory Open saw is still there. The /proc mem file
// opened then stays tied to that memory, which reads as empty once the
// process has dropped it (exec or exit); a live one answers a read at
// address 0 with an error.
func (p *Process) Check() error {
	var b [1]byte
	if _, err := p.mem.ReadAt(b[:], 0); !errors.Is(err, io.EOF) {
		return nil
	}
	if _, _, err := p.proc.LiveThread(); err == nil {
		return fmt.Errorf("process %d: %w", p.Pid, ErrExec)
	}
	return fmt.Errorf("process %d: %w", p.Pid, ErrGone)
}

// Explain replaces err by what Check says when the process has exited or
// replaced its program: any failure to read it then (an empty or foreign
// map, a short read, a missing file) only says that. An exec in progress
// shows as files that vanish before the old memory is dropped, so a failure
// of that kind is given a moment for the exec to finish.
func (p *Process) Explain(err error) error {
	if err == nil {
		return nil
	}
	if cerr := p.Check(); cerr != nil {
		return cerr
	}
	if !vanishing(err) {
		return err
	}
	for deadline := time.Now().Add(explainPatience); time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
		if cerr := p.Check(); cerr != nil {
			return cerr
		}
	}
	return err
}

// explainPatience is how long Explain waits for an exec to drop the old
// memory: the kernel does that within a few milliseconds of killing the
// other threads.
const explainPatience = 100 * time.Millisecond

// vanishing reports the errors a process gives while it is between two
// programs or on its way out.
func vanishing(err error) bool {
	var may interface{ ProcessMayBeGone() bool }
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrNoProcess) || errors.Is(err, ErrGone) ||
		errors.Is(err, ErrPermission) || errors.As(err, &may) && may.ProcessMayBeGone()
}

// StateError: the process is in a state where it cannot be examined.
type StateError = procfs.StateError

func tracedError(pid, tracer int) error {
	name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", tracer))
	return &TracedError{Pid: pid, TracerPid: tracer, TracerName: strings.TrimSpace(string(name))}
}

func procErr(pid int, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, unix.ESRCH):
		return fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	case errors.Is(err, os.ErrPermission), errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("process %d: %w", pid, ErrPermission)
	}
	return fmt.Errorf("process %d: %w", pid, err)
}

// closePatience bounds how long Close waits for threads it cannot give back
// at once: one still on its way into a stop we asked for, or the new
// program of a thread that exec'd while we held it. Whatever is left then
// the kernel lets go when arenactl exits.
const closePatience = 2 * time.Second

// Close restores and detaches every seized thread, then releases the tracer
// thread. It is safe to call more than once. The first error is returned, but
// every thread is given back regardless.
func (p *Process) Close() error {
	p.mu.Lock()
	if p.t == nil {
		p.mu.Unlock()
		return nil
	}
	ths := make([]*Thread, 0, len(p.threads))
	for _, th := range p.threads {
		ths = append(ths, th)
	}
	p.mu.Unlock()
	var first error
	for _, th := range ths {
		if err := th.Detach(); err != nil && first == nil && !errors.Is(err, ErrGone) {
			first = err
		}
	}
	p.settle(time.Now().Add(closePatience))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.t != nil {
		p.t.close()
		p.t = nil
		p.mem.Close()
		p.proc.Close()
	}
	return first
}

// Status is what /proc/PID/task/TID/status says about a thread.
type Status struct {
	Name      string
	State     byte
	Tgid      int
	TracerPid int
	Kernel    bool   // no memory (no VmSize line), and kthreadd's or its child
	ShdPnd    uint64 // signals pending for the whole process, bit n-1 for signal n
	dead      bool
}

// Dead reports a thread that has exited: a zombie, or one on its way out.
func (st Status) Dead() bool { return st.dead }

func statusOf(ts procfs.TaskStatus) Status {
	return Status{Name: ts.Name, State: ts.State, Tgid: ts.Tgid, TracerPid: ts.TracerPid, Kernel: ts.Kernel(), ShdPnd: ts.ShdPnd, dead: ts.Dead()}
}

// procReads counts the files this package reads under /proc, so that a test
// can tell how many were read during some step (an atomic: tests only
// compare counts, nothing reads it for a decision).
var procReads atomic.Int64

// ProcReads is the number of per-thread /proc files (status, syscall, task
// lists) this package has read so far.
func ProcReads() int64 { return procReads.Load() }

// ReadStatus reads a thread's status file, of whatever process has the pid
// now (Process.ReadStatus reads the opened one's).
func ReadStatus(pid, tid int) (Status, error) {
	procReads.Add(1)
	ts, err := procfs.ReadTaskStatus(pid, tid)
	if err != nil {
		return Status{}, err
	}
	return statusOf(ts), nil
}

// Tasks lists the thread ids of pid, main thread first: of whatever process
// has the pid now (Process.Tasks reads the opened one's).
func Tasks(pid int) ([]int, error) {
	procReads.Add(1)
	return procfs.Tasks(pid)
}

// SyscallState is /proc/PID/task/TID/syscall: what a thread is doing without
// stopping it.
type SyscallState = procfs.Syscall

// ReadSyscall reads a thread's syscall file, of whatever process has the
// pid now (Process.ReadSyscall reads the opened one's).
func ReadSyscall(pid, tid int) (SyscallState, error) {
	procReads.Add(1)
	return procfs.ReadSyscall(pid, tid)
}

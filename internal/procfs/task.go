package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Tasks lists the thread ids of pid from /proc/PID/task, the main thread
// (pid) first. It is there even when the main thread has exited and other
// threads still run.
func Tasks(pid int) ([]int, error) { return ByPid(pid).Tasks() }

// Tasks is procfs.Tasks of the process p holds.
func (p *Proc) Tasks() ([]int, error) {
	pid := p.Pid
	ents, err := os.ReadDir(p.Path("task"))
	if err != nil {
		return nil, Error(pid, err)
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

// Syscall is /proc/PID/task/TID/syscall: what a thread is doing, read
// without stopping it. A running thread has Running set and nothing else:
// its registers are saved nowhere the kernel can show.
type Syscall struct {
	Running   bool
	InSyscall bool // false with Running false: blocked outside a syscall (a page fault, a stop)
	Nr        int64
	Args      [6]uint64
	SP, PC    uint64
}

// ReadSyscall reads a thread's syscall file (it needs ptrace rights over the
// process).
func ReadSyscall(pid, tid int) (Syscall, error) { return ByPid(pid).ReadSyscall(tid) }

// ReadSyscall is procfs.ReadSyscall of a thread of the process p holds.
func (p *Proc) ReadSyscall(tid int) (Syscall, error) {
	pid := p.Pid
	path := p.Path(fmt.Sprintf("task/%d/syscall", tid))
	b, err := os.ReadFile(path)
	if err != nil {
		return Syscall{}, Error(pid, err)
	}
	s, err := ParseSyscall(string(b))
	if err != nil {
		return s, fmt.Errorf("process %d: %s: %w", pid, Shown(pid, path), err)
	}
	return s, nil
}

// ParseSyscall parses the text of a syscall file, one of
//
//	running
//	nr a1 a2 a3 a4 a5 a6 sp pc   (blocked in syscall nr)
//	-1 sp pc                     (blocked, but not in a syscall)
func ParseSyscall(text string) (Syscall, error) {
	f := strings.Fields(text)
	if len(f) == 1 && f[0] == "running" {
		return Syscall{Running: true}, nil
	}
	if len(f) == 0 {
		return Syscall{}, errors.New("empty syscall file")
	}
	var s Syscall
	nr, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return s, fmt.Errorf("syscall number: %w", err)
	}
	s.Nr = nr
	want := 9
	if nr < 0 {
		want = 3
	}
	if len(f) != want {
		return s, fmt.Errorf("unexpected syscall text %q", text)
	}
	vals := make([]uint64, len(f)-1)
	for i, x := range f[1:] {
		h, ok := strings.CutPrefix(x, "0x")
		if !ok {
			return s, fmt.Errorf("%q is not 0x-prefixed", x)
		}
		if vals[i], err = strconv.ParseUint(h, 16, 64); err != nil {
			return s, fmt.Errorf("%q: %w", x, err)
		}
	}
	if nr >= 0 {
		s.InSyscall = true
		copy(s.Args[:], vals[:6])
	}
	s.SP, s.PC = vals[len(vals)-2], vals[len(vals)-1]
	return s, nil
}

// TaskStatus is what arenactl uses of /proc/PID/task/TID/status.
type TaskStatus struct {
	Name       string
	Tid        int // the thread's id (the file's "Pid")
	State      byte
	Tgid, PPid int
	TracerPid  int
	HasMemory  bool // a VmSize line: the thread has an address space (kernel threads have none)
	// Seccomp is the thread's seccomp mode: 0 none, 1 strict, 2 filter.
	Seccomp int
	// NSpid are the thread's ids in each pid namespace it is in, from the
	// reader's own down to its innermost: [pid] when they are the same.
	NSpid []int
	// RssAnon and VmPTE: resident anonymous memory and page tables, in
	// bytes (the process's, the same in every thread's file).
	RssAnon, VmPTE uint64
	// ShdPnd: the signals pending for the whole process, bit n-1 for
	// signal n (the same in every thread's file).
	ShdPnd uint64
}

// ReadTaskStatus reads a thread's status file.
func ReadTaskStatus(pid, tid int) (TaskStatus, error) { return ByPid(pid).ReadTaskStatus(tid) }

// ReadTaskStatus is procfs.ReadTaskStatus of a thread of the process p
// holds.
func (p *Proc) ReadTaskStatus(tid int) (TaskStatus, error) {
	pid := p.Pid
	b, err := os.ReadFile(p.Path(fmt.Sprintf("task/%d/status", tid)))
	if err != nil {
		return TaskStatus{}, Error(pid, err)
	}
	st := TaskStatus{PPid: -1}
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
		case "Tgid":
			st.Tgid, _ = strconv.Atoi(v)
		case "Pid":
			st.Tid, _ = strconv.Atoi(v)
		case "TracerPid":
			st.TracerPid, _ = strconv.Atoi(v)
		case "PPid":
			st.PPid, _ = strconv.Atoi(v)
		case "VmSize":
			st.HasMemory = true
		case "Seccomp":
			st.Seccomp, _ = strconv.Atoi(v)
		case "NSpid":
			for _, f := range strings.Fields(v) {
				n, _ := strconv.Atoi(f)
				st.NSpid = append(st.NSpid, n)
			}
		case "RssAnon":
			st.RssAnon = kB(v)
		case "VmPTE":
			st.VmPTE = kB(v)
		case "ShdPnd":
			st.ShdPnd, _ = strconv.ParseUint(v, 16, 64)
		}
	}
	return st, nil
}

// kB reads a "1234 kB" value of a status file, in bytes.
func kB(v string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimSuffix(v, " kB"), 10, 64)
	return n << 10
}

// initPidNSIno is the inode of the host's (the initial) pid namespace,
// PROC_PID_INIT_INO in the kernel's include/linux/proc_ns.h.
const initPidNSIno = 0xEFFFFFFC

// InHostPidNamespace says whether this process is in the host's pid
// namespace: the kernel's own tools (eBPF's bpf_get_current_pid_tgid)
// number processes as the host does, and only then as arenactl does.
func InHostPidNamespace() (bool, error) {
	fi, err := os.Stat("/proc/self/ns/pid")
	if err != nil {
		return false, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Ino == initPidNSIno, nil
}

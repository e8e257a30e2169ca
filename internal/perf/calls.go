package perf

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/procfs"
)

// This file records system calls with an eBPF program instead of the
// syscall tracepoints' perf samples. A perf sample per call cost a
// process that maps and unmaps in a loop 1.5x its pace even with a 64-byte
// stack copy (docs/commands/growth.md): the sample's own machinery, not the copy.
// The program (bpf/calls.c, compiled by go generate with bpf2go into
// calls_x86_bpfel.o and calls_arm64_bpfel.o and their Go types: the
// asm/ptrace.h of each machine) runs at the exit of the memory
// syscalls only (their own tracepoints: no other syscall runs it; see
// docs/growth-ebpf.md for what they still cost other processes), keeps
// the calls of one process, known by its tgid and start time, and writes
// one record per call to a ring buffer: the user registers, the result,
// the time, and a copy of the top of the stack: a whole copy for every
// call the caller wants whole (a large size, brk) and, at random, for
// others with a chance that falls as the ring fills between two reads
// (CallOptions.ThinStep); a short copy for the rest, completed from the
// whole ones that begin as it does (stackprof's completion).
// Nothing waits: a full ring counts the call as lost. Nothing is written
// into the process. With CallOptions.RSS a raw tracepoint program on
// rss_stat writes the changes of the process's file and shmem page
// counters to the same ring (RSSChange), where perf's rss_stat tracepoint
// would sum the counter under its lock at every anonymous fault too.

//go:generate go tool bpf2go -target amd64 -type call -type sys_exit calls bpf/calls.c -- -I/usr/include/x86_64-linux-gnu -Wall -Werror
//go:generate go tool bpf2go -target arm64 -type call -type sys_exit calls bpf/calls.c -- -I/usr/aarch64-linux-gnu/include -Wall -Werror

// Syscall is a recorded call: its number, arguments, result, and how its
// stack was copied.
type Syscall struct {
	Nr   int // 0: the sample is no call's
	Args [6]uint64
	Ret  int64
	// Short: only the top of the stack was copied. A whole copy was
	// taken with chance 2^-Thin, or always for what the call was
	// (Forced: brk, a large size): such a call never goes short.
	Short, Forced bool
	Thin          int
}

// CallOptions say which calls and how much of their stacks.
type CallOptions struct {
	// Nrs are the syscall numbers to record.
	Nrs []int
	// WholeNrs are always copied whole (brk: rare, and the main heap's
	// growth).
	WholeNrs []int
	// WholeFrom: a call whose second argument (a length), or mremap's
	// third (its new length), is this or more is copied whole (0: 1 MiB).
	WholeFrom uint64
	// ThinStep: the others are copied whole with chance 2^-k, k the
	// bytes of the ring not read yet over ThinStep (at most maxThin; 0:
	// DefaultThinStep). A process that calls rarely has every call's
	// stack whole; one that calls in a loop fills the ring between two
	// reads and has most of them short, at a cost that stays low.
	ThinStep uint32
	// RingBytes is the ring buffer's size, a power of two (0:
	// DefaultCallRing).
	RingBytes uint32
	// RSS: the program records each change of the process's file and
	// shmem page counters too (rss_stat), as samples with RSS set, where
	// the kernel lets it (Calls.RSS says whether it does).
	RSS bool
}

// RSSChange is a change of a process's page counter the program saw
// (bpf/calls.c rss_stat): the counter (include/linux/mm_types_task.h's
// MM_FILEPAGES, MM_SHMEMPAGES) and its new value in pages, as the kernel's
// tracepoint gives it: since Linux 6.2 its shared part and every CPU's
// summed (lib/percpu_counter.c, percpu_counter_sum), before that the value
// the tracepoint passed.
type RSSChange struct {
	Set    bool
	Member int
	Pages  int64
}

const (
	DefaultThinStep = 32 << 10
	maxThin         = 8
	DefaultCallRing = 32 << 20
	// CallShortStack and CallWholeStack are the stack copies, the
	// largest that could be read: a short copy of 256 bytes unwinds
	// most calls past the syscall's wrapper and its caller.
	CallShortStack = 256
	CallWholeStack = DefaultStackSize
	// CallDeepStack is a whole copy's size when the ring is nearly
	// empty or the call is forced whole: rare calls on deep paths.
	CallDeepStack = 32 << 10
)

// The program's sizes (bpf/calls.c's SHORT_STACK, WHOLE_STACK, DEEP_STACK,
// MAX_THIN) are these.
const _ = uint(CallShortStack-256) + uint(256-CallShortStack) + uint(CallWholeStack-8192) + uint(8192-CallWholeStack) +
	uint(CallDeepStack-32768) + uint(32768-CallDeepStack) + uint(maxThin-8) + uint(8-maxThin)

// rssProgram is the rss_stat program that fits the running kernel, by the
// arguments its BTF gives the tracepoint (btf_trace_rss_stat: the probe's
// data, then the tracepoint's): mm and member since Linux 6.2, whose
// program sums the counter's parts (ncpus possible CPUs, maxRSSCPUs at
// most); mm, member and the counter's value before. "" and why where
// neither does.
func rssProgram(ncpus int) (prog, why string) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return "", "the kernel's BTF: " + err.Error()
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_rss_stat", &td); err != nil {
		return "", "the kernel's BTF has no rss_stat tracepoint"
	}
	var params int
	if p, ok := td.Type.(*btf.Pointer); ok {
		if fp, ok := p.Target.(*btf.FuncProto); ok {
			params = len(fp.Params)
		}
	}
	switch {
	case params == 4:
		return callsProgRssStatCount, ""
	case params != 3:
		return "", fmt.Sprintf("the kernel's rss_stat tracepoint takes %d arguments", max(params-1, 0))
	case ncpus <= 0 || ncpus > maxRSSCPUs:
		return "", fmt.Sprintf("the rss_stat eBPF program sums the page counters of %d CPUs at most", maxRSSCPUs)
	}
	return callsProgRssStat, ""
}

// maxRSSCPUs is bpf/calls.c's MAX_CPUS.
const maxRSSCPUs = 1024

// flagRSS marks a record of rss_stat's (bpf/calls.c FLAG_RSS).
const flagRSS = 4

// A record is a callsCall (bpf/calls.c's struct call), then the stack; its
// registers are each machine's (decodeCall).
const callBytes = int(unsafe.Sizeof(callsCall{}))

// callPrograms are the program (bpf/calls.c) for each syscall it can
// record, and the syscall's kind there (its bit in whole_kinds).
var callPrograms = map[int]struct {
	prog string
	kind uint
}{
	unix.SYS_MMAP:     {callsProgExitMmap, 0},
	unix.SYS_MUNMAP:   {callsProgExitMunmap, 1},
	unix.SYS_MREMAP:   {callsProgExitMremap, 2},
	unix.SYS_BRK:      {callsProgExitBrk, 3},
	unix.SYS_MADVISE:  {callsProgExitMadvise, 4},
	unix.SYS_MPROTECT: {callsProgExitMprotect, 5},
}

// clockTick is the kernel's USER_HZ, the unit of /proc/PID/stat's start
// time: 100 on x86_64 and arm64 (include/asm-generic/param.h).
const clockTick = 100

// BPFError is a failure of the calls' eBPF program: the kernel refused it
// (no eBPF, no BTF, a helper or tracepoint missing, a verifier's refusal,
// not allowed: errkind.ErrNoPerf, as perf's refusals are) or had no room
// for it.
type BPFError struct {
	Op  string
	Err error // a verifier's refusal is an *ebpf.VerifierError, with its whole log
}

func (e *BPFError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *BPFError) Unwrap() error { return e.Err }

// Is: a refusal is errkind.ErrNoPerf; out of memory or descriptors is no
// kind of its own.
func (e *BPFError) Is(target error) bool {
	if target != errkind.ErrNoPerf {
		return false
	}
	var ve *ebpf.VerifierError
	return errors.Is(e.Err, ebpf.ErrNotSupported) || errors.As(e.Err, &ve) ||
		errors.Is(e.Err, unix.EPERM) || errors.Is(e.Err, unix.EACCES) || errors.Is(e.Err, unix.EINVAL) ||
		errors.Is(e.Err, unix.ENOENT) || errors.Is(e.Err, unix.ENOSYS) || errors.Is(e.Err, unix.EOPNOTSUPP) ||
		errors.Is(e.Err, syscall.Errno(524)) // ENOTSUPP: no trampoline for the function
}

// Calls is a program recording one process's calls: a program per
// syscall, attached at its exit (links), the ring they write to and its
// reader.
type Calls struct {
	coll  *ebpf.Collection
	progs []*ebpf.Program
	tps   []Tracepoint // progs[i]'s
	links []link.Link
	rd    *bpfRing
	armed *ebpf.Variable
	lost  *ebpf.Variable
	// rss is the rss_stat program where it was asked for and loaded;
	// noRSS says why it is not, where it was asked for.
	rss   *ebpf.Program
	noRSS string
}

// OpenCalls loads and attaches the program for pid's calls (pid as
// arenactl sees it), disarmed: it records from Attach on. Whether the
// kernel can run it is known here, so that a caller can choose another
// way before it starts.
func OpenCalls(pid int, o CallOptions) (*Calls, error) { return OpenCallsProc(procfs.ByPid(pid), o) }

// OpenCallsProc is OpenCalls for the process whose /proc directory p
// holds: its start time, which the program matches besides the pid, is
// that process's.
func OpenCallsProc(p *procfs.Proc, o CallOptions) (*Calls, error) {
	st, err := p.ReadStat()
	if err != nil {
		return nil, wrap(fmt.Sprintf("perf: process %d", p.Pid), err)
	}
	return openCalls(p, st.StartTime, o)
}

// openCalls is OpenCalls for the process whose directory p holds, which
// started at start (clock ticks after boot).
func openCalls(p *procfs.Proc, start uint64, o CallOptions) (_ *Calls, err error) {
	pid := p.Pid
	if o.WholeFrom == 0 {
		o.WholeFrom = 1 << 20
	}
	if o.ThinStep == 0 {
		o.ThinStep = DefaultThinStep
	}
	if o.RingBytes == 0 {
		o.RingBytes = DefaultCallRing
	}
	if o.RingBytes&(o.RingBytes-1) != 0 || o.RingBytes < 4096 {
		return nil, fmt.Errorf("perf: a ring of %d bytes: not a power of two pages", o.RingBytes)
	}
	refused := func(op string, err error) error { return &BPFError{Op: op, Err: err} }
	c := &Calls{}
	// What the program needs: tracepoint programs, a ring buffer (Linux
	// 5.8) and the user registers of the task (bpf_task_pt_regs, 5.15);
	// the probes load a program or create a map of each, once.
	if err := features.HaveProgramType(ebpf.TracePoint); err != nil {
		return nil, refused("recording calls with eBPF (tracepoint programs)", err)
	}
	if err := features.HaveMapType(ebpf.RingBuf); err != nil {
		return nil, refused("recording calls with eBPF (ring buffers)", err)
	}
	if err := features.HaveProgramHelper(ebpf.TracePoint, asm.FnTaskPtRegs); err != nil {
		return nil, refused("recording calls with eBPF (bpf_task_pt_regs)", err)
	}
	dev, ino, err := callsNamespace(p)
	if err != nil {
		return nil, refused("recording calls with eBPF", err)
	}
	var whole uint32
	for _, nr := range o.WholeNrs {
		if p, ok := callPrograms[nr]; ok {
			whole |= 1 << p.kind
		}
	}
	ncpus, _ := ebpf.PossibleCPU()
	spec, err := loadCalls()
	if err != nil {
		return nil, err
	}
	spec.Maps[callsMapCalls].MaxEntries = o.RingBytes
	for name, v := range map[string]any{
		callsVarTargetTgid: uint32(pid), callsVarTargetStart: start, callsVarTickNs: uint64(1e9 / clockTick),
		callsVarBootOffset: bootOffset(), callsVarPidnsDev: dev, callsVarPidnsIno: ino,
		callsVarWholeFrom: o.WholeFrom, callsVarWholeKinds: whole, callsVarThinStep: uint64(o.ThinStep),
		callsVarNcpus: uint32(ncpus),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("perf: the calls' program's %s: %w", name, err)
		}
	}
	// The programs asked for, and their tracepoints, whose records must
	// be laid out as the program reads them.
	keep := map[string]bool{}
	var progs, names []string
	for _, nr := range o.Nrs {
		p, ok := callPrograms[nr]
		if !ok {
			return nil, fmt.Errorf("perf: syscall %d: the calls' program does not record it", nr)
		}
		if !keep[p.prog] {
			keep[p.prog] = true
			progs = append(progs, p.prog)
			names = append(names, spec.Programs[p.prog].AttachTo)
		}
	}
	rssProg := ""
	if o.RSS {
		var why string
		if rssProg, why = rssProgram(ncpus); rssProg != "" {
			keep[rssProg] = true
		} else {
			c.noRSS = why
		}
	}
	for name := range spec.Programs {
		if !keep[name] {
			delete(spec.Programs, name)
		}
	}
	tps, err := Tracepoints(names...)
	if err != nil {
		return nil, err
	}
	for _, tp := range tps {
		if f, ok := tp.Fields["ret"]; !ok || f.Offset != int(unsafe.Offsetof(callsSysExit{}.Ret)) || f.Size != 8 {
			return nil, refused("recording calls with eBPF", fmt.Errorf("tracepoint %s:%s has no 8-byte ret at offset %d: %w",
				tp.Group, tp.Name, unsafe.Offsetof(callsSysExit{}.Ret), ebpf.ErrNotSupported))
		}
	}
	// Kernels before 5.11 charge maps to RLIMIT_MEMLOCK, 8 MiB by
	// default: root may lift it (later kernels charge the cgroup, and
	// this does nothing). Where it cannot, loading says so.
	_ = rlimit.RemoveMemlock()
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.coll, err = ebpf.NewCollection(spec); err != nil && rssProg != "" {
		// A kernel that refuses the rss_stat program (raw tracepoints,
		// a helper, a relocation its BTF does not fit): the calls
		// without it, file pages left to perf's tracepoint.
		c.noRSS = refused("loading the rss_stat eBPF program", err).Error()
		delete(spec.Programs, rssProg)
		c.coll, err = ebpf.NewCollection(spec)
	}
	if err != nil {
		return nil, refused("loading the calls' eBPF program", err)
	}
	if rssProg != "" && c.noRSS == "" {
		c.rss = c.coll.Programs[rssProg]
	}
	for _, name := range progs {
		c.progs = append(c.progs, c.coll.Programs[name])
	}
	c.tps = tps
	c.armed, c.lost = c.coll.Variables[callsVarArmed], c.coll.Variables[callsVarLost]
	// Read without waiting: the program wakes no one, the reader polls.
	ringMap := c.coll.Maps[callsMapCalls]
	if c.rd, err = mapBPFRing(ringMap.FD(), uint64(ringMap.MaxEntries())); err != nil {
		return nil, refused("mapping the calls' eBPF ring", err)
	}
	if err := c.attach(); err != nil {
		return nil, err
	}
	return c, nil
}

// callsNamespace is the pid namespace the program must ask for the
// target's ids in: none (0, 0) where arenactl is in the host's, whose
// PIDs bpf_get_current_pid_tgid gives for any process; else arenactl's,
// where bpf_get_ns_current_pid_tgid (Linux 5.7) gives them for the
// processes whose own namespace it is (kernel/bpf/helpers.c): the
// target's must be arenactl's, as it is for a debug container sharing a
// pod's (kubectl debug --target).
func callsNamespace(p *procfs.Proc) (dev, ino uint64, err error) {
	pid := p.Pid
	if host, err := procfs.InHostPidNamespace(); err != nil || host {
		return 0, 0, err
	}
	self, err := nsOf("self")
	if err != nil {
		return 0, 0, err
	}
	var tg syscall.Stat_t // the target's, through its held directory
	if err := syscall.Stat(p.Path("ns/pid"), &tg); err != nil {
		return 0, 0, err
	}
	if l, err := os.Readlink("/proc/self"); err != nil || l != strconv.Itoa(os.Getpid()) {
		return 0, 0, errors.New("/proc is not mounted for arenactl's pid namespace, so its PIDs are not the ones eBPF would be asked for")
	}
	if tg != self {
		return 0, 0, fmt.Errorf("process %d is in a pid namespace below arenactl's, where eBPF cannot name it", pid)
	}
	if err := features.HaveProgramHelper(ebpf.TracePoint, asm.FnGetNsCurrentPidTgid); err != nil {
		return 0, 0, fmt.Errorf("arenactl is not in the host's pid namespace, and eBPF cannot name processes in another (bpf_get_ns_current_pid_tgid): %w", err)
	}
	return self.Dev, self.Ino, nil
}

func nsOf(pid string) (st syscall.Stat_t, err error) {
	err = syscall.Stat("/proc/"+pid+"/ns/pid", &st)
	return st, err
}

// bootOffset is arenactl's time namespace's boot time offset in ns, by
// which /proc/PID/stat's start times are shifted (0 outside one).
func bootOffset() uint64 {
	b, err := os.ReadFile("/proc/self/timens_offsets")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "boottime" {
			s, err1 := strconv.ParseInt(f[1], 10, 64)
			ns, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 == nil && err2 == nil {
				return uint64(s*1e9 + ns)
			}
		}
	}
	return 0
}

// attach links each program to its syscall's exit tracepoint, through a
// perf event of it on every process (CPU 0's: the programs of a tracepoint
// run on every CPU). The event is left disabled: the programs run all the
// same (the tracepoint's program array, kernel/trace/trace_syscalls.c
// perf_syscall_exit), but an enabled one is on CPU 0's list of the
// tracepoint's events, and since the programs return 1 the kernel built
// and offered it a sample at every memory syscall of every process on
// CPU 0 (about 100 ns a call, bench/growth/paired.sh with the target on
// CPU 0).
func (c *Calls) attach() error {
	for i, p := range c.progs {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: c.tps[i].ID,
			Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{})), Sample_type: unix.PERF_SAMPLE_RAW, Sample: 1, Wakeup: 1, Bits: unix.PerfBitDisabled}
		fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			return wrap("perf: opening tracepoint "+c.tps[i].Group+":"+c.tps[i].Name, err)
		}
		l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: p, Attach: ebpf.AttachPerfEvent})
		unix.Close(fd) // the link holds the event
		if err != nil {
			return &BPFError{Op: "attaching the calls' eBPF program to " + c.tps[i].Group + ":" + c.tps[i].Name, Err: err}
		}
		c.links = append(c.links, l)
	}
	if c.rss != nil {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "rss_stat", Program: c.rss})
		if err != nil {
			return &BPFError{Op: "attaching the rss_stat eBPF program", Err: err}
		}
		c.links = append(c.links, l)
	}
	return nil
}

// RSS says whether the process's file and shmem page counters are
// recorded (CallOptions.RSS), and if not, why not.
func (c *Calls) RSS() (bool, string) { return c.rss != nil, c.noRSS }

// Attach starts recording: every call of the process from now on, until
// Detach or Close.
func (c *Calls) Attach() error {
	if len(c.links) == 0 {
		if err := c.attach(); err != nil {
			return err
		}
	}
	if err := c.armed.Set(uint32(1)); err != nil {
		return &BPFError{Op: "arming the calls' eBPF program", Err: err}
	}
	return nil
}

// Detach stops recording; what was recorded can still be read.
func (c *Calls) Detach() {
	if c.armed != nil {
		c.armed.Set(uint32(0))
	}
	// Each link's close waits for a kernel grace period (a syscall
	// tracepoint's programs may fault); closed at once, the waits overlap
	// (six: 0.23-0.27 s against 0.37-0.39 s one after the other, here).
	var wg sync.WaitGroup
	for _, l := range c.links {
		wg.Go(func() { l.Close() })
	}
	wg.Wait()
	c.links = nil
}

// Read hands every recorded call to f as a sample (Call set, Event -1),
// and every change of a page counter (RSS set, Event -1), its stack valid
// during the call only.
func (c *Calls) Read(f func(Sample)) { c.ReadN(-1, f) }

// ReadN is Read for max records at most (max < 0: all); more says that it
// stopped with records left in the ring, for a later call.
func (c *Calls) ReadN(max int, f func(Sample)) (more bool) {
	if c.rd == nil {
		return false
	}
	defer c.rd.release()
	for n := 0; ; n++ {
		if n == max {
			c.rd.release() // before available, which counts from the consumer's position
			return c.rd.available() > 0
		}
		rec, ok := c.rd.next()
		if !ok {
			return false
		}
		if len(rec) < callBytes {
			continue
		}
		var h callsCall
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&h)), callBytes), rec)
		var s Sample
		s.Event = -1
		s.Time = h.Time
		s.Pid, s.Tid = int(h.Tgid), int(h.Tid)
		if n := int(h.StackLen); callBytes+n <= len(rec) {
			s.Stack = rec[callBytes : callBytes+n]
		}
		if h.Flags&flagRSS != 0 {
			decodeRegs(&h, &s)
			s.RSS = RSSChange{Set: true, Member: int(h.Flags >> 16 & 0xff), Pages: h.Ret}
			f(s)
			continue
		}
		if !decodeCall(&h, &s) {
			continue
		}
		s.Call.Ret = h.Ret
		s.Call.Short, s.Call.Forced, s.Call.Thin = h.Flags&1 == 0, h.Flags&2 != 0, int(h.Flags>>8&0xff)
		f(s)
	}
}

// Lost is how many calls found the ring full.
func (c *Calls) Lost() uint64 {
	var n uint64
	if c.lost == nil || c.lost.Get(&n) != nil {
		return 0
	}
	return n
}

// Close detaches the programs and frees them and the ring.
func (c *Calls) Close() {
	c.Detach()
	if c.rd != nil {
		c.rd.close()
		c.rd = nil
	}
	if c.coll != nil {
		c.coll.Close()
		c.coll = nil
	}
	c.armed, c.lost = nil, nil
}

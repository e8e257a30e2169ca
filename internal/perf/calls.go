package perf

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/bpf"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/target"
)

// This file records system calls with an eBPF program instead of the
// syscall tracepoints' perf samples. A perf sample per call cost a
// process that maps and unmaps in a loop 1.5x its pace even with a 64-byte
// stack copy (docs/commands/growth.md): the sample's own machinery, not the copy.
// The program (below) runs at every syscall's exit (the raw tracepoint
// sys_exit, whose first argument is the user registers saved at entry),
// keeps the calls of one process whose numbers it is given, and writes
// one record per call to a ring buffer: the registers (the arguments are
// still in them at exit, the result in rax), the time, and a copy of the
// top of the stack: a whole copy for every call the caller wants whole
// (a large size, brk) and, at random, for others with a chance that falls
// as the ring fills between two reads (CallOptions.ThinStep); a short copy
// for the rest, completed from the whole ones that begin as it does
// (heapprof's completion). Nothing waits: a full
// ring counts the call as lost. Nothing is written into the process.

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
)

// A record: time, pid_tgid, the stack bytes copied, flags (bit 0 whole,
// bit 1 forced whole, bits 8-15 thin), the 21 words of struct pt_regs (user_regs_struct's
// first 21, target.Regs' order), then the stack.
const (
	recTime  = 0
	recPid   = 8
	recDyn   = 16
	recFlags = 20
	recRegs  = 24
	nPtRegs  = 21
	recStack = recRegs + 8*nPtRegs
)

// struct pt_regs offsets (arch/x86/include/asm/ptrace.h), in the order
// of target.Regs.
const (
	ptRegsSize = 8 * nPtRegs
	ptOrigAX   = 8 * target.RegOrigRAX
	ptSI       = 8 * target.RegRSI
	ptDX       = 8 * target.RegRDX
	ptSP       = 8 * target.RegRSP
	// userCS64 is __USER_CS, the code segment of 64-bit user code
	// (arch/x86/include/asm/segment.h).
	userCS64 = 0x33
)

// Calls is a program recording one process's calls, its ring and its
// count of calls lost; link is its attachment (-1: none).
type Calls struct {
	ring *bpf.Ring
	lost *bpf.Map
	prog *bpf.Prog
	link int
}

// OpenCalls loads the program for pid's calls (pid as the host sees it),
// to be attached (Attach).
func OpenCalls(pid int, o CallOptions) (_ *Calls, err error) {
	if o.WholeFrom == 0 {
		o.WholeFrom = 1 << 20
	}
	if o.ThinStep == 0 {
		o.ThinStep = DefaultThinStep
	}
	if o.RingBytes == 0 {
		o.RingBytes = DefaultCallRing
	}
	// The program knows processes by their host PIDs: in a pid
	// namespace of its own, arenactl's PID for the process is another.
	if host, err := procfs.InHostPidNamespace(); err != nil || !host {
		return nil, &bpf.Error{Kind: bpf.KindUnsupported, Op: "recording calls with eBPF",
			Err: errors.New("arenactl is not in the host's pid namespace, by whose PIDs eBPF knows processes")}
	}
	c := &Calls{link: -1}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.ring, err = bpf.NewRing(o.RingBytes, "arenactl_calls"); err != nil {
		return nil, err
	}
	if c.lost, err = bpf.NewMap(bpf.MapArray, 4, 8, 1, "arenactl_lost"); err != nil {
		return nil, err
	}
	insns, err := callsProgram(pid, o, c.ring.Map().FD, c.lost.FD)
	if err != nil {
		return nil, err
	}
	if c.prog, err = bpf.LoadRawTracepoint(insns, "arenactl_calls"); err != nil {
		return nil, err
	}
	return c, nil
}

// Attach starts recording: the program runs at every syscall's exit from
// now on, until Detach or Close.
func (c *Calls) Attach() error {
	if c.link >= 0 {
		return nil
	}
	var err error
	c.link, err = c.prog.AttachRawTracepoint("sys_exit")
	return err
}

// Detach stops recording; what was recorded can still be read.
func (c *Calls) Detach() {
	if c.link >= 0 {
		unix.Close(c.link)
		c.link = -1
	}
}

// stackCopy is one try at copying the stack: add bytes (mask 0), or the
// bytes from sp to the next mask+1 boundary, plus add.
type stackCopy struct{ mask, add int32 }

// callsProgram writes the program. R6 the context, then the thinning's
// k; R7 the user registers, R8 the record, R9 pid_tgid.
func callsProgram(pid int, o CallOptions, ringFD, lostFD int) ([]bpf.Insn, error) {
	const regs = -ptRegsSize // where a few registers are read to, on the stack
	const key = regs - 8     // the lost counter's key
	var a bpf.Asm
	a.Emit(bpf.MovReg(bpf.R6, bpf.R1), bpf.Call(bpf.FnGetPidTgid), bpf.MovReg(bpf.R9, bpf.R0), bpf.AluImm(bpf.Rsh, bpf.R0, 32))
	a.If(bpf.JNe, bpf.R0, int32(pid), "out")
	// The raw tracepoint's first argument: the user registers. Their
	// number, and the length a whole copy depends on, first: the rest
	// only for a call kept, into its record.
	a.Emit(bpf.Load(bpf.DW, bpf.R7, bpf.R6, 0),
		bpf.MovReg(bpf.R1, bpf.R10), bpf.AluImm(bpf.Add, bpf.R1, regs+ptDX), bpf.MovImm(bpf.R2, ptOrigAX+8-ptDX),
		bpf.MovReg(bpf.R3, bpf.R7), bpf.AluImm(bpf.Add, bpf.R3, ptDX), bpf.Call(bpf.FnProbeReadKern))
	a.If(bpf.JNe, bpf.R0, 0, "out")
	a.Emit(bpf.Load(bpf.DW, bpf.R1, bpf.R10, regs+ptOrigAX))
	for _, nr := range o.Nrs {
		a.If(bpf.JEq, bpf.R1, int32(nr), "traced")
	}
	a.Goto("out")
	a.Label("traced")
	for _, nr := range o.WholeNrs {
		a.If(bpf.JEq, bpf.R1, int32(nr), "forced")
	}
	if o.WholeFrom > 1<<30 {
		return nil, fmt.Errorf("perf: whole stacks from %d bytes: too large", o.WholeFrom)
	}
	a.Emit(bpf.Load(bpf.DW, bpf.R2, bpf.R10, regs+ptSI))
	a.If(bpf.JGe, bpf.R2, int32(o.WholeFrom), "forced")
	// mremap's new length is its third argument.
	a.If(bpf.JNe, bpf.R1, unix.SYS_MREMAP, "sized")
	a.Emit(bpf.Load(bpf.DW, bpf.R2, bpf.R10, regs+ptDX))
	a.If(bpf.JGe, bpf.R2, int32(o.WholeFrom), "forced")
	a.Label("sized")
	// The thinning: k = the ring's unread bytes / ThinStep, at most
	// maxThin; a whole copy with chance 2^-k. R6 (the context no more)
	// holds k.
	a.Emit(bpf.LoadMap(bpf.R1, ringFD)...)
	a.Emit(bpf.MovImm(bpf.R2, 0 /* BPF_RB_AVAIL_DATA */), bpf.Call(bpf.FnRingbufQuery),
		bpf.AluImm(bpf.Div, bpf.R0, int32(o.ThinStep)), bpf.MovReg(bpf.R6, bpf.R0))
	a.If(bpf.JLe, bpf.R6, maxThin, "thin")
	a.Emit(bpf.MovImm(bpf.R6, maxThin))
	a.Label("thin")
	a.If(bpf.JEq, bpf.R6, 0, "whole")
	a.Emit(bpf.Call(bpf.FnGetPrandomU32), bpf.MovImm(bpf.R1, 1), bpf.AluReg(bpf.Lsh, bpf.R1, bpf.R6),
		bpf.AluImm(bpf.Sub, bpf.R1, 1), bpf.AluReg(bpf.And, bpf.R0, bpf.R1))
	a.If(bpf.JEq, bpf.R0, 0, "whole")
	a.Goto("short")
	a.Label("forced")
	a.Emit(bpf.MovImm(bpf.R6, -1)) // flags 2|1 below: forced, k 0
	a.Goto("whole")
	body := func(label string, copies []stackCopy, whole bool) {
		a.Label(label)
		a.Emit(bpf.LoadMap(bpf.R1, ringFD)...)
		a.Emit(bpf.MovImm(bpf.R2, recStack+copies[0].add), bpf.MovImm(bpf.R3, 0), bpf.Call(bpf.FnRingbufReserve))
		if whole {
			// No room for a whole copy: a short one still records the
			// call (its chance of a whole copy was a little less than
			// 2^-k then, near a full ring only).
			a.If(bpf.JEq, bpf.R0, 0, "short")
		} else {
			a.If(bpf.JEq, bpf.R0, 0, "lost")
		}
		a.Emit(bpf.MovReg(bpf.R8, bpf.R0), bpf.Store(bpf.DW, bpf.R8, bpf.R9, recPid))
		if whole {
			a.Emit(bpf.MovImm(bpf.R1, 3))
			a.If(bpf.JEq, bpf.R6, -1, label+"flags")
			a.Emit(bpf.MovReg(bpf.R1, bpf.R6), bpf.AluImm(bpf.Lsh, bpf.R1, 8), bpf.AluImm(bpf.Or, bpf.R1, 1))
			a.Label(label + "flags")
			a.Emit(bpf.Store(bpf.W, bpf.R8, bpf.R1, recFlags))
		} else {
			a.Emit(bpf.StoreImm(bpf.W, bpf.R8, recFlags, 0))
		}
		a.Emit(bpf.MovReg(bpf.R1, bpf.R8), bpf.AluImm(bpf.Add, bpf.R1, recRegs), bpf.MovImm(bpf.R2, ptRegsSize),
			bpf.MovReg(bpf.R3, bpf.R7), bpf.Call(bpf.FnProbeReadKern))
		a.Emit(bpf.Call(bpf.FnKtimeGetNs), bpf.Store(bpf.DW, bpf.R8, bpf.R0, recTime))
		// The largest copy that reads: a stack whose top is nearer
		// than the copy's size to its mapping's end fails whole. After
		// the full size, copies that end where a page does (to the end
		// of the next page, of sp's own), the most there may be.
		for _, c := range copies {
			if c.mask == 0 {
				a.Emit(bpf.MovImm(bpf.R6, c.add))
			} else {
				// ((^sp) & mask) + 1: the bytes from sp to the next
				// (mask+1)-byte boundary.
				a.Emit(bpf.Load(bpf.DW, bpf.R6, bpf.R8, recRegs+ptSP), bpf.AluImm(bpf.Xor, bpf.R6, -1),
					bpf.AluImm(bpf.And, bpf.R6, c.mask), bpf.AluImm(bpf.Add, bpf.R6, 1+c.add))
			}
			a.Emit(bpf.MovReg(bpf.R1, bpf.R8), bpf.AluImm(bpf.Add, bpf.R1, recStack), bpf.MovReg(bpf.R2, bpf.R6),
				bpf.Load(bpf.DW, bpf.R3, bpf.R8, recRegs+ptSP), bpf.Call(bpf.FnProbeReadUser))
			a.If(bpf.JEq, bpf.R0, 0, label+"got")
		}
		a.Emit(bpf.MovImm(bpf.R6, 0))
		a.Label(label + "got")
		a.Emit(bpf.Store(bpf.W, bpf.R8, bpf.R6, recDyn))
		a.Label(label + "submit")
		// No wakeup: the reader polls.
		a.Emit(bpf.MovReg(bpf.R1, bpf.R8), bpf.MovImm(bpf.R2, 1 /* BPF_RB_NO_WAKEUP */), bpf.Call(bpf.FnRingbufSubmit))
		a.Goto("out")
	}
	const page = 4096
	body("short", []stackCopy{{add: CallShortStack}, {mask: CallShortStack - 1}}, false)
	body("whole", []stackCopy{{add: CallWholeStack}, {mask: page - 1, add: page}, {mask: page - 1}}, true)
	a.Label("lost")
	a.Emit(bpf.StoreImm(bpf.W, bpf.R10, key, 0))
	a.Emit(bpf.LoadMap(bpf.R1, lostFD)...)
	a.Emit(bpf.MovReg(bpf.R2, bpf.R10), bpf.AluImm(bpf.Add, bpf.R2, key), bpf.Call(bpf.FnMapLookupElem))
	a.If(bpf.JEq, bpf.R0, 0, "out")
	a.Emit(bpf.MovImm(bpf.R1, 1), bpf.AtomicAdd(bpf.DW, bpf.R0, bpf.R1, 0))
	a.Label("out")
	a.Emit(bpf.MovImm(bpf.R0, 0), bpf.Exit())
	return a.Insns()
}

// Read hands every recorded call to f as a sample (Call set, Event -1),
// its stack valid during the call only.
func (c *Calls) Read(f func(Sample)) {
	c.ring.Read(func(rec []byte) {
		if len(rec) < recStack {
			return
		}
		var s Sample
		s.Event = -1
		s.Time = binary.LittleEndian.Uint64(rec[recTime:])
		pt := binary.LittleEndian.Uint64(rec[recPid:])
		s.Pid, s.Tid = int(pt>>32), int(uint32(pt))
		dyn := int(binary.LittleEndian.Uint32(rec[recDyn:]))
		flags := binary.LittleEndian.Uint32(rec[recFlags:])
		for i := 0; i < nPtRegs; i++ {
			s.Regs[i] = binary.LittleEndian.Uint64(rec[recRegs+8*i:])
		}
		s.HaveRegs = true
		if recStack+dyn <= len(rec) {
			s.Stack = rec[recStack : recStack+dyn]
		}
		r := &s.Regs
		// A 32-bit process's calls (ia32 numbers, where 9 is link) are
		// not the 64-bit ones: only the 64-bit code segment's count.
		if r[target.RegCS] != userCS64 {
			return
		}
		s.Call = Syscall{Nr: int(r[target.RegOrigRAX]), Ret: int64(r[target.RegRAX]),
			Args:  [6]uint64{r[target.RegRDI], r[target.RegRSI], r[target.RegRDX], r[target.RegR10], r[target.RegR8], r[target.RegR9]},
			Short: flags&1 == 0, Forced: flags&2 != 0, Thin: int(flags >> 8 & 0xff)}
		f(s)
	})
}

// Lost is how many calls found the ring full.
func (c *Calls) Lost() uint64 {
	if c.lost == nil {
		return 0
	}
	v, err := c.lost.Lookup(0)
	if err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}

// Close detaches the program and frees the ring.
func (c *Calls) Close() {
	c.Detach()
	if c.prog != nil {
		c.prog.Close()
		c.prog = nil
	}
	if c.ring != nil {
		c.ring.Close()
		c.ring = nil
	}
	if c.lost != nil {
		c.lost.Close()
		c.lost = nil
	}
}

// Package unwind owns turning a thread's registers and a copy of the top of
// its stack into a call chain, the way perf's --call-graph=dwarf does after
// the fact: with the modules' call frame information (.eh_frame, and
// .debug_frame from the file or its debug file), parsed by delve's
// pkg/dwarf/frame, so code built -O2 -fomit-frame-pointer unwinds. It reads
// nothing of the target's memory but the copy it is given: the heap
// profiler takes the copy at each sampled call and unwinds later.
//
// One unwinder serves every machine of internal/arch: the target's
// (module.Table.Arch) says the DWARF numbering of its registers, which
// column is the return address (x86_64's 16, the caller's rip; aarch64's
// x30, apart from its pc, and stripped of a pointer authentication code),
// and, in machine.go, what the fallbacks below are on it.
//
// Where a module has no CFI for an address it falls back, and says so in
// the frame's Method: a PLT stub's row (x86_64: CFA rsp+8, rsp+16 after
// its push; aarch64: the return address still in x30); the signal
// trampoline (glibc's x86_64 __restore_rt, aarch64's vDSO
// __kernel_rt_sigreturn, which is looked at before its CFI) is recognized
// by its code and the interrupted registers read from the kernel's
// rt_sigframe; otherwise the frame pointer (rbp, x29) is followed if it
// plausibly chains (points into the copy, above sp, aligned), and the
// walk stops if not; a leaf the caller says is at a function's entry
// (Start.AtEntry) has its return address where the call put it (at sp on
// x86_64, in x30 on aarch64).
package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/module"
)

// Start is where an unwind begins: the thread's registers at the sampled
// point, and what is known of them.
type Start struct {
	// Regs, as the target's machine lays out pr_reg: pc and sp always,
	// and on a machine whose return address is in a register (aarch64's
	// x30) that one; the callee-saved ones (those arch.Arch.Perf asks
	// the kernel for: x86_64's rbx, rbp, r12-r15, aarch64's x19-x29,
	// which the caller frames' CFI may say are still live in registers)
	// when HaveCalleeSaved. The others are not read.
	Regs debuggee.Regs
	// HaveCalleeSaved false means only pc and sp (and the link
	// register) are known: frames whose CFA depends on the frame pointer
	// then cannot be unwound.
	HaveCalleeSaved bool
	// AtEntry: pc is the first instruction of a function (the profiler
	// samples at malloc's entry), so the return address is where the
	// call put it: at sp on x86_64, in x30 on aarch64. Used only if the
	// leaf's module has no CFI there; CFI says the same.
	AtEntry bool
}

// Stack is a copy of the target's memory from Addr upward (normally from
// the thread's sp), which is all the unwinder reads.
type Stack struct {
	Addr uint64
	Data []byte
	// End is the end of the thread's stack mapping, when known: a frame
	// needing memory past the copy but below End means the copy was too
	// short (Trace.Truncated); past End, a bad frame. Unknown (0), the
	// copy counts as truncated for reads up to maxStack above it.
	End uint64
}

// maxStack bounds how far above a copy a read still passes for the same
// stack when Stack.End is unknown: larger than any default thread or main
// stack (8 MiB), so that only a garbage address is called a bad frame.
const maxStack = 256 << 20

// Method says how a frame's caller was found.
type Method uint8

const (
	MethodNone         Method = iota // the outermost frame: nothing was unwound from it
	MethodCFI                        // the module's .eh_frame/.debug_frame
	MethodSignal                     // a signal trampoline: the caller's registers from the kernel's sigframe
	MethodPLT                        // a PLT stub without CFI: return address at rsp (+8 after its push), or in x30
	MethodFramePointer               // no CFI: rbp (x29) followed as a frame pointer
	MethodEntry                      // no CFI, but the leaf is at a function's entry (Start.AtEntry): return address at sp, or in x30
)

func (m Method) String() string {
	switch m {
	case MethodCFI:
		return "cfi"
	case MethodSignal:
		return "signal"
	case MethodPLT:
		return "plt"
	case MethodFramePointer:
		return "fp"
	case MethodEntry:
		return "entry"
	}
	return "none"
}

// Frame is one frame of the chain, innermost first.
type Frame struct {
	// PC is where the leaf thread was, or a return address. Symbolize
	// LookupPC: a return address may lie past the end of the calling
	// function (a call to a noreturn function is its last instruction).
	PC uint64
	SP uint64 // the frame's stack pointer
	// Exact: PC is the very instruction the thread was at (the leaf, or a
	// frame a signal interrupted), not a return address.
	Exact  bool
	Module *module.Module // nil when PC is in no mapped file
	// Method is how the next frame (this one's caller) was found; None on
	// the last frame.
	Method Method
}

// LookupPC is the address to symbolize: inside the call instruction for a
// return address, PC itself for an exact one.
// A signal trampoline's frame is looked up at PC too: the kernel made the
// handler "return" to its first instruction.
func (f Frame) LookupPC() uint64 {
	if f.Exact || f.PC == 0 || f.Method == MethodSignal {
		return f.PC
	}
	return f.PC - 1
}

// Stop says why the chain ends.
type Stop uint8

const (
	StopEnd       Stop = iota // the outermost frame: CFI marks the return address undefined (_start, clone), or it is 0
	StopTruncated             // the next frame's data lies beyond the stack copy
	StopNoModule              // pc is in no mapped file (JIT code, garbage) and the frame pointer does not chain
	StopNoCFI                 // the module has no CFI for pc and the frame pointer does not chain
	StopBadFrame              // the CFI gave an impossible frame (stack not growing, unreadable, unsupported expression)
	StopMaxFrames             // MaxFrames reached
)

func (s Stop) String() string {
	switch s {
	case StopEnd:
		return "end"
	case StopTruncated:
		return "truncated"
	case StopNoModule:
		return "no module"
	case StopNoCFI:
		return "no CFI"
	case StopBadFrame:
		return "bad frame"
	case StopMaxFrames:
		return "max frames"
	}
	return fmt.Sprintf("stop(%d)", uint8(s))
}

// Trace is an unwound call chain.
type Trace struct {
	Frames []Frame // innermost first
	Stop   Stop
	// Truncated: the stack copy ended before the chain did (Stop ==
	// StopTruncated); the frames found are right, outer ones are missing.
	Truncated bool
	// CallerSP is, when Truncated, the last frame's CFA (its caller's sp)
	// if the frame's rule gave it before a read past the copy failed; 0
	// if not. Outer.Join checks a remembered caller against it.
	CallerSP uint64
}

// DefaultMaxFrames bounds a chain: garbage on the stack can never make the
// unwinder loop or run long.
const DefaultMaxFrames = 128

// Unwinder unwinds threads of one target. It caches each module's parsed
// CFI and compiled rows; it is not safe for concurrent use.
type Unwinder struct {
	m         *machine
	mods      *module.Table
	cfis      map[*module.Module]*cfi
	MaxFrames int
	// ignoreCFI makes the addresses it matches look as if they had no
	// CFI, for the tests of the fallbacks on real code.
	ignoreCFI func(m *module.Module, vaddr uint64) bool
}

// New makes an unwinder over a target's module table (shared with the
// symbolizer, so each file is opened once), for the target's machine.
func New(mods *module.Table) *Unwinder {
	return &Unwinder{m: machineOf(mods.Arch()), mods: mods, cfis: map[*module.Module]*cfi{}, MaxFrames: DefaultMaxFrames}
}

// Forget drops the cached CFI of modules no longer in the table, after
// the table was refreshed.
func (u *Unwinder) Forget() {
	live := map[*module.Module]bool{}
	for _, m := range u.mods.Modules() {
		live[m] = true
	}
	for m := range u.cfis {
		if !live[m] {
			delete(u.cfis, m)
		}
	}
}

// Prepare reads the CFI of every module in the table now, for a caller
// that cannot afford to wait for it at the first stack through a module
// (the heap profiler, whose ring fills meanwhile).
func (u *Unwinder) Prepare() {
	for _, m := range u.mods.Modules() {
		u.cfiOf(m)
	}
}

func (u *Unwinder) cfiOf(m *module.Module) *cfi {
	c := u.cfis[m]
	if c == nil {
		c = loadCFI(u.m, m)
		u.cfis[m] = c
	}
	return c
}

// regSet is the registers known in one frame, by DWARF number.
type regSet struct {
	v     [nRegs]uint64
	valid uint64
}

func (r *regSet) has(i int) bool { return i >= 0 && i < nRegs && r.valid&(1<<i) != 0 }
func (r *regSet) set(i int, v uint64) {
	r.v[i] = v
	r.valid |= 1 << i
}

var (
	errBeyond = errors.New("beyond the stack copy") // in the stack, but not copied
	errBelow  = errors.New("outside the stack")     // below sp, or past the stack's end
)

func (s *Stack) read(addr uint64) (uint64, error) {
	if addr < s.Addr {
		return 0, errBelow
	}
	off := addr - s.Addr
	if off > uint64(len(s.Data)) || uint64(len(s.Data))-off < 8 {
		if s.End != 0 && addr+8 > s.End || s.End == 0 && off > maxStack {
			return 0, errBelow
		}
		return 0, errBeyond
	}
	return binary.LittleEndian.Uint64(s.Data[off:]), nil
}

// Unwind walks from start up through the stack copy.
func (u *Unwinder) Unwind(start Start, stack Stack) Trace {
	return u.UnwindInto(nil, start, stack)
}

// UnwindInto is Unwind appending into frames[:0], for a caller that reuses
// one slice across samples.
func (u *Unwinder) UnwindInto(frames []Frame, start Start, stack Stack) Trace {
	max := u.MaxFrames
	if max <= 0 {
		max = DefaultMaxFrames
	}
	m := u.m
	cur := m.startRegs(&start)
	tr := Trace{Frames: frames[:0]}
	exact := true
	for {
		pc, sp := cur.v[m.pc], cur.v[m.sp]
		fr := Frame{PC: pc, SP: sp, Exact: exact}
		lookup := fr.LookupPC()
		mod, _ := u.mods.Lookup(lookup)
		fr.Module = mod
		tr.Frames = append(tr.Frames, fr)
		last := &tr.Frames[len(tr.Frames)-1]
		if len(tr.Frames) >= max {
			tr.Stop = StopMaxFrames
			return tr
		}
		if pc == 0 {
			tr.Stop = StopEnd
			return tr
		}
		next, method, stop := u.step(&cur, mod, lookup, start.AtEntry && len(tr.Frames) == 1, &stack)
		if method == MethodNone {
			tr.Stop = stop
			tr.Truncated = stop == StopTruncated
			if tr.Truncated && next.has(m.sp) {
				tr.CallerSP = next.v[m.sp]
			}
			return tr
		}
		last.Method = method
		if !next.has(m.pc) || next.v[m.pc] == 0 {
			last.Method = MethodNone
			tr.Stop = StopEnd
			return tr
		}
		// Every ordinary step pops at least a return address, except,
		// where the return address is in a register (aarch64's x30), from
		// a frame that called nothing yet: the leaf, or a frame a signal
		// interrupted. A signal frame may go anywhere (an alternate signal
		// stack), but the frame count still bounds the walk.
		nsp := next.v[m.sp]
		if method != MethodSignal && (nsp < sp || nsp == sp && !(m.link && exact && next.v[m.pc] != pc)) {
			last.Method = MethodNone
			tr.Stop = StopBadFrame
			return tr
		}
		exact = method == MethodSignal
		cur = next
	}
}

// step finds the caller's registers.
func (u *Unwinder) step(cur *regSet, mod *module.Module, lookup uint64, leafAtEntry bool, stack *Stack) (regSet, Method, Stop) {
	m := u.m
	if mod == nil {
		return u.framePointer(cur, stack, StopNoModule)
	}
	c := u.cfiOf(mod)
	vaddr := lookup - mod.Bias
	var r *row
	if u.ignoreCFI != nil && u.ignoreCFI(mod, vaddr) {
		r = c.fallback(mod, vaddr)
	} else {
		r = c.rowFor(mod, vaddr)
	}
	switch {
	case r.sigframe:
		return m.sigframe(cur, stack)
	case r.noCFI && leafAtEntry:
		// Nothing saved yet: the return address is where the call put
		// it. Following the frame pointer here would skip the caller,
		// whose frame pointer it still is.
		return m.noCFIEntry(cur, stack)
	case r.noCFI:
		return u.framePointer(cur, stack, StopNoCFI)
	}
	return m.apply(r, cur, stack)
}

// retAt is the step of a frame that only pushed (or has not pushed) its
// return address: CFA = the address above it.
func retAt(m *machine, cur *regSet, stack *Stack, cfa uint64, meth Method) (regSet, Method, Stop) {
	ra, err := stack.read(cfa - 8)
	if err != nil {
		return cfaOnly(m, cfa), MethodNone, stopFor(err)
	}
	next := *cur
	next.set(m.pc, m.a.StripCode(ra))
	next.set(m.sp, cfa)
	return next, meth, 0
}

func stopFor(err error) Stop {
	if errors.Is(err, errBeyond) {
		return StopTruncated
	}
	return StopBadFrame
}

// framePointer follows the frame pointer when it plausibly is one: above
// sp, aligned, and its frame inside the copy. Both machines keep the same
// frame record there, the caller's frame pointer then the return address
// (x86_64's push %rbp after the call's push; AAPCS64's frame record,
// stp x29, x30). The caller's sp is the address above the record: exact on
// x86_64, on aarch64 the least it can be (GCC puts the record at the
// bottom of the frame, clang at its top).
func (u *Unwinder) framePointer(cur *regSet, stack *Stack, fail Stop) (regSet, Method, Stop) {
	m := u.m
	if !cur.has(m.fp) {
		return regSet{}, MethodNone, fail
	}
	bp, sp := cur.v[m.fp], cur.v[m.sp]
	if bp < sp || bp&7 != 0 || bp < stack.Addr {
		return regSet{}, MethodNone, fail
	}
	savedBP, err := stack.read(bp)
	if err != nil {
		if errors.Is(err, errBeyond) {
			return regSet{}, MethodNone, StopTruncated
		}
		return regSet{}, MethodNone, fail
	}
	ra, err := stack.read(bp + 8)
	if err != nil {
		return cfaOnly(m, bp+16), MethodNone, stopFor(err)
	}
	next := *cur
	next.set(m.pc, m.a.StripCode(ra))
	if m.link {
		next.set(m.ra, ra)
	}
	next.set(m.sp, bp+16)
	next.set(m.fp, savedBP)
	return next, MethodFramePointer, 0
}

// cfaOnly is a failed step's result that still knows the caller's sp.
func cfaOnly(m *machine, cfa uint64) regSet {
	var r regSet
	r.set(m.sp, cfa)
	return r
}

// apply computes the caller's registers from a CFI row.
func (m *machine) apply(r *row, cur *regSet, stack *Stack) (regSet, Method, Stop) {
	var cfa uint64
	switch r.cfa.kind {
	case ruleCFAReg:
		if !cur.has(int(r.cfa.reg)) {
			return regSet{}, MethodNone, StopBadFrame
		}
		cfa = cur.v[r.cfa.reg] + uint64(r.cfa.off)
	case ruleCFAExpr:
		v, err := eval(r.cfa.expr, nil, cur, stack.read)
		if err != nil {
			return regSet{}, MethodNone, stopFor(err)
		}
		cfa = v
	default:
		return regSet{}, MethodNone, StopBadFrame
	}
	next := *cur
	next.set(m.sp, cfa)
	for i := range r.regs {
		ru := &r.regs[i]
		switch ru.kind {
		case ruleSame:
			continue
		case ruleUndefined:
			next.valid &^= 1 << i
		case ruleOffset:
			v, err := stack.read(cfa + uint64(ru.off))
			if err != nil {
				if i != m.ra && i != m.sp {
					next.valid &^= 1 << i // a lost callee-saved register only matters if used
					continue
				}
				return cfaOnly(m, cfa), MethodNone, stopFor(err)
			}
			next.set(i, v)
		case ruleValOffset:
			next.set(i, cfa+uint64(ru.off))
		case ruleRegister:
			if cur.has(int(ru.reg)) {
				next.set(i, cur.v[ru.reg])
			} else {
				next.valid &^= 1 << i
			}
		case ruleExpr, ruleValExpr:
			v, err := eval(ru.expr, &cfa, cur, stack.read)
			if err == nil && ru.kind == ruleExpr {
				v, err = stack.read(v)
			}
			if err != nil {
				if i != m.ra && i != m.sp {
					next.valid &^= 1 << i
					continue
				}
				return cfaOnly(m, cfa), MethodNone, stopFor(err)
			}
			next.set(i, v)
		}
	}
	if r.regs[m.ra].kind == ruleUndefined || !next.has(m.ra) {
		next.valid &^= 1<<m.ra | 1<<m.pc
		return next, r.method, 0
	}
	// The caller's pc is the return address column's value. On aarch64
	// that is the restored x30, which pointer authentication may have
	// signed before saving it; a signal frame's (the 'S' CFI of glibc's
	// x86_64 __restore_rt) is the interrupted pc itself.
	next.set(m.pc, m.a.StripCode(next.v[m.ra]))
	return next, r.method, 0
}

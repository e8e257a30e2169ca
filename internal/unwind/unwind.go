// Package unwind owns turning a thread's registers and a copy of the top of
// its stack into a call chain, the way perf's --call-graph=dwarf does after
// the fact: with the modules' call frame information (.eh_frame, and
// .debug_frame from the file or its debug file), parsed by delve's
// pkg/dwarf/frame, so code built -O2 -fomit-frame-pointer unwinds. It reads
// nothing of the target's memory but the copy it is given: the heap
// profiler takes the copy at each sampled call and unwinds later.
//
// Where a module has no CFI for an address it falls back, and says so in
// the frame's Method: a PLT stub's CFA is rsp+8 (rsp+16 after its push);
// glibc's signal trampoline (__restore_rt) is recognized by its code and
// the interrupted registers read from the kernel's rt_sigframe; otherwise
// rbp is followed as a frame pointer if it plausibly chains (points into
// the copy, above sp, aligned), and the walk stops if not; a leaf the
// caller says is at a function's entry (Start.AtEntry) has its return
// address at sp.
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
	// Regs: pc and sp always; the callee-saved ones (rbx, rbp, r12-r15,
	// which the caller frames' CFI may say are still live in registers)
	// when HaveCalleeSaved. The others are not read.
	Regs debuggee.Regs
	// HaveCalleeSaved false means only pc and sp are known: frames whose
	// CFA depends on rbp then cannot be unwound.
	HaveCalleeSaved bool
	// AtEntry: pc is the first instruction of a function (the profiler
	// samples at malloc's entry), so the return address is at sp. Used
	// only if the leaf's module has no CFI there; CFI says the same.
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
	MethodPLT                        // a PLT stub without CFI: return address at rsp (+8 after its push)
	MethodFramePointer               // no CFI: rbp followed as a frame pointer
	MethodEntry                      // no CFI, but the leaf is at a function's entry (Start.AtEntry): return address at sp
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
	StopNoModule              // pc is in no mapped file (JIT code, garbage) and rbp does not chain
	StopNoCFI                 // the module has no CFI for pc and rbp does not chain
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
	mods      *module.Table
	cfis      map[*module.Module]*cfi
	MaxFrames int
	// ignoreCFI makes the addresses it matches look as if they had no
	// CFI, for the tests of the fallbacks on real code.
	ignoreCFI func(m *module.Module, vaddr uint64) bool
}

// New makes an unwinder over a target's module table (shared with the
// symbolizer, so each file is opened once).
func New(mods *module.Table) *Unwinder {
	return &Unwinder{mods: mods, cfis: map[*module.Module]*cfi{}, MaxFrames: DefaultMaxFrames}
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
		c = loadCFI(m)
		u.cfis[m] = c
	}
	return c
}

// regSet is the registers known in one frame.
type regSet struct {
	v     [nRegs]uint64
	valid uint32
}

func (r *regSet) has(i int) bool { return r.valid&(1<<i) != 0 }
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
	var cur regSet
	regs := &start.Regs
	cur.set(regRA, regs.PC())
	cur.set(regRSP, regs.SP())
	if start.HaveCalleeSaved {
		cur.set(regRBP, regs[debuggee.RegRBP])
		cur.set(regRBX, regs[debuggee.RegRBX])
		cur.set(12, regs[debuggee.RegR12])
		cur.set(13, regs[debuggee.RegR13])
		cur.set(14, regs[debuggee.RegR14])
		cur.set(15, regs[debuggee.RegR15])
	}
	tr := Trace{Frames: frames[:0]}
	exact := true
	for {
		pc, sp := cur.v[regRA], cur.v[regRSP]
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
			if tr.Truncated && next.has(regRSP) {
				tr.CallerSP = next.v[regRSP]
			}
			return tr
		}
		last.Method = method
		if next.v[regRA] == 0 || !next.has(regRA) {
			last.Method = MethodNone
			tr.Stop = StopEnd
			return tr
		}
		// Every ordinary step pops at least a return address. A signal
		// frame may go anywhere (an alternate signal stack), but the
		// frame count still bounds the walk.
		if method != MethodSignal && next.v[regRSP] <= sp {
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
		return sigframe(cur, stack)
	case r.noCFI && leafAtEntry:
		// Nothing pushed yet: the return address is at rsp. Following
		// rbp here would skip the caller, whose frame pointer it still is.
		return retAt(cur, stack, cur.v[regRSP]+8, MethodEntry)
	case r.noCFI:
		return u.framePointer(cur, stack, StopNoCFI)
	}
	return apply(r, cur, stack)
}

// retAt is the step of a frame that only pushed (or has not pushed) its
// return address: CFA = the address above it.
func retAt(cur *regSet, stack *Stack, cfa uint64, m Method) (regSet, Method, Stop) {
	ra, err := stack.read(cfa - 8)
	if err != nil {
		return cfaOnly(cfa), MethodNone, stopFor(err)
	}
	next := *cur
	next.set(regRA, ra)
	next.set(regRSP, cfa)
	return next, m, 0
}

func stopFor(err error) Stop {
	if errors.Is(err, errBeyond) {
		return StopTruncated
	}
	return StopBadFrame
}

// framePointer follows rbp when it plausibly is a frame pointer: above sp,
// aligned, and its frame inside the copy.
func (u *Unwinder) framePointer(cur *regSet, stack *Stack, fail Stop) (regSet, Method, Stop) {
	if !cur.has(regRBP) {
		return regSet{}, MethodNone, fail
	}
	bp, sp := cur.v[regRBP], cur.v[regRSP]
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
		return cfaOnly(bp + 16), MethodNone, stopFor(err)
	}
	next := *cur
	next.set(regRA, ra)
	next.set(regRSP, bp+16)
	next.set(regRBP, savedBP)
	return next, MethodFramePointer, 0
}

// cfaOnly is a failed step's result that still knows the caller's sp.
func cfaOnly(cfa uint64) regSet {
	var r regSet
	r.set(regRSP, cfa)
	return r
}

// apply computes the caller's registers from a CFI row.
func apply(r *row, cur *regSet, stack *Stack) (regSet, Method, Stop) {
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
	next.set(regRSP, cfa)
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
				if i != regRA && i != regRSP {
					next.valid &^= 1 << i // a lost callee-saved register only matters if used
					continue
				}
				return cfaOnly(cfa), MethodNone, stopFor(err)
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
				if i != regRA && i != regRSP {
					next.valid &^= 1 << i
					continue
				}
				return cfaOnly(cfa), MethodNone, stopFor(err)
			}
			next.set(i, v)
		}
	}
	if r.regs[regRA].kind == ruleUndefined {
		next.valid &^= 1 << regRA
	}
	return next, r.method, 0
}

// The kernel's x86-64 rt_sigframe as the handler returns into the
// trampoline: rsp points at the ucontext (the pretcode was popped);
// uc_mcontext.gregs start 40 bytes in, in REG_R8 .. REG_RIP order.
const ucGregs = 40

// gregDwarf maps the first 17 greg slots to DWARF register numbers.
var gregDwarf = [...]int{8, 9, 10, 11, 12, 13, 14, 15, regRDI, regRSI, regRBP, regRBX, regRDX, regRAX, regRCX, regRSP, regRA}

func sigframe(cur *regSet, stack *Stack) (regSet, Method, Stop) {
	base := cur.v[regRSP] + ucGregs
	var next regSet
	for i, reg := range gregDwarf {
		v, err := stack.read(base + uint64(8*i))
		if err != nil {
			return regSet{}, MethodNone, stopFor(err)
		}
		next.set(reg, v)
	}
	return next, MethodSignal, 0
}

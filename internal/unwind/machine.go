package unwind

import (
	"slices"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/module"
)

// nRegs bounds the DWARF columns a frame keeps: x86_64's 0..16 (16, the
// return address column, is the caller's rip), aarch64's x0..x30, sp 31,
// pc 32 (AADWARF64, section 4.1; 34, RA_SIGN_STATE, is read by the CFI
// interpreter itself).
const nRegs = arch.ARM64PC + 1

// machine is what the unwinder needs of an architecture beyond its
// register numbering (arch.Arch.Regs): how a frame without CFI is stepped,
// and where a signal frame keeps the interrupted registers.
type machine struct {
	a *arch.Arch
	// pc, sp, fp, ra: DWARF numbers. ra is the CIE's return address
	// column; where it is not the pc (aarch64's x30), the caller's pc is
	// the restored ra with what is not address stripped (PAC), and a
	// frame that saved nothing may return with sp unchanged.
	pc, sp, fp, ra int
	link           bool
	// cols is how many DWARF columns a row of this machine keeps.
	cols int
	// always and all are where the registers Start gives are, without
	// and with HaveCalleeSaved (withStart).
	always, all []startWord
	// sigreturn is the code of the signal trampoline the kernel makes a
	// handler return into; sigframe reads the interrupted registers from
	// the frame it finds at sp. sigCodeFirst: the trampoline is recognized
	// by its code before its CFI is read (aarch64's vDSO CFI gives only
	// the frame record, not the interrupted pc).
	sigreturn    []byte
	sigCodeFirst bool
}

// The steps that differ by machine are methods that switch on it rather
// than function values: a call through one would make the caller's
// registers and stack escape to the heap at every unwind.

// sigframe reads the interrupted registers from the signal frame at sp.
func (m *machine) sigframe(cur *regSet, stack *Stack) (regSet, Method, Stop) {
	if m.link {
		return arm64Sigframe(m, cur, stack)
	}
	return amd64Sigframe(m, cur, stack)
}

// plt is the row of a PLT stub without CFI (kind as cfi.pltKind says),
// nil where none applies.
func (m *machine) plt(kind, start, vaddr uint64) *row {
	if m.link {
		return arm64PLT(m, kind, start, vaddr)
	}
	return amd64PLT(m, kind, start, vaddr)
}

// noCFIEntry steps a leaf at a function's first instruction when its
// module has no CFI there.
func (m *machine) noCFIEntry(cur *regSet, stack *Stack) (regSet, Method, Stop) {
	if m.link {
		return arm64Entry(m, cur)
	}
	return amd64Entry(m, cur, stack)
}

func machineOf(a *arch.Arch) *machine {
	if a == arch.ARM64 {
		return arm64Machine
	}
	return amd64Machine
}

// startRegs is the frame of the thread at start: its registers from
// pr_reg's words (debuggee.Regs) in DWARF numbering.
func (m *machine) startRegs(start *Start) regSet {
	var cur regSet
	words := m.always
	if start.HaveCalleeSaved {
		words = m.all
	}
	for _, w := range words {
		cur.set(int(w.dwarf), start.Regs[w.word])
	}
	return cur
}

// startWord is where a register the unwinder starts from is among
// pr_reg's words.
type startWord struct{ word, dwarf uint8 }

// startWords lists the words of the registers in dwarf, by
// arch.Arch.Prstatus.
func startWords(a *arch.Arch, dwarf ...int) []startWord {
	var out []startWord
	for _, n := range dwarf {
		for i, w := range a.Prstatus.Words {
			if w == n && n < nRegs && !slices.ContainsFunc(out, func(s startWord) bool { return int(s.dwarf) == n }) {
				out = append(out, startWord{uint8(i), uint8(n)})
			}
		}
	}
	return out
}

// withStart fills in always and all: pc and sp, and the link register
// where there is one (a leaf's return address, as the word at sp is
// x86_64's); all adds those a CFI rule of a caller may name, which
// arch.Arch.Perf's mask asks the kernel for too.
func (m *machine) withStart() *machine {
	m.always = startWords(m.a, m.pc, m.sp)
	if m.link {
		m.always = startWords(m.a, m.pc, m.sp, m.ra)
	}
	m.all = startWords(m.a, append([]int{m.pc, m.sp, m.ra}, m.a.Perf.Order...)...)
	return m
}

// --- x86_64 ---

var amd64Machine = (&machine{
	a:  arch.AMD64,
	pc: arch.AMD64RIP, sp: arch.AMD64RSP, fp: arch.AMD64RBP, ra: arch.AMD64RIP,
	cols: arch.AMD64RIP + 1,
	// glibc's __restore_rt (sysdeps/unix/sysv/linux/x86_64/libc_sigaction.c,
	// RESTORE): mov $15,%rax (rt_sigreturn); syscall.
	sigreturn: []byte{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05},
}).withStart()

// The kernel's x86-64 rt_sigframe as the handler returns into the
// trampoline: rsp points at the ucontext (the pretcode was popped);
// uc_mcontext.gregs start 40 bytes in, in REG_R8 .. REG_RIP order
// (arch/x86/include/uapi/asm/sigcontext.h).
const amd64UCGregs = 40

// amd64Gregs are the DWARF numbers of the first 17 greg slots.
var amd64Gregs = [...]int{
	arch.AMD64R8, arch.AMD64R9, arch.AMD64R10, arch.AMD64R11, arch.AMD64R12, arch.AMD64R13, arch.AMD64R14, arch.AMD64R15,
	arch.AMD64RDI, arch.AMD64RSI, arch.AMD64RBP, arch.AMD64RBX, arch.AMD64RDX, arch.AMD64RAX, arch.AMD64RCX, arch.AMD64RSP, arch.AMD64RIP,
}

func amd64Sigframe(m *machine, cur *regSet, stack *Stack) (regSet, Method, Stop) {
	return readRegs(stack, cur.v[m.sp]+amd64UCGregs, amd64Gregs[:])
}

// readRegs reads the caller's registers from consecutive words at base,
// regs[i] being the DWARF number of word i.
func readRegs(stack *Stack, base uint64, regs []int) (regSet, Method, Stop) {
	var next regSet
	for i, reg := range regs {
		v, err := stack.read(base + uint64(8*i))
		if err != nil {
			return regSet{}, MethodNone, stopFor(err)
		}
		next.set(reg, v)
	}
	return next, MethodSignal, 0
}

// amd64PLT: a lazy .plt entry is jmp *got; push n; jmp .plt0 (16 bytes
// each, the push at +6; .plt0 pushes first), .plt.sec and .plt.got are
// jumps only: the CFA is rsp+8, or +16 after a push.
func amd64PLT(m *machine, kind, start, vaddr uint64) *row {
	var off int64
	switch kind {
	case 1:
		off = 8
		if vaddr-start < 16 || (vaddr&15) >= 11 {
			off = 16
		}
	case 2:
		off = 8
	default:
		return nil
	}
	r := m.newRow(MethodPLT)
	r.cfa = rule{kind: ruleCFAReg, reg: uint8(m.sp), off: off}
	r.regs[m.ra] = rule{kind: ruleOffset, off: -8}
	return r
}

// amd64Entry: nothing pushed yet, the return address is at rsp.
func amd64Entry(m *machine, cur *regSet, stack *Stack) (regSet, Method, Stop) {
	return retAt(m, cur, stack, cur.v[m.sp]+8, MethodEntry)
}

// --- aarch64 ---

var arm64Machine = (&machine{
	a:  arch.ARM64,
	pc: arch.ARM64PC, sp: arch.ARM64SP, fp: arch.ARM64FP, ra: arch.ARM64LR,
	link: true,
	cols: arch.ARM64PC + 1,
	// The vDSO's __kernel_rt_sigreturn (Linux arch/arm64/kernel/vdso/
	// sigreturn.S), where the kernel makes a handler return unless it
	// gave SA_RESTORER: mov x8, #139 (rt_sigreturn); svc #0. Its CFI
	// (.cfi_signal_frame, the CFA at x29) gives only the frame record the
	// kernel pushed, x29 and x30, and so would skip the interrupted
	// function: the code is looked at first.
	sigreturn:    []byte{0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4},
	sigCodeFirst: true,
}).withStart()

// The kernel's arm64 rt_sigframe (arch/arm64/kernel/signal.c, struct
// rt_sigframe: a siginfo of 128 bytes, then the ucontext) is at sp when
// the handler returns into the trampoline. The ucontext's uc_mcontext
// (include/uapi/asm-generic/ucontext.h with arm64's sigset of 8 bytes and
// the 120 of padding arm64's ucontext.h adds: 168, aligned to 16) is 176
// bytes in; a struct sigcontext (arch/arm64/include/uapi/asm/sigcontext.h)
// starts with fault_address, then regs[31], sp, pc. glibc reads the same
// through uc_mcontext (sysdeps/unix/sysv/linux/aarch64/sigcontextinfo.h).
const arm64SigRegs = 128 + 176 + 8

// arm64Sigregs are the DWARF numbers of sigcontext's regs[0..30], sp, pc:
// their own indexes.
var arm64Sigregs = func() []int {
	r := make([]int, arch.ARM64PC+1)
	for i := range r {
		r[i] = i
	}
	return r
}()

func arm64Sigframe(m *machine, cur *regSet, stack *Stack) (regSet, Method, Stop) {
	next, method, stop := readRegs(stack, cur.v[m.sp]+arm64SigRegs, arm64Sigregs)
	if method == MethodSignal {
		next.set(m.pc, m.a.StripCode(next.v[m.pc]))
	}
	return next, method, stop
}

// arm64PLT: an aarch64 PLT entry (binutils' elfnn-aarch64.c,
// elfNN_aarch64_small_plt_entry: adrp x16; ldr x17; add x16; br x17, after
// a bti c with BTI) moves neither sp nor x30: the return address is still
// in x30. .plt0 first pushes x16 and x30 (stp x16, x30, [sp, #-16]!).
func arm64PLT(m *machine, kind, start, vaddr uint64) *row {
	if kind != 1 && kind != 2 {
		return nil
	}
	r := m.newRow(MethodPLT)
	r.cfa = rule{kind: ruleCFAReg, reg: uint8(m.sp)}
	// .plt0 is 32 bytes; after its first instruction x30 is at CFA-8.
	if kind == 1 && vaddr-start >= 4 && vaddr-start < 32 {
		r.cfa.off = 16
		r.regs[m.ra] = rule{kind: ruleOffset, off: -8}
	}
	return r
}

// arm64Entry: at a function's first instruction the return address is in
// x30 and nothing is on the stack (AAPCS64: bl writes the link register).
func arm64Entry(m *machine, cur *regSet) (regSet, Method, Stop) {
	if !cur.has(m.ra) {
		return regSet{}, MethodNone, StopNoCFI
	}
	next := *cur
	next.set(m.pc, m.a.StripCode(cur.v[m.ra]))
	return next, MethodEntry, 0
}

// newRow is an empty row: every register the same.
func (m *machine) newRow(method Method) *row {
	r := &row{method: method, regs: make([]rule, m.cols)}
	for i := range r.regs {
		r.regs[i] = rule{kind: ruleSame}
	}
	return r
}

// isSigreturn reports whether the machine's signal trampoline starts at
// vaddr in mod.
func (m *machine) isSigreturn(mod *module.Module, vaddr uint64) bool {
	if len(m.sigreturn) == 0 {
		return false
	}
	var b [16]byte
	code := b[:len(m.sigreturn)]
	return mod.ReadVaddr(code, vaddr) == nil && string(code) == string(m.sigreturn)
}

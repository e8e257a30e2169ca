package ptrace

import (
	"encoding/binary"
	"fmt"

	"github.com/arenactl/arenactl/internal/arch/site"
)

// The x86_64 hooks of the injection's flow (inject.go).

// redZone is the x86_64 SysV area below rsp that leaf code may use without
// moving rsp; everything we put on the thread's stack goes below it.
const redZone = 128

const pageSize = 4096

// trampCode is what the trampoline holds: glibc's __restore_rt.
var trampCode = restoreRT

// siteCode is the call site's code page.
var siteCode = site.AMD64

// xstateName names what getXState reads, for its errors.
const xstateName = "extended registers"

// callable: every x86_64 thread can take a call.
func (th *Thread) callable() error { return nil }

// newInjector starts from the thread's registers, its syscall forgotten.
func newInjector(saved *Regs) *injector {
	in := &injector{exact: *saved, at: atOther}
	in.exact.Orig_rax = ^uint64(0)
	in.fallback = in.exact
	return in
}

// inSyscall: the thread was stopped in a syscall that the kernel restarts.
func (th *Thread) inSyscall() bool {
	_, ok := InSyscall(th.saved)
	return ok
}

// entered takes the registers of the syscall's entry stop e as the
// thread's own, its rip back on the syscall instruction.
func (th *Thread) entered(in *injector, e Regs) error {
	nr, _ := InSyscall(th.saved)
	var insn [2]byte
	if _, err := th.p.ReadAt(insn[:], e.Rip-2); err != nil || insn != [2]byte{0x0f, 0x05} {
		th.saved = &e // untouched: resuming issues the syscall
		return fmt.Errorf("thread %d: the syscall at %#x was not issued by a syscall instruction", th.Tid, e.Rip)
	}
	in.exact = e
	in.exact.Rip -= 2
	in.exact.Rax = e.Orig_rax // restart_syscall (219) for ERESTART_RESTARTBLOCK
	in.exact.Orig_rax = ^uint64(0)
	in.fallback = in.exact
	if e.Orig_rax == sysRestartSyscall {
		in.fallback.Rax = uint64(nr)
	}
	return nil
}

// placeFrame builds the signal frame below the red zone.
func placeFrame(in *injector, mask uint64) (sp uint64, frame []byte, err error) {
	return sigFrame(in.exact.Rsp-redZone, &in.fallback, mask, in.xs)
}

// siteTail is the part of the site after its code: the xsave image that
// the routine restores.
func siteTail(in *injector, frame []byte) ([]byte, uint64) { return in.xs, xsaveOff }

func (th *Thread) page0(in *injector, size, sp uint64) []byte {
	return sitePage0(size, th.Tid, &in.exact, sp, rfbmFor(in.xs))
}

// onFrame points r at pc with the return-address slot at sp on top of the
// stack (the frame is above it).
func onFrame(r *Regs, pc, sp uint64) { r.Rip, r.Rsp = pc, sp+8 }

// enteredNo is the syscall the thread at entry stop e is entering.
func (th *Thread) enteredNo(e *Regs) (int64, error) { return int64(e.Orig_rax), nil }

// setSyscall makes the thread's entry stop r issue nr(args), returning into
// the trampoline.
func (th *Thread) setSyscall(r *Regs, nr uint64, args []uint64) error {
	r.Orig_rax = nr
	for i, p := range []*uint64{&r.Rdi, &r.Rsi, &r.Rdx, &r.R10, &r.R8, &r.R9} {
		if i < len(args) {
			*p = args[i]
		}
	}
	onFrame(r, th.tramp, th.inj.sp)
	return setRegs(th.Tid, r)
}

func sysResult(r *Regs) uint64 { return r.Rax }

// callRegs are the registers that start fn(args) with the routine's entry
// as its return address, pushed on the thread's stack.
func (th *Thread) callRegs(fn uint64, args []uint64) (Regs, error) {
	in := th.inj
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], in.entry)
	if _, err := th.p.WriteAt(w[:], in.sp); err != nil {
		return Regs{}, fmt.Errorf("writing the return address on thread %d's stack: %w", th.Tid, err)
	}
	r := in.exact
	r.Rsp = in.sp // at entry (rsp+8) % 16 == 0, as the ABI wants
	r.Rip = fn
	r.Rax = 0 // variadic callees read al as the number of vector registers used
	r.Orig_rax = ^uint64(0)
	r.Eflags &^= 1 << 10 // the ABI wants DF clear at a call
	for i, p := range []*uint64{&r.Rdi, &r.Rsi, &r.Rdx, &r.Rcx, &r.R8, &r.R9} {
		if i < len(args) {
			*p = args[i]
		}
	}
	return r, nil
}

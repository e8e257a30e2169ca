package ptrace

import (
	"errors"
	"fmt"
	"os"

	"github.com/arenactl/arenactl/internal/arch/site"
	"github.com/arenactl/arenactl/internal/errkind"
)

// The aarch64 hooks of the injection's flow (inject.go). What differs from
// x86_64 is said where it does: the syscall number is NT_ARM_SYSTEM_CALL's,
// x7 is lent by syscall stops, the link register carries the return into
// the routine, and the routine restores through rt_sigreturn.

// pageSize is the call site's granule: its header, code and frame parts are
// each a multiple of it, 64 KiB, the largest page aarch64 kernels use, so
// that the one layout (internal/arch/site) works under 4, 16 and 64 KiB
// pages alike; only touched pages take memory.
const pageSize = site.Arm64Page

// stackGap is left free below the thread's sp before the signal frame
// (Linux's aarch64 ABI has no red zone; the gap is cheap insurance).
const stackGap = 256

// ErrPageSize: the kernel's pages do not divide the call site's granule.
var ErrPageSize = fmt.Errorf("calls into processes are made only under 4, 16 or 64 KiB pages on aarch64: %w", errkind.ErrArch)

// ErrLiveSVE: the thread has SVE state the call would lose.
var ErrLiveSVE = errors.New("the thread has live SVE state, which a call through a signal frame without an SVE record would lose")

// ErrLiveSME: the thread is in SME streaming mode or has ZA live.
var ErrLiveSME = errors.New("the thread is in SME streaming mode or has ZA live, which a call through a signal frame without their records would lose")

// trampCode is what the trampoline holds: the vDSO's __kernel_rt_sigreturn.
var trampCode = sigreturnCode

// siteCode is the call site's code page.
var siteCode = site.ARM64

// xstateName names what getXState reads, for its errors.
const xstateName = "the FP/SIMD registers"

// callable refuses a page size the site's layout does not divide and a
// thread whose SVE or SME state the frame would lose.
func (th *Thread) callable() error {
	if ps := os.Getpagesize(); ps <= 0 || pageSize%ps != 0 {
		return fmt.Errorf("thread %d: %w", th.Tid, ErrPageSize)
	}
	if liveSVE(th.Tid) {
		return fmt.Errorf("thread %d: %w", th.Tid, ErrLiveSVE)
	}
	if liveSME(th.Tid) {
		return fmt.Errorf("thread %d: %w", th.Tid, ErrLiveSME)
	}
	return nil
}

func newInjector(saved *Regs) *injector {
	in := &injector{exact: *saved, at: atOther}
	in.fallback = in.exact
	return in
}

// inSyscall: blocked in a syscall (pc already rewound to the svc, x0
// orig_x0 again: see InSyscall), or about to issue one. Either way it is
// let issue it and stopped at the entry, where the syscall it runs is
// what the kernel says: restart_syscall for one interrupted with
// -ERESTART_RESTARTBLOCK (do_signal's setup_restart_syscall sets x8 as it
// resumes).
func (th *Thread) inSyscall() bool { return th.atSVC(th.saved) }

// entered takes the registers of the syscall's entry stop e as the
// thread's own, its pc back on the svc.
func (th *Thread) entered(in *injector, e Regs) error {
	nr, err := getSyscallNo(th.Tid)
	if err != nil {
		return th.gone(err)
	}
	if e.Pc != th.saved.Pc+4 || nr < 0 {
		return fmt.Errorf("thread %d: the syscall at %#x was not issued by the svc at %#x", th.Tid, e.Pc, th.saved.Pc)
	}
	in.exact = e
	in.exact.Pc = th.saved.Pc
	in.exact.Regs[7] = th.saved.Regs[7] // lent by the stop (setResume)
	in.exact.Regs[8] = uint64(nr)
	in.fallback = in.exact
	if nr == sysRestartSyscall {
		// rt_sigreturn cancels the restart block: the frame issues the
		// original syscall again.
		in.fallback.Regs[8] = th.saved.Regs[8]
		in.fallback.Regs[0] = th.saved.Regs[0]
	}
	return nil
}

// placeFrame puts the signal frame a gap below sp, 16-byte aligned.
func placeFrame(in *injector, mask uint64) (sp uint64, frame []byte, err error) {
	frame, err = sigFrame(&in.fallback, mask, in.xs)
	if err != nil {
		return 0, nil, err
	}
	return (in.exact.Sp - stackGap - uint64(len(frame))) &^ 15, frame, nil
}

// siteTail is the part of the site after its code: a copy of the signal
// frame, which the routine's rt_sigreturn restores from.
func siteTail(in *injector, frame []byte) ([]byte, uint64) { return frame, frameOff }

func (th *Thread) page0(in *injector, size, sp uint64) []byte {
	return sitePage0(size, th.Tid, &in.exact, sp)
}

// onFrame points r at pc with sp on the frame.
func onFrame(r *Regs, pc, sp uint64) { r.Pc, r.Sp = pc, sp }

// enteredNo is the syscall the thread at an entry stop is entering:
// NT_ARM_SYSTEM_CALL's, not x8.
func (th *Thread) enteredNo(*Regs) (int64, error) { return getSyscallNo(th.Tid) }

// setSyscall makes the thread's entry stop r issue nr(args), returning into
// the trampoline. The number is changed through NT_ARM_SYSTEM_CALL: the
// kernel runs syscallno, not x8.
func (th *Thread) setSyscall(r *Regs, nr uint64, args []uint64) error {
	r.Regs[7] = th.inj.exact.Regs[7]
	for i := range min(len(args), 6) {
		r.Regs[i] = args[i]
	}
	onFrame(r, th.tramp, th.inj.sp)
	if err := setRegs(th.Tid, r); err != nil {
		return err
	}
	return setSyscallNo(th.Tid, int64(nr))
}

func sysResult(r *Regs) uint64 { return r.Regs[0] }

// callRegs are the registers that start fn(args) returning into the
// routine through the link register.
func (th *Thread) callRegs(fn uint64, args []uint64) (Regs, error) {
	in := th.inj
	r := in.exact
	r.Sp = in.sp // 16-byte aligned, as AAPCS64 wants; the frame is above it
	r.Pc = fn
	r.Regs[30] = in.entry // the link register: the call returns into the routine
	// PSTATE.BTYPE (bits 10-11) 0: whatever branch the thread stopped
	// after, the callee's first instruction is entered as from no branch.
	r.Pstate &^= 3 << 10
	for i, a := range args {
		r.Regs[i] = a
	}
	return r, nil
}

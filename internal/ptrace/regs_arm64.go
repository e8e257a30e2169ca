package ptrace

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// Regs are the general-purpose registers of a stopped thread: aarch64's
// struct user_pt_regs (x0..x30, sp, pc, pstate), NT_PRSTATUS's pr_reg. The
// syscall number a thread stopped in is not there (the kernel keeps it in
// its own struct pt_regs, syscallno): NT_ARM_SYSTEM_CALL reads and changes
// it.
type Regs = unix.PtraceRegs

// fpsimdMax bounds NT_PRFPREG (struct user_fpsimd_state: 32 128-bit
// registers, fpsr, fpcr: 528 bytes).
const fpsimdMax = 1024

// getXState reads the FP/SIMD state (NT_PRFPREG, struct
// user_fpsimd_state). SVE's and SME's wider state (NT_ARM_SVE, NT_ARM_ZA)
// is not kept: calls are made only in threads without live SVE state
// (liveSVE), and ZA is off outside code that turns it on.
func getXState(tid int) ([]byte, error) { return getRegset(tid, 2, fpsimdMax) }

func setXState(tid int, buf []byte) error { return setRegset(tid, 2, buf) }

// PC is the thread's program counter; SP its stack pointer.
func PC(r *Regs) uint64 { return r.Pc }
func SP(r *Regs) uint64 { return r.Sp }

// SyscallArgs are the arguments of the syscall a thread stopped in: x0..x5
// (x0 is the result once it returned; the kernel keeps the first argument
// in orig_x0, which NT_PRSTATUS does not show).
func SyscallArgs(r *Regs) [6]uint64 {
	return [6]uint64{r.Regs[0], r.Regs[1], r.Regs[2], r.Regs[3], r.Regs[4], r.Regs[5]}
}

// InSyscall cannot tell from user_pt_regs alone whether a thread is in a
// syscall: when a stop interrupts a blocked syscall, arm64's do_signal
// (arch/arm64/kernel/signal.c) rewinds pc to the svc and puts orig_x0
// back in x0 before the stop, and forgets the syscall number (syscallno
// -1, which NT_ARM_SYSTEM_CALL would show). The thread is then about to
// issue x8 again; Thread.Blocked reads the instruction at pc to say so.
func InSyscall(r *Regs) (nr int64, ok bool) { return -1, false }

// svc is "svc #0", the instruction a syscall is issued with.
const svc = 0xd4000001

// NT_ARM_SYSTEM_CALL (include/uapi/linux/elf.h): the syscall number the
// kernel keeps in struct pt_regs' syscallno (arch/arm64/kernel/ptrace.c,
// system_call_get and system_call_set), which is what a syscall-entry-stop
// runs on resume (el0_svc_common takes syscall_trace_enter's return,
// regs->syscallno, not x8), and -1 (NO_SYSCALL) for none.
const ntARMSystemCall = 0x404

// NT_ARM_SVE: the SVE state, struct user_sve_header first
// (arch/arm64/include/uapi/asm/ptrace.h).
const ntARMSVE = 0x405

func getSyscallNo(tid int) (int64, error) {
	b, err := getRegset(tid, ntARMSystemCall, 4)
	if err != nil {
		return 0, err
	}
	if len(b) < 4 {
		return 0, fmt.Errorf("thread %d: NT_ARM_SYSTEM_CALL gave %d bytes", tid, len(b))
	}
	return int64(int32(le32(b))), nil
}

func setSyscallNo(tid int, nr int64) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(int32(nr)))
	return setRegset(tid, ntARMSystemCall, b[:])
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// atSVC reports whether the thread's pc is at an svc: a thread stopped
// while blocked in a syscall is (see InSyscall), and so is one stopped just
// before issuing one, which resuming makes the same.
func (th *Thread) atSVC(r *Regs) bool {
	var insn [4]byte
	if _, err := th.p.ReadAt(insn[:], PC(r)); err != nil {
		return false
	}
	return le32(insn[:]) == svc
}

// blockedIn reports, for a thread stopped during a call, the syscall it
// was blocked in, and where its svc ends (pc+4: arm64 rewound pc to the
// svc before the stop).
func (th *Thread) blockedIn(r *Regs) (nr int64, after uint64, ok bool) {
	if !th.atSVC(r) {
		return -1, 0, false
	}
	return int64(r.Regs[8]), PC(r) + 4, true
}

// Blocked reports the syscall the thread was blocked in when it stopped
// (x8 at an svc) and its arguments (x0 is orig_x0 again, see InSyscall).
func (th *Thread) Blocked() (nr int64, args [6]uint64, ok bool) {
	if th.saved == nil {
		return -1, args, false
	}
	if nr, _, ok = th.blockedIn(th.saved); ok {
		args = SyscallArgs(th.saved)
	}
	return nr, args, ok
}

// setResume sets the registers the thread resumes with. At a syscall stop
// the syscall is forgotten first (syscallno -1): at entry so that it does
// not run, at exit so that do_signal's restart does not take our x0 for
// the syscall's -ERESTART* result. x7 is not the thread's at a syscall
// stop (report_syscall in arch/arm64/kernel/ptrace.c lends it to say
// entry or exit, and puts the thread's back after the stop, whatever the
// tracer wrote): the registers we write carry the thread's own.
func (th *Thread) setResume(r *Regs) error {
	if in := th.inj; in != nil && in.at != atOther {
		if err := setSyscallNo(th.Tid, -1); err != nil {
			return err
		}
	}
	return setRegs(th.Tid, r)
}

// liveSVE reports whether the thread has SVE state beyond the FP/SIMD
// registers (SVE_PT_REGS_SVE in user_sve_header's flags): a thread
// stopped in a syscall has none, since a syscall discards it
// (Documentation/arch/arm64/sve.rst, "System call behaviour"). A CPU
// without SVE has no NT_ARM_SVE.
func liveSVE(tid int) bool {
	b, err := getRegset(tid, ntARMSVE, 16)
	return err == nil && len(b) >= 14 && binary.LittleEndian.Uint16(b[12:])&1 != 0
}

// justExeced: a thread out of a successful execve has x0 0 and a new pc;
// without the syscall number it cannot be told, so never.
func justExeced(r, saved *Regs) bool { return false }

// Words are the registers as NT_PRSTATUS's words (user_pt_regs' order,
// arch.ARM64.Prstatus).
func Words(r *Regs) []uint64 {
	return append(append(r.Regs[:31:31], r.Sp, r.Pc), r.Pstate)
}

// ntARMTLS is NT_ARM_TLS: TPIDR_EL0, the thread pointer.
const ntARMTLS = 0x401

// AllWords are the thread's registers as a core holds them: NT_PRSTATUS's
// words, then the thread pointer from NT_ARM_TLS (arch.ARM64.Words.TP),
// read here while the thread is stopped. nil when it is not.
func (th *Thread) AllWords() []uint64 {
	if th.saved == nil {
		return nil
	}
	w := Words(th.saved)
	var tp uint64
	th.p.t.do(func() error {
		if !th.stopped || th.detached {
			return nil
		}
		b, err := getRegset(th.Tid, ntARMTLS, 8)
		if err == nil && len(b) >= 8 {
			tp = binary.LittleEndian.Uint64(b)
		}
		return nil
	})
	return append(w, tp)
}

// Uncallable says why a call could not give the stopped thread its state
// back whole, or "": live SVE state (liveSVE) or SME state (liveSME),
// which the call's frame has no record for.
func (th *Thread) Uncallable() string {
	var sve, sme bool
	th.p.t.do(func() error {
		sve = th.stopped && !th.detached && liveSVE(th.Tid)
		sme = th.stopped && !th.detached && !sve && liveSME(th.Tid)
		return nil
	})
	switch {
	case sve:
		return "it has live SVE state, which a call would not give back"
	case sme:
		return "it is in SME streaming mode or has ZA live, which a call would not give back"
	}
	return ""
}

// NT_ARM_SSVE and NT_ARM_ZA (include/uapi/linux/elf.h).
const (
	ntARMSSVE = 0x40b
	ntARMZA   = 0x40c
)

// liveSME reports whether the thread is in SME streaming mode (NT_ARM_SSVE's
// user_sve_header has SVE_PT_REGS_SVE only then) or has ZA enabled
// (NT_ARM_ZA's user_za_header says a size beyond the header only then):
// Documentation/arch/arm64/sme.rst, "ptrace extensions". Unlike SVE state,
// ZA survives a syscall (sme.rst, "System call behaviour"), so a thread
// blocked in one can have it. A CPU or kernel without SME has neither regset.
func liveSME(tid int) bool {
	if b, err := getRegset(tid, ntARMSSVE, 16); err == nil && len(b) >= 14 && binary.LittleEndian.Uint16(b[12:])&1 != 0 {
		return true
	}
	b, err := getRegset(tid, ntARMZA, 16)
	return err == nil && len(b) >= 4 && binary.LittleEndian.Uint32(b) > 16
}

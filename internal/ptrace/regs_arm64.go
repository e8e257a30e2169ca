package ptrace

import (
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

// getXState reads the FP/SIMD state (NT_PRFPREG). SVE's and SME's wider
// state (NT_ARM_SVE, NT_ARM_ZA) is not kept yet.
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

// InSyscall cannot tell from user_pt_regs alone which syscall a thread is
// in (the number is in NT_ARM_SYSTEM_CALL); until calls are injected on
// aarch64 it says none, which makes a thread count as running code.
func InSyscall(r *Regs) (nr int64, ok bool) { return -1, false }

// justExeced: a thread out of a successful execve has x0 0 and a new pc;
// without the syscall number it cannot be told, so never.
func justExeced(r, saved *Regs) bool { return false }

// Words are the registers as NT_PRSTATUS's words (user_pt_regs' order,
// arch.ARM64.Prstatus).
func Words(r *Regs) []uint64 {
	return append(append(r.Regs[:31:31], r.Sp, r.Pc), r.Pstate)
}

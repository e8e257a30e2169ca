package ptrace

import (
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/arch"
)

// Regs are the general-purpose registers of a stopped thread: x86_64's
// struct user_regs_struct, NT_PRSTATUS's pr_reg.
type Regs = unix.PtraceRegs

// xstateMax bounds the NT_X86_XSTATE buffer; the kernel trims the iovec to
// the real size (about 2.7 KiB with AVX-512, 11 KiB with AMX).
const xstateMax = 16 << 10

// getXState reads the extended state (NT_X86_XSTATE, an XSAVE area).
func getXState(tid int) ([]byte, error) { return getRegset(tid, unix.NT_X86_XSTATE, xstateMax) }

func setXState(tid int, buf []byte) error { return setRegset(tid, unix.NT_X86_XSTATE, buf) }

// PC is the thread's instruction pointer; SP its stack pointer.
func PC(r *Regs) uint64 { return r.Rip }
func SP(r *Regs) uint64 { return r.Rsp }

// SyscallArgs are the arguments of the syscall a thread stopped in, in
// order (rdi, rsi, rdx, r10, r8, r9).
func SyscallArgs(r *Regs) [6]uint64 { return [6]uint64{r.Rdi, r.Rsi, r.Rdx, r.R10, r.R8, r.R9} }

// Words are the registers as NT_PRSTATUS's words (user_regs_struct's
// order, arch.AMD64.Prstatus), the order target.Regs keeps.
func Words(r *Regs) []uint64 {
	return []uint64{r.R15, r.R14, r.R13, r.R12, r.Rbp, r.Rbx, r.R11, r.R10, r.R9, r.R8,
		r.Rax, r.Rcx, r.Rdx, r.Rsi, r.Rdi, r.Orig_rax, r.Rip, r.Cs, r.Eflags, r.Rsp, r.Ss,
		r.Fs_base, r.Gs_base, r.Ds, r.Es, r.Fs, r.Gs}
}

// InSyscall reports whether the registers belong to a thread that was
// blocked in a syscall when it stopped, and which one: orig_rax holds the
// number, rax the -ERESTART* the kernel left for the restart.
func InSyscall(r *Regs) (nr int64, ok bool) {
	nr = int64(r.Orig_rax)
	if nr < 0 {
		return -1, false
	}
	switch -int64(r.Rax) {
	case errRestartSys, errRestartNoIntr, errRestartNoHand, errRestartRestartBlk:
		return nr, true
	}
	return nr, false
}

// justExeced reports registers that only a thread just out of a successful
// execve has.
func justExeced(r, saved *Regs) bool {
	return (r.Orig_rax == unix.SYS_EXECVE || r.Orig_rax == unix.SYS_EXECVEAT) && r.Rax == 0 &&
		(saved == nil || r.Rip != saved.Rip)
}

var sysRestartSyscall = uint64(arch.AMD64.MustSys("restart_syscall"))

// blockedIn is InSyscall for a thread stopped during a call, with where its
// syscall instruction ends (the rip it stopped at: x86_64 rewinds it for
// the restart only on the way out).
func (th *Thread) blockedIn(r *Regs) (nr int64, after uint64, ok bool) {
	nr, ok = InSyscall(r)
	return nr, PC(r), ok
}

// Blocked reports the syscall the thread was blocked in when it stopped
// (InSyscall of its saved registers) and its arguments.
func (th *Thread) Blocked() (nr int64, args [6]uint64, ok bool) {
	if th.saved == nil {
		return -1, args, false
	}
	if nr, ok = InSyscall(th.saved); ok {
		args = SyscallArgs(th.saved)
	}
	return nr, args, ok
}

// setResume sets the registers the thread resumes with; orig_rax -1 in
// them means no syscall is run or restarted.
func (th *Thread) setResume(r *Regs) error { return setRegs(th.Tid, r) }

// AllWords are the thread's saved registers as a core holds them (Words:
// fs.base, the thread pointer, is among them). nil before a stop.
func (th *Thread) AllWords() []uint64 {
	if th.saved == nil {
		return nil
	}
	return Words(th.saved)
}

// Uncallable says why a call could not give the stopped thread its state
// back whole, or "": on x86_64 the whole extended state is kept.
func (th *Thread) Uncallable() string { return "" }

package perf

import "unsafe"

// The registers of a record are struct user_pt_regs (x0..x30, sp, pc,
// pstate): debuggee.Regs' first 34 words on aarch64, pr_reg's order.
const (
	nUserRegs = 34
	// psrMode32 marks a task running AArch32 code (PSR_MODE32_BIT,
	// arch/arm64/include/uapi/asm/ptrace.h): a compat call, numbered by
	// another table.
	psrMode32 = 0x10
)

var _ = [1]struct{}{}[unsafe.Sizeof(callsCall{}.Regs.User)-8*nUserRegs]

// decodeCall fills the sample's registers and the call's number and
// arguments from an aarch64 record: the number is the kernel's syscallno,
// the first argument orig_x0 (x0 holds the result by now, as at the exit
// of invoke_syscall, arch/arm64/kernel/syscall.c), the others x1..x5;
// false for a call that is not the process's 64-bit one, or one the
// kernel skipped (syscallno -1).
func decodeCall(h *callsCall, s *Sample) bool {
	decodeRegs(h, s)
	u := &h.Regs.User
	s.Call = Syscall{Nr: int(h.Regs.Syscallno),
		Args: [6]uint64{h.Regs.OrigX0, u.Regs[1], u.Regs[2], u.Regs[3], u.Regs[4], u.Regs[5]}}
	return h.Regs.Syscallno >= 0 && u.Pstate&psrMode32 == 0
}

// decodeRegs fills the sample's registers from a record.
func decodeRegs(h *callsCall, s *Sample) {
	u := &h.Regs.User
	copy(s.Regs[:len(u.Regs)], u.Regs[:])
	s.Regs[len(u.Regs)], s.Regs[len(u.Regs)+1], s.Regs[len(u.Regs)+2] = u.Sp, u.Pc, u.Pstate
	s.HaveRegs = true
}

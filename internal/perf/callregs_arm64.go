package perf

// decodeCall fills the call's number and arguments from an aarch64 record:
// the number is the kernel's syscallno, the first argument orig_x0 (x0
// holds the result by now), the others x1..x5. The registers are not
// given (HaveRegs false) until target.Regs holds aarch64's, so such a call
// is counted but not unwound.
func decodeCall(h *callsCall, s *Sample) bool {
	u := &h.Regs.User
	s.Call = Syscall{Nr: int(h.Regs.Syscallno),
		Args: [6]uint64{h.Regs.OrigX0, u.Regs[1], u.Regs[2], u.Regs[3], u.Regs[4], u.Regs[5]}}
	return h.Regs.Syscallno >= 0
}

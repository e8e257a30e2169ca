package perf

import (
	"unsafe"

	"github.com/arenactl/arenactl/internal/debuggee"
)

// The registers of a record are struct pt_regs, user_regs_struct's first
// 21 words: debuggee.Regs' order.
const (
	nPtRegs = 21
	// userCS64 is __USER_CS, the code segment of 64-bit user code
	// (arch/x86/include/asm/segment.h); x32Bit marks an x32 call's
	// number (__X32_SYSCALL_BIT, arch/x86/include/uapi/asm/unistd.h).
	userCS64 = 0x33
	x32Bit   = 0x40000000
)

var _ = [1]struct{}{}[unsafe.Sizeof(callsCall{}.Regs)-8*nPtRegs]

// decodeCall fills the sample's registers and the call's number and
// arguments from a record; false for a call that is not the process's
// 64-bit one.
func decodeCall(h *callsCall, s *Sample) bool {
	decodeRegs(h, s)
	r := &s.Regs
	// The registers are those saved at entry: the result is the
	// wrapper's.
	r[debuggee.RegRAX] = uint64(h.Ret)
	// The program sees 64-bit calls only (ia32 ones have wrappers of
	// their own); x32 ones share them, with numbers of their own.
	if r[debuggee.RegCS] != userCS64 || r[debuggee.RegOrigRAX]&x32Bit != 0 {
		return false
	}
	s.Call = Syscall{Nr: int(r[debuggee.RegOrigRAX]),
		Args: [6]uint64{r[debuggee.RegRDI], r[debuggee.RegRSI], r[debuggee.RegRDX], r[debuggee.RegR10], r[debuggee.RegR8], r[debuggee.RegR9]}}
	return true
}

// decodeRegs fills the sample's registers from a record.
func decodeRegs(h *callsCall, s *Sample) {
	copy(s.Regs[:nPtRegs], (*[nPtRegs]uint64)(unsafe.Pointer(&h.Regs))[:])
	s.HaveRegs = true
}

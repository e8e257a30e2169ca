package perf

import (
	"testing"

	"github.com/arenactl/arenactl/internal/arch"
)

// TestSampleRegsARM64: a page-fault sample's registers land in the words
// of debuggee.Regs the unwinder reads (x29, x30, sp, pc among them), and
// an eBPF record gives the whole user_pt_regs with the call's number and
// arguments; a call from AArch32 code or one the kernel skipped is not the
// process's.
func TestSampleRegsARM64(t *testing.T) {
	a := arch.ARM64
	if len(sampleRegs) != 14 {
		t.Fatalf("%d sample registers, want 14 (x19..x28, x29, x30, sp, pc)", len(sampleRegs))
	}
	for i, w := range sampleRegs {
		if w != 19+i {
			t.Errorf("the sample's word %d goes to Regs[%d], want %d", i, w, 19+i)
		}
	}
	for _, w := range []int{a.Words.PC, a.Words.SP, a.Regs.FP, a.Regs.RA} {
		found := false
		for _, s := range sampleRegs {
			found = found || s == w
		}
		if !found {
			t.Errorf("Regs[%d] is not in the sample", w)
		}
	}

	var h callsCall
	for i := range h.Regs.User.Regs {
		h.Regs.User.Regs[i] = uint64(100 + i)
	}
	h.Regs.User.Sp, h.Regs.User.Pc, h.Regs.User.Pstate = 0x7ff0, 0x4000, 0
	h.Regs.OrigX0, h.Regs.Syscallno = 0, 222 // mmap
	var s Sample
	if !decodeCall(&h, &s) || !s.HaveRegs {
		t.Fatal("a 64-bit mmap is not decoded")
	}
	if s.Regs.PCOf(a) != 0x4000 || s.Regs.SPOf(a) != 0x7ff0 || s.Regs[30] != 130 || s.Regs[29] != 129 {
		t.Errorf("registers %v", s.Regs)
	}
	if s.Call.Nr != 222 || s.Call.Args != [6]uint64{0, 101, 102, 103, 104, 105} {
		t.Errorf("call %+v", s.Call)
	}
	h.Regs.User.Pstate = psrMode32
	if decodeCall(&h, &s) {
		t.Error("an AArch32 call is decoded")
	}
	h.Regs.User.Pstate, h.Regs.Syscallno = 0, -1
	if decodeCall(&h, &s) {
		t.Error("a skipped call is decoded")
	}
}
